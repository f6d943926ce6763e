"""Kubernetes objects as watches deliver them, translated one at a time into the events of
the cluster cache (``scheduler/cache.py``).

The store keeps each object's last raw form and what it was translated to, so that a change
becomes ``ADDED``, ``MODIFIED`` (only when the translation changed: a new resourceVersion
of an object gpufleet reads the same way changes nothing) or ``DELETED``. Each object is
read by the same readers as a snapshot (``load/``), so a live cluster and its snapshot are
read alike, and every error names the object and the field in the same words.

A pod's translation reads what the API server resolves from other objects: its
PriorityClass (where ``spec.priority`` is absent), its PodGroup (the queue it inherits; a
pod whose PodGroup does not exist waits for it), and its node (which must exist; the GPU
indexes of ``gpufleet.io/gpu-index`` must be the node's). When one of those objects
changes, the pods that read it are translated again, and their changes are events too;
watches of different kinds arrive in any order, so a pod seen before its node is
translated when the node arrives.

An object that cannot be read is a :class:`Problem` — the object and the error, for the
live scheduler to report as an event — and is absent from the cache (its earlier
translation, if there was one, is deleted); every other object goes on being read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError
from gpufleet.load.node_pools import read_topology
from gpufleet.load.nodes import read_node
from gpufleet.load.pods import read_pod
from gpufleet.load.queues import read_group, read_priority_class, read_queue
from gpufleet.load.reader import Obj, Reader
from gpufleet.load.vocabulary import POD_GROUP_LABEL, SCHEDULER_NAME
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.workload import GroupSpec, PodInfo
from gpufleet.scheduler.events import Event, Topology

if TYPE_CHECKING:
    from gpufleet.scheduler.events import CacheObject, EventType

SOURCE = "cluster"
"""What errors name as the place an object came from."""

KINDS = ("Node", "PriorityClass", "Queue", "PodGroup", "Topology", "Pod")
"""The kinds translated here, in the order a first list applies them (what a pod reads
first)."""


API = {
    "Node": ("v1", "nodes"),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses"),
    "Queue": ("gpufleet.io/v1alpha1", "queues"),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1", "podgroups"),
    "Topology": ("gpufleet.io/v1alpha1", "topologies"),
    "Pod": ("v1", "pods"),
}
"""Each kind of :data:`~gpufleet.kube.objects.KINDS`: its apiVersion and resource."""

PATHS = {
    kind: f"/api/{version}/{plural}" if "/" not in version else f"/apis/{version}/{plural}"
    for kind, (version, plural) in API.items()
}
"""Where each kind is listed and watched (all namespaces)."""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    """A PriorityClass as pods read it. It is kept here, not in the cache: a pod carries
    its priority."""

    name: str
    value: int
    preempts: bool
    default: bool


@dataclass(frozen=True, slots=True)
class Problem:
    """An object that could not be read, and why (the what-if tool's words)."""

    kind: str
    namespace: str | None
    name: str
    uid: str
    message: str


@dataclass(frozen=True, slots=True)
class Changes:
    """What one watch event changed: the cache's events, and the objects that could not be
    read."""

    events: tuple[Event, ...] = ()
    problems: tuple[Problem, ...] = ()


class ObjectStore:
    """The raw objects of the translated kinds, and their translations."""

    def __init__(self, *, schedulers: Collection[str] = (SCHEDULER_NAME,)) -> None:
        self.schedulers = frozenset(schedulers)
        self.raw: dict[str, dict[str, Obj]] = defaultdict(dict)
        """Per kind, the last raw object of each key (``namespace/name`` or name)."""
        self.made: dict[str, dict[str, CacheObject]] = defaultdict(dict)
        """Per kind, the translation of each key the cache holds."""
        self.classes: dict[str, tuple[int, bool, bool]] = {}
        self.group_queues: dict[str, str] = {}
        self.node_gpus: dict[str, int] = {}
        self.pods_of_group: dict[str, set[str]] = defaultdict(set)
        self.pods_on_node: dict[str, set[str]] = defaultdict(set)
        self._reads: dict[str, tuple[str | None, str | None]] = {}
        """Per pod: the PodGroup and node its translation reads."""
        self.held: dict[str, str] = {}
        """Pending pods held back by the live scheduler (a bind backing off), with why."""

    def apply(self, type_: EventType, kind: str, obj: Obj) -> Changes:
        """The changes of one watch event of ``kind`` (one of :data:`KINDS`)."""
        if kind not in KINDS:
            raise ValueError(f"{kind} objects are not translated live")
        key = _key(kind, obj)
        events: list[Event] = []
        problems: list[Problem] = []
        if type_ == "DELETED":
            self.raw[kind].pop(key, None)
            if kind == "Pod":
                self.held.pop(key, None)
        else:
            self.raw[kind][key] = obj
        self._index(kind, key, obj, deleted=type_ == "DELETED")
        self._translate(kind, key, events, problems)
        for pod in self._dependents(kind, key):
            self._translate("Pod", pod, events, problems)
        return Changes(tuple(events), tuple(problems))

    def hold(self, key: str, reason: str) -> Changes:
        """Keep pending pod ``key`` from cycles (it reads as blocked, for ``reason``) until
        :meth:`release`; an event of the pod keeps the hold."""
        self.held[key] = reason
        return self._again(key)

    def release(self, key: str) -> Changes:
        """End the hold of pod ``key``."""
        if self.held.pop(key, None) is None:
            return Changes()
        return self._again(key)

    def _again(self, key: str) -> Changes:
        events: list[Event] = []
        problems: list[Problem] = []
        self._translate("Pod", key, events, problems)
        return Changes(tuple(events), tuple(problems))

    def _index(self, kind: str, key: str, obj: Obj, *, deleted: bool) -> None:
        """Remember which pod reads which PodGroup and node (from the raw pod, whether or
        not it can be read)."""
        if kind != "Pod":
            return
        group, node = self._reads.pop(key, (None, None))
        if group is not None:
            self.pods_of_group[group].discard(key)
        if node is not None:
            self.pods_on_node[node].discard(key)
        if deleted:
            return
        meta = obj.get("metadata") or {}
        label = (meta.get("labels") or {}).get(POD_GROUP_LABEL)
        group = f"{key.split('/', 1)[0]}/{label}" if isinstance(label, str) else None
        spec_node = (obj.get("spec") or {}).get("nodeName")
        node = spec_node if isinstance(spec_node, str) else None
        if group is not None:
            self.pods_of_group[group].add(key)
        if node is not None:
            self.pods_on_node[node].add(key)
        self._reads[key] = (group, node)

    def _dependents(self, kind: str, key: str) -> list[str]:
        """The pods whose translation reads object ``key`` of ``kind``."""
        if kind == "PodGroup":
            return sorted(self.pods_of_group.get(key, ()))
        if kind == "Node":
            return sorted(self.pods_on_node.get(key, ()))
        if kind == "PriorityClass":
            return sorted(self.raw["Pod"])
        return []

    def _translate(self, kind: str, key: str, events: list[Event], problems: list[Problem]) -> None:
        """Read ``key`` of ``kind`` again and add what changed to ``events``."""
        raw = self.raw[kind].get(key)
        made: CacheObject | PriorityClass | None = None
        if raw is not None:
            try:
                made = self._read(kind, Reader(SOURCE, raw))
            except InputError as error:
                problems.append(_problem(kind, raw, str(error)))
                made = None
            except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
                problems.append(_problem(kind, raw, f"unexpected structure: {exc}"))
                made = None
        if isinstance(made, PodInfo) and key in self.held and not made.bound:
            made = replace(made, blocked=self.held[key])
        self._context(kind, key, made)
        if isinstance(made, PriorityClass):
            return  # read by pods, not kept by the cache
        before = self.made[kind].get(key)
        if made is None:
            if before is not None:
                del self.made[kind][key]
                events.append(Event("DELETED", kind, before))
            return
        self.made[kind][key] = made
        if before is None:
            events.append(Event("ADDED", kind, made))
        elif made != before:
            events.append(Event("MODIFIED", kind, made))

    def _read(self, kind: str, r: Reader) -> CacheObject | PriorityClass | None:
        return _READERS[kind](self, r)

    def _context(self, kind: str, key: str, made: CacheObject | PriorityClass | None) -> None:
        """Keep what pods read of other objects in step with ``made``."""
        if kind == "Node":
            self.node_gpus.pop(key, None)
            if isinstance(made, NodeSpec):
                self.node_gpus[key] = made.gpus
        elif kind == "PodGroup":
            self.group_queues.pop(key, None)
            if isinstance(made, GroupSpec):
                self.group_queues[key] = made.queue
        elif kind == "PriorityClass":
            self.classes.pop(key, None)
            if isinstance(made, PriorityClass):
                self.classes[key] = (made.value, made.preempts, made.default)


_READERS: Mapping[str, Callable[[ObjectStore, Reader], CacheObject | PriorityClass | None]] = {
    "Node": lambda _store, r: read_node(r),
    "Queue": lambda _store, r: read_queue(r)[0],
    "PodGroup": lambda _store, r: read_group(r),
    "Topology": lambda _store, r: Topology(r.name, read_topology(r)),
    "PriorityClass": lambda _store, r: PriorityClass(r.name, *read_priority_class(r)),
    "Pod": lambda store, r: read_pod(
        r, store.classes, store.group_queues, store.node_gpus, schedulers=store.schedulers
    ),
}


def _key(kind: str, obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    if kind in {"Pod", "PodGroup"}:
        return f"{meta.get('namespace') or 'default'}/{name}"
    return name


def _problem(kind: str, obj: Obj, message: str) -> Problem:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return Problem(
        kind,
        str(namespace) if namespace is not None else None,
        str(meta.get("name", "")),
        str(meta.get("uid", "")),
        message,
    )
