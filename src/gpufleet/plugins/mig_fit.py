"""MigFit (filter) and the MIG slice choice: where a pod asking for a MIG slice can go.

A node serves ``nvidia.com/mig-<profile>`` in one of two ways:

* *static* MIG — the node advertises a number of slices per profile (the NVIDIA device
  plugin's mixed strategy) and a pod takes one of them, counted per profile;
* *dynamic* MIG — the node's MIG-capable GPUs are partitioned by gpufleet
  (:class:`~gpufleet.model.mig.MigLayouts`): a free instance of the profile, room for one
  more on a partitioned GPU, an idle partitioned GPU to re-partition, or a whole free GPU.

The choice inside a dynamic node prefers, in that order, a free instance, the partitioned
GPU with the least room left, an idle GPU to re-partition, and only then a whole GPU, so
slices pack onto few GPUs and whole GPUs stay free for whole-GPU pods.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "MigFit"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class MigFit:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if pod.mig_profile is None:
            return FilterVerdict.pass_all(state.size)
        p = state.mig_profile_index(pod.mig_profile)
        ok = (
            state.mig_free[:, p] >= pod.mig_count
            if p is not None
            else np.zeros(state.size, dtype=np.bool_)
        )
        if state.mig is not None:
            for node in state.mig.tables:
                ok[node] = state.mig_gpu(node, pod) is not None
        return FilterVerdict(ok, ((f"Insufficient {pod.mig_resource}", ~ok),))


def new(args: Args, handle: Handle) -> MigFit:
    return MigFit()
