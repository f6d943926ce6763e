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

A translation reads what the API server resolves from other objects
(:mod:`gpufleet.kube.read.lookups`); which object reads which is indexed
(:mod:`gpufleet.kube.read.dependents`); a bound pod holds what it was bound with
(:mod:`gpufleet.kube.read.bound`). A pod reads its
PriorityClass (where ``spec.priority`` is absent), its PodGroup (the queue it inherits; a
pod whose PodGroup does not exist waits for it), its node (which must exist; the GPU
indexes of ``gpufleet.io/gpu-index`` must be the node's) and its ResourceClaims (a pending
pod whose claim does not exist yet waits for it). A node reads its NodeResourceTopology
(its NUMA zones), a pool of slices that select nodes by label reads the nodes' labels.
When one of those objects changes (for such a pool: a node's labels, for a pod: its node's
GPUs, not the node's status), what reads it is translated again, and its changes are events
too; watches of different kinds arrive in any order, so a pod seen before its node is
translated when the node arrives.

An object that cannot be read is a :class:`~gpufleet.kube.read.translated.Problem` — the
object and the error, for the live scheduler to report as an event — and is absent from the
cache (its earlier translation, if there was one, is deleted); every other object goes on
being read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection
from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.kube.read.bound import bound_alone, conditions_alone, holding
from gpufleet.kube.read.definitions import Definitions
from gpufleet.kube.read.dependents import Dependents
from gpufleet.kube.read.devices import pool_key, read_pool, waiting_for_claims
from gpufleet.kube.read.kinds import CONTEXT, becomes, kinds
from gpufleet.kube.read.lookups import Lookups
from gpufleet.kube.read.translated import (
    SOURCE,
    Changes,
    Context,
    Problem,
    bound_to,
    key_of,
    problem,
)
from gpufleet.load.errors import InputError
from gpufleet.load.foreign import installed_classes, pod_names
from gpufleet.load.objects.pods import read_bound
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.load.objects.vocabulary import SCHEDULER_NAME
from gpufleet.load.snapshot import described
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, queue_problems
from gpufleet.scheduler.state.changes import Event

if TYPE_CHECKING:
    from gpufleet.scheduler.state.changes import CacheObject, EventType


_ABSENT = object()
"""A gang no PodGroup defines (its pods wait for it)."""


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
        self.names = pod_names(vocabularies)
        """Where pods name their queue and gang in the vocabularies read."""
        self.raw: dict[str, dict[str, Obj]] = defaultdict(dict)
        """Per kind, the last raw object of each key (``namespace/name`` or name)."""
        self.made: dict[str, dict[str, CacheObject]] = defaultdict(dict)
        """Per cache kind, the translation of each key the cache holds."""
        self.lookups = Lookups(self.schedulers, self.names, installed_classes(vocabularies))
        group_kinds = tuple(k for k in kinds(vocabularies) if becomes(k) == "PodGroup")
        self.dependents = Dependents(self.raw, self.names, group_kinds)
        self.definitions = Definitions()
        """Queues and gangs by name, with each object that defines them."""
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
        key = key_of(kind, obj)
        events: list[Event] = []
        problems: list[Problem] = []
        labels = self.lookups.node_labels.get(key) if kind == "Node" else None
        gpus = self.lookups.node_gpus.get(key) if kind == "Node" else None
        previous = self.raw[kind].get(key)
        finished = self.dependents.finished(previous) if kind == "Pod" else ""
        gang = kind == "PodGroup"  # the scheduler-plugins kind, keyed as its gang is
        queue = self.lookups.group_queues.get(key, _ABSENT) if gang else None
        if type_ == "DELETED":
            self.raw[kind].pop(key, None)
            self.reported.pop((kind, key), None)
            if kind == "Pod":
                self.held.pop(key, None)
        else:
            self.raw[kind][key] = obj
        if kind == "Pod":
            self.dependents.index(key, obj, deleted=type_ == "DELETED")
        if kind == "ResourceSlice":
            for pool in sorted(self.dependents.slice_moved(key, obj, deleted=type_ == "DELETED")):
                self._translate_pool(pool, events, problems)
            if type_ != "DELETED" and pool_key(obj) is None:
                _, bad = read_pool([Reader(SOURCE, obj)], {})
                problems += [problem(kind, o, message) for o, message in bad]
        else:
            self._translate(kind, key, events, problems, previous=previous)
        relabelled = kind == "Node" and self.lookups.node_labels.get(key) != labels
        resized = kind == "Node" and self.lookups.node_gpus.get(key) != gpus
        regrouped = not gang or self.lookups.group_queues.get(key, _ABSENT) != queue
        for dependent_kind, dependent in self.dependents.of(
            kind,
            key,
            relabelled=relabelled,
            resized=resized,
            finished=finished,
            regrouped=regrouped,
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

    def _waits(self, r: Reader, problems: list[Problem]) -> str:
        """Why pending pod ``r`` waits for its claims (empty: it does not)."""
        try:
            return waiting_for_claims(r, self.made["ResourceClaim"], self.lookups.templates)
        except InputError as error:
            problems.append(problem("Pod", r.obj, str(error)))
            return str(error)

    def _translate(
        self,
        kind: str,
        key: str,
        events: list[Event],
        problems: list[Problem],
        *,
        previous: Obj | None = None,
    ) -> None:
        """Read ``key`` of ``kind`` again and add what changed to ``events``; ``previous``:
        the object as the event before this one had it (None: not known)."""
        raw = self.raw[kind].get(key)
        known = len(problems)
        made: CacheObject | Context | None = None
        if raw is not None:
            try:
                made = self._read_again(kind, key, raw, previous) or self._read(
                    kind, Reader(SOURCE, raw)
                )
            except InputError as error:
                problems.append(problem(kind, raw, str(error)))
                made = None
            except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
                problems.append(problem(kind, raw, f"unexpected structure: {exc}"))
                made = None
        if kind == "Pod" and raw is not None and bound_to(raw):
            before = self.made["Pod"].get(key)
            pod = made if isinstance(made, PodInfo) or made is None else None
            made = holding(raw, pod, before, problems, read=self.lookups.read_pod, names=self.names)
        if isinstance(made, GroupSpec):
            done = self.dependents.succeeded(key)
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
        self.lookups.keep(kind, key, made)
        if kind in CONTEXT or becomes(kind) in {"Queue", "PodGroup"}:
            return  # not kept by the cache as such (context; a definition, above)
        self._made(kind, key, made, events)  # type: ignore[arg-type]

    def _read_again(self, kind: str, key: str, raw: Obj, previous: Obj | None) -> PodInfo | None:
        """What was read of pod ``key`` before, where the change stands without reading its
        spec again (None: read it whole):

        * its Binding is all that changed (``bound.py``'s :func:`bound_alone`; most often
          gpufleet's own): with its node and GPUs;
        * its conditions alone changed (:func:`conditions_alone`: the kubelet's of a running
          pod, gpufleet's own ``PodScheduled`` false of one that waits), and it read nothing
          blocked and no problem: as it was.

        What it was read as is current: every object a pod's translation reads reads it
        again when it changes (``dependents.py``)."""
        if kind != "Pod" or previous is None or previous is raw:  # the same dict, changed
            return None
        before = self.made["Pod"].get(key)
        if not isinstance(before, PodInfo):
            return None
        if not before.bound and bound_alone(previous, raw):
            return read_bound(before, Reader(SOURCE, raw), self.lookups.node_gpus)
        if (
            not before.blocked
            and ("Pod", key) not in self.reported
            and conditions_alone(previous, raw)
        ):
            return replace(before, resource_version=Reader(SOURCE, raw).identity()[1])
        return None

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
                    problems.append(problem(other_kind, other, message))
            self.lookups.settle(cache_kind, settled)
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
        for name, fault in sorted(queue_problems(queues).items()):
            definer = self.definitions.definer("Queue", name)
            raw = self.raw[definer[0]].get(definer[1]) if definer is not None else None
            if raw is not None:
                message = f"not valid: it {fault.text()}; its pods wait until it is fixed"
                problems.append(problem(definer[0], raw, message))  # type: ignore[index]
        return self._changes([], problems)

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
        slices = [self.raw["ResourceSlice"][s] for s in self.dependents.slices(key)]
        readers = [Reader(SOURCE, s) for s in slices]
        pool, bad = read_pool(readers, self.lookups.node_labels)
        problems += [problem("ResourceSlice", o, message) for o, message in bad]
        unreadable = {key_of("ResourceSlice", o) for o, _ in bad}
        for name in {key_of("ResourceSlice", s) for s in slices} - unreadable:
            self.reported.pop(("ResourceSlice", name), None)
        self._made("ResourcePool", key, pool, events)

    def _read(self, kind: str, r: Reader) -> CacheObject | Context | None:
        return self.lookups.read(kind, r)
