"""Best-fit decreasing packing of GPU shares into whole GPUs (offline, GPU only).

Used twice: the headroom estimate of the fill benchmark (how much an offline placement
would leave unallocated) and gpufleet's share plan (which shares an offline packing of the
workload puts together on one GPU).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

from gpufleet.model.cluster import MILLI


def best_fit_decreasing(shares: Iterable[int]) -> list[list[int]]:
    """The GPUs (each the list of milli-GPU shares on it) that best-fit decreasing packs
    ``shares`` into: largest first, each into the fullest GPU that still holds it, a new
    GPU when none does. Shares are in 1..1000."""
    gpus: list[list[int]] = []
    free: list[tuple[int, int]] = []  # (free milli, GPU), sorted
    for share in sorted(shares, reverse=True):
        if not 0 < share <= MILLI:
            raise ValueError(f"a share of {share} milli-GPU is not in 1..{MILLI}")
        i = bisect.bisect_left(free, (share, -1))
        if i < len(free):
            left, gpu = free.pop(i)
        else:
            left, gpu = MILLI, len(gpus)
            gpus.append([])
        gpus[gpu].append(share)
        if left > share:
            bisect.insort(free, (left - share, gpu))
    return gpus
