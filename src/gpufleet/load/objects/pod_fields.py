"""Every field of a PodSpec, and what gpufleet does with it: one decision per field.

A pod with ``schedulerName: gpufleet`` is placed by gpufleet alone, so a field that changes
where kube-scheduler would put a pod and that gpufleet skipped would be a placement
Kubernetes never makes. Each field (a path such as
``spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].topologyKey``,
``[]`` standing for every item of a list) is therefore one of:

* :data:`IMPLEMENTED` — gpufleet places by it as kube-scheduler does (the plugin named);
* :data:`REFUSED` — it changes where the pod may go and gpufleet does not place by it yet:
  a pending pod that sets it waits, with a reason naming the field, and the load warns
  once per field with the count of pods (:func:`gpufleet.load.objects.placement.refused_fields`);
* :data:`PREFERENCES` — a soft rule kube-scheduler only scores: any node it allows is a
  placement Kubernetes accepts, so the pod is placed, and the load warns that the
  preference is not weighed;
* :data:`NOT_PLACEMENT` — kube-scheduler does not read it (the kubelet, the API server or
  a controller does), with the reason.

An entry of the last three kinds covers the field's whole subtree; an implemented field
whose parts are read one by one lists its parts too (``subtree`` False), so that a part
added by a later Kubernetes is a decision to make.
``tests/load/objects/test_pod_fields.py`` walks the PodSpec of Kubernetes 1.37's OpenAPI
schema and fails on any field no entry decides.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Implemented:
    by: str
    """What places by it (a filter plugin, the reader)."""
    subtree: bool = True
    """Whether the entry covers every field below (a value type read whole)."""


_TERM = {
    "labelSelector": Implemented("InterPodAffinity (a label selector, read whole)"),
    "matchLabelKeys": Implemented("InterPodAffinity (merged into the selector)"),
    "mismatchLabelKeys": Implemented("InterPodAffinity (merged into the selector)"),
    "namespaces": Implemented("InterPodAffinity"),
    "topologyKey": Implemented("InterPodAffinity"),
    "namespaceSelector": Implemented("InterPodAffinity (by the Namespaces' labels)"),
}
"""The fields of a pod affinity term, required or preferred."""
_CONTAINER_OTHER = {
    "args": "the container's command line",
    "command": "the container's command line",
    "env": "the container's environment",
    "envFrom": "the container's environment",
    "image": "image pulls are the kubelet's",
    "imagePullPolicy": "image pulls are the kubelet's",
    "lifecycle": "hooks the kubelet runs",
    "livenessProbe": "probes the kubelet runs",
    "readinessProbe": "probes the kubelet runs",
    "startupProbe": "probes the kubelet runs",
    "name": "a name",
    "resizePolicy": "in-place resize is the kubelet's",
    "restartPolicyRules": "restarts are the kubelet's",
    "securityContext": "the kubelet and the runtime enforce it",
    "stdin": "terminal settings",
    "stdinOnce": "terminal settings",
    "tty": "terminal settings",
    "terminationMessagePath": "the kubelet's",
    "terminationMessagePolicy": "the kubelet's",
    "volumeDevices": "mounts of the pod's volumes (spec.volumes decides)",
    "volumeMounts": "mounts of the pod's volumes (spec.volumes decides)",
    "workingDir": "the container's working directory",
}
_VOLUME_REFUSED = {
    "awsElasticBlockStore": "VolumeRestrictions and NodeVolumeLimits of in-tree disks",
    "gcePersistentDisk": "VolumeRestrictions and NodeVolumeLimits of in-tree disks",
    "azureDisk": "NodeVolumeLimits of in-tree disks",
    "cinder": "NodeVolumeLimits of in-tree disks",
    "portworxVolume": "NodeVolumeLimits of in-tree disks",
    "rbd": "VolumeRestrictions of RBD images",
    "iscsi": "VolumeRestrictions of iSCSI disks",
}
_VOLUME_MOUNTED = (
    "azureFile", "cephfs", "configMap", "csi", "downwardAPI", "emptyDir", "fc", "flexVolume",
    "flocker", "gitRepo", "glusterfs", "hostPath", "image", "nfs", "photonPersistentDisk",
    "projected", "quobyte", "scaleIO", "secret", "storageos", "vsphereVolume",
)  # fmt: skip


def _build() -> tuple[dict[str, Implemented], dict[str, str], dict[str, str], dict[str, str]]:
    implemented: dict[str, Implemented] = {
        "spec.affinity": Implemented("the filters below", subtree=False),
        "spec.affinity.nodeAffinity": Implemented("NodeAffinity", subtree=False),
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution": (
            Implemented("NodeAffinity (a node selector, read whole)")
        ),
        "spec.affinity.podAffinity": Implemented("InterPodAffinity", subtree=False),
        "spec.affinity.podAntiAffinity": Implemented("InterPodAffinity", subtree=False),
        "spec.nodeSelector": Implemented("NodeAffinity"),
        "spec.tolerations": Implemented("TaintToleration (tolerationSeconds: the taint manager)"),
        "spec.nodeName": Implemented("a bound pod's node (its usage is counted there)"),
        "spec.schedulerName": Implemented("which pods gpufleet schedules"),
        "spec.schedulingGates": Implemented("SchedulingGates (a gated pod waits)"),
        "spec.priority": Implemented("priority order and preemption"),
        "spec.priorityClassName": Implemented("priority order and preemption"),
        "spec.preemptionPolicy": Implemented("preemption (Never: the pod evicts no one)"),
        "spec.resourceClaims": Implemented("DynamicResources"),
        "spec.resources": Implemented("NodeResourcesFit (pod-level requests)"),
        "spec.overhead": Implemented("NodeResourcesFit (added to the requests)"),
        "spec.hostNetwork": Implemented("NodePorts (container ports become host ports)"),
        "spec.topologySpreadConstraints": Implemented("PodTopologySpread", subtree=False),
        "spec.topologySpreadConstraints[].labelSelector": Implemented(
            "PodTopologySpread (a label selector, read whole)"
        ),
        **{
            f"spec.topologySpreadConstraints[].{f}": Implemented("PodTopologySpread")
            for f in (
                "matchLabelKeys",
                "maxSkew",
                "minDomains",
                "nodeAffinityPolicy",
                "nodeTaintsPolicy",
                "topologyKey",
                "whenUnsatisfiable",
            )
        },
        "spec.volumes": Implemented("the volume kinds below", subtree=False),
        "spec.volumes[].persistentVolumeClaim": Implemented(
            "VolumeBinding, VolumeZone, VolumeRestrictions, NodeVolumeLimits (by the claim)"
        ),
        "spec.volumes[].ephemeral": Implemented(
            "the same filters, by the claim the ephemeral volume controller makes"
        ),
    }
    refused: dict[str, str] = {
        "spec.schedulingGroup": "the Workload API's PodGroup, which gpufleet does not read",
    }
    for kind in ("podAffinity", "podAntiAffinity"):
        required = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        preferred = f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        implemented[required] = Implemented("InterPodAffinity", subtree=False)
        implemented[preferred] = Implemented("InterPodAffinity's score", subtree=False)
        implemented[f"{preferred}[].weight"] = Implemented("InterPodAffinity's score")
        implemented[f"{preferred}[].podAffinityTerm"] = Implemented(
            "InterPodAffinity's score", subtree=False
        )
        for term in (f"{required}[]", f"{preferred}[].podAffinityTerm"):
            implemented |= {f"{term}.{field}": entry for field, entry in _TERM.items()}
    refused |= {f"spec.volumes[].{k}": v for k, v in _VOLUME_REFUSED.items()}
    preferences = {
        "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution": (
            "NodeAffinity's score"
        ),
    }
    not_placement = {
        "spec.activeDeadlineSeconds": "a run-time deadline the kubelet enforces",
        "spec.automountServiceAccountToken": "a mount the kubelet makes",
        "spec.dnsConfig": "the pod's DNS",
        "spec.dnsPolicy": "the pod's DNS",
        "spec.enableServiceLinks": "the containers' environment",
        "spec.ephemeralContainers": "added to a running pod, never scheduled",
        "spec.evictionResponders": "who reacts to an eviction, not where the pod runs",
        "spec.hostAliases": "the pod's /etc/hosts",
        "spec.hostIPC": "a namespace the kubelet shares",
        "spec.hostPID": "a namespace the kubelet shares",
        "spec.hostUsers": "a namespace the kubelet shares",
        "spec.hostname": "the pod's host name",
        "spec.hostnameOverride": "the pod's host name",
        "spec.imagePullSecrets": "image pulls are the kubelet's",
        "spec.os": "kube-scheduler does not filter by it (the kubelet rejects a mismatch)",
        "spec.readinessGates": "readiness, after the pod runs",
        "spec.restartPolicy": "restarts are the kubelet's",
        "spec.runtimeClassName": (
            "its node selector, tolerations and overhead are written into the pod at "
            "admission, and those fields are read"
        ),
        "spec.securityContext": "the kubelet and the runtime enforce it",
        "spec.serviceAccount": "the pod's identity",
        "spec.serviceAccountName": "the pod's identity",
        "spec.setHostnameAsFQDN": "the pod's host name",
        "spec.shareProcessNamespace": "a namespace the kubelet shares",
        "spec.subdomain": "the pod's DNS name",
        "spec.terminationGracePeriodSeconds": "how the kubelet stops the pod",
        "spec.volumes[].name": "a name",
    }
    not_placement |= {
        f"spec.volumes[].{k}": "mounted by the kubelet; kube-scheduler does not place by it"
        for k in _VOLUME_MOUNTED
    }
    for part in ("containers", "initContainers"):
        implemented[f"spec.{part}"] = Implemented("the pod's requests", subtree=False)
        implemented[f"spec.{part}[].resources"] = Implemented("NodeResourcesFit, DynamicResources")
        not_placement |= {f"spec.{part}[].{k}": why for k, why in _CONTAINER_OTHER.items()}
    implemented["spec.initContainers[].restartPolicy"] = Implemented(
        "NodeResourcesFit (a sidecar's requests add to the pod's)"
    )
    not_placement["spec.containers[].restartPolicy"] = "restarts are the kubelet's"
    for part in ("containers", "initContainers"):  # init containers': a sidecar's ports
        implemented[f"spec.{part}[].ports"] = Implemented("NodePorts", subtree=False)
        for f in ("containerPort", "hostIP", "hostPort", "protocol"):
            implemented[f"spec.{part}[].ports[].{f}"] = Implemented("NodePorts")
        not_placement[f"spec.{part}[].ports[].name"] = "a name"
    return implemented, refused, preferences, not_placement


IMPLEMENTED, REFUSED, PREFERENCES, NOT_PLACEMENT = _build()


def decided(path: str) -> str | None:
    """Which table decides generic field ``path`` (None: none does): its own entry, else
    the nearest parent's where that covers its subtree (a list's entry covers its items)."""
    parts = path.split(".")
    for end in range(len(parts), 0, -1):
        at = ".".join(parts[:end])
        own = at == path
        at = at if own else at.removesuffix("[]")
        entry = IMPLEMENTED.get(at)
        if entry is not None:
            return "implemented" if entry.subtree or own else None
        for table, name in _COVERING:
            if at in table:
                return name
    return None


_COVERING = ((REFUSED, "refused"), (PREFERENCES, "preference"), (NOT_PLACEMENT, "not placement"))


def used_fields(obj: Mapping[str, Any], path: str) -> Iterator[str]:
    """The concrete paths (``spec.volumes[2].ephemeral``) where ``obj`` sets generic field
    ``path`` to something other than null or empty."""

    def walk(node: Any, parts: list[str], at: str) -> Iterator[str]:
        if not parts:
            if _set(node):
                yield at
            return
        head, rest = parts[0], parts[1:]
        many = head.endswith("[]")
        key = head.removesuffix("[]")
        if not isinstance(node, Mapping):
            return
        value = node.get(key)
        where = f"{at}.{key}" if at else key
        if not many:
            yield from walk(value, rest, where)
        elif isinstance(value, list):
            for i, item in enumerate(value):
                yield from walk(item, rest, f"{where}[{i}]")

    return walk(obj, path.split("."), "")


Trie = dict[str, tuple[str, bool, "Trie", int | None]]
"""Generic paths by their parts: each part (``volumes[]``) to its key, whether it is a list,
the parts under it, and the index of the path that ends there."""


@functools.cache
def _trie(paths: tuple[str, ...]) -> Trie:
    root: Trie = {}
    for index, path in enumerate(paths):
        level, parts = root, path.split(".")
        for depth, head in enumerate(parts):
            key, many, children, leaf = level.get(
                head, (head.removesuffix("[]"), head.endswith("[]"), {}, None)
            )
            if depth == len(parts) - 1:
                leaf = index
            level[head] = (key, many, children, leaf)
            level = children
    return root


def used_fields_of(obj: Mapping[str, Any], paths: tuple[str, ...]) -> list[str]:
    """What :func:`used_fields` finds for each of ``paths``, in their order, from one walk
    of ``obj`` that follows only the keys it has (a pod is read at every watch event)."""
    found: list[tuple[int, str]] = []

    def walk(node: Any, level: Trie, at: str) -> None:
        if not isinstance(node, Mapping):
            return
        for key, many, children, leaf in level.values():
            value = node.get(key)
            if value is None:
                continue
            where = f"{at}.{key}" if at else key
            if not many:
                hits = [(where, value)]
            elif isinstance(value, list):
                hits = [(f"{where}[{i}]", item) for i, item in enumerate(value)]
            else:
                continue
            for here, item in hits:
                if leaf is not None and _set(item):
                    found.append((leaf, here))
                if children:
                    walk(item, children, here)

    walk(obj, _trie(paths), "")
    found.sort(key=lambda hit: hit[0])  # stable: a path's own hits stay in the walk's order
    return [path for _, path in found]


def _set(value: Any) -> bool:
    """Whether ``value`` says anything: not null, and not empty all the way down
    (``{matchLabels: {}}`` says as little as ``{}``)."""
    if isinstance(value, Mapping):
        return any(_set(v) for v in value.values())
    if isinstance(value, list):
        return bool(value)
    return value not in (None, "")
