"""The cluster cache: every object the scheduler reads, kept up to date by events.

One cache serves every edge: a watch stream applies the API server's events to it (live),
the replay applies arrivals and completions, and a what-if applies every object of a
snapshot to an empty cache. :meth:`ClusterCache.apply` takes one :class:`Event` — ``ADDED``,
``MODIFIED`` or ``DELETED``, as a watch reports them — of an object already translated to
gpufleet's model (``load/`` and, live, ``kube/`` translate one object at a time).

What an event changes:

* a **pod** changes only its own node's row of the cluster state and the queues on its
  path (:class:`~gpufleet.scheduler.state.ledger.Ledger`), and the victim pool;
* a **node**'s labels or taints change its row of the label index; nodes joining or
  leaving give a new ledger at the next session that copies the other nodes' rows and
  reserves only the pods of the nodes that joined (an autoscaled cluster does this all
  day: O(nodes + pods) array copies, not a reservation per running pod); a node changing
  its capacity, a **queue**, the **topology** and the **DRA** objects rebuild the ledger
  from the objects at the next session (they are rare; the rebuild reserves every running
  pod again);
* every event bumps its kind's generation (:attr:`ClusterCache.generations`), so that
  what a scheduler memoised about one kind is dropped exactly when that kind changed.

Bindings follow kube-scheduler's cache: a binding a cycle decided is **assumed** at once
(the pod holds its capacity from the decision on), **confirmed** when the pod is seen bound
(an event with its ``nodeName``), and **forgotten** — its capacity given back, the pod
pending again — when the bind fails (:meth:`ClusterCache.forget`) or when it was not
confirmed within its time to live (:meth:`ClusterCache.expire`). Evictions alike: a victim
stops counting when a cycle evicts it, and counts again if the eviction is refused
(:meth:`ClusterCache.keep`).

A cycle runs on a session (:mod:`gpufleet.scheduler.cycle.session`) over the cache. A scheduler
that keeps its pending jobs from one cycle to the next reads only the gangs whose pending
job changed (:meth:`ClusterCache.pending_changes`, :meth:`ClusterCache.pending_of`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Generic, TypeVar

from gpufleet.model.volumes import Storage
from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot
from gpufleet.scheduler.state.accounting import Accounting
from gpufleet.scheduler.state.assumed import AssumedBindings
from gpufleet.scheduler.state.changes import KINDS, STORAGE_KINDS, ClaimObject, Event, object_key
from gpufleet.scheduler.state.ledger import Ledger, SnapshotError, ledger_order
from gpufleet.scheduler.state.pending import PendingPods
from gpufleet.scheduler.state.pool import VictimPool
from gpufleet.scheduler.state.shapes import Policies, WorkloadShapes

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    import numpy as np

    from gpufleet.framework.runtime import Framework
    from gpufleet.model.cluster import ClusterState, NodeSpec
    from gpufleet.model.pod import PodSpec
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.state.changes import CacheObject

P = TypeVar("P", bound=Policies)
"""What the edge composed: at least the plugins and policies the cache builds frameworks of."""

ASSUMED_TTL_S = 30.0
"""kube-scheduler's default: an assumed pod not confirmed this long after it was assumed
is forgotten."""


class ClusterCache(Generic[P]):
    """Objects by kind, the ledger of what runs, assumed bindings (see the module doc).

    ``non_preemptible_priority`` decides which running pods count as non-preemptible in
    queue accounting; ``workload`` is the pods FGD's fragmentation is measured against
    (default: the pods in the cache when a session starts); ``components`` what the edge
    composed (the plugins, policies, actions and rules, :class:`Policies` at least): the
    cache builds the policies' frameworks from it and carries it to the sessions opened on
    it.
    """

    def __init__(
        self,
        non_preemptible_priority: int,
        *,
        components: P,
        workload: Sequence[PodSpec] | None = None,
        assumed_ttl_s: float = ASSUMED_TTL_S,
        strict: bool = True,
    ) -> None:
        self.non_preemptible_priority = non_preemptible_priority
        self.strict = strict
        """A cluster that contradicts itself (bound pods over-commit a node) raises
        :class:`SnapshotError` (a snapshot is refused). Not strict (a live cluster): the pod
        that does not fit is left out of the accounting, recorded in :attr:`conflicts`, and
        its node is fenced (tainted ``gpufleet.io/conflict``) so that nothing more is
        placed there until the pods' objects agree again."""
        self.components = components
        self.workload = tuple(workload) if workload is not None else None
        self.assumed_ttl_s = assumed_ttl_s
        self.objects: dict[str, dict[str, CacheObject]] = {kind: {} for kind in KINDS}
        self.generations: dict[str, int] = dict.fromkeys(KINDS, 0)
        """Per kind: bumped by every event of that kind."""
        self._shapes = WorkloadShapes(workload)
        self._pending = PendingPods()
        """gpufleet's pods that no event shows bound (pending, or assumed by a cycle)."""
        leaving: set[str] = set()
        self.accounting = Accounting(strict, self.objects["Node"], leaving)
        """What runs: the ledger and the victim pool (``accounting.py``)."""
        self.bindings = AssumedBindings(
            assumed_ttl_s, self.accounting, self.pods, self._pending, self.ledger, leaving=leaving
        )
        """What cycles decided that events have not confirmed yet (``assumed.py``)."""

    # -- what the binding operations keep -------------------------------------------------

    @property
    def assumed(self) -> Mapping[str, float]:
        return self.bindings.assumed

    @property
    def evicted(self) -> set[str]:
        return self.bindings.evicted

    @property
    def leaving(self) -> set[str]:
        return self.bindings.leaving

    @property
    def conflicts(self) -> dict[str, str]:
        return self.accounting.conflicts

    def assume(self, result: CycleResult, now: float) -> None:
        """See :meth:`AssumedBindings.assume`."""
        self.bindings.assume(result, now)

    def forget(self, *keys: str) -> None:
        self.bindings.forget(*keys)

    def keep(self, key: str) -> None:
        self.bindings.keep(key)

    def terminating(self, key: str) -> None:
        self.bindings.terminating(key)

    def expire(self, now: float) -> list[str]:
        return self.bindings.expire(now)

    # -- reading ------------------------------------------------------------------------

    def get(self, kind: str, key: str) -> CacheObject | None:
        return self.objects[kind].get(key)

    @property
    def pods(self) -> Mapping[str, PodInfo]:
        return self.objects["Pod"]  # type: ignore[return-value]

    def snapshot(self, *, pods: bool = True) -> Snapshot:
        """The cache's objects as a snapshot (sorted by key): what a cache built from
        scratch from the same objects holds (without ``pods``: none of its pods)."""

        def values(kind: str) -> list[CacheObject]:
            return [v for _, v in sorted(self.objects[kind].items())]

        topology = values("Topology")
        claims: list[ClaimObject] = values("ResourceClaim")  # type: ignore[assignment]
        return Snapshot(
            tuple(values("Node")),  # type: ignore[arg-type]
            tuple(values("Pod")) if pods else (),  # type: ignore[arg-type]
            tuple(values("PodGroup")),  # type: ignore[arg-type]
            tuple(values("Queue")),  # type: ignore[arg-type]
            topology[0].levels if topology else (),  # type: ignore[union-attr]
            tuple(values("DeviceClass")),  # type: ignore[arg-type]
            tuple(values("ResourcePool")),  # type: ignore[arg-type]
            tuple(c.claim for c in claims),
            {c.claim.key: c.allocation for c in claims if c.allocation is not None},
            Storage(*(tuple(values(kind)) for kind in STORAGE_KINDS)),  # type: ignore[arg-type]
            {n.name: n.labels for n in values("Namespace")},  # type: ignore[union-attr]
        )

    # -- events -------------------------------------------------------------------------

    def apply(self, event: Event) -> None:
        """Apply one watch event (see the module doc for what each kind changes)."""
        if event.kind not in self.objects:
            raise ValueError(f"the cluster cache does not keep {event.kind} objects")
        store = self.objects[event.kind]
        key = object_key(event.obj)
        old = store.get(key)
        new = None if event.type == "DELETED" else event.obj
        if old is None and new is None:
            return  # the deletion of an object the cache never saw changes nothing
        if new is None:
            store.pop(key, None)
        else:
            store[key] = new
        self.generations[event.kind] += 1
        if event.kind == "Pod":
            self._pod(key, old, new)  # type: ignore[arg-type]
        elif event.kind == "Node":
            self._node(old, new)  # type: ignore[arg-type]
        elif event.kind == "PodGroup":
            self._group(key, new)  # type: ignore[arg-type]
        else:
            if event.kind == "ResourceClaim":
                self.bindings.assumptions.carried.pop(
                    key, None
                )  # the object says how it is allocated
            self.accounting.invalidate()

    def apply_all(self, events: Iterable[Event]) -> None:
        for event in events:
            self.apply(event)

    def _node(self, old: NodeSpec | None, new: NodeSpec | None) -> None:
        acc = self.accounting
        ledger = acc.ledger
        if ledger is None:
            return
        if old is None or new is None:
            acc.moved.add((new or old).name)  # type: ignore[union-attr]
            return
        if old.capacity_key != new.capacity_key:
            acc.invalidate()
            return
        row = ledger.node_index.get(new.name)
        if row is None:
            return  # it joined since the ledger was built, which reads it when taking it in
        for state in (ledger.state, ledger.empty):
            state.node_labels.set_node(row, new.labels, new.taints)
            state.generation[row] += 1
            state.changes += 1
        ledger.released += 1  # pods that did not fit there may now: their failures end

    def _group(self, key: str, new: GroupSpec | None) -> None:
        self._pending.touch(key)
        ledger = self.accounting.ledger
        if ledger is None:
            return
        if new is None:
            ledger.drop_group(key)
        else:
            ledger.set_group(new)

    def _pod(self, key: str, old: PodInfo | None, new: PodInfo | None) -> None:
        self._shapes.count(old, new)
        self._pending.index(key, old, new)
        acc, bindings = self.accounting, self.bindings
        if acc.conflicts and acc.fenced & {p.node for p in (old, new) if p is not None}:
            acc.invalidate()  # a pod of a fenced node changed: the rebuild judges it again
            return
        if new is None or new.claims or (old is not None and old.claims):
            self._claims_pod(key, new)
            return
        if key in self.evicted:
            if new.bound:
                return  # on its way out: it stopped counting when it was evicted
            self.evicted.discard(key)
        ledger = acc.ledger
        if ledger is None:
            if new.bound:
                bindings.assumptions.settle(key)
            return
        running = ledger.running.get(key)
        if running is not None:
            if key in self.assumed:
                if not new.bound:
                    return  # the bind is on its way
                bindings.assumptions.settle(key)  # seen bound: where the cycle put it, or not
            if new.bound and acc.same(running, new):
                return
            acc.stop(key)
        if new.bound:
            acc.start(new)

    def _claims_pod(self, key: str, new: PodInfo | None) -> None:
        """Pod ``key`` was deleted, or it (or what it was) uses ResourceClaims: a deleted
        pod stops counting; a pod with claims rebuilds the ledger (claims change what the
        book has allocated), keeping what cycles assumed."""
        acc, bindings = self.accounting, self.bindings
        bindings.evicted.discard(key)
        if new is None:
            bindings.leaving.discard(key)
            bindings.assumptions.settle(key)
            if acc.ledger is not None and key in acc.ledger.running:
                acc.stop(key)
            return
        if new.bound:
            bindings.assumptions.settle(key)  # seen bound
        acc.invalidate()

    # -- sessions -----------------------------------------------------------------------

    def ledger(self) -> Ledger:
        """The ledger of the cache's objects, built anew if a change invalidated it (or
        moved onto the nodes there are now if nodes joined or left)."""
        if self.accounting.moved:
            self._move()
        if self.accounting.ledger is None:
            self._build()
        assert self.accounting.ledger is not None
        return self.accounting.ledger

    def pool(self) -> VictimPool:
        """The running pods that may be evicted, as the victim search reads them."""
        self.ledger()
        return self.accounting.read_pool()

    def framework(
        self, policy: str, state: ClusterState, rng: np.random.Generator
    ) -> Framework | None:
        """The policy's plugins for FGD's workload (``scheduler/state/shapes.py``)."""
        return self._shapes.framework(self.components, policy, state, rng)

    @property
    def framework_version(self) -> int:
        """Bumped whenever :meth:`framework` may answer otherwise than it did."""
        return self._shapes.version

    def unchanged(self, ledger: Ledger, framework_version: int) -> bool:
        """Whether a reader that last saw ``ledger`` (and :attr:`framework_version`) and
        read :meth:`pending_changes` would find nothing new: the same ledger and plugins,
        no gang changed since."""
        return (
            ledger is self.accounting.ledger
            and not self.accounting.moved
            and framework_version == self._shapes.version
            and not self._pending.changed
        )

    def _build(self) -> None:
        self._pending.forget_changes()  # who keeps pending jobs reads them from a new ledger
        snap = self.snapshot()
        # Claims that cycles allocated and no ResourceClaim event shows yet stay allocated.
        assumptions, acc = self.bindings.assumptions, self.accounting
        snap = replace(snap, allocations=assumptions.allocations(snap.allocations))
        ledger = Ledger.of(snap, self.non_preemptible_priority)
        bound = [p for p in snap.pods if p.bound and p.key not in self.evicted]
        bound += self._unconfirmed(bound)
        known = [p for p in bound if p.node in ledger.node_index]
        acc.conflicts.clear()
        acc.fenced.clear()
        self._bind(ledger, known)
        acc.built(ledger, VictimPool.of(ledger, 0.0))

    def _move(self) -> None:
        """Take the nodes that joined or left into the ledger: the rows of the others are
        copied (:meth:`Ledger.on_nodes`), the pods bound to nodes that joined are reserved.
        Where that cannot be done — fenced nodes, a node that left and came back, what
        :meth:`Ledger.on_nodes` refuses — the ledger is built anew."""
        acc = self.accounting
        old, moved = acc.ledger, acc.moved
        assert old is not None
        nodes = self.objects["Node"]
        if acc.conflicts or any(n in old.node_index and n in nodes for n in moved):
            acc.invalidate()
            return
        pool = acc.read_pool()  # the pods waiting to join it join on the old rows
        moved_to = old.on_nodes(self.snapshot(pods=False))  # the ledger reads no pod of it
        if moved_to is None:
            acc.invalidate()
            return
        ledger, to = moved_to
        pool.moved(ledger, to)
        self._pending.forget_changes()  # who keeps pending jobs reads them from a new ledger
        joined = {n for n in moved if n in nodes}
        bound = [p for p in self.pods.values() if p.bound and p.key not in self.evicted]
        bound += self._unconfirmed(bound)  # as _build counts them
        fresh = [p for p in bound if p.node in joined and p.key not in ledger.running]
        try:
            self._bind(ledger, fresh)
        except SnapshotError:
            acc.invalidate()  # a strict cache refuses the cluster; the rebuild says where
            raise
        running = [ledger.running.get(p.key) for p in ledger_order(fresh)]
        pool.add([r for r in running if r is not None and ledger.evictable(r.pod)])
        acc.built(ledger, pool)

    def _unconfirmed(self, bound: Sequence[PodInfo]) -> list[PodInfo]:
        """The assumed pods where cycles put them, but those that ``bound`` (the pods seen
        bound) has already: a bind confirmed while its node was out of the ledger is
        counted once, where the event says."""
        seen = {p.key for p in bound}
        return [p for p in self.bindings.assumptions.bound() if p.key not in seen]

    def _bind(self, ledger: Ledger, pods: Sequence[PodInfo]) -> None:
        """Reserve bound ``pods`` on ``ledger``; a cache that is not strict fences the node
        of one that does not fit (see :class:`Accounting`)."""
        if self.strict:
            ledger.bind_all(pods)
            return
        for pod in ledger_order(pods):
            try:
                ledger.bind(pod)
            except SnapshotError as error:
                self.accounting.conflict(ledger, pod, error)

    def workload_specs(self) -> list[PodSpec]:
        """The pods FGD measures fragmentation against (see the class doc)."""
        return self._shapes.specs()

    def pending(self) -> list[PodInfo]:
        """Pods waiting to be scheduled (gpufleet's, not bound, not assumed), by key."""
        return self._pending.waiting(self.ledger().running)

    def pending_of(self, gang: str) -> list[PodInfo]:
        """The pods of ``gang`` (a PodGroup's key, or a pod's own) that wait, as
        :meth:`pending` has them."""
        return self._pending.waiting_of(gang, self.ledger().running)

    def pending_changes(self) -> list[str]:
        """The gangs whose pending job may have changed since the last call, in the order of
        the changes (see ``scheduler/state/pending.py``); after a rebuild of the ledger (see
        :meth:`ledger`) a scheduler reads every pending pod anew."""
        return self._pending.changes()
