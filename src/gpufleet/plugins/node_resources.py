"""NodeResourcesFit (filter): the node has the CPU and memory the pod requests.

kube-scheduler's filter of the same name; it also checks extended resources, which gpufleet
leaves to :mod:`gpufleet.plugins.gpu_fit` so that GPU shares are understood.
"""

from __future__ import annotations

from dataclasses import dataclass

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
        return FilterVerdict(
            cpu_ok & memory_ok,
            (("Insufficient cpu", ~cpu_ok), ("Insufficient memory", ~memory_ok)),
        )


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit()
