"""Kubernetes objects as watches deliver them, translated one at a time into the events of
the cluster cache (``scheduler/state/cache.py``).

The store keeps each object's last raw form and what it was translated to, so that a change
becomes ``ADDED``, ``MODIFIED`` (only when the translation changed: a new resourceVersion
of an object gpufleet reads the same way changes nothing) or ``DELETED``. Each object is
read by the same readers as a snapshot (``load/``), so a live cluster and its snapshot are
read alike, and every error names the object and the field in the same words.

The kinds (:data:`KINDS`): Nodes with their NodeResourceTopologies, PriorityClasses,
Queues, PodGroups, Topologies, the DRA kinds (DeviceClasses, ResourceSlices merged into
pools, ResourceClaims with their allocation, ResourceClaimTemplates; see
:mod:`gpufleet.kube.read.devices`), the storage kinds (StorageClasses, PersistentVolumes and
their claims, CSINodes; :mod:`gpufleet.load.objects.storage`) and Pods.

A translation reads what the API server resolves from other objects. A pod reads its
PriorityClass (where ``spec.priority`` is absent), its PodGroup (the queue it inherits; a
pod whose PodGroup does not exist waits for it), its node (which must exist; the GPU
indexes of ``gpufleet.io/gpu-index`` must be the node's) and its ResourceClaims (a pending
pod whose claim does not exist yet waits for it). A node reads its NodeResourceTopology
(its NUMA zones), a pool of slices that select nodes by label reads the nodes' labels.
When one of those objects changes (for such a pool: a node's labels, for a pod: its node's
GPUs, not the node's status), what reads it is translated again, and its changes are events
too; watches of different kinds arrive in any order, so a pod seen before its node is
translated when the node arrives.

An object that cannot be read is a :class:`Problem` — the object and the error, for the
live scheduler to report as an event — and is absent from the cache (its earlier
translation, if there was one, is deleted); every other object goes on being read.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import TYPE_CHECKING, Any, TypeAlias

from lightkube.utils.quantity import parse_quantity

from gpufleet.kube.read.definitions import Definitions, Settled
from gpufleet.kube.read.devices import (
    claim_reads,
    pool_key,
    read_claim,
    read_device_class,
    read_pool,
    selects_nodes,
    waiting_for_claims,
)
from gpufleet.kube.read.kinds import CONTEXT, NAMESPACED, becomes, kinds
from gpufleet.load.errors import InputError
from gpufleet.load.foreign import (
    ELASTIC_QUOTA,
    KAI_POD_GROUP,
    KAI_QUEUE,
    VOLCANO_POD_GROUP,
    VOLCANO_QUEUE,
    PodNames,
    installed_classes,
    pod_names,
)
from gpufleet.load.objects.devices import claim_spec
from gpufleet.load.objects.node_pools import read_topology
from gpufleet.load.objects.nodes import read_node, read_numa, with_numa
from gpufleet.load.objects.pods import read_pod
from gpufleet.load.objects.queues import read_group, read_priority_class, read_queue
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.load.objects.storage import read_claim as read_volume_claim
from gpufleet.load.objects.storage import read_csi_node, read_storage_class, read_volume
from gpufleet.load.objects.vocabulary import (
    FRACTION_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_RESOURCE,
    POD_GROUP_LABEL,
    SCHEDULER_NAME,
)
from gpufleet.load.snapshot import described
from gpufleet.load.vocabularies.elasticquota import read_elastic_quota
from gpufleet.load.vocabularies.kai import read_kai_group, read_kai_queue
from gpufleet.load.vocabularies.volcano import ROOT as VOLCANO_ROOT
from gpufleet.load.vocabularies.volcano import read_volcano_group, read_volcano_queue
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.devices import Claim
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, queue_problems
from gpufleet.scheduler.state.changes import Event, Namespace, Topology

if TYPE_CHECKING:
    from gpufleet.scheduler.state.changes import CacheObject, EventType

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
    """A PriorityClass as pods read it. It is kept here, not in the cache: a pod carries
    its priority."""

    name: str
    value: int
    preempts: bool
    default: bool


Context: TypeAlias = PriorityClass | NodeNuma | Template


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


class ObjectStore:
    """The raw objects of the translated kinds, and their translations."""

    def __init__(
        self,
        *,
        schedulers: Collection[str] = (SCHEDULER_NAME,),
        vocabularies: frozenset[str] = frozenset(),
    ) -> None:
        self.schedulers = frozenset(schedulers)
        self.kinds = frozenset(kinds(vocabularies))
        self.group_kinds = tuple(k for k in kinds(vocabularies) if becomes(k) == "PodGroup")
        """The kinds whose objects define gangs (scheduler-plugins' PodGroup, and KAI's and
        Volcano's where their vocabularies are read)."""
        self.names = pod_names(vocabularies)
        """Where pods name their queue and gang in the vocabularies read."""
        self.default_classes: Mapping[str, tuple[int, bool, bool]] = installed_classes(vocabularies)
        """PriorityClasses Kubernetes makes and a vocabulary's scheduler installs (KAI's),
        where the cluster has none of that name."""
        self.raw: dict[str, dict[str, Obj]] = defaultdict(dict)
        """Per kind, the last raw object of each key (``namespace/name`` or name)."""
        self.made: dict[str, dict[str, CacheObject]] = defaultdict(dict)
        """Per cache kind, the translation of each key the cache holds."""
        self.classes: dict[str, tuple[int, bool, bool]] = dict(self.default_classes)
        self.group_queues: dict[str, str] = {}
        self.namespace_queues: dict[str, str] = {}
        """Per namespace with an ElasticQuota, the queue its pods belong to (its own)."""
        self.definitions = Definitions()
        """Queues and gangs by name, with each object that defines them."""
        self.node_gpus: dict[str, int] = {}
        self.node_labels: dict[str, Mapping[str, str]] = {}
        self.numa: dict[str, Numa] = {}
        """Per node name, the NUMA zones of its NodeResourceTopology."""
        self.templates: set[str] = set()
        self.slices_of_pool: dict[str, set[str]] = defaultdict(set)
        self.readers: dict[tuple[str, str], set[str]] = defaultdict(set)
        """Per (kind, key) of an object pods read, the pods that read it."""
        self._reads: dict[str, tuple[tuple[str, str], ...]] = {}
        """Per pod: the objects its translation reads."""
        self._pools: dict[str, str] = {}
        """Per slice: its pool's key."""
        self.reported: dict[tuple[str, str], str] = {}
        """Per (kind, key) of an unreadable object, the words it was reported in."""
        self.held: dict[str, str] = {}
        """Pending pods held back by the live scheduler (a bind backing off), with why."""
        self.queues_changed = False
        """A queue was defined, changed or removed since :meth:`check_queues` last ran."""

    def apply(self, type_: EventType, kind: str, obj: Obj) -> Changes:
        """The changes of one watch event of ``kind`` (one of :data:`KINDS`)."""
        if kind not in self.kinds:
            raise ValueError(f"{kind} objects are not translated live")
        key = _key(kind, obj)
        events: list[Event] = []
        problems: list[Problem] = []
        labels = self.node_labels.get(key) if kind == "Node" else None
        gpus = self.node_gpus.get(key) if kind == "Node" else None
        finished = self._finished(self.raw[kind].get(key)) if kind == "Pod" else ""
        if type_ == "DELETED":
            self.raw[kind].pop(key, None)
            self.reported.pop((kind, key), None)
            if kind == "Pod":
                self.held.pop(key, None)
        else:
            self.raw[kind][key] = obj
        if kind == "Pod":
            self._index(key, obj, deleted=type_ == "DELETED")
        if kind == "ResourceSlice":
            for pool in sorted(self._slice_moved(key, obj, deleted=type_ == "DELETED")):
                self._translate_pool(pool, events, problems)
            if type_ != "DELETED" and pool_key(obj) is None:
                _, bad = read_pool([Reader(SOURCE, obj)], {})
                problems += [_problem(kind, o, message) for o, message in bad]
        else:
            self._translate(kind, key, events, problems)
        relabelled = kind == "Node" and self.node_labels.get(key) != labels
        resized = kind == "Node" and self.node_gpus.get(key) != gpus
        for dependent_kind, dependent in self._dependents(
            kind, key, relabelled=relabelled, resized=resized, finished=finished
        ):
            if dependent_kind == "ResourcePool":
                self._translate_pool(dependent, events, problems)
            else:
                self._translate(dependent_kind, dependent, events, problems)
        return self._changes(events, problems)

    def _changes(self, events: list[Event], problems: list[Problem]) -> Changes:
        """``events`` and the problems not reported before in the same words: an object
        that stays unreadable is reported once, not at every event that reads it again
        (such as the status write that reports it)."""
        fresh = []
        for p in problems:
            if self.reported.get((p.kind, p.key)) != p.message:
                self.reported[p.kind, p.key] = p.message
                fresh.append(p)
        return Changes(tuple(events), tuple(fresh))

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
        return self._changes(events, problems)

    def _index(self, key: str, obj: Obj, *, deleted: bool) -> None:
        """Remember which objects pod ``key`` reads (from the raw pod, whether or not it
        can be read): its PodGroup, node, claims and templates."""
        for read in self._reads.pop(key, ()):
            self.readers[read].discard(key)
        if deleted:
            return
        reads: list[tuple[str, str]] = []
        group = self._group_name(_meta(obj))
        if group is not None:
            reads.append(("PodGroup", f"{key.split('/', 1)[0]}/{group}"))
        node = _mapping(obj, "spec").get("nodeName")
        if isinstance(node, str):
            reads.append(("Node", node))
        try:
            claims, templates = claim_reads(obj)
        except (TypeError, ValueError, AttributeError, KeyError):  # the pod's problem says why
            claims, templates = set(), set()
        reads += [("ResourceClaim", c) for c in sorted(claims)]
        reads += [("ResourceClaimTemplate", t) for t in sorted(templates)]
        for read in reads:
            self.readers[read].add(key)
        self._reads[key] = tuple(reads)

    def _finished(self, raw: Obj | None) -> str:
        """The gang of raw pod ``raw`` if it succeeded (empty: it did not, or names none)."""
        if raw is None or _mapping(raw, "status").get("phase") != "Succeeded":
            return ""
        group = self._group_name(_meta(raw))
        return "" if group is None else f"{_key('Pod', raw).split('/', 1)[0]}/{group}"

    def _succeeded(self, gang: str) -> int:
        """How many pods of ``gang`` succeeded, as their raw objects say."""
        pods = self.raw["Pod"]
        readers = self.readers.get(("PodGroup", gang), ())
        return sum(1 for key in readers if self._finished(pods.get(key)) == gang)

    def _group_name(self, meta: Mapping[str, object]) -> str | None:
        """The PodGroup a pod names, where ``read_pod`` looks: the label, then the
        annotations of the vocabularies read."""
        labels = meta.get("labels")
        label = labels.get(POD_GROUP_LABEL) if isinstance(labels, Mapping) else None
        if isinstance(label, str):
            return label
        annotations = meta.get("annotations")
        if isinstance(annotations, Mapping):
            for name in self.names.group_annotations:
                value = annotations.get(name)
                if isinstance(value, str):
                    return value
        return None

    def _slice_moved(self, key: str, obj: Obj, *, deleted: bool) -> set[str]:
        """Keep slice ``key`` filed under its pool; the pools it was and is in."""
        touched = set()
        before = self._pools.pop(key, None)
        if before is not None:
            self.slices_of_pool[before].discard(key)
            touched.add(before)
        after = None if deleted else pool_key(obj)
        if after is not None:
            self._pools[key] = after
            self.slices_of_pool[after].add(key)
            touched.add(after)
        return touched

    def _waits(self, r: Reader, problems: list[Problem]) -> str:
        """Why pending pod ``r`` waits for its claims (empty: it does not)."""
        try:
            return waiting_for_claims(r, self.made["ResourceClaim"], self.templates)
        except InputError as error:
            problems.append(_problem("Pod", r.obj, str(error)))
            return str(error)

    def _dependents(
        self,
        kind: str,
        key: str,
        *,
        relabelled: bool = False,
        resized: bool = False,
        finished: str = "",
    ) -> list[tuple[str, str]]:
        """The objects whose translation reads object ``key`` of ``kind``; for a node,
        ``relabelled``: its labels, as pools read them, changed, and ``resized``: whether it
        can be read and how many GPUs it has, as its pods read it, changed (either: it
        appeared or left). For a pod, ``finished``: the gang it had succeeded in before this
        event (empty: none); a gang counts its pods that succeeded, so the objects that
        define a gang it now succeeded in, or no longer did, are read again.

        Pools whose slices select nodes by label read only the nodes' labels, and a bound
        pod reads only its node's GPUs, so a node event that leaves them as they were (a
        status update, every few seconds to minutes per node) reads nothing again."""
        if kind == "Pod":
            now = self._finished(self.raw["Pod"].get(key))
            gangs = sorted({finished, now} - {""}) if now != finished else []
            return [(k, gang) for gang in gangs for k in self.group_kinds if gang in self.raw[k]]
        if kind == "PriorityClass":
            return [("Pod", pod) for pod in sorted(self.raw["Pod"])]
        if kind == ELASTIC_QUOTA.key:  # the pods of its namespace read its queue
            prefix = f"{key.split('/', 1)[0]}/"
            return [("Pod", pod) for pod in sorted(self.raw["Pod"]) if pod.startswith(prefix)]
        kind = becomes(kind)  # a KAI or Volcano PodGroup is read where pods read PodGroups
        if kind == "NodeResourceTopology":
            return [("Node", key)] if key in self.raw["Node"] else []
        if kind == "Node" and not resized:
            out = []
        else:
            out = [("Pod", pod) for pod in sorted(self.readers.get((kind, key), ()))]
        if relabelled:
            out += [
                ("ResourcePool", pool)
                for pool, slices in sorted(self.slices_of_pool.items())
                if any(selects_nodes(self.raw["ResourceSlice"][s]) for s in slices)
            ]
        return out

    def _translate(self, kind: str, key: str, events: list[Event], problems: list[Problem]) -> None:
        """Read ``key`` of ``kind`` again and add what changed to ``events``."""
        raw = self.raw[kind].get(key)
        known = len(problems)
        made: CacheObject | Context | None = None
        if raw is not None:
            try:
                made = self._read(kind, Reader(SOURCE, raw))
            except InputError as error:
                problems.append(_problem(kind, raw, str(error)))
                made = None
            except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
                problems.append(_problem(kind, raw, f"unexpected structure: {exc}"))
                made = None
        if kind == "Pod" and raw is not None and _bound_to(raw):
            made = self._holding(key, raw, made, problems)  # type: ignore[arg-type]
        if isinstance(made, GroupSpec):
            done = self._succeeded(key)
            made = replace(made, succeeded=done) if done else made
        if isinstance(made, PodInfo) and not made.bound and raw is not None:
            blocked = self.held.get(key) or made.blocked
            if not blocked and made.claims:
                blocked = self._waits(Reader(SOURCE, raw), problems)
            made = replace(made, blocked=blocked)
        if becomes(kind) in {"Queue", "PodGroup"}:
            self._define(kind, key, made, events, problems)  # type: ignore[arg-type]
        if not any((p.kind, p.key) == (kind, key) for p in problems[known:]):
            self.reported.pop((kind, key), None)  # readable (again)
        self._context(kind, key, made)
        if kind in CONTEXT or becomes(kind) in {"Queue", "PodGroup"}:
            return  # not kept by the cache as such (context; a definition, above)
        self._made(kind, key, made, events)  # type: ignore[arg-type]

    def _holding(
        self, key: str, raw: Obj, made: PodInfo | None, problems: list[Problem]
    ) -> PodInfo | None:
        """A bound pod holds what it was bound with: once read bound to its node, a change
        of what it asks (its GPU annotations: the API server validates requests, not them)
        is reported and not trusted, whether it can be read or not; a bound pod first read
        with annotations gpufleet cannot read holds what its container requests name, each
        share of a GPU a whole GPU — never nothing, which would give its GPUs out again."""
        if made is not None and not made.managed:
            made = self._requests_alone(raw) or made  # another scheduler's pod
        before = self.made["Pod"].get(key)
        held = isinstance(before, PodInfo) and before.bound and before.node == _bound_to(raw)
        if held and isinstance(before, PodInfo) and before.uid == str(_meta(raw).get("uid", "")):
            if made is None:
                return before
            if (made.spec, made.gpus) != (before.spec, before.gpus):
                problems.append(_problem("Pod", raw, CHANGED_AFTER_BIND))
                return replace(made, spec=before.spec, gpus=before.gpus)
            return made
        if made is not None and _holds_its_requests(made, raw):
            return made
        # One that cannot be read, or would hold less than its containers ask (the device
        # plugin gave it whole devices; a share annotation beside them frees nothing).
        return self._requests_alone(raw) or made

    def _requests_alone(self, raw: Obj) -> PodInfo | None:
        """The bound pod ``raw`` read by its container requests alone (another scheduler's
        pods count so; None: not even they can be read, its problem says why)."""
        try:
            conservative = self._read("Pod", Reader(SOURCE, _requests_only(raw, self.names)))
        except (InputError, TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
            return None
        return conservative if isinstance(conservative, PodInfo) else None

    def _define(
        self,
        kind: str,
        key: str,
        made: QueueSpec | GroupSpec | None,
        events: list[Event],
        problems: list[Problem],
    ) -> None:
        """Object ``key`` of ``kind`` defines ``made`` (None: nothing): each name it defined
        and defines is read from its first definer (``definitions.py``), and each other
        definer is reported, as a what-if refuses such a snapshot."""
        cache_kind = becomes(kind)
        for settled in self.definitions.define(kind, key, made):
            name, read = settled.name, settled.read
            if read is not None:
                self.reported.pop(read, None)  # it is read: a collision it lost is over
                first = described(Reader(SOURCE, self.raw[read[0]][read[1]]))
                for other_kind, other_key in settled.others:
                    other = self.raw[other_kind][other_key]
                    message = (
                        f"{cache_kind} {name} defined twice: by {first} and by "
                        f"{described(Reader(SOURCE, other))}; the second is not read: keep "
                        "one, or leave one vocabulary out"
                    )
                    problems.append(_problem(other_kind, other, message))
            self._context_of(cache_kind, settled)
            self._made(cache_kind, name, settled.made, events)
        if cache_kind == "Queue":
            self.queues_changed = True  # judged once per cycle (check_queues), not per event

    def check_queues(self) -> Changes:
        """Report each queue whose parents are missing, in a cycle or too deep, on the object
        it is read from, as the what-if refuses it: the cycle leaves it out and its pods wait
        (``scheduler/state/ledger.py``), every other queue schedules on. Called before each cycle
        once every kind is listed, and judging the tree only when a queue changed since: a
        list that names children before their parents raises no false alarm, and a burst of
        queue events costs one walk of the tree, not one per event."""
        if not self.queues_changed:
            return Changes()
        self.queues_changed = False
        problems: list[Problem] = []
        queues = [q for q in self.made["Queue"].values() if isinstance(q, QueueSpec)]
        for name, problem in sorted(queue_problems(queues).items()):
            definer = self.definitions.definer("Queue", name)
            raw = self.raw[definer[0]].get(definer[1]) if definer is not None else None
            if raw is not None:
                message = f"not valid: it {problem.text()}; its pods wait until it is fixed"
                problems.append(_problem(definer[0], raw, message))  # type: ignore[index]
        return self._changes([], problems)

    def _context_of(self, cache_kind: str, settled: Settled) -> None:
        """What pods read of a settled queue or gang: a gang's queue; an ElasticQuota's
        namespace's queue."""
        name = settled.name
        if cache_kind == "PodGroup":
            self.group_queues.pop(name, None)
            if isinstance(settled.made, GroupSpec):
                self.group_queues[name] = settled.made.queue
            return
        definers = (settled.read, *settled.others) if settled.read else ()
        if any(kind == ELASTIC_QUOTA.key for kind, _ in definers):
            self.namespace_queues[name] = name
        else:
            self.namespace_queues.pop(name, None)

    def defined_by(self, cache_kind: str, name: str) -> str | None:
        """The store kind of the object queue or gang ``name`` is read from (None: none)."""
        return self.definitions.read_from(cache_kind, name)

    def _made(self, kind: str, key: str, made: CacheObject | None, events: list[Event]) -> None:
        """``made`` is what ``key`` of cache kind ``kind`` reads as now: the event, if any."""
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

    def _translate_pool(self, key: str, events: list[Event], problems: list[Problem]) -> None:
        """Read pool ``key`` again from all its slices."""
        slices = [self.raw["ResourceSlice"][s] for s in sorted(self.slices_of_pool.get(key, ()))]
        readers = [Reader(SOURCE, s) for s in slices]
        pool, bad = read_pool(readers, self.node_labels)
        problems += [_problem("ResourceSlice", o, message) for o, message in bad]
        unreadable = {_key("ResourceSlice", o) for o, _ in bad}
        for name in {_key("ResourceSlice", s) for s in slices} - unreadable:
            self.reported.pop(("ResourceSlice", name), None)
        self._made("ResourcePool", key, pool, events)

    def _read(self, kind: str, r: Reader) -> CacheObject | Context | None:
        return _READERS[kind](self, r)

    def _context(self, kind: str, key: str, made: CacheObject | Context | None) -> None:
        """Keep what other objects read of ``key`` of ``kind`` in step with ``made``."""
        if kind == "Node":
            self.node_gpus.pop(key, None)
            self.node_labels.pop(key, None)
            if isinstance(made, NodeSpec):
                self.node_gpus[key] = made.gpus
                self.node_labels[key] = made.labels
        elif kind == "PriorityClass":
            self.classes.pop(key, None)
            if isinstance(made, PriorityClass):
                self.classes[key] = (made.value, made.preempts, made.default)
            elif key in self.default_classes:
                self.classes[key] = self.default_classes[key]
        elif kind == "NodeResourceTopology":
            self.numa.pop(key, None)
            if isinstance(made, NodeNuma):
                self.numa[key] = made.zones
        elif kind == "ResourceClaimTemplate":
            self.templates.discard(key)
            if made is not None:
                self.templates.add(key)


def _numa(r: Reader) -> NodeNuma:
    name, zones = read_numa(r)
    return NodeNuma(name, zones)


_READERS: Mapping[str, Callable[[ObjectStore, Reader], CacheObject | Context | None]] = {
    "NodeResourceTopology": lambda _store, r: _numa(r),
    "Node": lambda store, r: with_numa(read_node(r), store.numa.get(r.name)),
    "Queue": lambda _store, r: read_queue(r)[0],
    "PodGroup": lambda _store, r: read_group(r),
    "Topology": lambda _store, r: Topology(r.name, read_topology(r)),
    "PriorityClass": lambda _store, r: PriorityClass(r.name, *read_priority_class(r)),
    "DeviceClass": lambda _store, r: read_device_class(r),
    "ResourceClaimTemplate": lambda _store, r: Template(r.key, claim_spec(r, "spec.spec", r.key)),
    "ResourceClaim": lambda _store, r: read_claim(r),
    "StorageClass": lambda _store, r: read_storage_class(r),
    "PersistentVolume": lambda _store, r: read_volume(r),
    "PersistentVolumeClaim": lambda _store, r: read_volume_claim(r),
    "CSINode": lambda _store, r: read_csi_node(r),
    "Namespace": lambda _store, r: Namespace(r.name, r.strings("metadata.labels")),
    "Pod": lambda store, r: read_pod(
        r,
        store.classes,
        store.group_queues,
        store.node_gpus,
        schedulers=store.schedulers,
        names=store.names,
        namespace_queues=store.namespace_queues,
    ),
    KAI_QUEUE.key: lambda _store, r: read_kai_queue(r)[0],
    VOLCANO_QUEUE.key: lambda _store, r: (
        None if r.name == VOLCANO_ROOT else read_volcano_queue(r)[0]
    ),
    ELASTIC_QUOTA.key: lambda _store, r: read_elastic_quota(r)[0],
    KAI_POD_GROUP.key: lambda _store, r: read_kai_group(r),
    VOLCANO_POD_GROUP.key: lambda _store, r: read_volcano_group(r),
}


CHANGED_AFTER_BIND = (
    "its GPU annotations or requests changed after it was bound: gpufleet keeps counting what "
    "it was bound with"
)


def _mapping(obj: Obj, name: str) -> Mapping[str, Any]:
    """Field ``name`` of ``obj`` where it is a mapping, else an empty one (the object's
    reader reports a field of the wrong shape; indexing it must not fail first)."""
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def _meta(obj: Obj) -> Mapping[str, Any]:
    return _mapping(obj, "metadata")


def _bound_to(obj: Obj) -> str:
    """The node a pod that holds resources is bound to (empty: none, or it finished)."""
    spec, status = obj.get("spec"), obj.get("status")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = status.get("phase") if isinstance(status, Mapping) else None
    return node if isinstance(node, str) and phase not in {"Succeeded", "Failed"} else ""


NVIDIA_DEVICES = "nvidia.com/"
"""The prefix of the device plugin's resources: whole GPUs, MIG slices, shared replicas."""


def _whole_gpus(obj: Obj, prefix: str = GPU_RESOURCE) -> Decimal:
    """The most of a resource named ``prefix`` (``nvidia.com/gpu``; or every NVIDIA device:
    whole GPUs, MIG slices, replicas) any one container of ``obj`` requests or is limited to
    (quantities parsed; an unreadable one counts 0: the pod's own read says why)."""
    spec = obj.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    most = Decimal(0)
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if isinstance(container, Mapping) else None
        for part in ("requests", "limits"):
            listed = resources.get(part) if isinstance(resources, Mapping) else None
            for name, value in listed.items() if isinstance(listed, Mapping) else ():
                if not str(name).startswith(prefix) or isinstance(value, bool):
                    continue
                if isinstance(value, str | int):
                    with contextlib.suppress(ValueError, ArithmeticError):
                        most = max(most, parse_quantity(str(value)) or Decimal(0))
    return most


def _holds_its_requests(made: PodInfo, raw: Obj) -> bool:
    """Whether ``made`` holds at least the whole GPUs its containers ask: a share
    annotation beside ``nvidia.com/gpu`` does not free what the device plugin gave — unless
    gpufleet bound the pod as a share itself (its ``gpu-index``, written in the Binding,
    is the record of what it gave)."""
    whole = _whole_gpus(raw)
    if not whole:
        return True
    annotations = _meta(raw).get("annotations")
    if made.managed and isinstance(annotations, Mapping) and GPU_INDEX_ANNOTATION in annotations:
        return True
    try:
        return made.spec.total_gpu_milli >= whole * MILLI
    except ValueError:  # a share sized by memory: no milli-GPU of its own
        return False


def _requests_only(obj: Obj, names: PodNames) -> Obj:
    """``obj`` without the annotations that share GPUs or name them (gpufleet's, and those
    of the vocabularies read), a share counted as one whole GPU of its first container
    where no container asks for GPUs itself."""
    meta = dict(_meta(obj))
    notes = dict(meta.get("annotations") or {})
    shares: tuple[str, ...] = (FRACTION_ANNOTATION, GPU_MEMORY_ANNOTATION)
    shares += names.fraction_annotations + names.memory_mib_annotations
    shared = any(a in notes for a in shares)
    for name in (*shares, GPU_INDEX_ANNOTATION):
        notes.pop(name, None)
    meta["annotations"] = notes
    out = {**obj, "metadata": meta}
    if shared:
        spec = dict(obj.get("spec") or {})
        containers = [dict(c) for c in spec.get("containers") or []]
        if containers and not _whole_gpus(obj, NVIDIA_DEVICES):  # one asking devices holds them
            resources = dict(containers[0].get("resources") or {})
            for part in ("requests", "limits"):
                listed = dict(resources.get(part) or {})
                if part == "limits" or listed:
                    listed[GPU_RESOURCE] = "1"
                resources[part] = listed
            containers[0]["resources"] = resources
            spec["containers"] = containers
            out["spec"] = spec
    return out


def _key(kind: str, obj: Obj) -> str:
    meta = _meta(obj)
    name = str(meta.get("name", ""))
    if kind in NAMESPACED:
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
        _key(kind, obj),
    )
