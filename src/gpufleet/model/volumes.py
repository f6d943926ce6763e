"""Where a pod may go by its PersistentVolumeClaims: the storage objects as values, and the
per-node state the volume filters read (kube-scheduler's VolumeBinding, VolumeZone,
VolumeRestrictions and NodeVolumeLimits).

* :class:`VolumeCatalog` — the cluster's StorageClasses, PersistentVolumes, claims and
  CSINodes (a snapshot's, or the live cache's), with the node mask of each claim cached:
  a bound claim may go where its volume's node affinity allows; an unbound claim of a
  ``WaitForFirstConsumer`` class where a matching available volume is, or where its class
  may provision one (``allowedTopologies``).
* :class:`VolumeState` — kept in the :class:`~gpufleet.model.cluster.ClusterState` and
  changed by ``reserve``/``release`` as the pod index is: the volumes attached to each
  node per CSI driver (NodeVolumeLimits), the pods using each ``ReadWriteOncePod`` claim
  (VolumeRestrictions), and the volume each unbound claim was given by a placement of this
  cycle (so two claims never get one volume, and the binding says which to write).

Kubernetes semantics, from the API reference and the plugins' documented behaviour: a
volume matches a claim when it is of the claim's class, free (no ``claimRef``, or one to
this claim), at least as large, offers every access mode the claim asks for, has its
volume mode, and carries the labels of the claim's selector; of the matching volumes the
smallest is chosen (the PV controller's rule), ties by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.interpod import LabelSelector
from gpufleet.model.selectors import NodeConstraint, NodeLabels, Requirement
from gpufleet.model.values import EMPTY, frozen_map

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import BoolArray, IntArray

NO_PROVISIONER = "kubernetes.io/no-provisioner"
"""A class whose volumes are made by hand (local volumes): nothing is provisioned for it."""
READ_WRITE_ONCE_POD = "ReadWriteOncePod"
ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
"""The volume labels VolumeZone compares with the node's (a value may list several,
joined by ``__``)."""
GA_LABELS = {
    "failure-domain.beta.kubernetes.io/zone": "topology.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
}
"""A beta zone label of a volume is compared with the node's GA label."""


@dataclass(frozen=True, slots=True)
class StorageClass:
    name: str
    provisioner: str
    wait_for_consumer: bool = False
    """``volumeBindingMode: WaitForFirstConsumer`` (else Immediate)."""
    allowed_topologies: tuple[tuple[Requirement, ...], ...] = ()
    """Terms ORed, each ANDed (empty: anywhere)."""


@dataclass(frozen=True, slots=True)
class PersistentVolume:
    name: str
    storage_class: str = ""
    capacity: int = 0
    """Bytes."""
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    node_affinity: tuple[tuple[Requirement, ...], ...] = ()
    """Required node-selector terms, ORed (empty: any node)."""
    labels: Mapping[str, str] = EMPTY
    claim: str = ""
    """``namespace/name`` of the claim in its ``claimRef`` (empty: free)."""
    driver: str = ""
    """The CSI driver (empty: not a CSI volume)."""
    handle: str = ""
    """The CSI volume handle (the name where empty): what is attached to a node."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", frozen_map(self.labels))


@dataclass(frozen=True, slots=True)
class VolumeClaim:
    key: str
    storage_class: str | None = None
    """``spec.storageClassName`` (None: not set; "": no class, static binding only)."""
    volume_name: str = ""
    """``spec.volumeName``: the volume it is bound to (empty: unbound)."""
    request: int = 0
    """Bytes."""
    access_modes: frozenset[str] = frozenset()
    volume_mode: str = "Filesystem"
    selector: LabelSelector | None = None
    deleting: bool = False
    selected_node: str = ""
    """``volume.kubernetes.io/selected-node``: the node a volume is being provisioned on for
    it (a scheduler chose it): the claim's pods may go there only."""
    uid: str = field(default="", compare=False)
    """``metadata.uid``: which object (a claim made again under its name is another)."""


@dataclass(frozen=True, slots=True)
class CsiNode:
    name: str
    limits: Mapping[str, int] = EMPTY
    """Per CSI driver, how many of its volumes the node may attach."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "limits", frozen_map(self.limits))


@dataclass(frozen=True, slots=True)
class Storage:
    """A cluster's storage objects, as a snapshot holds them."""

    classes: tuple[StorageClass, ...] = ()
    volumes: tuple[PersistentVolume, ...] = ()
    claims: tuple[VolumeClaim, ...] = ()
    csi_nodes: tuple[CsiNode, ...] = ()


NO_STORAGE = Storage()
"""A cluster without storage objects (a trace's)."""

ClaimVerdict = tuple["BoolArray | None", str]
"""Where one claim lets its pod go: the nodes, or a problem that keeps it off every node
(a missing claim or class, an unbound immediate claim) with None."""


