"""GpuFit (filter): the node has the GPU model and the GPU capacity the pod asks for.

A pod of ``n`` whole GPUs needs ``n`` fully free GPUs; a pod asking for a share of one GPU
needs one GPU with at least that much free (the ``Open-Gpu-Share`` filter of the FGD
simulator). A node whose GPU model the pod does not allow is rejected for good
(UnschedulableAndUnresolvable: no eviction changes a node's GPU model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.arrays import MILLI, BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "GpuFit"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


def gpu_capacity_fits(state: ClusterState, pod: PodSpec) -> BoolArray:
    """Nodes with at least ``num_gpu`` GPUs that each have ``gpu_milli`` free."""
    if pod.gpu_milli == MILLI:
        return np.asarray(state.gpu_whole_free >= pod.num_gpu)
    fitting = np.count_nonzero(state.gpu_free >= pod.gpu_milli, axis=1)
    return np.asarray(fitting >= pod.num_gpu)


class GpuFit:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if pod.num_gpu == 0:
            return FilterVerdict.pass_all(state.size)
        capacity_ok = gpu_capacity_fits(state, pod)
        if pod.is_gpu_share:
            lacking = f"Insufficient GPU share ({pod.gpu_milli}m free on one GPU)"
        else:
            lacking = "Insufficient nvidia.com/gpu"
        if pod.gpu_models is None:
            return FilterVerdict(capacity_ok, ((lacking, ~capacity_ok),))
        models = "|".join(sorted(pod.gpu_models))
        model_ok = state.model_mask(pod.gpu_models)
        lacking_capacity = model_ok & ~capacity_ok
        return FilterVerdict(
            model_ok & capacity_ok,
            (
                (f"node(s) didn't match Pod's GPU model ({models})", ~model_ok),
                (lacking, lacking_capacity),
            ),
            unresolvable=not lacking_capacity.any(),
        )


def new(args: Args, handle: Handle) -> GpuFit:
    return GpuFit()
