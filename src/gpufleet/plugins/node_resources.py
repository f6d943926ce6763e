"""NodeResourcesFit (filter): the node has the CPU, memory, pod slot and other resources the
pod requests.

kube-scheduler's filter of the same name: ``Insufficient cpu``, ``Insufficient memory``,
``Too many pods`` (the node's allocatable ``pods``), and ``Insufficient <resource>`` for every
other resource the pod requests (``vpc.amazonaws.com/efa``, ``hugepages-2Mi``,
``ephemeral-storage``) — a node that does not offer the resource has none of it. GPUs (whole,
shared, MIG) are left to :mod:`gpufleet.plugins.gpu_fit` and :mod:`gpufleet.plugins.mig_fit`
so that GPU shares are understood.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import BoolArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NodeResourcesFit"

ALL = slice(None)
UNBOUNDED = np.iinfo(np.int64).max
"""The count of a pod that asks for none of these resources."""


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


def _free(
    state: ClusterState, pod: PodSpec, rows: Rows | IntArray
) -> list[tuple[str, IntArray, int]]:
    """Per resource the pod needs: the reason a node lacks it, what ``rows`` have free, and
    how much the pod asks for. The filter, the one-node check and the slot count all read
    this list, so a resource is judged the same way by each."""
    needs: list[tuple[str, IntArray, int]] = [
        ("Insufficient cpu", state.cpu_free[rows], pod.cpu_milli),
        ("Insufficient memory", state.memory_free[rows], pod.memory_mib),
    ]
    if state.pods_limited:
        needs.append(("Too many pods", state.pods_free[rows], 1))
    for name, amount in pod.extended:
        column = state.extended_index.get(name)
        free = (
            state.extended_free[rows, column]
            if column is not None
            else np.zeros_like(state.cpu_free[rows])
        )
        needs.append((f"Insufficient {name}", free, amount))
    return needs


class NodeResourcesFit:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        failures: list[tuple[str, BoolArray]] = []
        ok: BoolArray | None = None
        for message, free, amount in _free(state, pod, ALL):
            has = free >= amount
            ok = has if ok is None else ok & has
            failures.append((message, ~has))
        assert ok is not None, "cpu and memory are always judged"
        return FilterVerdict(ok, tuple(failures))

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray:
        needs = _free(state, pod, rows)
        ok = needs[0][1] >= needs[0][2]
        for _, free, amount in needs[1:]:
            ok &= free >= amount
        return ok

    def count(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        counts: IntArray | None = None
        for _, free, amount in _free(state, pod, nodes):
            if amount > 0:
                room = free // amount
                counts = room if counts is None else np.minimum(counts, room, out=counts)
        return counts if counts is not None else np.full(nodes.size, UNBOUNDED, dtype=np.int64)


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit()