class VolumeCatalog:
    """The storage objects of one cluster, read-only, with each claim's verdict cached per
    node set (the catalog is made anew when any storage object changes)."""

    def __init__(
        self,
        classes: Sequence[StorageClass] = (),
        volumes: Sequence[PersistentVolume] = (),
        claims: Sequence[VolumeClaim] = (),
        csi_nodes: Sequence[CsiNode] = (),
    ) -> None:
        self.classes = {c.name: c for c in classes}
        self.volumes = {v.name: v for v in sorted(volumes, key=lambda v: (v.capacity, v.name))}
        self.claims = {c.key: c for c in claims}
        self.csi_nodes = {c.name: c for c in csi_nodes}
        self._masks: dict[object, BoolArray] = {}

    @staticmethod
    def of(storage: Storage) -> VolumeCatalog:
        return VolumeCatalog(storage.classes, storage.volumes, storage.claims, storage.csi_nodes)

    def __bool__(self) -> bool:
        return bool(self.classes or self.volumes or self.claims or self.csi_nodes)

    def term_mask(
        self, labels: NodeLabels, terms: tuple[tuple[Requirement, ...], ...]
    ) -> BoolArray:
        """Nodes that satisfy one of ``terms`` (all nodes for none), cached."""
        if not terms:
            return np.ones(len(labels.labels), dtype=np.bool_)
        mask = self._masks.get(terms)
        if mask is None:
            mask = labels.affinity_mask(NodeConstraint(terms))
            mask.setflags(write=False)
            self._masks[terms] = mask
        return mask

    def candidates(self, claim: VolumeClaim) -> list[PersistentVolume]:
        """The volumes that match unbound ``claim``: one whose ``claimRef`` names it first
        (the PV controller binds such a pre-bound volume before any other), then the free
        ones smallest first (given to another claim this cycle or not)."""
        matching = [
            v
            for v in self.volumes.values()
            if v.storage_class == (claim.storage_class or "")
            and v.claim in ("", claim.key)
            and v.capacity >= claim.request
            and claim.access_modes <= v.access_modes
            and v.volume_mode == claim.volume_mode
            and (claim.selector is None or claim.selector.matches(v.labels))
        ]
        return sorted(matching, key=lambda v: v.claim != claim.key)

    def verdict(
        self,
        labels: NodeLabels,
        key: str,
        taken: Mapping[str, str],
        chosen: Mapping[str, tuple[str, int]],
    ) -> ClaimVerdict:
        """Where claim ``key`` lets a pod go; ``taken``: volume -> claim given it this cycle,
        ``chosen``: claim -> the volume (and node) a placement gave it, which its other pods
        must follow."""
        name = key.split("/", 1)[1]
        claim = self.claims.get(key)
        if claim is None:
            return None, f'persistentvolumeclaim "{name}" not found'
        if claim.deleting:
            return None, f'persistentvolumeclaim "{name}" is being deleted'
        if claim.volume_name:
            volume = self.volumes.get(claim.volume_name)
            if volume is None:
                return None, "pvc(s) bound to non-existent pv(s)"
            return self.term_mask(labels, volume.node_affinity), ""
        given = chosen.get(key)
        if given is not None:
            return self._given(labels, *given), ""
        return self._unbound(labels, claim, taken)

    def _given(self, labels: NodeLabels, volume: str, node: int) -> BoolArray:
        """Where the other pods of a claim given ``volume`` on ``node`` may go: that
        volume's nodes, or the node it is provisioned on."""
        if volume and volume in self.volumes:
            return self.term_mask(labels, self.volumes[volume].node_affinity)
        there = np.zeros(len(labels.labels), dtype=np.bool_)
        there[node] = True
        return there

    def _unbound(
        self, labels: NodeLabels, claim: VolumeClaim, taken: Mapping[str, str]
    ) -> ClaimVerdict:
        key = claim.key
        cls = self.classes.get(claim.storage_class or "")
        if claim.storage_class and cls is None:
            return None, f'storageclass.storage.k8s.io "{claim.storage_class}" not found'
        if cls is None or not cls.wait_for_consumer:
            return None, "pod has unbound immediate PersistentVolumeClaims"
        ok = np.zeros(len(labels.labels), dtype=np.bool_)
        for volume in self.candidates(claim):
            if taken.get(volume.name, key) == key:
                ok |= self.term_mask(labels, volume.node_affinity)
        if cls.provisioner != NO_PROVISIONER:
            ok |= self.term_mask(labels, cls.allowed_topologies)
        if claim.selected_node:  # provisioning there has begun: that node only
            ok &= np.array([n == claim.selected_node for n in labels.names], dtype=np.bool_)
        return ok, ""

    def choose(
        self, labels: NodeLabels, key: str, node: int, taken: Mapping[str, str]
    ) -> str | None:
        """For unbound claim ``key`` placed on ``node``: the volume it is given (the smallest
        free match whose node affinity allows the node), "" to provision one there, None if
        neither (the filter said yes, so only a bug gets None)."""
        claim = self.claims[key]
        for volume in self.candidates(claim):
            if (
                taken.get(volume.name, key) == key
                and self.term_mask(labels, volume.node_affinity)[node]
            ):
                return volume.name
        cls = self.classes.get(claim.storage_class or "")
        provisions = cls is not None and cls.provisioner != NO_PROVISIONER
        if provisions and cls is not None and self.term_mask(labels, cls.allowed_topologies)[node]:
            return ""
        return None

    def attachment(self, key: str, chosen: str | None) -> tuple[str, str] | None:
        """The (CSI driver, volume handle) claim ``key`` attaches to its node, if any: its
        bound or chosen volume's, or for a volume to provision its class's provisioner and
        the claim itself."""
        claim = self.claims.get(key)
        if claim is None:
            return None
        name = claim.volume_name or chosen
        if name:
            volume = self.volumes.get(name)
            if volume is None or not volume.driver:
                return None
            return volume.driver, volume.handle or volume.name
        cls = self.classes.get(claim.storage_class or "")
        if cls is None or chosen is None or cls.provisioner == NO_PROVISIONER:
            return None
        return cls.provisioner, f"claim:{key}"

    def limits(self, names: Sequence[str], driver: str) -> IntArray:
        """Per node, how many volumes of ``driver`` it may attach (a large number: no limit)."""
        return np.array(
            [
                (
                    self.csi_nodes[n].limits.get(driver, _NO_LIMIT)
                    if n in self.csi_nodes
                    else _NO_LIMIT
                )
                for n in names
            ],
            dtype=np.int64,
        )


