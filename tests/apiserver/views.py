"""How a stored object looks through a resource: its ``apiVersion`` and ``kind``, and the
field names of a second version of the same objects.

Stored objects carry no ``apiVersion``/``kind``; a response gets the resource's. ``v1`` Events
and ``events.k8s.io/v1`` Events are one collection in apiserver ("Event v1 events.k8s.io" API
reference: the fields it renames from ``v1`` Event), so an Event a scheduler writes through
``events.k8s.io/v1`` is what ``kubectl get events`` lists. They are stored in the ``v1`` form.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.resources import Resource

JSON = dict[str, Any]

# events.k8s.io/v1 field -> v1 Event field
EVENT_FIELDS = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedSource": "source",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedCount": "count",
    "reportingController": "reportingComponent",
}


def _renamed(obj: JSON, names: dict[str, str]) -> JSON:
    return {names.get(key, key): value for key, value in obj.items()}


def to_storage(resource: Resource, obj: JSON) -> JSON:
    """The stored form of an object sent to ``resource`` (a deep copy)."""
    stored = {k: copy.deepcopy(v) for k, v in obj.items() if k not in {"apiVersion", "kind"}}
    if resource.group == "events.k8s.io":
        stored = _renamed(stored, EVENT_FIELDS)
    return stored


def to_view(resource: Resource, stored: JSON) -> JSON:
    """The object as ``resource`` serves it (a deep copy)."""
    obj = copy.deepcopy(stored)
    if resource.group == "events.k8s.io":
        obj = _renamed(obj, {v: k for k, v in EVENT_FIELDS.items()})
    return {"kind": resource.kind, "apiVersion": resource.api_version, **obj}
