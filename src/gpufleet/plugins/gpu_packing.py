"""GpuPackingScore: fill GPUs that are already in use before touching free ones.

Bands, from best to worst (integer arithmetic, as in the FGD paper's ``GpuPacking``):

1. the pod's share fits on a GPU already in use:
   ``max(50, 100 - (free_milli_of_that_gpu * 100 // 1000) // 10)`` — the tighter the better;
2. it needs fully free GPUs on a node already in use: ``max(33, 50 - free_gpus_taken)``;
3. the node is entirely free: ``max(free_gpus, 33 - free_gpus)``.

The GPUs the pod would take are the tightest that hold it. CPU-only pods score 0 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import MILLI, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "GpuPackingScore"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


def gpu_packing_score(gpu_free: IntArray, gpu_count: IntArray, pod: PodSpec) -> FloatArray:
    """Scores for nodes with GPU rows ``gpu_free`` ``(C, G)`` and ``gpu_count`` GPUs."""
    if pod.num_gpu == 0:
        return np.zeros(len(gpu_count), dtype=np.float64)
    fully_free = np.count_nonzero(gpu_free == MILLI, axis=1)
    empty_node = fully_free == gpu_count
    if pod.is_gpu_share:
        tightest = np.where(gpu_free >= pod.gpu_milli, gpu_free, MILLI + 1).min(axis=1)
        takes_free = tightest == MILLI
        shared = np.maximum(50, 100 - (tightest * 100 // MILLI) // 10)
        used_node = np.where(takes_free, max(33, 50 - 1), shared)
    else:
        used_node = np.full(len(gpu_count), max(33, 50 - pod.num_gpu))
    scores = np.where(empty_node, np.maximum(fully_free, 33 - fully_free), used_node)
    return scores.astype(np.float64)


class GpuPackingScore:
    name = NAME

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return gpu_packing_score(state.gpu_free[nodes], state.gpu_count[nodes], pod)


def new(args: Args, handle: Handle) -> GpuPackingScore:
    return GpuPackingScore()
