"""GpuFit (filter): the node has the GPU model and the GPU capacity the pod asks for.

A pod of ``n`` whole GPUs needs ``n`` fully free GPUs; a pod asking for a share of one GPU
needs one GPU with at least that much free (the ``Open-Gpu-Share`` filter of the FGD
simulator). A node whose GPU model the pod does not allow is rejected for good
(UnschedulableAndUnresolvable: no eviction changes a node's GPU model). A share of a GPU
(gpufleet's) never goes where the device plugin advertises MIG slices or time-sliced
replicas as ``nvidia.com/gpu``: those are not GPUs gpufleet can divide; nor does a pod of
several GPUs go where they are MPS replicas, of which the device plugin gives a pod one
(both unresolvable too).
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


DIVIDED = (
    "node(s) advertise MIG slices or time-sliced replicas as nvidia.com/gpu, which a share of "
    "a GPU cannot divide"
)


ONE_PER_POD = (
    "node(s) give a Pod at most one MPS replica of nvidia.com/gpu (the device plugin refuses more)"
)


def _divisible(state: ClusterState, pod: PodSpec) -> BoolArray | None:
    """For a share of a GPU, the nodes whose advertised GPUs are whole ones; for a pod of
    several advertised GPUs, the nodes that give a pod more than one (None: any)."""
    if not state.divided_gpus:
        return None
    if pod.is_gpu_share:
        return np.asarray(state.gpu_unit == 1.0)
    if pod.num_gpu > 1:
        return np.asarray(~state.one_per_pod)
    return None


class GpuFit:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if pod.num_gpu == 0:
            if pod.shared_gpus > 1 and state.divided_gpus:  # renamed replicas: as above
                ok = ~state.one_per_pod
                return FilterVerdict(ok, ((ONE_PER_POD, ~ok),), unresolvable=True)
            return FilterVerdict.pass_all(state.size)
        capacity_ok = gpu_capacity_fits(state, pod)
        if pod.is_gpu_share:
            lacking = f"Insufficient GPU share ({pod.gpu_milli}m free on one GPU)"
        else:
            lacking = "Insufficient nvidia.com/gpu"
        kind_ok = _divisible(state, pod)
        if kind_ok is None and pod.gpu_models is None:  # the common case: capacity alone
            return FilterVerdict(capacity_ok, ((lacking, ~capacity_ok),))
        failures = []
        if kind_ok is not None:
            failures.append((DIVIDED if pod.is_gpu_share else ONE_PER_POD, ~kind_ok))
        if pod.gpu_models is not None:
            models = "|".join(sorted(pod.gpu_models))
            model_ok = state.model_mask(pod.gpu_models)
            mismatch = ~model_ok if kind_ok is None else kind_ok & ~model_ok
            failures.append((f"node(s) didn't match Pod's GPU model ({models})", mismatch))
            kind_ok = model_ok if kind_ok is None else kind_ok & model_ok
        assert kind_ok is not None
        lacking_capacity = kind_ok & ~capacity_ok
        failures.append((lacking, lacking_capacity))
        return FilterVerdict(
            kind_ok & capacity_ok, tuple(failures), unresolvable=not lacking_capacity.any()
        )

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        if pod.num_gpu == 0:
            if pod.shared_gpus > 1 and state.divided_gpus:
                return np.asarray(~state.one_per_pod[rows])
            return None
        ok = gpu_capacity_fits(state, pod, rows)
        if pod.gpu_models is not None:
            ok &= state.model_mask(pod.gpu_models)[rows]
        kind_ok = _divisible(state, pod)
        if kind_ok is not None:
            ok &= kind_ok[rows]
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
