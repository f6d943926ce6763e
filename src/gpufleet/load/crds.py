"""The CustomResourceDefinitions of gpufleet's own kinds (Queue, Topology, NodePool) and of
scheduler-plugins' PodGroup, made from the field table the loader checks objects against.

One source of truth: a CRD's properties are the fields of
:data:`gpufleet.load.objects.schema.STRICT`
(the fields the loader reads, where an unknown one is an error), each given the type, bounds
and rules the readers (``queues.py``, ``node_pools.py``) enforce, from :data:`TYPES`,
:data:`SHAPES` and :data:`RULES` below. Making a CRD fails when a field of the table has no
type, or a type names no field, so the two cannot drift apart; what each rule allows is held
equal to what the readers allow by a table of objects read both ways (``tests/load/test_crds.py``).

Rules between fields are CEL ``x-kubernetes-validations`` as the API server evaluates them
(Kubernetes 1.29 or later: they compare quantities with ``quantity()``). The Node a NodePool's
``spec.template`` holds is checked by the loader only: the CRD keeps its fields as given.

The PodGroup CRD (``scheduling.x-k8s.io/v1alpha1``, namespaced) is scheduler-plugins' kind:
its spec is the fields of :data:`gpufleet.load.objects.schema.POD_GROUP` with the types of
scheduler-plugins' API (``int32``, a resource list), and its status is that API's (``phase``,
``occupiedBy``, the counts, ``scheduleStartTime``) plus what ``gpufleet.kube.write.podgroups``
writes besides (``scheduled``, the ``Scheduled`` condition), so that nothing gpufleet writes
is pruned. It has no CEL rule: it installs on every Kubernetes the chart allows.

``python -m gpufleet.load.crds --write DIR`` writes one file per kind of gpufleet's into
``DIR``, a Helm chart's ``crds/`` (``deploy/helm/gpufleet/crds/``, which Helm installs before
the chart's templates, always), and the PodGroup CRD into the chart's ``templates/``, as a
template rendered only with the value ``podGroupCRD.install``: the CRD may be installed
already, by scheduler-plugins or another scheduler, and Helm will not take over an object
it did not create.
"""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufleet.load.objects.kinds import GPUFLEET, SUPPORTED
from gpufleet.load.objects.node_pools import HOSTNAME_LABEL, MAX_DOMAINS, MAX_POOL_NODES
from gpufleet.load.objects.schema import ANY, LENIENT, STRICT, Schema

JSON = dict[str, Any]
CATEGORIES = ("gpufleet",)
"""``kubectl get gpufleet`` lists every object of gpufleet's kinds."""
POD_GROUP = SUPPORTED["PodGroup"][0]
TABLES: Mapping[str, Schema] = {**STRICT, "PodGroup": LENIENT["PodGroup"]}
"""Per kind with a CRD, the loader's field table its schema is made from."""

_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN = rf"^(-1|\+?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?)$"
"""A non-negative Kubernetes quantity (``500m``, ``4``, ``80Gi``) or ``-1`` (none)."""
AMOUNT_PATTERN = rf"^\+?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$"
"""A non-negative Kubernetes quantity, as a resource list holds it."""
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|h|m|s))+$"
INT32_MAX = 2**31 - 1
"""The largest ``int32``: scheduler-plugins' clients cannot read a larger count."""
MAX_QUANTITY = "4503599627370496"
"""2^52, :data:`gpufleet.load.objects.reader.MAX_QUANTITY`: beyond it a quantity is a typo."""


def _int_or_string(pattern: str, minimum: int) -> JSON:
    """A value written as a whole number or a string: a quantity or a duration."""
    return {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
        "pattern": pattern,
        "minimum": minimum,
    }


def _quantity(what: str) -> JSON:
    return {
        **_int_or_string(QUANTITY_PATTERN, -1),
        "description": what,
        "x-kubernetes-validations": [
            {
                "rule": f"string(self) == '-1' || "
                f"quantity(string(self)).compareTo(quantity('{MAX_QUANTITY}')) < 0",
                "message": "must be below 2^52 (about 4.5e15) bytes, cores or devices",
            }
        ],
    }


def _duration(what: str) -> JSON:
    return {**_int_or_string(DURATION_PATTERN, 0), "description": what}


def _int32(what: str, minimum: int = 0) -> JSON:
    """A Go ``int32`` field, its bounds explicit: API servers do not enforce a number's
    ``format``."""
    return {
        "type": "integer",
        "format": "int32",
        "minimum": minimum,
        "maximum": INT32_MAX,
        "description": what,
    }


_STRING_MAP: JSON = {"type": "object", "additionalProperties": {"type": "string"}}
_KEPT: JSON = {"x-kubernetes-preserve-unknown-fields": True}
"""A value of a Kubernetes kind's own (a Node's), kept as given: the loader checks it."""

