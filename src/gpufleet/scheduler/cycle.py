"""One scheduling cycle: snapshot -> queues by fair share -> per job allocate, else make room.

The flow (ARCHITECTURE.md, "Cycle"):

1. The snapshot's bound pods take their capacity; pending gpufleet pods are grouped into
   *jobs* (a PodGroup, or a pod on its own). A job needs ``minMember`` minus its running pods
   placed together (its *core*); pods beyond that are elastic extras, placed if they fit.
2. Queues get their fair shares (:mod:`gpufleet.scheduler.fairshare`) and are served in
   fair-share order, one job at a time, each queue's jobs by priority, then age. A job that
   cannot be placed is set aside — it never blocks the jobs behind it or other queues.
3. Per job: admission (the queue's limit; non-preemptible work only within quota), then
   allocation as one transaction — all core pods or none. If that fails, the cycle tries to
   make room (:mod:`gpufleet.scheduler.victims`): consolidation, reclaim, preemption.
4. A job that still does not fit stays pending with a specific reason. A gang that has fewer
   than ``minMember`` pods running and cannot be completed is stale; after the grace period
   its pods are released. A job that has waited past the starvation threshold holds nodes
   so that later, smaller jobs cannot keep overtaking it.

The cycle decides; it changes nothing outside its own copy of the state. Its result is a
:class:`~gpufleet.scheduler.outcome.CycleResult`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, Literal

import numpy as np

from gpufleet.dra.allocator import Unsatisfiable
from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework, Held
from gpufleet.framework.status import Code, Reason, Status
from gpufleet.model.arrays import MILLI, BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.workload import (
    NON_PREEMPTIBLE_PRIORITY,
    RESOURCES,
    UNITS,
    PodInfo,
    Snapshot,
    pods_request,
    vector,
)
from gpufleet.plugins.registry import FIT_FILTERS, PLUGINS, POLICIES
from gpufleet.scheduler.backlog import Backlog, order_key
from gpufleet.scheduler.claims import ClaimBook
from gpufleet.scheduler.fairshare import EPS, fair_shares, share_ratio
from gpufleet.scheduler.job import Job, job_gpus, snapshot_jobs
from gpufleet.scheduler.ledger import Ledger
from gpufleet.scheduler.outcome import (
    Binding,
    CycleResult,
    Eviction,
    JobRecord,
    Pending,
    Reconfiguration,
)
from gpufleet.scheduler.placement import Placement, place, share_over
from gpufleet.scheduler.pool import VictimPool
from gpufleet.scheduler.topology import Domains, Failure, GangPlacement, levels_for, restrict
from gpufleet.scheduler.transaction import Running, Transaction
from gpufleet.scheduler.victims import Plan, VictimSearch

if TYPE_CHECKING:
    from gpufleet.model.arrays import FloatArray, IntArray
    from gpufleet.model.pod import PodSpec


MAX_ROOM_DOMAINS = 4
"""Topology domains (largest first) in which victims are sought for a constrained gang."""


@dataclass(frozen=True, slots=True)
class CycleConfig:
    policy: str = "gpufleet"
    non_preemptible_priority: int = NON_PREEMPTIBLE_PRIORITY
    stale_grace_s: float = 60.0
    starvation_after_s: float = 1800.0
    actions: tuple[str, ...] = ("consolidate", "reclaim", "preempt")
    watch: frozenset[str] = frozenset()
    """Pods whose per-node filter reasons the result should carry (for explain)."""
    strict_fifo: bool = False
    """A queue's first job that cannot be placed blocks the jobs behind it (Kueue's
    StrictFIFO); by default they may pass it."""
    records: bool = True
    """Report what explain and the schedule output show besides the decisions: a record
    of every job tried (its queue's fair share and allocation, the outcome, the notes)
    and every queue's fair share. A replay reads only bindings and evictions."""


def gpus_text(value: float) -> str:
    return f"{value:g} GPU" + ("" if value == 1 else "s")


def amount_text(vec: FloatArray, mask: np.ndarray | None = None) -> str:
    parts = [
        gpus_text(vec[0]) if i == 0 else f"{vec[i]:g} {UNITS[i]}"
        for i in range(len(RESOURCES))
        if (mask is None or mask[i]) and (vec[i] > EPS or i == 0)
    ]
    return ", ".join(parts)


def _equals_selector(attribute: str, value: object) -> str:
    """CEL requiring ``attribute`` (``domain/name``) to equal ``value``."""
    domain, _, name = attribute.rpartition("/")
    literal = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
    # Devices of other drivers (a NIC claim of the same gang) are not constrained.
    return f'device.driver != "{domain}" || device.attributes["{domain}"].{name} == {literal}'


def _changed(before: tuple[BoolArray, float] | None, after: tuple[BoolArray, float] | None) -> bool:
    if before is None or after is None:
        return before is not after
    return not np.array_equal(before[0], after[0])


def _per_node_slots(spec: PodSpec, state: ClusterState, nodes: IntArray) -> IntArray:
    """How many pods of plain ``spec`` each of ``nodes`` has whole GPUs, CPU, memory, pod
    slots and other resources for."""
    per_node = np.full(nodes.size, np.iinfo(np.int64).max, dtype=np.int64)
    if spec.num_gpu:
        per_node = np.minimum(per_node, state.gpu_whole_free[nodes] // spec.num_gpu)
    if spec.cpu_milli:
        per_node = np.minimum(per_node, state.cpu_free[nodes] // spec.cpu_milli)
    if spec.memory_mib:
        per_node = np.minimum(per_node, state.memory_free[nodes] // spec.memory_mib)
    if state.pods_limited:
        per_node = np.minimum(per_node, state.pods_free[nodes])
    for name, amount in spec.extended:
        column = state.extended_index.get(name)
        free = state.extended_free[nodes, column] if column is not None else 0
        per_node = np.minimum(per_node, free // max(amount, 1))
    return per_node


def make_framework(policy: str, workload: Sequence[PodSpec], rng: np.random.Generator) -> Framework:
    """The plugins of ``policy``, FGD's fragmentation measured against ``workload``."""
    return Framework(
        POLICIES[policy], PLUGINS, Handle(rng, FragmentIndex(typical_pods(workload)), None)
    )


class Cycle:
    """The mutable working state of one cycle; :func:`run_cycle` is the entry point."""

    def __init__(
        self,
        snapshot: Snapshot,
        config: CycleConfig,
        now: float,
        *,
        workload: Sequence[PodSpec] | None = None,
        backlog: Backlog | None = None,
        rng: np.random.Generator | None = None,
        ledger: Ledger | None = None,
        pool: VictimPool | None = None,
        jobs: Sequence[Job] | None = None,
        framework: Framework | None = None,
    ) -> None:
        """A cycle at ``now`` over ``ledger`` (default: the snapshot's nodes with its bound
        pods), which it changes as it decides.

        ``workload`` is the pods FGD's fragmentation is measured against (default: the
        snapshot's); ``backlog`` the pending jobs (default: ``jobs``, else the snapshot's);
        ``pool`` the pods that may be evicted (default: the ledger's preemptible pods);
        ``framework`` the policy's plugins, kept across cycles by a cache (default: built
        on first use); ``rng`` the policy's random source (default: seed 0). A replay
        keeps one Cycle for a whole trace and calls :meth:`begin` before each cycle.
        """
        self.config, self.now, self.snapshot = config, now, snapshot
        self.workload = workload
        self.rng = rng if rng is not None else np.random.default_rng(0)
        if ledger is None:
            ledger = Ledger(
                snapshot.nodes,
                snapshot.queues,
                {g.key: g for g in snapshot.groups},
                ClaimBook(snapshot),
                config.non_preemptible_priority,
            )
            ledger.bind_all(snapshot.pods)
        self.ledger = ledger
        self.state, self.empty, self.node_index = ledger.state, ledger.empty, ledger.node_index
        self.tree, self.groups, self.book = ledger.tree, ledger.groups, ledger.book
        self.running, self.gang_running = ledger.running, ledger.gang_running
        self.partial, self.alloc, self.alloc_np = ledger.partial, ledger.alloc, ledger.alloc_np
        self.versions = ledger.versions
        self.cycles = 0
        self.holds: dict[str, tuple[BoolArray, float]] = {}
        """Per starving job: the nodes held for it, and its GPUs (held against smaller
        jobs). A hold lasts until the job is tried again (or the next cycle starts, for
        a what-if); in a replay the job's class is retried only when capacity was freed."""
        self.hold_version = 0
        self.room_failures: dict[tuple[str, object], tuple[Hashable, str]] = {}
        """Room searches that failed, with the epoch they failed in (see make_room)."""
        self.act = True
        """Whether this cycle may evict (consolidate, reclaim, preempt)."""
        self._caches()
        if self.state.mig is not None:
            self.state.mig.mark_baseline()  # running pods' slices are the cluster's own
        if pool is None:
            pool = VictimPool(
                [r for r in self.running.values() if self._victim(r)],
                self.tree.queues,
                now,
                self.state.gpu_slots,
            )
        else:
            pool.at(now)
        self.pool = pool
        if framework is not None:
            self.__dict__["framework"] = framework  # the cached_property's slot
        if backlog is None:
            found = snapshot_jobs(snapshot, self.state) if jobs is None else list(jobs)
            backlog = Backlog.of(self._with_claim_gpus(found))
        self.backlog = backlog
        self.capacity = ledger.capacity
        self.bindings: list[Binding] = []
        self._start(now)

    @property
    def released(self) -> int:
        """Pods whose capacity went back to the cluster (evicted or finished), ever."""
        return self.ledger.released

    def _caches(self) -> None:
        self._order_cache: dict[str, tuple[tuple[int, ...], str, object, tuple[object, ...]]] = {}
        """Per queue: its order key, with the versions, head job and fair shares it was
        computed for."""
        self._static: dict[Hashable, IntArray] = {}
        """Per pod spec (name aside): the nodes that could run it empty (static_nodes)."""
        self._plain: dict[tuple[str, int], Hashable | None] = {}
        """Per pod group (first pod, size): its plain request key (see _plain_key)."""
        self._slots: dict[Hashable, tuple[int, float]] = {}
        """slots() on the cycle's state, with the state's version it was counted at."""
        self._fair_key = b""
        self._fair_demand: tuple[dict[str, FloatArray], FloatArray] = ({}, vector())
        self._fair: dict[str, FloatArray] | None = None
        """The fair shares of the demands of ``_fair_key`` (None: not divided yet)."""
        self.movable: tuple[Hashable, BoolArray, ClusterState] | None = None
        """Consolidation's movable pods and the state without them (VictimSearch)."""

    def _victim(self, r: Running) -> bool:
        return self.ledger.evictable(r.pod)

    def begin(self, now: float, *, act: bool = True) -> None:
        """Start another cycle at ``now`` on the state the previous ones left: the pods they
        bound become possible victims, fair shares follow the backlog. Without ``act`` the
        cycle only places jobs (a replay evicts on its periodic cycle only)."""
        fresh = [self.running[b.pod] for b in self.bindings if b.pod in self.running]
        self.pool.add([r for r in fresh if self._victim(r)])
        self.pool.at(now)
        self.act = act
        self._start(now)

    def _start(self, now: float) -> None:
        self.now = now
        self.cycles += 1
        own = self.ledger.own
        demand = {
            q: own[q] + self.backlog.demand[q] if q in self.backlog.demand else own[q]
            for q in self.tree.queues
        }
        available = np.maximum(self.capacity - self.ledger.unqueued, 0.0)
        key = b"".join([available.tobytes(), *(d.tobytes() for d in demand.values())])
        if key != self._fair_key:
            self._fair_key, self._fair_demand, self._fair = key, (demand, available), None
        self.bindings = []
        self.evictions: list[Eviction] = []
        self.pending: list[Pending] = []
        self.records: list[JobRecord] = []
        self.node_reasons: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {}
        self.evicted_nodes: set[int] = set()
        self.freed_gpus: set[tuple[int, int]] = set()
        self.bound_now: set[str] = set()
        """Pods bound (or moved) in this cycle: never victims of the same cycle."""
        self.over_share = 0
        """Bindings that left a queue above its fair share, counted only where reclaim may
        run: its failed searches are remembered until this changes (see make_room)."""
        epoch = self.consolidation_epoch()
        self.room_failures = {k: v for k, v in self.room_failures.items() if v[0] == epoch}
        self.held: Held | None = None
        """The holds that apply to the job being scheduled."""
        self.caps: dict[str, int] = {}
        """The most milli-GPU each memory-sized share of that job may take (share_caps)."""

    @property
    def fair(self) -> dict[str, FloatArray]:
        """Every queue's fair share in this cycle, of what its pods held and its pending
        jobs asked when the cycle started. Divided on first use (a cycle may need none),
        and only when those demands differ from the last division's."""
        if self._fair is None:
            self._fair = fair_shares(self.tree, *self._fair_demand)
        return self._fair

    def finish(self, key: str) -> Running:
        """Pod ``key`` ended (its job completed, or it was stopped): free what it held."""
        running = self._remove_running(key)
        self.state.release(running.node, running.spec, running.gpus)
        return running

    @cached_property
    def framework(self) -> Framework:
        """The policy's plugins; FGD's target workload is every pod of the snapshot.

        Built on first use: a snapshot without pods has no workload and needs no placement.
        """
        specs = (
            [self.state.demand(p.spec) for p in self.snapshot.pods]
            if self.workload is None
            else self.workload
        )
        return make_framework(self.config.policy, specs, self.rng)

    # -- state --------------------------------------------------------------------------

    def preemptible(self, pod: PodInfo) -> bool:
        return self.ledger.preemptible(pod)

    def _add_running(self, running: Running) -> None:
        self.ledger.add(running)

    def _remove_running(self, key: str) -> Running:
        running = self.ledger.remove(key)
        self.pool.discard(key)
        return running

    def claims_freed(self, pods: Sequence[PodInfo]) -> FloatArray:
        return self.ledger.claims_freed(pods)

    def _with_claim_gpus(self, jobs: list[Job]) -> list[Job]:
        """``jobs`` with their pending pods' ``claim_gpus``: what their claims may count as,
        each claim once per queue — not where the queue's running pods hold it already,
        and, among pending pods, only for the first that uses it (jobs in serving order)."""
        if self.book.allocator is None:
            return jobs
        counted = {q: set(users) for q, users in self.ledger.claim_users.items()}
        out = []
        for job in sorted(jobs, key=order_key):
            pods = []
            for pod in job.pods:
                seen = counted.setdefault(pod.queue, set())
                fresh = [k for k in pod.claims if k not in seen]
                seen.update(fresh)
                gpus = sum(self.book.most_gpus(k) for k in fresh)
                pods.append(replace(pod, claim_gpus=gpus) if gpus else pod)
            out.append(replace(job, pods=tuple(pods)))
        return out

    def ratio(self, queue: str, extra: FloatArray | None = None) -> float:
        alloc = self.alloc[queue] if extra is None else self.alloc[queue] + extra
        return share_ratio(alloc, self.fair.get(queue, vector()))

    def queue_order(self, queue: str, head: Job) -> tuple[object, ...]:
        """Serve first the queue whose share ratio, with its head job added, is lowest.

        Counting the head job makes a queue with no fair share (no quota, no weight) wait
        behind every queue that is still within its share, even before it runs anything.
        """
        path = self.tree.paths[queue]
        versions = tuple(self.versions[q] for q in path)
        fair = self.fair
        cached = self._order_cache.get(queue)
        if cached is not None and cached[2] is fair and cached[:2] == (versions, head.key):
            return cached[3]
        request = pods_request(head.core or head.pods)
        levels = tuple(
            (-self.tree.queues[q].priority, self.ratio(q, request)) for q in self.tree.paths[queue]
        )
        order = (levels, queue)
        self._order_cache[queue] = (versions, head.key, fair, order)
        return order

    # -- the cycle ----------------------------------------------------------------------

    def run(self) -> CycleResult:
        backlog = self.backlog
        backlog.start()
        self.pending.extend(
            Pending(p.key, p.blocked) for p in self.snapshot.pods if p.blocked and p.managed
        )
        unknown = [q for q in backlog.queues() if q not in self.tree.queues]
        for queue in unknown:
            for job in backlog.behind(queue):
                self._pend(job, job.pods, f"queue {job.queue} does not exist")
        for gang in sorted(self.partial):
            if gang not in backlog:
                self._release_stale(gang, "")
        self._serve(backlog)
        mig = self.state.mig
        reconfigurations = tuple(
            Reconfiguration(self.state.names[node], gpu, tuple(layout))
            for node, gpu, layout in (mig.reconfigurations() if mig is not None else ())
        )
        return CycleResult(
            tuple(self.bindings),
            tuple(self.evictions),
            tuple(sorted(self.pending, key=lambda p: p.pod)),
            tuple(self.records),
            self.node_reasons,
            dict(self.fair) if self.config.records else {},
            reconfigurations,
            self.book.status(),
        )

    def _serve(self, backlog: Backlog) -> None:
        """Serve the queues' jobs, one at a time, the queue furthest below its share first."""
        strict = self.config.strict_fifo
        viable = self.worth if self.act else self.viable
        heads: dict[str, Job] = {}
        for queue in backlog.queues():
            if queue in self.tree.queues:
                head = backlog.head(queue, 0, self._failure_token(), strict=strict, viable=viable)
                if head is not None:
                    heads[queue] = head
        bound: list[Job] = []
        while heads:
            queue = (
                min(heads, key=lambda q: self.queue_order(q, heads[q]))
                if len(heads) > 1
                else next(iter(heads))
            )
            job = heads[queue]
            backlog.passed(job)
            # A replay's backlog skips known failures without a trace: a head judged at the
            # walk's start may have lost its room to the jobs bound since.
            if (not backlog.skip_failed or viable(job)) and self.schedule(job):
                bound.append(job)
                backlog.bound(job)
            else:
                backlog.failed(job, len(self.evictions), self._failure_token())
                if strict:
                    backlog.block(queue)
                    if not backlog.skip_failed:
                        for behind in backlog.behind(queue):
                            self._pend(behind, behind.pods, f"behind {job.key} (strict FIFO)")
            head = backlog.head(
                queue, len(self.evictions), self._failure_token(), strict=strict, viable=viable
            )
            if head is None:
                del heads[queue]
            else:
                heads[queue] = head
        for job in bound:
            backlog.remove(job)

    def _failure_token(self) -> Hashable:
        """What a failed job's class waits on: freed capacity or a change of holds (later
        bindings only take capacity). A cycle that may evict has tokens of its own: there
        every failed class is judged again (:meth:`worth`), with its fair shares and min
        runtimes."""
        token = (self.released, self.hold_version)
        return (*token, "act", self.cycles) if self.act else token

    def settled(self) -> bool:
        """Whether a cycle now, without evicting, would do nothing: every pending class
        failed since capacity was last freed, and no gang runs below its minMember (whose
        grace period could run out)."""
        if self.partial:
            return False
        return self.backlog.settled(
            self._failure_token(), strict=self.config.strict_fifo, viable=self.viable
        )

    def worth(self, job: Job) -> bool:
        """In a cycle that may evict: whether trying ``job`` could bind it — it fits now,
        or some action might make room for it (:meth:`VictimSearch.hopeless`)."""
        if self.viable(job):
            return True
        base, self.held = self.held, self.held_for(job)
        try:
            request = pods_request(job.core)
            return bool(self._room_actions(job, request, []))
        finally:
            self.held = base

    def viable(self, job: Job) -> bool:
        """Whether ``job`` may fit now without evicting anything: False only when its core
        is of one plain spec and the cluster has fewer slots for it than it needs (an exact
        bound, see :meth:`slots`)."""
        core = job.core
        return not core or self.slots(core, held=self.held_for(job)) >= len(core)

    def held_for(self, job: Job) -> Held | None:
        if not self.holds:
            return None
        gpus = job_gpus(job)
        masks = [mask for mask, held_gpus in self.holds.values() if held_gpus > gpus]
        if not masks:
            return None
        return Held(np.logical_or.reduce(masks), "node(s) were held for a starving job")

    def schedule(self, job: Job) -> bool:
        """Place ``job`` (or make room for it); False if it stays pending. A starving job's
        hold is made anew; the holds count as changed only if it holds other nodes now."""
        before = self.holds.pop(job.key, None)
        try:
            return self._schedule(job)
        finally:
            after = self.holds.get(job.key)
            if _changed(before, after):
                self.hold_version += 1

    def _schedule(self, job: Job) -> bool:
        self.held = self.held_for(job)
        record = None
        if self.config.records:
            fair = self.fair.get(job.queue, vector())
            record = (fair, self.alloc[job.queue].copy(), self.ratio(job.queue))
        notes: list[str] = []
        core = job.core
        if job.incomplete:
            reason = (
                f"gang {job.key} has {job.running + len(job.pods)} pod(s), fewer than its "
                f"minMember {job.min_member}; waiting for the rest to be created"
            )
            self._pend(job, job.pods, self._stale(job, reason), notes=notes, record=record)
            return False
        if core:
            request = pods_request(core)
            blocked = self.admission(job, request)
            if blocked is not None:
                reason = self._stale(job, blocked)
                self._pend(job, job.pods, reason, notes=notes, record=record)
                return False
            self.caps = self.share_caps(job, core, request)
            txn = Transaction(self.state)
            failure = self.allocate_job(job, txn)
            if failure is not None:
                self._watch(job, failure.pod)
                txn.rollback()
                plan = None
                if self.act and failure.status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    plan = self.make_room(job, request, notes)
                if plan is None:
                    reason = self._failure_reason(job, failure)
                    self._give_up(job, reason, notes, record)
                    return False
                self._apply(job, plan)
            else:
                self._commit(txn, core)
        self._extras(job)
        self._record(job, record, "bound" if core else "elastic", notes)
        return True

    def admission(self, job: Job, request: FloatArray) -> str | None:
        """Why the queue cannot take ``request`` now (limit, quota), or None."""
        for q in self.tree.paths[job.queue]:
            spec = self.tree.queues[q]
            over = self.alloc[q] + request > spec.limit + EPS
            if over.any():
                i = int(np.flatnonzero(over)[0])
                limit = gpus_text(spec.limit[i]) if i == 0 else f"{spec.limit[i]:g} {UNITS[i]}"
                return (
                    f"queue {q} is at its limit of {limit} "
                    f"({amount_text(self.alloc[q], over)} in use, job needs "
                    f"{amount_text(request, over)})"
                )
        if job.priority >= self.config.non_preemptible_priority:
            for q in self.tree.paths[job.queue]:
                spec = self.tree.queues[q]
                mask = np.array(spec.quota_set)
                over = mask & (self.alloc_np[q] + request > spec.quota + EPS)
                if over.any():
                    return (
                        f"non-preemptible job (priority {job.priority}) must fit within "
                        f"queue {q}'s quota of {amount_text(spec.quota, over)} "
                        f"({amount_text(self.alloc_np[q], over)} in use by non-preemptible "
                        f"work, job needs {amount_text(request, over)})"
                    )
        return None

    def allocate(
        self, pods: tuple[PodInfo, ...], txn: Transaction, held: Held | None
    ) -> Failure | None:
        """Place ``pods`` in ``txn`` off ``held`` nodes; on failure the first that did not fit."""
        for i, pod in enumerate(pods):
            limit = held
            if pod.claims:
                allowed, why = self.book.nodes(pod, self.state.names)
                if not allowed.any():
                    status = Status(Code.UNSCHEDULABLE, total_nodes=self.state.size)
                    return Failure(pod, status, i, f"pod {pod.key}: {why}")
                limit = restrict(held, ~allowed, "node(s) cannot allocate the pod's ResourceClaims")
            outcome = place(self.framework, self.state, pod.spec, self.capped(pod, limit))
            if isinstance(outcome, Status):
                return Failure(pod, outcome, i)
            txn.reserve(outcome.node, outcome.pod, outcome.gpus)
            if pod.claims:
                self.book.take(pod, self.state.names[outcome.node], txn)
        return None

    def held_for_claims(self, pod: PodInfo) -> Held | None:
        """The held nodes, plus, for a pod with claims, the nodes that cannot allocate them."""
        if not pod.claims:
            return self.capped(pod, self.held)
        allowed, _ = self.book.nodes(pod, self.state.names)
        held = restrict(self.held, ~allowed, "node(s) cannot allocate the pod's ResourceClaims")
        return self.capped(pod, held)

    def share_caps(self, job: Job, pods: Sequence[PodInfo], request: FloatArray) -> dict[str, int]:
        """The most milli-GPU each share sized by GPU memory among ``pods`` may take.

        Admission judged ``request``, the job at its pods' ``demand`` (the least share each
        can take); on smaller GPUs a share is larger. What the limits of the job's queues
        (and, for non-preemptible work, their GPU quotas) leave beyond ``request`` is split
        evenly among those pods, so that the shares they take on their nodes keep within.
        """
        sized = [p for p in pods if p.spec.sized_by_memory]
        if not sized:
            return {}
        room = np.inf
        for q in self.tree.paths[job.queue]:
            spec = self.tree.queues[q]
            room = min(room, spec.limit[0] - self.alloc[q][0] - request[0])
            if job.priority >= self.config.non_preemptible_priority and spec.quota_set[0]:
                room = min(room, spec.quota[0] - self.alloc_np[q][0] - request[0])
        if room == np.inf:
            return {}
        each = math.floor(max(room, 0.0) * MILLI / len(sized) + 1e-6)
        return {p.key: p.demand_milli + each for p in sized}

    def capped(self, pod: PodInfo, held: Held | None) -> Held | None:
        """``held``, plus the nodes where ``pod``'s share of GPU memory would be over its cap."""
        cap = self.caps.get(pod.key)
        if cap is None:
            return held
        over = share_over(self.state, self.framework.prepare(pod.spec), cap)
        if not over.any():
            return held
        return restrict(
            held,
            over,
            f"node(s) had GPUs on which the Pod's share of GPU memory is over the {cap}m "
            "its queue's limit or quota leaves it",
        )

    def claims_fit(self, pod: PodInfo, node: int) -> bool:
        """Whether ``pod``'s claims can be allocated on ``node`` now."""
        return not isinstance(self.book.try_on(pod, self.state.names[node]), Unsatisfiable)

    def allocate_job(self, job: Job, txn: Transaction) -> Failure | None:
        """Place the job's core; a gang whose devices must share an attribute value is tried
        value by value, the value with the fewest free devices first (the fullest that fits)."""
        group = self.groups.get(job.key)
        if group is None or group.device_match is None or self.book.allocator is None:
            return self._allocate_job(job, txn)
        last: Failure | None = None
        try:
            for value in self.book.match_values(group.device_match):
                self.book.device_match = _equals_selector(group.device_match, value)
                mark = txn.mark()
                failure = self._allocate_job(job, txn)
                if failure is None:
                    return None
                txn.rollback(mark)
                last = failure
        finally:
            self.book.device_match = None
        return last or self._allocate_job(job, txn)

    def _allocate_job(self, job: Job, txn: Transaction) -> Failure | None:
        core = job.core
        if len(core) > 1 and (slots := self.slots(core)) < len(core):
            # The cluster cannot take the gang, whatever the domain: say so without trying
            # (a saturated cluster has many such gangs waiting) — with the filters' own
            # reasons where no node can take even one of its pods.
            fitted = int(slots)
            if not fitted:
                spec = self.framework.prepare(core[0].spec)
                result = self.framework.run_filters(self.state, spec, self.held)
                if not result.nodes.size:
                    return Failure(core[0], result.status, 0)
            full = "node(s) had no room left for another pod of the gang"
            status = Status(
                Code.UNSCHEDULABLE, (Reason("GangFit", full, self.state.size),), "GangFit",
                self.state.size,
            )  # fmt: skip
            return Failure(core[fitted], status, fitted)
        group = self.groups.get(job.key)
        if group is not None and levels_for(group, self.snapshot.topology) is not None:
            gang = GangPlacement(self.allocate, job.core, txn, self.held)
            return gang.allocate(group, self.snapshot.topology, self.gang_nodes(job.key))
        return self.allocate(job.core, txn, self.held)

    def slots(
        self,
        pods: tuple[PodInfo, ...],
        state: ClusterState | None = None,
        held: Held | Literal["cycle"] | None = "cycle",
    ) -> float:
        """At most how many of ``pods`` the cluster (or ``state``) could take, off the
        ``held`` nodes (by default the cycle's) — for pods of one plain spec (whole GPUs,
        no claims, no MIG, no pinned CPUs); infinite for others (no bound is known).
        Placing one such pod on a node takes exactly one of the node's slots, so the bound
        is exact for them.

        On the cycle's own state the answer is remembered until the state changes: a
        saturated cluster asks it for many jobs of the same few specs."""
        first = pods[0].spec
        key = self._plain_key(pods)
        if key is None:
            return np.inf
        if held == "cycle":
            held = self.held
        cache_key: Hashable = None
        if state is None:
            state = self.state
            cache_key = (key, len(pods), None if held is None else held.mask.tobytes())
            version = state.changes
            known = self._slots.get(cache_key)
            if known is not None and known[0] == version:
                return known[1]
        answer = self._count_slots(first, len(pods), state, held)
        if cache_key is not None:
            self._slots[cache_key] = (version, answer)
        return answer

    def _plain_key(self, pods: tuple[PodInfo, ...]) -> Hashable | None:
        """The request key of ``pods`` if they are of one plain spec (whole GPUs, no claims,
        no MIG, no pinned CPUs), else None. Remembered per pod group: a pod's key names
        one pod, and a pod's request never changes."""
        memo = (pods[0].key, len(pods))
        if memo in self._plain:
            return self._plain[memo]
        first = pods[0].spec
        key: Hashable | None = first.request_key
        if (
            first.is_gpu_share
            or first.mig_profile is not None
            or first.exclusive_cpu
            or any(p.claims or p.spec.request_key != key for p in pods)
        ):
            key = None
        self._plain[memo] = key
        return key

    def _count_slots(
        self, pod: PodSpec, count: int, state: ClusterState, held: Held | None
    ) -> float:
        spec = self.framework.prepare(pod)
        if self.framework.profile.filters == FIT_FILTERS:
            # These filters take a plain pod on a node its constraints allow exactly when
            # the node has its whole GPUs, CPU and memory free: count without running them.
            nodes = self.static_nodes(spec)
            if held is not None:
                nodes = nodes[~held.mask[nodes]]
        else:
            nodes = self.framework.run_filters(state, spec, held).nodes
        return float(np.minimum(_per_node_slots(spec, state, nodes), count).sum())

    def gang_nodes(self, gang: str) -> list[int]:
        """Nodes where the gang's pods run (at the snapshot or bound in this cycle)."""
        return sorted({self.running[k].node for k in self.gang_running.get(gang, ())})

    def extras_held(self, job: Job) -> Held | None:
        """Where the job's elastic pods may go: its topology domain, if it has to keep one."""
        group = self.groups.get(job.key)
        plan = levels_for(group, self.snapshot.topology) if group is not None else None
        nodes = self.gang_nodes(job.key)
        if plan is None or plan[0] != "required" or not nodes:
            return self.held
        domains = Domains.of(self.state, plan[1][0])
        domain = int(domains.ids[nodes[0]])
        return restrict(
            self.held, domains.outside(domain), f"node(s) outside the gang's {domains.short}"
        )

    def _commit(self, txn: Transaction, pods: tuple[PodInfo, ...]) -> None:
        reserved = txn.reserved()
        for pod, (node, spec, gpus) in zip(pods, reserved, strict=True):
            self._record_binding(pod, node, spec, gpus)

    def _record_binding(
        self, pod: PodInfo, node: int, spec: PodSpec, gpus: tuple[int, ...]
    ) -> None:
        self._add_running(Running(replace(pod, started=self.now), node, gpus, spec))
        self.bound_now.add(pod.key)
        if (
            self.act
            and "reclaim" in self.config.actions
            and pod.queue in self.tree.queues
            and any(self.ratio(q) > 1 + EPS for q in self.tree.paths[pod.queue])
        ):
            self.over_share += 1
        self.bindings.append(
            Binding(
                pod.key,
                self.state.names[node],
                gpus if spec.num_gpu or gpus else None,
                any((node, g) in self.freed_gpus for g in gpus)
                or (not gpus and node in self.evicted_nodes),
                self.book.pod_claims.get(pod.key),
            )
        )

    def _extras(self, job: Job) -> None:
        for pod in job.extras:
            request = pods_request((pod,))
            blocked = self.admission(job, request)
            if blocked is None:
                self.caps = self.share_caps(job, (pod,), request)
                held = self.capped(pod, self.extras_held(job))
                outcome = place(self.framework, self.state, pod.spec, held)
                if isinstance(outcome, Placement):
                    self.state.reserve(outcome.node, outcome.pod, outcome.gpus)
                    self._record_binding(pod, outcome.node, outcome.pod, outcome.gpus)
                    continue
                self._watch(job, pod)
                blocked = outcome.message()
            self.pending.append(
                Pending(pod.key, f"elastic pod beyond minMember of {job.key}: {blocked}")
            )

    def _failure_reason(self, job: Job, failure: Failure) -> str:
        pod, status, fitted = failure.pod, failure.status, failure.fitted
        if failure.reason is not None:
            if len(job.core) == 1:
                return failure.reason
            return f"gang {job.key} of {len(job.core)} pods: {failure.reason}"
        if len(job.core) == 1:
            return status.message()
        return (
            f"gang {job.key} needs {len(job.core)} pods, {fitted} fit; "
            f"pod {pod.key}: {status.message()}"
        )

    def _give_up(
        self,
        job: Job,
        reason: str,
        notes: list[str],
        record: tuple[FloatArray, FloatArray, float] | None,
    ) -> None:
        reason = self._stale(job, reason)
        waited = self.now - job.created
        if waited >= self.config.starvation_after_s and any(p.spec.num_gpu for p in job.core):
            held = self._hold(job)
            if held:
                reason += (
                    f" Waiting {waited:.0f}s (over {self.config.starvation_after_s:g}s): "
                    f"holding node(s) {', '.join(held)} for it."
                )
        self._pend(job, job.pods, reason, notes=notes, record=record)

    def _stale(self, job: Job, reason: str) -> str:
        """A gang running below ``minMember`` that cannot be completed: release it after the
        grace period (the reason says which)."""
        return self._release_stale(job.key, reason) if job.key in self.groups else reason

    def _release_stale(self, gang: str, reason: str) -> str:
        group = self.groups[gang]
        running = len(self.gang_running.get(gang, ()))
        if not 0 < running < group.min_member:
            return reason
        stale = group.stale_since
        if stale is not None and self.now - stale >= self.config.stale_grace_s:
            for key in sorted(self.gang_running[gang]):
                released = self._remove_running(key)
                self.state.release(released.node, released.spec, released.gpus)
                self._freed(released)
                self.evictions.append(Eviction(key, "stale-gang", gang))
            return (
                f"gang {gang} had {running} of {group.min_member} pods running for "
                f"{self.now - stale:.0f}s (grace {self.config.stale_grace_s:g}s); its "
                f"running pods were released. {reason}"
            )
        since = "now" if stale is None else f"{self.now - stale:.0f}s ago"
        return (
            f"gang {gang} has {running} of {group.min_member} pods running and is stale "
            f"since {since}; its pods are released after {self.config.stale_grace_s:g}s "
            f"unless it is completed. {reason}"
        )

    def _freed(self, running: Running) -> None:
        """Remember what an eviction frees: bindings onto it are pipelined."""
        self.evicted_nodes.add(running.node)
        self.freed_gpus.update((running.node, g) for g in running.gpus)

    def _hold(self, job: Job) -> list[str]:
        """Hold, until the job is tried again, nodes that could run the starving job's pods."""
        taken = [m for m, _ in self.holds.values()]
        mask = np.logical_or.reduce(taken) if taken else np.zeros(self.state.size, dtype=np.bool_)
        mine = np.zeros(self.state.size, dtype=np.bool_)
        names = []
        for pod in job.core:
            possible = self.static_nodes(pod.spec)
            possible = possible[~mask[possible]]
            if possible.size == 0:
                continue
            free = self.state.gpu_idle[possible]
            node = int(possible[np.argmax(free)])
            mask[node] = mine[node] = True
            names.append(self.state.names[node])
        if names:
            self.holds[job.key] = (mine, job_gpus(job))
        return names

    def static_nodes(self, spec: PodSpec) -> IntArray:
        """Nodes that could run ``spec`` if they were empty (its constraints allow them)."""
        key = spec.request_key
        nodes = self._static.get(key)
        if nodes is None:
            nodes = self.framework.run_filters(self.empty, self.framework.prepare(spec)).nodes
            self._static[key] = nodes
        return nodes

    def _pend(
        self,
        job: Job,
        pods: tuple[PodInfo, ...],
        reason: str,
        *,
        notes: list[str] | tuple[str, ...] = (),
        record: tuple[FloatArray, FloatArray, float] | None = None,
    ) -> None:
        self.pending.extend(Pending(p.key, reason) for p in pods)
        self._record(job, record, "pending", notes)

    def _record(
        self,
        job: Job,
        record: tuple[FloatArray, FloatArray, float] | None,
        outcome: str,
        notes: list[str] | tuple[str, ...],
    ) -> None:
        if not self.config.records:
            return
        if record is None:
            record = (vector(), vector(), 0.0)
        keys = tuple(p.key for p in job.pods)
        self.records.append(
            JobRecord(job.key, job.queue, job.priority, keys, *record, outcome, tuple(notes))
        )

    def _watch(self, job: Job, pod: PodInfo) -> None:
        """Keep, for explain, why each node rejected ``pod`` (the first of its job that failed)."""
        if any(p.key in self.config.watch for p in job.pods):
            reasons = self.framework.node_reasons(self.state, self.framework.prepare(pod.spec))
            self.node_reasons[pod.key] = tuple(zip(self.state.names, reasons, strict=True))

    # -- making room --------------------------------------------------------------------

    def make_room(self, job: Job, request: FloatArray, notes: list[str]) -> Plan | None:
        """The first action that makes room for ``job``, or None (notes say why not).

        A search that failed for a job of the same shape, queue and priority fails again as
        long as no capacity was freed since: later bindings only take capacity, and pods
        bound in this cycle are never victims. Reclaim is also retried when a queue went
        over its fair share (its pods may have become reclaimable). So the many identical
        jobs of a saturated cluster cost one search, not one each (KAI skips such jobs
        alike). Preemption and reclaim depend on the cycle's time (min runtimes) and fair
        shares, so their failures last one cycle; consolidation depends only on what runs
        where, so its failures last until capacity is freed, across cycles.

        An action that could not make room even by evicting every pod it may is not
        searched for at all (:meth:`VictimSearch.hopeless`) — in no topology domain.
        """
        actions = self._room_actions(job, request, notes)
        if not actions:
            return None
        base = self.held
        try:
            for where, held in self._room_restrictions(job):
                self.held = held
                tried: list[str] = []
                plan = self._make_room_within(job, request, tried, actions)
                notes.extend(f"{where}{note}" for note in tried)
                if plan is not None:
                    return plan
        finally:
            self.held = base
        return None

    def _room_restrictions(self, job: Job) -> list[tuple[str, Held | None]]:
        """Where victims may be sought: inside the largest topology domains, or anywhere
        (with the prefix its notes get)."""
        group = self.groups.get(job.key)
        plan = levels_for(group, self.snapshot.topology) if group is not None else None
        if plan is None:
            return [("", self.held)]
        kind, levels = plan
        domains = Domains.of(self.state, levels[0])
        inside = domains.ids >= 0
        capacity = np.bincount(
            domains.ids[inside], weights=self.state.gpu_count[inside], minlength=len(domains.names)
        )
        best = sorted(range(len(domains.names)), key=lambda d: (-capacity[d], domains.names[d]))
        out: list[tuple[str, Held | None]] = [
            (
                f"in {domains.short} {domains.label(d)}: ",
                restrict(self.held, domains.outside(d), f"node(s) outside {domains.short}"),
            )
            for d in best[:MAX_ROOM_DOMAINS]
        ]
        return [*out, ("anywhere: ", self.held)] if kind == "preferred" else out

    def _room_actions(self, job: Job, request: FloatArray, notes: list[str]) -> list[str]:
        """The actions that might make room for ``job`` (the others' reasons go to notes)."""
        search = VictimSearch(self, job)
        actions: list[str] = []
        for action in self.config.actions:
            shape = self._room_shape(job, action)
            note = self._room_failure(action, shape)
            if note is None and (note := search.hopeless(action, request)) is not None:
                self.room_failures[action, shape] = (self._room_epoch(action), note)
            if note is None:
                actions.append(action)
            else:
                notes.append(f"{action}: {note}")
        return actions

    def _make_room_within(
        self, job: Job, request: FloatArray, notes: list[str], actions: list[str]
    ) -> Plan | None:
        search = VictimSearch(self, job)
        for action in actions:
            shape = self._room_shape(job, action)
            known = self._room_failure(action, shape)
            if known is not None:
                notes.append(f"{action}: {known}")
                continue
            plan, note = search.run(action, request)
            notes.append(f"{action}: {note}")
            if plan is not None:
                return plan
            self.room_failures[action, shape] = (self._room_epoch(action), note)
        return None

    def _room_shape(self, job: Job, action: str) -> Hashable:
        """What ``action``'s search for ``job`` depends on besides the epoch, off the held
        nodes (consolidation moves any queue's pods, for a job of any queue)."""
        return (
            None if action == "consolidate" else (job.queue, job.priority, job.can_preempt),
            tuple(p.spec.request_key for p in job.core),
            tuple(k for p in job.core for k in p.claims),
            None if self.held is None else self.held.mask.tobytes(),
        )

    def _room_epoch(self, action: str) -> Hashable:
        if action == "consolidate":
            return self.consolidation_epoch()
        return (self.cycles, self.released, self.over_share if action == "reclaim" else 0)

    def _room_failure(self, action: str, shape: Hashable) -> str | None:
        """Why ``action`` failed for a job of ``shape`` in this epoch, if it did."""
        known = self.room_failures.get((action, shape))
        return known[1] if known is not None and known[0] == self._room_epoch(action) else None

    def consolidation_epoch(self) -> Hashable:
        """Consolidation fails again until capacity is freed or new pods may be moved."""
        return ("consolidate", self.released, self.pool.generation)

    def _apply(self, job: Job, plan: Plan) -> None:
        for victim in plan.victims:
            self._remove_running(victim.pod.key)
            self._freed(victim)
            self.evictions.append(Eviction(victim.pod.key, plan.action, job.key))
        for pod, (node, spec, gpus) in zip(job.core, plan.placements, strict=True):
            self._record_binding(pod, node, spec, gpus)
        for moved, (node, spec, gpus) in plan.moved:
            self._record_binding(moved.pod, node, spec, gpus)


def run_cycle(snapshot: Snapshot, now: float, config: CycleConfig | None = None) -> CycleResult:
    """Schedule ``snapshot`` once at time ``now`` (seconds since the epoch)."""
    return Cycle(snapshot, config or CycleConfig(), now).run()
