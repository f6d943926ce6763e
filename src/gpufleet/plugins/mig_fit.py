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

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import BoolArray
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
        ok = self.fits_rows(state, pod, slice(None))
        assert ok is not None, "a pod with a MIG profile"
        return FilterVerdict(ok, ((f"Insufficient {pod.mig_resource}", ~ok),))

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        if pod.mig_profile is None:
            return None
        p = state.mig_profile_index(pod.mig_profile)
        free = state.mig_free[rows]
        ok = free[:, p] >= pod.mig_count if p is not None else np.zeros(len(free), np.bool_)
        if state.mig is not None:
            first, last, _ = rows.indices(state.size)
            for node in state.mig.tables:
                if first <= node < last:
                    ok[node - first] = state.mig_gpu(node, pod) is not None
        return ok


def new(args: Args, handle: Handle) -> MigFit:
    return MigFit()
