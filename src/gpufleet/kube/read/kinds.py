"""The kinds the live scheduler reads from a cluster: which, in what order, where the API
serves them, and which a cluster may lack."""

from __future__ import annotations

from gpufleet.load.foreign import (
    ELASTIC_QUOTA,
    KAI_POD_GROUP,
    KAI_QUEUE,
    VOLCANO_POD_GROUP,
    VOLCANO_QUEUE,
    ForeignKind,
)

KINDS = (
    "NodeResourceTopology",
    "Node",
    "PriorityClass",
    "Queue",
    "PodGroup",
    "Topology",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "StorageClass",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "CSINode",
    "Namespace",
    "Deployment",
    "StatefulSet",
    "LeaderWorkerSet",
    "Pod",
)
"""The kinds the live scheduler watches and translates (``objects.py``), in the order a
first list applies them (what a pod reads first)."""

WORKLOADS = ("Deployment", "StatefulSet", "LeaderWorkerSet")
"""The serving workloads whose replicas ask a serving queue for GPUs (``load/objects/
workloads.py``)."""
CONTEXT = frozenset({"PriorityClass", "NodeResourceTopology", "ResourceClaimTemplate", *WORKLOADS})
"""Kinds read where other objects are translated (a pod's priority, a node's NUMA zones,
why a pod waits for its claims) or beside the cache (serving workloads' replicas), not kept
by the cache."""

REQUIRED = frozenset(
    {
        "Node",
        "Pod",
        "PriorityClass",
        "StorageClass",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "CSINode",
        "Namespace",
    }
)
"""Kinds every cluster serves. The others a cluster may not serve — a CustomResourceDefinition
not installed (gpufleet's Queue and Topology before its chart, scheduler-plugins' PodGroup,
NodeResourceTopology) or ``resource.k8s.io/v1`` before Kubernetes 1.34 — and then it has
none of them: a pod that needs one (its PodGroup, its claims) waits, every other pod is
scheduled."""


API = {
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2", "noderesourcetopologies"),
    "Node": ("v1", "nodes"),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses"),
    "Queue": ("gpufleet.io/v1alpha1", "queues"),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1", "podgroups"),
    "Topology": ("gpufleet.io/v1alpha1", "topologies"),
    "DeviceClass": ("resource.k8s.io/v1", "deviceclasses"),
    "ResourceSlice": ("resource.k8s.io/v1", "resourceslices"),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates"),
    "ResourceClaim": ("resource.k8s.io/v1", "resourceclaims"),
    "StorageClass": ("storage.k8s.io/v1", "storageclasses"),
    "PersistentVolume": ("v1", "persistentvolumes"),
    "PersistentVolumeClaim": ("v1", "persistentvolumeclaims"),
    "CSINode": ("storage.k8s.io/v1", "csinodes"),
    "Namespace": ("v1", "namespaces"),
    "Deployment": ("apps/v1", "deployments"),
    "StatefulSet": ("apps/v1", "statefulsets"),
    "LeaderWorkerSet": ("leaderworkerset.x-k8s.io/v1", "leaderworkersets"),
    "Pod": ("v1", "pods"),
}
"""Each kind of :data:`KINDS`: its apiVersion and resource."""

FOREIGN_LIVE: tuple[ForeignKind, ...] = (
    KAI_QUEUE,
    VOLCANO_QUEUE,
    ELASTIC_QUOTA,
    KAI_POD_GROUP,
    VOLCANO_POD_GROUP,
)
"""Other schedulers' kinds the live scheduler reads when their vocabulary is on
(``load/foreign.py``), each watched under the store kind ``Kind apiVersion`` (its
:attr:`~gpufleet.load.foreign.ForeignKind.key`). Where two objects define one queue or
gang, the first in this order wins, after gpufleet's own."""

LIVE_VOCABULARIES = frozenset(k.vocabulary for k in FOREIGN_LIVE)
"""The vocabularies ``gpufleet serve`` can read."""

FOREIGN_KINDS = {k.key: k for k in FOREIGN_LIVE}

NAMESPACED = frozenset(
    {"Pod", "PodGroup", "ResourceClaim", "ResourceClaimTemplate", "PersistentVolumeClaim"}
    | set(WORKLOADS)
    | {KAI_POD_GROUP.key, VOLCANO_POD_GROUP.key, ELASTIC_QUOTA.key}
)
"""The kinds whose objects live in a namespace (keyed ``namespace/name``)."""

API.update({k.key: (k.api_version, k.plural) for k in FOREIGN_LIVE})


def _root(version: str) -> str:
    """``/api/v1`` for the core group, ``/apis/GROUP/VERSION`` for the others."""
    return f"/api/{version}" if "/" not in version else f"/apis/{version}"


def path(kind: str) -> str:
    """Where ``kind`` (of :data:`KINDS` or a foreign kind's key) is listed and watched,
    across namespaces."""
    version, plural = API[kind]
    return f"{_root(version)}/{plural}"


def object_path(kind: str, key: str) -> str:
    """Where the object ``key`` (``namespace/name``, or a name) of ``kind`` is read and
    written."""
    version, plural = API[kind]
    namespace, _, name = key.rpartition("/")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{_root(version)}{where}/{plural}/{name}"


PATHS = {kind: path(kind) for kind in API}
"""Where each kind is listed and watched (all namespaces)."""


def kinds(vocabularies: frozenset[str]) -> tuple[str, ...]:
    """:data:`KINDS` and the kinds of ``vocabularies``: each foreign kind right after
    gpufleet's kind it is read as (queues before PodGroups before pods)."""
    out: list[str] = []
    for kind in KINDS:
        out.append(kind)
        out += [k.key for k in FOREIGN_LIVE if k.becomes == kind and k.vocabulary in vocabularies]
    return tuple(out)


def becomes(kind: str) -> str:
    """The cache's kind that store kind ``kind`` is read as (``Queue`` for a KAI Queue)."""
    foreign = FOREIGN_KINDS.get(kind)
    return foreign.becomes if foreign is not None else kind


def object_kind(kind: str) -> str:
    """The ``kind`` field of the objects of store kind ``kind`` (``Queue`` for
    ``Queue scheduling.run.ai/v2``)."""
    return kind.split(" ", 1)[0]
