"""BestFitScore: the node that would be left with the least free CPU and GPU wins.

    score = trunc(100 * (1 - [0.5 * (cpu_free - cpu_req) / max_cpu
                              + 0.5 * (gpu_free_total - gpu_req_total) / max_gpu]))

Inside the node the GPU is chosen best-fit. The FGD paper's ``BestFit`` baseline; the
simulator min-max normalises these scores, which keeps their order and so the choice.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "BestFitScore"


@dataclass(frozen=True, slots=True)
class Args:
    max_cpu_milli: float = 128_000.0
    max_gpu_milli: float = 8_000.0


def best_fit_score(
    cpu_free: IntArray, gpu_free_total: IntArray, pod: PodSpec, args: Args
) -> FloatArray:
    leftover = (cpu_free - pod.cpu_milli) / args.max_cpu_milli * 0.5
    leftover = leftover + (gpu_free_total - pod.total_gpu_milli) / args.max_gpu_milli * 0.5
    return np.trunc((1.0 - leftover) * 100.0)


class BestFitScore:
    name = NAME

    def __init__(self, args: Args) -> None:
        self.args = args

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return best_fit_score(state.cpu_free[nodes], state.gpu_idle[nodes], pod, self.args)


def new(args: Args, handle: Handle) -> BestFitScore:
    return BestFitScore(args)
