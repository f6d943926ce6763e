"""The CustomResourceDefinitions of gpufleet's own kinds (Queue, Topology, NodePool) and of
scheduler-plugins' PodGroup: names, printer columns and status, around the ``spec`` schema of
:mod:`tools.crds.schema`.

The PodGroup CRD (``scheduling.x-k8s.io/v1alpha1``, namespaced) is scheduler-plugins' kind:
its spec is the fields of :data:`gpufleet.load.objects.schema.POD_GROUP` with the types of
scheduler-plugins' API (``int32``, a resource list), and its status is that API's (``phase``,
``occupiedBy``, the counts, ``scheduleStartTime``) plus what ``gpufleet.kube.write.podgroups``
writes besides (``scheduled``, the ``Scheduled`` condition), so that nothing gpufleet writes
is pruned. It has no CEL rule: it installs on every Kubernetes the chart allows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from gpufleet.load.objects.kinds import GPUFLEET, SUPPORTED
from tools.crds.schema import JSON, int32, spec_schema

CATEGORIES = ("gpufleet",)
"""``kubectl get gpufleet`` lists every object of gpufleet's kinds."""
POD_GROUP = SUPPORTED["PodGroup"][0]


@dataclass(frozen=True, slots=True)
class Kind:
    """One of gpufleet's kinds as the API server serves it."""

    kind: str
    plural: str
    short_names: tuple[str, ...]
    description: str
    columns: tuple[JSON, ...] = ()
    status: JSON = field(default_factory=dict)
    api_version: str = GPUFLEET
    namespaced: bool = False
    categories: tuple[str, ...] = CATEGORIES

    @property
    def group(self) -> str:
        return self.api_version.partition("/")[0]

    @property
    def name(self) -> str:
        """The CRD's name, ``<plural>.<group>``."""
        return f"{self.plural}.{self.group}"

    @property
    def file(self) -> str:
        """The CRD's file name, ``<group>_<plural>.yaml``."""
        return f"{self.group}_{self.plural}.yaml"


def _column(name: str, path: str, kind: str = "string", what: str = "", priority: int = 0) -> JSON:
    column: JSON = {"name": name, "type": kind, "jsonPath": path, "description": what or name}
    if priority:
        column["priority"] = priority
    return column


_PER_RESOURCE: JSON = {
    "type": "object",
    "properties": {
        "gpu": {"type": "number", "description": "GPUs."},
        "cpu": {"type": "number", "description": "CPU, in millicores."},
        "memory": {"type": "number", "description": "Memory, in MiB."},
    },
}

KINDS: tuple[Kind, ...] = (
    Kind(
        "Queue",
        "queues",
        ("gfq",),
        "A tenant queue: per resource a guaranteed quota, a hard limit and a weight for the "
        "surplus; queues form a tree by spec.parentQueue.",
        (
            _column("GPU Quota", ".spec.resources.gpu.quota", what="Guaranteed GPUs."),
            _column("GPU Limit", ".spec.resources.gpu.limit", what="Most GPUs (-1: none)."),
            _column("GPUs", ".status.allocated.gpu", "number", "GPUs its running pods hold."),
            _column("Fair Share", ".status.fairShare.gpu", "number", "Its fair share of GPUs."),
            _column("Pending", ".status.pendingJobs", "integer", "Jobs (gangs) waiting."),
            _column("Parent", ".spec.parentQueue", priority=1, what="The parent queue."),
            _column("Pending Pods", ".status.pendingPods", "integer", "Pods waiting.", 1),
            _column("Lent", ".status.lent", "number", "GPUs of its quota others run.", 1),
            _column("Borrowed", ".status.borrowed", "number", "GPUs beyond its quota.", 1),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ),
        {
            "type": "object",
            "description": "Written by the scheduler after each cycle that changes it.",
            "properties": {
                "allocated": {**_PER_RESOURCE, "description": "What its running pods hold."},
                "fairShare": {**_PER_RESOURCE, "description": "Its fair share, last cycle."},
                "lent": {
                    "type": "number",
                    "description": "A serving queue's GPUs of its quota that other queues run.",
                },
                "borrowed": {
                    "type": "number",
                    "description": "GPUs its running pods hold beyond its GPU quota.",
                },
                "pendingJobs": {"type": "integer", "description": "Jobs (gangs) waiting."},
                "pendingPods": {"type": "integer", "description": "Pods waiting."},
                "conditions": {
                    "type": "array",
                    "x-kubernetes-list-type": "map",
                    "x-kubernetes-list-map-keys": ["type"],
                    "description": "Valid: False where its parent queues are missing, in a "
                    "cycle or too deep (its pods wait), with the reason.",
                    "items": {
                        "type": "object",
                        "required": ["type", "status"],
                        "properties": {
                            "type": {"type": "string", "minLength": 1},
                            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
                            "reason": {"type": "string"},
                            "message": {"type": "string"},
                            "lastTransitionTime": {"type": "string", "format": "date-time"},
                        },
                    },
                },
            },
        },
    ),
    Kind(
        "Topology",
        "topologies",
        ("gft",),
        "The levels of the cluster's network topology, widest first (block, rack, host), "
        "each a node label; gangs are kept within one domain of a level.",
        (_column("Age", ".metadata.creationTimestamp", "date"),),
    ),
    Kind(
        "NodePool",
        "nodepools",
        ("gfnp",),
        "spec.count nodes made from a Node template, with topology labels per domain: a "
        "modelled cluster for what-if scheduling and simulation.",
        (
            _column("Nodes", ".spec.count", "integer", "How many nodes."),
            _column("Age", ".metadata.creationTimestamp", "date"),
        ),
    ),
)


