"""The OpenAPI schema of each of gpufleet's kinds' ``spec``, made from the field table the
loader checks objects against.

One source of truth: a CRD's properties are the fields of
:data:`gpufleet.load.objects.schema.STRICT` (the fields the loader reads, where an unknown one
is an error), each given the type, bounds and rules the readers (``load/objects/queues.py``,
``load/objects/node_pools.py``) enforce, from :data:`TYPES`, :data:`SHAPES` and :data:`RULES`
below. Making a schema fails when a field of the table has no type, or a type names no field,
so the two cannot drift apart; what each rule allows is held equal to what the readers allow
by a table of objects read both ways (``tests/tools/test_crds.py``).

Rules between fields are CEL ``x-kubernetes-validations`` as the API server evaluates them
(Kubernetes 1.29 or later: they compare quantities with ``quantity()``). The Node a NodePool's
``spec.template`` holds is checked by the loader only: the CRD keeps its fields as given.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.load.objects.node_pools import MAX_DOMAINS, MAX_POOL_NODES
from gpufleet.load.objects.queues import MAX_FORECAST_GPUS, MAX_QUERY_CHARS
from gpufleet.load.objects.schema import ANY, LENIENT, STRICT, Schema
from gpufleet.model.supply import HOSTNAME_LABEL

JSON = dict[str, Any]
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


def int32(what: str, minimum: int = 0) -> JSON:
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
        "spec.serving.forecastGPUs": {
            **_int_or_string(AMOUNT_PATTERN, 0),
            "description": "A serving queue's GPUs forecast for the reclaim horizon, kept free "
            "from lending as whole nodes (at most its GPU quota; default 0: it lends all it "
            "does not use).",
            "x-kubernetes-validations": [
                {
                    "rule": f"quantity(string(self)).compareTo(quantity('{MAX_FORECAST_GPUS}')) "
                    "<= 0",
                    "message": f"must be at most {MAX_FORECAST_GPUS} (2^40) GPUs",
                }
            ],
        },
        "spec.serving.forecastQuery": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUERY_CHARS,
            "description": "A PromQL query of the GPUs a serving queue will need over the "
            "reclaim horizon, asked by gpufleet serve --forecast-prometheus; the larger of its "
            "answer and forecastGPUs is kept.",
        },
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
            "minimum": 0,
            "maximum": MAX_POOL_NODES,
            "description": "How many nodes the pool makes from its template (0 only for a "
            "pool that autoscales).",
        },
        "spec.autoscaling.maxNodes": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_POOL_NODES,
            "description": "The most nodes an autoscaler may give the pool (at least count).",
        },
        "spec.autoscaling.minNodes": {
            "type": "integer",
            "minimum": 0,
            "maximum": MAX_POOL_NODES,
            "description": "The nodes the pool keeps (at most count; default 0).",
        },
        "spec.autoscaling.provisioningDelay": _duration(
            "From a request to the node being Ready (default 5m)."
        ),
        "spec.autoscaling.interruptionsPerHour": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "Spot pools: interruptions per node-hour (default 0.01).",
        },
        "spec.autoscaling.availability": {
            "type": "number",
            "exclusiveMinimum": True,
            "minimum": 0,
            "maximum": 1,
            "description": "Spot pools: the chance a request for capacity is filled (default 1).",
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
        "spec.minMember": int32(
            "How many of the group's pods must be placed together, or none is (default 1).", 1
        ),
        "spec.minResources": {
            "type": "object",
            "additionalProperties": _int_or_string(AMOUNT_PATTERN, 0),
            "description": "Resources the group needs at least, by resource name "
            "('nvidia.com/gpu': 8, cpu: '500m', memory: '80Gi'); gpufleet sums its pods' "
            "requests instead.",
        },
        "spec.scheduleTimeoutSeconds": int32(
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
        "spec.autoscaling": {
            "required": ["maxNodes"],
            "description": "The pool is a node type an autoscaler may buy, up to maxNodes.",
        },
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
            {
                "rule": "has(self.autoscaling) || self.count >= 1",
                "message": "a pool that does not autoscale needs at least one node",
                "fieldPath": ".count",
            },
            {
                "rule": "!has(self.autoscaling) || self.autoscaling.maxNodes >= self.count",
                "message": "maxNodes must be at least count",
                "fieldPath": ".autoscaling.maxNodes",
            },
            {
                "rule": "!has(self.autoscaling) || !has(self.autoscaling.minNodes) || "
                "self.autoscaling.minNodes <= self.count",
                "message": "minNodes must be at most count",
                "fieldPath": ".autoscaling.minNodes",
            },
        ],
    },
    "PodGroup": {},
}
"""Per object of a kind's field table, the CEL rules between its fields that the readers
enforce (``self`` the object)."""


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
