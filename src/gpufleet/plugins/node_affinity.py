"""NodeAffinity (filter): the node satisfies the pod's nodeSelector and required node affinity.

kube-scheduler's filter of the same name and message. The pod's ``nodeSelector`` is folded
into every required term when the snapshot is read, so one mask per term, ORed, decides.
A node's labels do not change by evicting pods, so a rejection is unresolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NodeAffinity"
MESSAGE = "node(s) didn't match Pod's node affinity/selector"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class NodeAffinity:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if pod.constraint is None or not pod.constraint.has_terms:
            return FilterVerdict.pass_all(state.size)
        ok = state.node_labels.affinity_mask(pod.constraint)
        return FilterVerdict(ok, ((MESSAGE, ~ok),), unresolvable=True)

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        if pod.constraint is None or not pod.constraint.has_terms:
            return None
        return state.node_labels.affinity_mask(pod.constraint)[rows]


def new(args: Args, handle: Handle) -> NodeAffinity:
    return NodeAffinity()
