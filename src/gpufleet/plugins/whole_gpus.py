"""WholeGpus (score): a pod asking whole GPUs goes where they are whole physical GPUs first.

Under the GPU operator's MIG single strategy and its time-slicing or MPS sharing, the device
plugin advertises MIG slices or replicas as ``nvidia.com/gpu``; Kubernetes lets a pod asking
``nvidia.com/gpu`` run on any of them, and so does gpufleet (GpuFit counts advertised GPUs).
But a training pod that asked for a GPU and got a seventh of one, or a quarter of one's
time, runs several times slower: among the nodes that fit, this score ranks each by what one
of its advertised GPUs is worth (100 for a whole GPU, 25 for a replica of four, 14 for a
``1g.5gb`` slice), and gpufleet weighs it above every other score, so a slice or a replica is
taken only where no whole GPU fits; the binding then says what the pod runs on.

Pods that ask no advertised GPUs (MIG slices by name, shares, CPU pods) score alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "WholeGpus"
MAX_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class WholeGpus:
    name = NAME
    node_local = True
    """A node's score depends on the pod and the node's own row (``Framework.run_scores``)."""
    needs = ("advertised_gpus",)

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        if not state.divided_gpus or not pod.advertised_gpus:
            return np.zeros(nodes.size, dtype=np.float64)
        return np.asarray(MAX_SCORE * state.gpu_unit[nodes], dtype=np.float64)


def new(args: Args, handle: Handle) -> WholeGpus:
    return WholeGpus()
