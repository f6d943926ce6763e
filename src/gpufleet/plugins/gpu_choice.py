"""GPU choice inside the chosen node ("gpusel" in the FGD simulator).

* ``GpuBestFit``: a share goes to the GPU with the least free milli that still holds it
  (lowest index among equals); whole GPUs are the first fully free ones in index order —
  which is also what a device plugin hands out.
* ``GpuRandom``: a share goes to a GPU drawn uniformly among those that hold it; whole GPUs
  as above.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

BEST_FIT = "GpuBestFit"
RANDOM = "GpuRandom"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


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


class GpuBestFit:
    name = BEST_FIT

    def choose_gpus(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if pod.is_gpu_share:
            return (tightest_gpu(state, pod, node),)
        return first_free_gpus(state, pod, node)


class GpuRandom:
    name = RANDOM

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def choose_gpus(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if pod.is_gpu_share:
            fitting = np.flatnonzero(state.node_gpu_free(node) >= pod.gpu_milli)
            return (int(fitting[self.rng.integers(fitting.size)]),)
        return first_free_gpus(state, pod, node)


def new_best_fit(args: Args, handle: Handle) -> GpuBestFit:
    return GpuBestFit()


def new_random(args: Args, handle: Handle) -> GpuRandom:
    return GpuRandom(handle.rng)
