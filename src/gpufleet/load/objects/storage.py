"""Read the storage objects a pod's volumes are placed by: StorageClasses, PersistentVolumes,
PersistentVolumeClaims and CSINodes, into :mod:`gpufleet.model.volumes` values.

What each is read for (kube-scheduler's volume plugins read the same):

* a StorageClass: its ``provisioner``, ``volumeBindingMode`` (Immediate by default) and
  ``allowedTopologies`` (``matchLabelExpressions``: each expression ``key In values``);
* a PersistentVolume: its class, ``capacity.storage``, access modes, volume mode
  (Filesystem by default), required ``nodeAffinity``, labels (the zone labels), the claim
  of its ``claimRef`` and, for a CSI volume, its driver and volume handle;
* a PersistentVolumeClaim: its class (``spec.storageClassName``), ``volumeName``, the
  ``requests.storage`` it asks for, access modes, volume mode, ``selector``, whether it is
  being deleted, and the node a scheduler chose to provision its volume on (annotation
  ``volume.kubernetes.io/selected-node``: its pods may go there only);
* a CSINode: per driver, ``allocatable.count`` (the volumes the node may attach).

A claim that names no class is read as naming none: the cluster's default class is
written into it by the admission controller when it is created, so a snapshot shows it.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.load.objects.placement import label_value, selector
from gpufleet.load.objects.pods import NOTHING, node_requirement
from gpufleet.load.objects.reader import Reader
from gpufleet.model.selectors import Requirement
from gpufleet.model.volumes import CsiNode, PersistentVolume, StorageClass, VolumeClaim

MODES = ("Immediate", "WaitForFirstConsumer")
VOLUME_MODES = ("Filesystem", "Block")
SELECTED_NODE = "volume.kubernetes.io/selected-node"
"""The annotation a scheduler writes on a claim to provision where its pod runs."""
ACCESS_MODES = ("ReadWriteOnce", "ReadOnlyMany", "ReadWriteMany", "ReadWriteOncePod")


def read_storage_class(r: Reader) -> StorageClass:
    provisioner = r.string("provisioner")
    if not provisioner:
        raise r.fail("provisioner", "the name of the class's provisioner", provisioner)
    mode = r.string("volumeBindingMode", "Immediate")
    if mode not in MODES:
        raise r.fail("volumeBindingMode", " | ".join(MODES), mode)
    terms = []
    for i, term in enumerate(r.sequence("allowedTopologies")):
        where = f"allowedTopologies[{i}].matchLabelExpressions"
        exprs = term.get("matchLabelExpressions") if isinstance(term, Mapping) else None
        if not isinstance(exprs, list):
            raise r.fail(where, "a list of label expressions", exprs)
        reqs = []
        for j, expr in enumerate(exprs):
            key = expr.get("key") if isinstance(expr, Mapping) else None
            values = expr.get("values") if isinstance(expr, Mapping) else None
            if not isinstance(key, str) or not key:
                raise r.fail(f"{where}[{j}].key", "a node label key", key)
            if not isinstance(values, list) or not values:
                raise r.fail(f"{where}[{j}].values", "a list of label values", values)
            reqs.append(
                Requirement(
                    key,
                    "In",
                    tuple(
                        label_value(r, f"{where}[{j}].values[{k}]", v) for k, v in enumerate(values)
                    ),
                )
            )
        terms.append(tuple(reqs) if reqs else (NOTHING,))
    return StorageClass(r.name, provisioner, mode == "WaitForFirstConsumer", tuple(terms))


def _modes(r: Reader, path: str) -> frozenset[str]:
    modes = r.sequence(path)
    for i, mode in enumerate(modes):
        if mode not in ACCESS_MODES:
            raise r.fail(f"{path}[{i}]", " | ".join(ACCESS_MODES), mode)
    return frozenset(modes)


def _volume_mode(r: Reader, path: str) -> str:
    mode = r.string(path, "Filesystem") or "Filesystem"
    if mode not in VOLUME_MODES:
        raise r.fail(path, " | ".join(VOLUME_MODES), mode)
    return mode


def read_volume(r: Reader) -> PersistentVolume:
    capacity = r.mapping("spec.capacity").get("storage", 0)
    path = "spec.nodeAffinity.required.nodeSelectorTerms"
    terms = []
    for i, term in enumerate(r.sequence(path)):
        if not isinstance(term, Mapping):
            raise r.fail(f"{path}[{i}]", "a node selector term", term)
        reqs = [
            node_requirement(r, f"{path}[{i}].{kind}[{j}]", expr, kind)
            for kind in ("matchExpressions", "matchFields")
            for j, expr in enumerate(term.get(kind) or [])
        ]
        terms.append(tuple(reqs) if reqs else (NOTHING,))
    ref = r.mapping("spec.claimRef")
    for field in ("namespace", "name"):
        if ref.get(field) is not None and not isinstance(ref[field], str):
            raise r.fail(f"spec.claimRef.{field}", "a name", ref[field])
    claim = f"{ref.get('namespace') or 'default'}/{ref['name']}" if ref.get("name") else ""
    csi = r.mapping("spec.csi")
    return PersistentVolume(
        r.name,
        r.string("spec.storageClassName", "") or "",
        int(r.quantity("spec.capacity.storage", capacity)),
        _modes(r, "spec.accessModes"),
        _volume_mode(r, "spec.volumeMode"),
        tuple(terms),
        r.strings("metadata.labels"),
        claim,
        str(csi.get("driver") or ""),
        str(csi.get("volumeHandle") or ""),
    )


def read_claim(r: Reader) -> VolumeClaim:
    requests = r.mapping("spec.resources.requests")
    raw = r.get("spec.selector")
    return VolumeClaim(
        r.key,
        r.string("spec.storageClassName"),
        r.string("spec.volumeName", "") or "",
        int(r.quantity("spec.resources.requests.storage", requests.get("storage", 0))),
        _modes(r, "spec.accessModes"),
        _volume_mode(r, "spec.volumeMode"),
        None if raw is None else selector(r, "spec.selector", raw),
        r.get("metadata.deletionTimestamp") is not None,
        r.strings("metadata.annotations").get(SELECTED_NODE, ""),
        uid=r.identity()[0],
    )


def read_csi_node(r: Reader) -> CsiNode:
    limits = {}
    for i, driver in enumerate(r.sequence("spec.drivers")):
        name = driver.get("name") if isinstance(driver, Mapping) else None
        if not isinstance(name, str) or not name:
            raise r.fail(f"spec.drivers[{i}].name", "a CSI driver name", name)
        allocatable = driver.get("allocatable") or {}
        if not isinstance(allocatable, Mapping):
            raise r.fail(f"spec.drivers[{i}].allocatable", "a mapping with count", allocatable)
        count = allocatable.get("count")
        if count is not None:
            if isinstance(count, bool) or not isinstance(count, int) or count < 0:
                raise r.fail(f"spec.drivers[{i}].allocatable.count", "a count >= 0", count)
            limits[name] = count
    return CsiNode(r.name, limits)
