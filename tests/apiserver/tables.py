"""Server-side printing: the ``Table`` that ``kubectl get`` asks for.

API concepts, "Receiving resources as Tables": a client that sends ``Accept:
application/json;as=Table;v=v1;g=meta.k8s.io`` gets a ``meta.k8s.io/v1`` ``Table`` of
``columnDefinitions`` and ``rows`` (``cells`` and, per ``includeObject``, the object's
``PartialObjectMetadata`` by default, the whole object or nothing). The columns are
kube-apiserver's printers' for pods (``NAME READY STATUS RESTARTS AGE``, and ``IP NODE
NOMINATED NODE READINESS GATES`` at priority 1, shown by ``-o wide``), nodes and v1 Events;
the kinds whose CRDs gpufleet generates (its own and PodGroup, ``tools/crds``: the
chart's files are its output, a test says so) get their ``additionalPrinterColumns``, as
apiserver prints a custom resource: ``NAME``, then each column's value at its ``jsonPath``
(none: null, a blank cell in kubectl), a ``date`` as an age; other kinds get ``NAME AGE``,
as custom resources without printer columns do. In a watch, only the first event's Table has
the column definitions, as in apiserver.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from tools.crds.kinds import definitions

from tests.apiserver.resources import Resource
from tests.apiserver.views import to_storage

JSON = dict[str, Any]
Row = Callable[[JSON, datetime], list[Any]]
NONE = "<none>"


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def age(created: str | None, now: datetime) -> str:  # noqa: PLR0911 (one per unit)
    """apimachinery's ``duration.HumanDuration`` of the time since ``created``."""
    if not created:
        return "<unknown>"
    seconds = max(0, int((now - datetime.fromisoformat(created)).total_seconds()))
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86400
    if seconds < 120:
        return f"{seconds}s"
    if minutes < 10:
        return f"{minutes}m{seconds % 60}s" if seconds % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 192:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 730 else f"{days // 365}y"


def _column(name: str, kind: str = "string", *, priority: int = 0, fmt: str = "") -> JSON:
    return {"name": name, "type": kind, "format": fmt, "description": name, "priority": priority}


def _pod(pod: JSON, now: datetime) -> list[Any]:
    spec, status, meta = pod.get("spec") or {}, pod.get("status") or {}, pod["metadata"]
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for s in statuses if s.get("ready"))
    phase = (
        "Terminating"
        if meta.get("deletionTimestamp")
        else status.get("reason") or status.get("phase", "")
    )
    restarts = sum(int(s.get("restartCount", 0)) for s in statuses)
    gates = spec.get("readinessGates") or []
    return [
        meta["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        restarts,
        age(meta.get("creationTimestamp"), now),
        status.get("podIP") or NONE,
        spec.get("nodeName") or NONE,
        status.get("nominatedNodeName") or NONE,
        f"0/{len(gates)}" if gates else NONE,
    ]


def _node(node: JSON, now: datetime) -> list[Any]:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}.get("Ready")
    state = {"True": "Ready", "False": "NotReady"}.get(ready or "", "Unknown")
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    prefix = "node-role.kubernetes.io/"
    roles = sorted(k[len(prefix) :] for k in meta.get("labels") or {} if k.startswith(prefix))
    version = (status.get("nodeInfo") or {}).get("kubeletVersion", "")
    return [
        meta["name"],
        state,
        ",".join(roles) or NONE,
        age(meta.get("creationTimestamp"), now),
        version,
    ]


def _event(event: JSON, now: datetime) -> list[Any]:
    involved = event.get("involvedObject") or {}
    last = (
        event.get("lastTimestamp")
        or event.get("eventTime")
        or event["metadata"].get("creationTimestamp")
    )
    return [
        age(last, now),
        event.get("type", ""),
        event.get("reason", ""),
        f"{involved.get('kind', '').lower()}/{involved.get('name', '')}",
        event.get("message", ""),
    ]


def _default(obj: JSON, now: datetime) -> list[Any]:
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"), now)]


NAME = _column("Name", fmt="name")
PRINTERS: dict[str, tuple[list[JSON], Row]] = {
    "/pods": (
        [
            NAME,
            _column("Ready"),
            _column("Status"),
            _column("Restarts", "string"),
            _column("Age"),
            _column("IP", priority=1),
            _column("Node", priority=1),
            _column("Nominated Node", priority=1),
            _column("Readiness Gates", priority=1),
        ],
        _pod,
    ),
    "/nodes": (
        [NAME, _column("Status"), _column("Roles"), _column("Age"), _column("Version")],
        _node,
    ),
    "/events": (
        [
            _column("Last Seen"),
            _column("Type"),
            _column("Reason"),
            _column("Object"),
            _column("Message"),
        ],
        _event,
    ),
}


def _at(obj: Any, path: str) -> Any:
    """The value at a simple ``jsonPath`` (``.status.allocated.gpu``); None where absent."""
    for part in path.strip(".").split("."):
        obj = obj.get(part) if isinstance(obj, dict) else None
    return obj


def _custom(columns: list[JSON]) -> tuple[list[JSON], Row]:
    definitions = [NAME] + [
        {
            "name": c["name"],
            "type": "string" if c["type"] == "date" else c["type"],
            "format": c.get("format", ""),
            "description": c.get("description", ""),
            "priority": c.get("priority", 0),
        }
        for c in columns
    ]

    def row(obj: JSON, now: datetime) -> list[Any]:
        cells = [obj["metadata"]["name"]]
        for c in columns:
            value = _at(obj, c["jsonPath"])
            cells.append(age(value, now) if c["type"] == "date" else value)
        return cells

    return definitions, row


def _crd_printers() -> dict[str, tuple[list[JSON], Row]]:
    printers = {}
    for crd in definitions():
        spec = crd["spec"]
        columns = spec["versions"][0].get("additionalPrinterColumns")
        if columns:
            printers[f"{spec['group']}/{spec['names']['plural']}"] = _custom(columns)
    return printers


PRINTERS.update(_crd_printers())


def table(
    resource: Resource,
    objects: list[JSON],
    *,
    now: datetime,
    include: str = "Metadata",
    revision: str = "",
    columns: bool = True,
) -> JSON:
    """The Table of ``objects`` (as ``resource`` serves them)."""
    definitions, row = PRINTERS.get(resource.storage_key, ([NAME, _column("Age")], _default))
    rows = []
    for obj in objects:
        entry: JSON = {"cells": row(to_storage(resource, obj), now)}
        if include == "Object":
            entry["object"] = obj
        elif include != "None":
            entry["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj["metadata"],
            }
        rows.append(entry)
    result: JSON = {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": {"resourceVersion": revision} if revision else {},
    }
    if columns:
        result["columnDefinitions"] = definitions
    result["rows"] = rows
    return result
