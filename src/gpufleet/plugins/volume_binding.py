"""VolumeBinding (filter): the pod's PersistentVolumeClaims can be bound on the node, as
kube-scheduler's plugin of the same name decides it.

Per claim (:meth:`~gpufleet.model.volumes.VolumeCatalog.verdict`): a bound claim allows
the nodes its volume's node affinity allows (``node(s) had volume node affinity
conflict``); an unbound claim of a ``WaitForFirstConsumer`` class the nodes where a free
matching volume is, or where its class may provision one (``node(s) didn't find available
persistent volumes to bind``). A claim that does not exist, is being deleted, names a
class that does not exist or is unbound and of an ``Immediate`` class keeps the pod off
every node with kube-scheduler's message (``persistentvolumeclaim "data" not found``,
``pod has unbound immediate PersistentVolumeClaims``). No eviction changes a volume, so a
rejection is unresolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.arrays import BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "VolumeBinding"
AFFINITY_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class VolumeBinding:
    name = NAME
    needs = ("volumes",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if not pod.volumes:
            return FilterVerdict.pass_all(state.size)
        volumes = state.volumes
        catalog = volumes.catalog
        checks: list[tuple[str, BoolArray]] = []
        for key in pod.volumes:
            claim = catalog.claims.get(key)
            nodes, problem = catalog.verdict(state.node_labels, key, volumes.taken, volumes.chosen)
            if nodes is None:
                return FilterVerdict.reject_pod(state.size, problem)
            # a claim bound, or given its volume by a placement of this cycle
            bound = claim is not None and bool(claim.volume_name or key in volumes.chosen)
            checks.append((AFFINITY_CONFLICT if bound else BIND_CONFLICT, ~nodes))
        return FilterVerdict.first_failing(state.size, checks, lambda _: True)


def new(args: Args, handle: Handle) -> VolumeBinding:
    return VolumeBinding()
