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

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NodeResourcesFit"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class NodeResourcesFit:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        cpu_ok = state.cpu_free >= pod.cpu_milli
        memory_ok = state.memory_free >= pod.memory_mib
        ok = cpu_ok & memory_ok
        failures = [("Insufficient cpu", ~cpu_ok), ("Insufficient memory", ~memory_ok)]
        if state.pods_limited:
            room = state.pods_free >= 1
            ok &= room
            failures.append(("Too many pods", ~room))
        for name, amount in pod.extended:
            column = state.extended_index.get(name)
            has = (
                state.extended_free[:, column] >= amount
                if column is not None
                else np.zeros(state.size, dtype=np.bool_)
            )
            ok &= has
            failures.append((f"Insufficient {name}", ~has))
        return FilterVerdict(ok, tuple(failures))


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit()
