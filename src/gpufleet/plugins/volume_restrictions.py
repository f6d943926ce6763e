"""VolumeRestrictions (filter): a ``ReadWriteOncePod`` claim serves one pod at a time, as
kube-scheduler's plugin of the same name: while another pod uses it, the pod fits no node
(``node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access
mode``). Evicting that pod frees the claim: resolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "VolumeRestrictions"
MESSAGE = (
    "node has pod using PersistentVolumeClaim with the same name and ReadWriteOncePod access mode"
)


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class VolumeRestrictions:
    name = NAME
    needs = ("volumes",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        used = state.volumes.rwop
        if not pod.volumes or not any(used.get(key, 0) > 0 for key in pod.volumes):
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict.reject_pod(state.size, MESSAGE, unresolvable=False)


def new(args: Args, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions()
