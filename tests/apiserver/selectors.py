"""Label and field selectors of list and watch requests.

* Label selectors, "Labels and Selectors" (concepts): equality-based ``k=v``, ``k==v``,
  ``k!=v`` and set-based ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``, joined by commas
  (a logical AND). ``!=`` and ``notin`` also match objects without the label.
* Field selectors, "Field Selectors" (concepts): ``=``, ``==`` and ``!=`` on
  ``metadata.name`` and ``metadata.namespace`` for every kind, and on the fields a resource
  adds (pods: ``spec.nodeName``, ``spec.schedulerName``, ``status.phase``). A field a
  resource does not support is a 400 ``field label not supported: <field>``, as apiserver
  answers. A missing field compares as the empty string (``spec.nodeName=`` selects unbound
  pods). The fields are the resource's, not the stored kind's: ``v1`` Events select on
  ``involvedObject.*`` (what ``kubectl describe`` sends: the object's name, namespace and
  uid), ``events.k8s.io/v1`` Events on the same fields by that version's names
  (``regarding.*``, ``reportingController``), and each refuses the other's spelling, as
  apiserver's field-label conversion for that group version does.
* ``PodDisruptionBudget.spec.selector`` is a ``LabelSelector`` object (``matchLabels`` and
  ``matchExpressions``, "Labels and Selectors: Resources that support set-based
  requirements"); an empty one selects every pod of its namespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from tests.apiserver.errors import bad_request
from tests.apiserver.resources import Resource

JSON = dict[str, Any]
Predicate = Callable[[JSON], bool]

_SET = re.compile(r"^\s*(!?)\s*([\w./-]+)\s*(?:(in|notin)\s*\(([^)]*)\))?\s*$")
_EQ = re.compile(r"^\s*([\w./-]+)\s*(==|=|!=)\s*([\w./-]*)\s*$")

_REFERENCE = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
FIELDS: dict[str, dict[str, str]] = {
    "pods": {
        f: f for f in ("spec.nodeName", "spec.schedulerName", "status.phase", "spec.restartPolicy")
    },
    "events": {
        **{f"involvedObject.{f}": f"involvedObject.{f}" for f in _REFERENCE},
        "reason": "reason",
        "type": "type",
        "reportingComponent": "reportingComponent",
        "source": "source.component",
    },
    "events.events.k8s.io": {
        **{f"regarding.{f}": f"regarding.{f}" for f in _REFERENCE},
        "reason": "reason",
        "type": "type",
        "reportingController": "reportingController",
        "source": "deprecatedSource.component",
    },
    "nodes": {"spec.unschedulable": "spec.unschedulable"},
}
"""Per resource (``Resource.qualified``), each field label it selects on and the path of
that field in the objects it serves."""


def _split(selector: str) -> list[str]:
    """Requirements split on the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for i, char in enumerate(selector):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(selector[start:i])
            start = i + 1
    parts.append(selector[start:])
    return [part for part in parts if part.strip()]


def _labels(obj: JSON) -> dict[str, str]:
    labels: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels


def _requirement(text: str) -> Predicate:
    eq = _EQ.match(text)
    if eq:
        key, op, value = eq.groups()
        if op == "!=":
            return lambda obj: _labels(obj).get(key) != value
        return lambda obj: _labels(obj).get(key) == value
    found = _SET.match(text)
    if not found:
        raise bad_request(f"unable to parse requirement: {text.strip()!r}")
    negated, key, op, values = found.groups()
    if op:
        if negated:
            raise bad_request(f"unable to parse requirement: {text.strip()!r}")
        options = {v.strip() for v in values.split(",") if v.strip()}
        if op == "in":
            return lambda obj: _labels(obj).get(key) in options
        return lambda obj: _labels(obj).get(key) not in options
    if negated:
        return lambda obj: key not in _labels(obj)
    return lambda obj: key in _labels(obj)


def label_selector(selector: str | None) -> Predicate:
    """The predicate of a ``labelSelector`` query parameter; everything when absent."""
    checks = [_requirement(part) for part in _split(selector or "")]
    return lambda obj: all(check(obj) for check in checks)


def field_value(obj: JSON, path: str) -> str:
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def _field_check(path: str, value: str, *, equal: bool) -> Predicate:
    return lambda obj: (field_value(obj, path) == value) == equal


def field_selector(selector: str | None, resource: Resource) -> Predicate:
    """The predicate of a ``fieldSelector`` query parameter for that resource."""
    supported = {
        "metadata.name": "metadata.name",
        "metadata.namespace": "metadata.namespace",
        **FIELDS.get(resource.qualified, {}),
    }
    checks: list[Predicate] = []
    for part in _split(selector or ""):
        found = _EQ.match(part)
        if not found:
            raise bad_request(f"invalid selector: '{part.strip()}'; can't understand it")
        label, op, value = found.groups()
        if label not in supported:
            raise bad_request(f"field label not supported: {label}")
        checks.append(_field_check(supported[label], value, equal=op != "!="))
    return lambda obj: all(check(obj) for check in checks)


def _expression(expr: JSON) -> Predicate:
    key, op, values = expr.get("key", ""), expr.get("operator", ""), set(expr.get("values") or [])
    tests: dict[str, Predicate] = {
        "In": lambda obj: _labels(obj).get(key) in values,
        "NotIn": lambda obj: _labels(obj).get(key) not in values,
        "Exists": lambda obj: key in _labels(obj),
        "DoesNotExist": lambda obj: key not in _labels(obj),
    }
    if op not in tests:
        raise bad_request(f"{op!r} is not a valid label selector operator")
    return tests[op]


def object_selector(selector: JSON | None) -> Predicate:
    """The predicate of a ``LabelSelector`` object; a null one selects nothing."""
    if selector is None:
        return lambda obj: False
    match = selector.get("matchLabels") or {}
    exprs = [_expression(e) for e in selector.get("matchExpressions") or []]
    return lambda obj: (
        all(_labels(obj).get(k) == v for k, v in match.items()) and all(e(obj) for e in exprs)
    )
