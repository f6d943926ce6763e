"""The CustomResourceDefinitions of gpufleet's own kinds (Queue, Topology, NodePool), made
from the field table the loader checks objects against.

One source of truth: a CRD's properties are the fields of :data:`gpufleet.load.schema.STRICT`
(the fields the loader reads, where an unknown one is an error), each given the type, bounds
and rules the readers (``queues.py``, ``node_pools.py``) enforce, from :data:`TYPES`,
:data:`SHAPES` and :data:`RULES` below. Making a CRD fails when a field of the table has no
type, or a type names no field, so the two cannot drift apart; what each rule allows is held
equal to what the readers allow by a table of objects read both ways (``tests/test_crds.py``).

Rules between fields are CEL ``x-kubernetes-validations`` as the API server evaluates them
(Kubernetes 1.29 or later: they compare quantities with ``quantity()``). The Node a NodePool's
``spec.template`` holds is checked by the loader only: the CRD keeps its fields as given.

``python -m gpufleet.load.crds --write DIR`` writes one file per kind into ``DIR``
(``deploy/helm/gpufleet/crds/``, which Helm installs before the chart's templates).
"""

from __future__ import annotations

import argparse
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from gpufleet.load.kinds import GPUFLEET
from gpufleet.load.node_pools import HOSTNAME_LABEL, MAX_DOMAINS, MAX_POOL_NODES
from gpufleet.load.schema import ANY, STRICT

JSON = dict[str, Any]
GROUP, _, VERSION = GPUFLEET.partition("/")
CATEGORIES = ["gpufleet"]
"""``kubectl get gpufleet`` lists every object of gpufleet's kinds."""

_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
QUANTITY_PATTERN = rf"^(-1|\+?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?)$"
"""A non-negative Kubernetes quantity (``500m``, ``4``, ``80Gi``) or ``-1`` (none)."""
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|h|m|s))+$"
MAX_QUANTITY = "4503599627370496"
"""2^52, :data:`gpufleet.load.reader.MAX_QUANTITY`: beyond it a quantity is a typo."""


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
    schema = _schema(kind, STRICT[kind]["spec"], "spec", leaves)
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
    version: JSON = {"name": VERSION, "served": True, "storage": True}
    if k.status:
        properties["status"] = k.status
        version["subresources"] = {"status": {}}
    version["additionalPrinterColumns"] = list(k.columns)
    root: JSON = {"type": "object", "description": k.description, "properties": properties}
    if properties["spec"].get("required"):
        root["required"] = ["spec"]
    version["schema"] = {"openAPIV3Schema": root}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{k.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {
                "kind": k.kind,
                "listKind": f"{k.kind}List",
                "plural": k.plural,
                "singular": k.kind.lower(),
                "shortNames": list(k.short_names),
                "categories": CATEGORIES,
            },
            "versions": [version],
        },
    }


def definitions() -> list[JSON]:
    """Every CustomResourceDefinition the generator makes, as the API server would hold it."""
    return [crd(k) for k in KINDS]


HEADER = (
    "# Generated by `python -m gpufleet.load.crds --write DIR`; edit src/gpufleet/load/crds.py.\n"
)


class _Dumper(yaml.SafeDumper):
    """Writes a schema used twice in full, not as a YAML alias: the files are read by people."""

    def ignore_aliases(self, data: Any) -> bool:  # noqa: ARG002 (every value alike)
        return True


def files() -> dict[str, str]:
    """Each CRD's file name and YAML text."""
    return {
        f"{GROUP}_{k.plural}.yaml": HEADER
        + yaml.dump(crd(k), Dumper=_Dumper, sort_keys=False, width=100, allow_unicode=True)
        for k in KINDS
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", type=Path, required=True, metavar="DIR")
    folder = parser.parse_args(argv).write
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files().items():
        (folder / name).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
