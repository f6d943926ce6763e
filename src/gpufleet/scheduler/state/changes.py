"""Watch events of the objects the cluster cache keeps, and the kinds it keeps.

An :class:`Event` is what a watch reports — ``ADDED``, ``MODIFIED`` or ``DELETED`` — of
one object already translated to gpufleet's model (``load/`` and, live, ``kube/``
translate one object at a time). :func:`snapshot_events` are the events that build a
snapshot in an empty cache (every object ``ADDED``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeAlias

from gpufleet.model.devices import Pool
from gpufleet.model.values import EMPTY, frozen_map
from gpufleet.model.volumes import VolumeClaim
from gpufleet.model.workload import GroupSpec, PodInfo

if TYPE_CHECKING:
    from gpufleet.model.cluster import NodeSpec
    from gpufleet.model.devices import Claim, DeviceAllocation, DeviceClass
    from gpufleet.model.volumes import CsiNode, PersistentVolume, StorageClass, VolumeClaim
    from gpufleet.model.workload import QueueSpec, Snapshot

EventType = Literal["ADDED", "MODIFIED", "DELETED"]

STORAGE_KINDS = ("StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode")
"""The storage objects, in :class:`~gpufleet.model.volumes.Storage`'s order."""

KINDS = (
    "Node",
    "Pod",
    "PodGroup",
    "Queue",
    "Topology",
    "DeviceClass",
    "ResourcePool",
    "ResourceClaim",
    *STORAGE_KINDS,
    "Namespace",
)
"""The kinds the cache keeps. ``ResourcePool`` is a DRA pool (the ResourceSlices of one
driver's pool, merged as the allocator reads them); a ``ResourceClaim`` carries its
``status.allocation``. PriorityClasses, NodeResourceTopologies and ResourceClaimTemplates
are read where an object is translated (a pod's priority, a node's NUMA zones, a pod's
claims), as the API server and its controllers resolve them."""


@dataclass(frozen=True, slots=True)
class Topology:
    """The Topology object: node-label keys of the levels, widest first."""

    name: str
    levels: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Namespace:
    """A Namespace object: its labels (what pod affinity's namespace selectors read)."""

    name: str
    labels: Mapping[str, str] = EMPTY

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", frozen_map(self.labels))


@dataclass(frozen=True, slots=True)
class ClaimObject:
    """A ResourceClaim with its allocation (``status.allocation``; None: not allocated)."""

    claim: Claim
    allocation: DeviceAllocation | None = None
    uid: str = ""
    """``metadata.uid`` (empty: not read from a cluster). Compared: a claim deleted and made
    again under its name is another claim, which the live scheduler must not write the
    allocation of the first to."""


if TYPE_CHECKING:
    CacheObject: TypeAlias = (
        NodeSpec
        | PodInfo
        | GroupSpec
        | QueueSpec
        | Topology
        | DeviceClass
        | Pool
        | ClaimObject
        | StorageClass
        | PersistentVolume
        | VolumeClaim
        | CsiNode
        | Namespace
    )


@dataclass(frozen=True, slots=True)
class Event:
    """One watch event: ``type`` of ``obj``, an object of ``kind``."""

    type: EventType
    kind: str
    obj: CacheObject


def object_key(obj: CacheObject) -> str:
    """The key the cache files ``obj`` under: its name, or ``namespace/name``."""
    if isinstance(obj, PodInfo | GroupSpec | VolumeClaim):
        return obj.key
    if isinstance(obj, ClaimObject):
        return obj.claim.key
    if isinstance(obj, Pool):
        return f"{obj.driver}/{obj.name}"
    return obj.name


def snapshot_events(snapshot: Snapshot) -> list[Event]:
    """The events that build ``snapshot`` in an empty cache (every object ``ADDED``)."""
    events = [Event("ADDED", "Node", n) for n in snapshot.nodes]
    events += [Event("ADDED", "Queue", q) for q in snapshot.queues]
    events += [Event("ADDED", "PodGroup", g) for g in snapshot.groups]
    if snapshot.topology:
        events.append(Event("ADDED", "Topology", Topology("default", snapshot.topology)))
    events += [Event("ADDED", "DeviceClass", c) for c in snapshot.device_classes]
    events += [Event("ADDED", "ResourcePool", p) for p in snapshot.pools]
    events += [
        Event("ADDED", "ResourceClaim", ClaimObject(c, snapshot.allocations.get(c.key)))
        for c in snapshot.claims
    ]
    storage = snapshot.storage
    events += [Event("ADDED", "StorageClass", c) for c in storage.classes]
    events += [Event("ADDED", "PersistentVolume", v) for v in storage.volumes]
    events += [Event("ADDED", "PersistentVolumeClaim", c) for c in storage.claims]
    events += [Event("ADDED", "CSINode", c) for c in storage.csi_nodes]
    events += [
        Event("ADDED", "Namespace", Namespace(n, labels))
        for n, labels in snapshot.namespaces.items()
    ]
    events += [Event("ADDED", "Pod", p) for p in snapshot.pods]
    return events
