"""DotProductScore: Tetris-style alignment of the node's free vector with the pod's request.

With ``free = (cpu_free / max_cpu, gpu_free_total / max_gpu)`` and
``req = (cpu_req / max_cpu, gpu_req_total / max_gpu)`` (normalised by the largest node spec):

    score = trunc(100 * (1 - (free . req) / 2))

A smaller product scores higher, which steers pods to nodes with little of what they use
left. Inside the node the GPU is chosen best-fit. As in the FGD paper's ``DotProd`` baseline
(``-dimext merge -norm max``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "DotProductScore"


@dataclass(frozen=True, slots=True)
class Args:
    max_cpu_milli: float = 128_000.0
    max_gpu_milli: float = 8_000.0


def dot_product_score(
    cpu_free: IntArray, gpu_free_total: IntArray, pod: PodSpec, args: Args
) -> FloatArray:
    node_cpu = cpu_free / args.max_cpu_milli
    node_gpu = gpu_free_total / args.max_gpu_milli
    dot = node_cpu * (pod.cpu_milli / args.max_cpu_milli)
    dot = dot + node_gpu * (pod.total_gpu_milli / args.max_gpu_milli)
    return np.trunc(100.0 * (1.0 - dot / 2.0))


class DotProductScore:
    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return dot_product_score(state.cpu_free[nodes], state.gpu_idle[nodes], pod, self.args)


def new(args: Args, handle: Handle) -> DotProductScore:
    return DotProductScore(args)
