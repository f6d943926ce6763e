"""How a pod's GPUs are picked on the node chosen for it: the rules that the GPU choosers
(``GpuBestFit``, ``GpuRandom``, ``FGDGpu``, ``GpuPlannedShare``) and the scheduling cycle
share. Not a plugin: the plugins import it, never one another.

* whole GPUs: the first fully free ones in index order (what a device plugin hands out), or,
  where the node's NUMA zones are known, as few zones as possible (:func:`first_free_gpus`);
* a share: the GPU with the least free milli that holds it (:func:`tightest_gpu`).
"""

from __future__ import annotations

import numpy as np

from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec


def first_free_gpus(state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
    """``num_gpu`` fully free GPUs of ``node``: the first in index order, or, where the node's
    NUMA zones are known, from one zone — the one with the fewest free GPUs that holds them
    (and the pod's pinned CPUs) — else from as few zones as possible, fullest of free first.
    """
    free = np.flatnonzero(state.node_gpu_free(node) == MILLI)
    zones = state.gpu_zone[node, free]
    if free.size == 0 or (zones < 0).any():
        return tuple(int(g) for g in free[: pod.num_gpu])
    counts = {int(z): int(np.count_nonzero(zones == z)) for z in np.unique(zones)}
    pinned = state.pins_cpu(node, pod)
    fitting = [
        z
        for z, c in counts.items()
        if c >= pod.num_gpu and (not pinned or state.zone_cpu_free[node, z] >= pod.cpu_milli)
    ]
    if fitting:
        zone = min(fitting, key=lambda z: (counts[z], z))
        return tuple(int(g) for g in free[zones == zone][: pod.num_gpu])
    order = sorted(counts, key=lambda z: (-counts[z], z))
    ranked = [int(g) for z in order for g in free[zones == z]]
    return tuple(ranked[: pod.num_gpu])


def tightest_gpu(state: ClusterState, pod: PodSpec, node: int) -> int:
    """The GPU with the least free milli that holds ``pod``'s share (lowest index on ties);
    for a pod that pins CPUs on a single-numa-node node, only GPUs of zones with its CPUs."""
    free = state.node_gpu_free(node)
    usable = free >= pod.gpu_milli
    if state.pins_cpu(node, pod):
        zones = state.gpu_zone[node, : free.size]
        usable &= state.zone_cpu_free[node, np.maximum(zones, 0)] >= pod.cpu_milli
    return int(np.argmin(np.where(usable, free, MILLI + 1)))
