"""RandomScore: one feasible node, drawn uniformly, gets the top score (the "Random" policy).

The FGD simulator's RandomScore picks the node in PreScore and scores it 100, all others 0;
paired with :class:`~gpufleet.plugins.gpu_choice.GpuRandom` inside the node.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "RandomScore"
MAX_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class RandomScore:
    name = NAME

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        scores = np.zeros(nodes.size, dtype=np.float64)
        scores[self.rng.integers(nodes.size)] = MAX_SCORE
        return scores


def new(args: Args, handle: Handle) -> RandomScore:
    return RandomScore(handle.rng)
