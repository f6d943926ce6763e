"""NodePorts (filter): the node has the host ports the pod asks for free, as kube-scheduler's
plugin of the same name: a port conflicts with one in use of the same protocol and number
on the same host IP, or on any IP where either is ``0.0.0.0``. Evicting the pod that holds
the port frees it, so a rejection is resolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NodePorts"
MESSAGE = "node(s) didn't have free ports for the requested pod ports"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class NodePorts:
    name = NAME
    needs = ("placement",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        placement = pod.placement
        index = state.pod_index
        if placement is None or not placement.host_ports or not index.ports:
            return FilterVerdict.pass_all(state.size)
        taken = np.zeros(state.size, dtype=np.bool_)
        for port in placement.host_ports:
            taken |= index.ports_in_use(port) > 0
        if not taken.any():
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict(~taken, ((MESSAGE, taken),))


def new(args: Args, handle: Handle) -> NodePorts:
    return NodePorts()