TYPES: Mapping[str, Mapping[str, JSON]] = {
    "Queue": {
        "spec.parentQueue": {
            "type": "string",
            "description": "The parent queue's name; none: a top-level queue.",
        },
        "spec.priority": {
            "type": "integer",
            "description": "Order among sibling queues, higher first (default 100).",
        },
        "spec.preemptMinRuntime": _duration(
            "How long a pod runs before preemption within the queue may evict it "
            "('90s', '10m', '1h30m' or seconds)."
        ),
        "spec.reclaimMinRuntime": _duration(
            "How long a pod runs before another queue may reclaim its resources."
        ),
        "spec.resources.*.quota": _quantity(
            "Guaranteed amount (GPUs; CPU as '500m' or cores; memory as '80Gi'); -1 or "
            "none: no quota."
        ),
        "spec.resources.*.limit": _quantity("Hard cap, at least the quota; -1 or none: none."),
        "spec.resources.*.overQuotaWeight": {
            "type": "number",
            "minimum": 0,
            "description": "Share of the surplus beyond the quotas (default 1).",
        },
    },
    "Topology": {
        "spec.levels[].nodeLabel": {
            "type": "string",
            "minLength": 1,
            "description": "A node-label key (e.g. the rack label), levels widest first.",
        },
    },
    "NodePool": {
        "spec.count": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_POOL_NODES,
            "description": "How many nodes the pool makes from its template.",
        },
        "spec.domains[].label": {
            "type": "string",
            "minLength": 1,
            "description": "A topology node-label key the pool's nodes get a value of.",
        },
        "spec.domains[].size": {
            "type": "integer",
            "minimum": 1,
            "description": "Nodes per value: fewer than the wider domain before, dividing it.",
        },
        "spec.template.metadata.labels": _STRING_MAP,
        "spec.template.metadata.annotations": _STRING_MAP,
        "spec.template.metadata.*": _KEPT,
        "spec.template.spec.*": _KEPT,
        "spec.template.spec.taints[].*": _KEPT,
        "spec.template.status": _KEPT,
    },
    "PodGroup": {
        "spec.minMember": _int32(
            "How many of the group's pods must be placed together, or none is (default 1).", 1
        ),
        "spec.minResources": {
            "type": "object",
            "additionalProperties": _int_or_string(AMOUNT_PATTERN, 0),
            "description": "Resources the group needs at least, by resource name "
            "('nvidia.com/gpu': 8, cpu: '500m', memory: '80Gi'); gpufleet sums its pods' "
            "requests instead.",
        },
        "spec.scheduleTimeoutSeconds": _int32(
            "How long scheduler-plugins' coscheduling lets the group's pods wait, in seconds."
        ),
    },
}
"""Per kind, the OpenAPI schema of each leaf of the loader's field table (``*`` any name)."""

SHAPES: Mapping[str, Mapping[str, JSON]] = {
    "Queue": {},
    "Topology": {
        "spec": {"required": ["levels"]},
        "spec.levels": {
            "minItems": 1,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["nodeLabel"],
            "description": "The topology's levels, widest first, each a distinct node label.",
        },
        "spec.levels[]": {"required": ["nodeLabel"]},
    },
    "NodePool": {
        "spec": {"required": ["count", "template"]},
        "spec.template": {
            "minProperties": 1,
            "description": "A Node (metadata.labels, status.allocatable) each node copies.",
        },
        "spec.domains": {
            "maxItems": MAX_DOMAINS,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["label"],
            "description": "Topology domains, widest first.",
        },
        "spec.domains[]": {"required": ["label", "size"]},
    },
    "PodGroup": {
        "spec": {"description": "A gang: pods placed all together or not at all."},
    },
}
"""Per object or list of a kind's field table, what its schema adds (required fields, bounds)."""


def _narrower(i: int) -> str:
    """The rule that domain ``i`` is narrower than domain ``i - 1`` (CEL has no loop over
    indexes: one term per pair, as many as ``maxItems`` allows)."""
    a, b = f"self.domains[{i - 1}].size", f"self.domains[{i}].size"
    return f"(size(self.domains) <= {i} || {a} > {b} && {a} % {b} == 0)"


