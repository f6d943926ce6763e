"""GpuFit (filter): the node has the GPU model and the GPU capacity the pod asks for.

A pod of ``n`` whole GPUs needs ``n`` fully free GPUs; a pod asking for a share of one GPU
needs one GPU with at least that much free (the ``Open-Gpu-Share`` filter of the FGD
simulator). A node whose GPU model the pod does not allow is rejected for good
(UnschedulableAndUnresolvable: no eviction changes a node's GPU model).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import MILLI, BoolArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "GpuFit"

ALL = slice(None)


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


def gpu_capacity_fits(state: ClusterState, pod: PodSpec, rows: Rows = ALL) -> BoolArray:
    """Nodes of ``rows`` with at least ``num_gpu`` GPUs that each have ``gpu_milli`` free."""
    if pod.gpu_milli == MILLI:
        return np.asarray(state.gpu_whole_free[rows] >= pod.num_gpu)
    fitting = np.count_nonzero(state.gpu_free[rows] >= pod.gpu_milli, axis=1)
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

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        if pod.num_gpu == 0:
            return None
        ok = gpu_capacity_fits(state, pod, rows)
        if pod.gpu_models is not None:
            ok &= state.model_mask(pod.gpu_models)[rows]
        return ok

    def count(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        """Whole GPUs: the node's fully free GPUs over the pod's count (plain pods only)."""
        if pod.num_gpu == 0:
            return np.full(nodes.size, np.iinfo(np.int64).max, dtype=np.int64)
        free = state.gpu_whole_free[nodes] // pod.num_gpu
        if pod.gpu_models is not None:
            free = np.where(state.model_mask(pod.gpu_models)[nodes], free, 0)
        return free


def new(args: Args, handle: Handle) -> GpuFit:
    return GpuFit()
