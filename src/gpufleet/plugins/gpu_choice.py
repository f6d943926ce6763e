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
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.gpu_pick import first_free_gpus, tightest_gpu

BEST_FIT = "GpuBestFit"
RANDOM = "GpuRandom"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


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
