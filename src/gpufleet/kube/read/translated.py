"""What the object store (:mod:`gpufleet.kube.read.objects`) gives and keeps besides the
cache's objects: the context objects other translations read (PriorityClasses, NUMA zones,
claim templates), the problems of objects that cannot be read, one watch event's changes,
and the few fields of a raw object read before its reader runs (its key, its node)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from gpufleet.kube.read.kinds import NAMESPACED
from gpufleet.load.objects.reader import Obj, is_mapping
from gpufleet.load.objects.workloads import Workload
from gpufleet.model.devices import Claim
from gpufleet.scheduler.state.changes import Event

SOURCE = "cluster"
"""What errors name as the place an object came from."""

Numa: TypeAlias = tuple[tuple[int, ...], tuple[int, ...], bool]
"""A node's NUMA zones as ``load/objects/nodes.py`` reads them: per GPU its zone, per zone its
CPU, whether the kubelet keeps a pod in one zone."""


@dataclass(frozen=True, slots=True)
class NodeNuma:
    """A NodeResourceTopology as its node reads it."""

    name: str
    zones: Numa


@dataclass(frozen=True, slots=True)
class Template:
    """A ResourceClaimTemplate (read, so that a bad one is reported; its pods' claims are
    made from it by the resourceclaim controller)."""

    key: str
    claim: Claim


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A PriorityClass as pods read it, kept by the store's lookups, not by the cache: a pod
    carries its priority."""

    name: str
    value: int
    preempts: bool
    default: bool


Context: TypeAlias = PriorityClass | NodeNuma | Template | Workload


@dataclass(frozen=True, slots=True)
class Problem:
    """An object that could not be read, and why (the what-if tool's words)."""

    kind: str
    namespace: str | None
    name: str
    uid: str
    message: str
    key: str = ""
    """The store's key of the object."""


@dataclass(frozen=True, slots=True)
class Changes:
    """What one watch event changed: the cache's events, and the objects that could not be
    read."""

    events: tuple[Event, ...] = ()
    problems: tuple[Problem, ...] = ()


def mapping(obj: Obj, name: str) -> Mapping[str, Any]:
    """Field ``name`` of ``obj`` where it is a mapping, else an empty one (the object's
    reader reports a field of the wrong shape; indexing it must not fail first)."""
    value = obj.get(name)
    return value if is_mapping(value) else {}


def meta(obj: Obj) -> Mapping[str, Any]:
    return mapping(obj, "metadata")


def bound_to(obj: Obj) -> str:
    """The node a pod that holds resources is bound to (empty: none, or it finished)."""
    spec, status = obj.get("spec"), obj.get("status")
    node = spec.get("nodeName") if is_mapping(spec) else None
    phase = status.get("phase") if is_mapping(status) else None
    return node if isinstance(node, str) and phase not in {"Succeeded", "Failed"} else ""


def key_of(kind: str, obj: Obj) -> str:
    """The store's key of ``obj`` of ``kind``: ``namespace/name``, or its name."""
    name = str(meta(obj).get("name", ""))
    if kind in NAMESPACED:
        return f"{meta(obj).get('namespace') or 'default'}/{name}"
    return name


def problem(kind: str, obj: Obj, message: str) -> Problem:
    """``obj`` of ``kind`` cannot be read, for ``message``."""
    m = meta(obj)
    namespace = m.get("namespace")
    return Problem(
        kind,
        str(namespace) if namespace is not None else None,
        str(m.get("name", "")),
        str(m.get("uid", "")),
        message,
        key_of(kind, obj),
    )
