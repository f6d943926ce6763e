"""NodeVolumeLimits (filter): the node can attach the pod's CSI volumes, as kube-scheduler's
CSI limits plugin: per driver, the volumes already attached to the node (each volume once,
however many pods use it) plus the pod's new ones may not exceed the node's CSINode
``allocatable.count`` for that driver (a node or driver without one has no limit). An
unbound claim counts with its class's provisioner. ``node(s) exceed max volume count``;
evicting pods detaches their volumes, so a rejection is resolvable.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NodeVolumeLimits"
MESSAGE = "node(s) exceed max volume count"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class NodeVolumeLimits:
    name = NAME
    needs = ("volumes",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        volumes = state.volumes
        catalog = volumes.catalog
        if not pod.volumes or not catalog.csi_nodes:
            return FilterVerdict.pass_all(state.size)
        wanted: Counter[str] = Counter()
        handles: dict[str, list[str]] = {}
        for key in pod.volumes:
            claim = catalog.claims.get(key)
            # an unbound claim: the volume a placement of this cycle gave it, else one to
            # provision
            chosen = None if claim is None or claim.volume_name else ""
            if chosen == "" and key in volumes.chosen:
                chosen = volumes.chosen[key][0]
            attachment = catalog.attachment(key, chosen)
            if attachment is not None:
                wanted[attachment[0]] += 1
                handles.setdefault(attachment[0], []).append(attachment[1])
        over = np.zeros(state.size, dtype=np.bool_)
        for driver, count in wanted.items():
            limit = catalog.limits(state.names, driver)
            already = np.zeros(state.size, dtype=np.int64)
            for handle in handles[driver]:  # the pod's volumes some node has attached
                for (node, d, h), n in volumes.attached.items():
                    if d == driver and h == handle and n > 0:
                        already[node] += 1
            over |= volumes.attached_on(driver) + count - already > limit
        if not over.any():
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict(~over, ((MESSAGE, over),))


def new(args: Args, handle: Handle) -> NodeVolumeLimits:
    return NodeVolumeLimits()
