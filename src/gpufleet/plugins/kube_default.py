"""What a stock kube-scheduler does with GPU pods: the ``kube-default`` policy's scores.

kube-scheduler's default scoring for resources is NodeResourcesFit with the
``LeastAllocated`` strategy plus NodeResourcesBalancedAllocation, both over CPU and memory
with weight 1 (GPUs, an extended resource, are not scored). Requests are the node's
requested resources plus the incoming pod's; a pod asking for no CPU or memory counts as
100m / 200Mi, as kube-scheduler's non-zero defaults do.

    LeastAllocated = (sum_r (capacity_r - requested_r) * 100 // capacity_r) // 2
    BalancedAllocation = trunc((1 - |cpu_fraction - memory_fraction| / 2) * 100)

The profile pairs them with device-plugin semantics (``whole_gpus_only``): a pod that asks for
a share of a GPU gets a whole one, which is what clusters without GPU sharing lose.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

LEAST_ALLOCATED = "NodeResourcesLeastAllocated"
BALANCED_ALLOCATION = "NodeResourcesBalancedAllocation"

DEFAULT_CPU_MILLI = 100
DEFAULT_MEMORY_MIB = 200


@dataclass(frozen=True, slots=True)
class Args:
    """No options: kube-scheduler's defaults."""


def _requested(state: ClusterState, pod: PodSpec, nodes: IntArray) -> tuple[IntArray, IntArray]:
    cpu = pod.cpu_milli or DEFAULT_CPU_MILLI
    memory = pod.memory_mib or DEFAULT_MEMORY_MIB
    cpu_req = state.cpu_capacity[nodes] - state.cpu_free[nodes] + cpu
    memory_req = state.memory_capacity[nodes] - state.memory_free[nodes] + memory
    return cpu_req, memory_req


def least_allocated_score(
    capacity: tuple[IntArray, IntArray], requested: tuple[IntArray, IntArray]
) -> FloatArray:
    total = np.zeros(len(capacity[0]), dtype=np.int64)
    for cap, req in zip(capacity, requested, strict=True):
        safe = np.maximum(cap, 1)
        total += np.where(req > cap, 0, (cap - req) * 100 // safe)
    return (total // len(capacity)).astype(np.float64)


def balanced_allocation_score(
    capacity: tuple[IntArray, IntArray], requested: tuple[IntArray, IntArray]
) -> FloatArray:
    cpu_fraction = np.minimum(requested[0] / np.maximum(capacity[0], 1), 1.0)
    memory_fraction = np.minimum(requested[1] / np.maximum(capacity[1], 1), 1.0)
    std = np.abs(cpu_fraction - memory_fraction) / 2.0
    return np.asarray(np.trunc((1.0 - std) * 100.0), dtype=np.float64)


class LeastAllocated:
    name = LEAST_ALLOCATED

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        capacity = (state.cpu_capacity[nodes], state.memory_capacity[nodes])
        return least_allocated_score(capacity, _requested(state, pod, nodes))


class BalancedAllocation:
    name = BALANCED_ALLOCATION

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        capacity = (state.cpu_capacity[nodes], state.memory_capacity[nodes])
        return balanced_allocation_score(capacity, _requested(state, pod, nodes))


def new_least_allocated(args: Args, handle: Handle) -> LeastAllocated:
    return LeastAllocated()


def new_balanced_allocation(args: Args, handle: Handle) -> BalancedAllocation:
    return BalancedAllocation()