_NO_LIMIT = 1 << 30


class VolumeState:
    """What placements change (see the module doc); copied with the cluster state (the
    dicts are small: the pods with claims, not every pod)."""

    __slots__ = ("attached", "catalog", "chosen", "rwop", "size", "taken", "users")

    def __init__(self, size: int, catalog: VolumeCatalog | None = None) -> None:
        self.size = size
        self.catalog = catalog or VolumeCatalog()
        self.attached: dict[tuple[int, str, str], int] = {}
        """(node, driver, handle) -> pods using that attachment."""
        self.rwop: dict[str, int] = {}
        """ReadWriteOncePod claim -> pods using it."""
        self.taken: dict[str, str] = {}
        """Volume -> the unbound claim a placement gave it."""
        self.chosen: dict[str, tuple[str, int]] = {}
        """Unbound claim -> the volume a placement gave it ("" to provision) and the node."""
        self.users: dict[str, int] = {}
        """Unbound claim -> the placed pods that count on its ``chosen`` volume."""

    def attached_on(self, driver: str) -> IntArray:
        out = np.zeros(self.size, dtype=np.int64)
        for (node, d, _), n in self.attached.items():
            if d == driver and n > 0:
                out[node] += 1
        return out

    def take(self, labels: NodeLabels, node: int, claims: Sequence[str], sign: int) -> None:
        """A pod with ``claims`` starts (``sign`` 1) or stops (-1) on ``node``. An unbound
        claim is given a volume by the first pod placed with it; the others count on it."""
        catalog = self.catalog
        for key in claims:
            claim = catalog.claims.get(key)
            if claim is None:
                continue  # a running pod whose claim is gone: nothing to count
            given = self.chosen.get(key)
            if not claim.volume_name and sign > 0:
                if given is None:
                    volume = catalog.choose(labels, key, node, self.taken)
                    if volume is not None:
                        given = self.chosen[key] = (volume, node)
                        if volume:
                            self.taken[volume] = key
                if given is not None:
                    self.users[key] = self.users.get(key, 0) + 1
            elif given is not None and sign < 0:
                self.users[key] -= 1
                if not self.users[key]:
                    del self.users[key], self.chosen[key]
                    if given[0] and self.taken.get(given[0]) == key:
                        del self.taken[given[0]]
            if READ_WRITE_ONCE_POD in claim.access_modes:
                self.rwop[key] = self.rwop.get(key, 0) + sign
            attachment = catalog.attachment(key, None if given is None else given[0])
            if attachment is not None:
                slot = (node, *attachment)
                self.attached[slot] = self.attached.get(slot, 0) + sign

    def copy(self) -> VolumeState:
        if not self.catalog:
            return self  # no storage object: no placement changes it (take finds no claim)
        other = VolumeState(self.size, self.catalog)
        other.attached = dict(self.attached)
        other.rwop = dict(self.rwop)
        other.taken = dict(self.taken)
        other.chosen = dict(self.chosen)
        other.users = dict(self.users)
        return other
