"""Best-fit decreasing packing of GPU shares into whole GPUs (offline, GPU only).

Used twice: the headroom estimate of the fill benchmark (how much an offline placement
would leave unallocated) and gpufleet's share plan (which shares an offline packing of the
workload puts together on one GPU).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from gpufleet.model.arrays import MILLI


@dataclass(slots=True)
class _Group:
    """``count`` open GPUs holding the same ``packed`` shares."""

    packed: tuple[int, ...]
    count: int


def best_fit_decreasing(shares: Iterable[int]) -> list[tuple[tuple[int, ...], int]]:
    """How best-fit decreasing packs ``shares`` (milli-GPU, 1..1000) into GPUs: largest
    first, each into the fullest GPU that still holds it, a new GPU when none does.
    Returns ``(shares on a GPU, how many GPUs hold exactly those)``, fullest first.

    GPUs with the same shares are packed as one group. Best fit's choices depend only on
    the free milli of the GPUs, so the GPUs fill up exactly as they would one share at a
    time; among GPUs with equal free milli but different shares, the group that reached
    that free milli first is used first (one share at a time would take the GPU opened
    first, which can pair a size with different partners). Past counting the shares,
    the cost grows with the number of distinct sizes and packings, not of shares.
    """
    sizes: Counter[int] = Counter()
    for share in shares:
        if not 0 < share <= MILLI:
            raise ValueError(f"a share of {share} milli-GPU is not in 1..{MILLI}")
        sizes[share] += 1
    full: Counter[tuple[int, ...]] = Counter()
    open_: dict[int, list[_Group]] = {}  # by free milli, first come first
    gaps: list[int] = []  # the keys of open_, sorted

    def put(packed: tuple[int, ...], count: int) -> None:
        free = MILLI - sum(packed)
        if free == 0:
            full[packed] += count
            return
        if free not in open_:
            open_[free] = []
            bisect.insort(gaps, free)
        open_[free].append(_Group(packed, count))

    for size in sorted(sizes, reverse=True):
        left = sizes[size]
        while left:
            i = bisect.bisect_left(gaps, size)
            if i == len(gaps):  # no GPU holds it: open GPUs, each taking as many as fit
                per_gpu = min(MILLI // size, left)
                put((size,) * per_gpu, left // per_gpu)
                if left % per_gpu:
                    put((size,) * (left % per_gpu), 1)
                break
            free = gaps[i]
            group = open_[free][0]
            packed, count = group.packed, group.count
            per_gpu = min(free // size, left)  # it stays the fullest that holds one more
            gpus = min(count, left // per_gpu)
            if gpus == count:
                open_[free].pop(0)
                if not open_[free]:
                    del open_[free]
                    gaps.pop(i)
            else:
                group.count = count - gpus
            put((*packed, *(size,) * per_gpu), gpus)
            left -= gpus * per_gpu
    packings = full + Counter()
    for groups in open_.values():
        for group in groups:
            packings[group.packed] += group.count
    return sorted(packings.items(), key=lambda pc: (-sum(pc[0]), pc[0]))