PHASES: Mapping[str, str] = {
    "Pending": "no pod is bound (the scheduler cannot find the gang room)",
    "Scheduling": "minMember pods are bound, fewer are running",
    "Unknown": "some pods are bound, fewer than minMember (the others cannot be placed)",
    "Running": "minMember pods are running or succeeded",
    "Finished": "minMember pods succeeded",
    "Failed": "a pod failed, and minMember pods ran",
}
"""scheduler-plugins' ``PodGroupPhase`` values, each with what it means."""


def _count(what: str) -> JSON:
    return int32(f"How many of the group's pods {what}.")


_TIME: JSON = {"type": "string", "format": "date-time"}
_CONDITION: JSON = {
    "type": "object",
    "required": ["type", "status"],
    "properties": {
        "type": {"type": "string", "minLength": 1, "description": "Scheduled, from gpufleet."},
        "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
        "reason": {"type": "string", "description": "Scheduled or Unschedulable."},
        "message": {"type": "string", "description": "Why the gang waits, in its pods' words."},
        "lastTransitionTime": {**_TIME, "description": "When status last changed."},
    },
}

POD_GROUP_KIND = Kind(
    "PodGroup",
    "podgroups",
    ("pg", "pgs"),
    "scheduler-plugins' PodGroup: pods that name it in the scheduling.x-k8s.io/pod-group "
    "label are a gang, placed all together or not at all.",
    (
        _column("Phase", ".status.phase", what="The group's phase."),
        _column("Min Member", ".spec.minMember", "integer", "Pods placed together or none."),
        _column("Scheduled", ".status.scheduled", "integer", "Pods bound to a node."),
        _column("Running", ".status.running", "integer", "Pods running."),
        _column("Succeeded", ".status.succeeded", "integer", "Pods that succeeded."),
        _column("Failed", ".status.failed", "integer", "Pods that failed."),
        _column("Age", ".metadata.creationTimestamp", "date"),
    ),
    {
        "type": "object",
        "description": "Kept by the scheduler of the group's pods: gpufleet writes it after "
        "each cycle that changes it, in scheduler-plugins' fields and two of its own "
        "(scheduled, conditions).",
        "properties": {
            "phase": {
                "type": "string",
                "enum": list(PHASES),
                "description": "; ".join(f"{p}, {what}" for p, what in PHASES.items()) + ".",
            },
            "occupiedBy": {
                "type": "string",
                "description": "The workload (its UID) the group belongs to; scheduler-plugins' "
                "controller sets it.",
            },
            "scheduled": _count("are bound to a node"),
            "running": _count("are running"),
            "succeeded": _count("succeeded"),
            "failed": _count("failed"),
            "scheduleStartTime": {**_TIME, "description": "When scheduling the group began."},
            "conditions": {
                "type": "array",
                "items": _CONDITION,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
                "description": "gpufleet's Scheduled condition: True once minMember pods are "
                "bound, else False with why the gang waits.",
            },
        },
    },
    api_version=POD_GROUP,
    namespaced=True,
    categories=(),
)
"""scheduler-plugins' PodGroup, as the chart installs it on request (module docstring)."""


def crd(k: Kind) -> JSON:
    """The ``apiextensions.k8s.io/v1`` CustomResourceDefinition of ``k``."""
    properties: JSON = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec_schema(k.kind),
    }
    group, _, version_name = k.api_version.partition("/")
    version: JSON = {"name": version_name, "served": True, "storage": True}
    if k.status:
        properties["status"] = k.status
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = list(k.columns)
    root: JSON = {"type": "object", "description": k.description, "properties": properties}
    if properties["spec"].get("required"):
        root["required"] = ["spec"]
    version["schema"] = {"openAPIV3Schema": root}
    names: JSON = {
        "kind": k.kind,
        "listKind": f"{k.kind}List",
        "plural": k.plural,
        "singular": k.kind.lower(),
        "shortNames": list(k.short_names),
    }
    if k.categories:
        names["categories"] = list(k.categories)
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": k.name},
        "spec": {
            "group": group,
            "scope": "Namespaced" if k.namespaced else "Cluster",
            "names": names,
            "versions": [version],
        },
    }


def definitions() -> list[JSON]:
    """Every CustomResourceDefinition the generator makes, as the API server would hold it."""
    return [crd(k) for k in (*KINDS, POD_GROUP_KIND)]
