"""GpuClusteringScore: put GPU pods of the same kind together.

A pod's kind is "share" (part of one GPU) or "n whole GPUs". With
``fill = 25 * (max_gpu - gpu_free_total) // max_gpu`` (fuller nodes score higher), bands:

* the node hosts only pods of the pod's kind:        ``75 + fill``
* it hosts the pod's kind among others:              ``50 + fill``
* it hosts no GPU pods:                              ``25 + fill``
* it hosts only other kinds:                         ``fill``

CPU-only pods score 0 everywhere. The FGD paper's ``GpuClustering`` baseline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState, gpu_pod_kind
from gpufleet.model.pod import PodSpec

NAME = "GpuClusteringScore"


@dataclass(frozen=True, slots=True)
class Args:
    max_gpu_milli: int = 8_000


def gpu_clustering_score(
    gpu_free_total: IntArray, kinds: IntArray, pod: PodSpec, args: Args
) -> FloatArray:
    """Scores for nodes with ``kinds`` ``(C, G + 1)`` pods per GPU pod kind."""
    if pod.num_gpu == 0:
        return np.zeros(len(gpu_free_total), dtype=np.float64)
    used = args.max_gpu_milli - gpu_free_total
    fill = np.sign(used) * (25 * np.abs(used) // args.max_gpu_milli)  # Go truncates to zero
    present = kinds > 0
    kind_count = present.sum(axis=1)
    mine = present[:, gpu_pod_kind(pod)]
    band = np.where(mine, np.where(kind_count == 1, 75, 50), np.where(kind_count == 0, 25, 0))
    return np.asarray(band + fill, dtype=np.float64)


class GpuClusteringScore:
    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return gpu_clustering_score(
            state.gpu_idle[nodes], state.gpu_pod_kinds[nodes], pod, self.args
        )


def new(args: Args, handle: Handle) -> GpuClusteringScore:
    return GpuClusteringScore(args)