RULES: Mapping[str, Mapping[str, Sequence[JSON]]] = {
    "Queue": {
        "spec.resources.*": [
            {
                "rule": "!has(self.limit) || string(self.limit) == '-1' || "
                "quantity(string(self.limit)).compareTo(quantity(has(self.quota) && "
                "string(self.quota) != '-1' ? string(self.quota) : '0')) >= 0",
                "message": "limit must be -1 or at least the quota",
                "fieldPath": ".limit",
            }
        ],
    },
    "Topology": {},
    "NodePool": {
        "spec": [
            {
                "rule": f"!has(self.domains) || self.domains.all(d, d.label != '{HOSTNAME_LABEL}')",
                "message": f"a domain's label must not be {HOSTNAME_LABEL} (each node has its own)",
                "fieldPath": ".domains",
            },
            {
                "rule": "!has(self.domains) || "
                + " && ".join(_narrower(i) for i in range(1, MAX_DOMAINS)),
                "message": "each domain must have fewer nodes than the wider domain before it, "
                "dividing its size",
                "fieldPath": ".domains",
            },
        ],
    },
    "PodGroup": {},
}
"""Per object of a kind's field table, the CEL rules between its fields that the readers
enforce (``self`` the object)."""


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
            _column("Age", ".metadata.creationTimestamp", "date"),
        ),
        {
            "type": "object",
            "description": "Written by the scheduler after each cycle that changes it.",
            "properties": {
                "allocated": {**_PER_RESOURCE, "description": "What its running pods hold."},
                "fairShare": {**_PER_RESOURCE, "description": "Its fair share, last cycle."},
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
    return _int32(f"How many of the group's pods {what}.")


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


def _leaf(kind: str, path: str) -> JSON:
    for pattern, schema in TYPES[kind].items():
        if fnmatch.fnmatchcase(path, pattern):
            return dict(schema)
    raise KeyError(f"{kind}: no type for field {path}")


def _patterns_used(kind: str, paths: Sequence[str]) -> None:
    unused = [p for p in TYPES[kind] if not any(fnmatch.fnmatchcase(x, p) for x in paths)]
    if unused:
        raise KeyError(f"{kind}: types for fields the loader does not read: {unused}")


def _schema(kind: str, table: Any, path: str, leaves: list[str]) -> JSON:
    """The OpenAPI schema of the field table ``table`` at ``path``."""
    if table is ANY:
        leaves.append(path)
        out = _leaf(kind, path)
    elif isinstance(table, list):
        out = {"type": "array", "items": _schema(kind, table[0], f"{path}[]", leaves)}
    else:
        out = {
            "type": "object",
            "properties": {
                name: _schema(kind, sub, f"{path}.{name}", leaves) for name, sub in table.items()
            },
        }
    generic = _generic(path)
    for key in (path, generic):
        if key in SHAPES[kind]:
            out.update(SHAPES[kind][key])
        if key in RULES[kind]:
            out["x-kubernetes-validations"] = [dict(r) for r in RULES[kind][key]]
    return out


def _generic(path: str) -> str:
    """``spec.resources.gpu`` -> ``spec.resources.*`` (per-resource rules)."""
    head, _, _ = path.rpartition(".")
    return f"{head}.*" if head == "spec.resources" else path


def spec_schema(kind: str) -> JSON:
    """The OpenAPI schema of ``spec`` of ``kind``, from the loader's field table."""
    leaves: list[str] = []
    schema = _schema(kind, TABLES[kind]["spec"], "spec", leaves)
    _patterns_used(kind, leaves)
    return schema


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


COMMAND = "python -m gpufleet.load.crds --write DIR"
HEADER = f"# Generated by `{COMMAND}`; edit src/gpufleet/load/crds.py.\n"
VALUE = "podGroupCRD.install"
"""The chart's value that installs the PodGroup CRD (``values.yaml`` says why it is off)."""


class _Dumper(yaml.SafeDumper):
    """Writes a schema used twice in full, not as a YAML alias: the files are read by people."""

    def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002 (every value alike)
        return True


def _yaml(value: JSON) -> str:
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)


def template(k: Kind) -> str:
    """The chart's template of ``k``'s CRD: rendered only with :data:`VALUE`, labelled as
    the chart's objects are, and left in place by ``helm uninstall`` (deleting a CRD deletes
    every object of its kind)."""
    definition = crd(k)
    body = _yaml({"spec": definition["spec"]})
    if "{{" in body:
        raise ValueError(f"{k.kind}: its schema holds '{{{{', which Helm would read as a template")
    head = [
        f"{{{{- /* {HEADER.removeprefix('# ').strip()} */}}}}",
        f"{{{{- if .Values.{VALUE} }}}}",
        f"apiVersion: {definition['apiVersion']}",
        f"kind: {definition['kind']}",
        "metadata:",
        f"  name: {definition['metadata']['name']}",
        "  labels:",
        '    {{- include "gpufleet.labels" . | nindent 4 }}',
        "  annotations:",
        "    helm.sh/resource-policy: keep",
    ]
    return "\n".join(head) + "\n" + body + "{{- end }}\n"


def files() -> dict[str, str]:
    """Each generated file's path in the chart and its text."""
    out = {f"crds/{k.file}": HEADER + _yaml(crd(k)) for k in KINDS}
    out[f"templates/{POD_GROUP_KIND.file}"] = template(POD_GROUP_KIND)
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write",
        type=Path,
        required=True,
        metavar="DIR",
        help="a Helm chart's crds/ folder; the PodGroup CRD goes to the chart's templates/",
    )
    folder = parser.parse_args(argv).write
    chart = folder.parent
    if folder.name != "crds" or not (chart / "Chart.yaml").is_file():
        parser.error(
            f"--write {folder}: expected the crds/ folder of a Helm chart (beside its "
            "Chart.yaml), e.g. deploy/helm/gpufleet/crds/"
        )
    for name, text in files().items():
        path = chart / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
