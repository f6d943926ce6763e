"""VolumeZone (filter): the zone and region labels of the pod's bound volumes match the
node's, as kube-scheduler's plugin of the same name: a volume label names one value, or
several joined by ``__``, and a node without a volume's beta label
(``failure-domain.beta.kubernetes.io/zone``) is judged by its GA label instead; a node with
none of the zone and region labels is not judged (a cluster of one zone), one with some
must carry each of the volume's with a value it names (``node(s) had no available volume
zone``). Labels do not change by eviction: unresolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec
from gpufleet.model.volumes import GA_LABELS, ZONE_LABELS

NAME = "VolumeZone"
MESSAGE = "node(s) had no available volume zone"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class VolumeZone:
    name = NAME
    needs = ("volumes",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        if not pod.volumes:
            return FilterVerdict.pass_all(state.size)
        catalog = state.volumes.catalog
        labels = state.node_labels
        ok = np.ones(state.size, dtype=np.bool_)
        zoned = np.fromiter(
            (any(k in node for k in ZONE_LABELS) for node in labels.labels),
            dtype=np.bool_,
            count=state.size,
        )
        for key in pod.volumes:
            claim = catalog.claims.get(key)
            volume = catalog.volumes.get(claim.volume_name) if claim is not None else None
            if volume is None:
                continue  # VolumeBinding's to judge
            for label in ZONE_LABELS:
                value = volume.labels.get(label)
                if value is None:
                    continue
                allowed = set(value.split("__"))
                ga = GA_LABELS.get(label, label)
                ok &= ~zoned | np.fromiter(
                    (node.get(label, node.get(ga)) in allowed for node in labels.labels),
                    dtype=np.bool_,
                    count=state.size,
                )
        if ok.all():
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict(ok, ((MESSAGE, ~ok),), unresolvable=True)


def new(args: Args, handle: Handle) -> VolumeZone:
    return VolumeZone()
