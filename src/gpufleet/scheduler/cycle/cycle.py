"""One scheduling cycle: queues by fair share -> per job admit, allocate, else make room.

The walk of one pending job, top to bottom (ARCHITECTURE.md, "Cycle"):

1. :meth:`Cycle.run` serves the queues in fair-share order (``order.py``), one job at a
   time, each queue's jobs by priority, then age (``backlog.py``). A job that cannot be
   placed is set aside — it never blocks the jobs behind it or other queues.
2. :meth:`Cycle.schedule`: admission (``admission.py``: the queues' limits;
   non-preemptible work only within quota), a PodGroup's ``minResources`` against its
   queues and the cluster's free resources (``min_resources.py``: a gang short of them is
   not tried), then allocation of the job's core as one transaction, all pods or none
   (``placement/allocate.py``).
3. If that fails and evicting could help, the profile's actions make room (``room.py``
   with ``room/consolidate.py``, ``reclaim.py``, ``preempt.py`` over the one victim
   search of ``victims.py``); a plan found is applied.
4. Otherwise the job stays pending with its reason; a gang running below ``minMember`` is
   released after its grace period (``cycle/stale_gang.py``); a job that has waited past
   the starvation threshold reserves nodes, those no older starving job has (``holds.py``).
5. Bindings and evictions are recorded on the ledger (``ledger.py``) as they are decided
   and returned as a :class:`~gpufleet.scheduler.api.outcome.CycleResult`.

The cycle works on the ledger it is given — the cluster cache's, in a session
(``session.py``) — and its per-cycle state (order, holds, failure memo, result) is its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpufleet.framework.runtime import Exclusion, Framework
from gpufleet.framework.status import Code
from gpufleet.model.workload import (
    PodInfo,
    pods_request,
    vector,
)
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.api.outcome import (
    Binding,
    CycleResult,
    Eviction,
    Note,
    Pending,
    Reconfiguration,
    Why,
    WhyCode,
    why,
)
from gpufleet.scheduler.api.transaction import Running, Transaction
from gpufleet.scheduler.cycle.commit import Commit
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.dispatch import Dispatcher
from gpufleet.scheduler.cycle.journal import (
    Journal,
    Record,
    failure_reason,
    incomplete_reason,
    set_aside_strays,
)
from gpufleet.scheduler.cycle.stale_gang import StaleGangs
from gpufleet.scheduler.placement.allocate import Placer
from gpufleet.scheduler.placement.domains import Domains
from gpufleet.scheduler.placement.fit import Fit
from gpufleet.scheduler.placement.place import Placement, place
from gpufleet.scheduler.queues.backlog import Backlog
from gpufleet.scheduler.queues.holds import Holds, drained_by, provisioned_nodes
from gpufleet.scheduler.queues.min_resources import MinResources
from gpufleet.scheduler.room.preempt import NAME as PREEMPT
from gpufleet.scheduler.room.protocols import Means, Round
from gpufleet.scheduler.room.room import Room
from gpufleet.scheduler.room.under_limit import UnderLimit
from gpufleet.scheduler.state.fairshare import EPS
from gpufleet.scheduler.state.ledger import Ledger
from gpufleet.scheduler.state.pool import VictimPool

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.pod import PodSpec
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.room.protocols import Plan


LIMIT = WhyCode.QUEUE_LIMIT


class Cycle:
    """The working state of one cycle over a ledger (``gpufleet/compose.py`` has the entry
    points that put one together)."""

    def __init__(
        self,
        config: CycleConfig,
        now: float,
        *,
        components: Components,
        ledger: Ledger,
        pool: VictimPool,
        backlog: Backlog,
        framework: Callable[[], Framework],
        pending: Sequence[PodInfo] = (),
        topology: tuple[str, ...] = (),
    ) -> None:
        """A cycle at ``now`` over ``ledger``, which it changes as it decides, with the
        plugins, policies and actions of ``components``: ``pool`` the pods that may be
        evicted, ``backlog`` the pending jobs (``pending`` their pods, as read: those blocked
        are reported), ``framework`` builds the policy's plugins when a pod is first placed,
        ``topology`` the cluster's topology levels. A session opens one on the cache
        (``session.py``; a snapshot's cache too, ``snapshot_session``). A replay keeps one
        Cycle for a whole trace and calls :meth:`begin` before each cycle.
        """
        self.config, self.now, self.pending = config, now, tuple(pending)
        self.ledger = ledger
        self.stale = StaleGangs(ledger, config.stale_grace_s)
        """The release of gangs below ``minMember`` (its ``since`` and ``leaving`` are the
        session's to set)."""
        self.cycles = 0
        self.order = components.queue_rule(ledger)
        self.admission = components.admission_rule(ledger, config.non_preemptible_priority)
        self.min_resources = MinResources(ledger)
        self.holds = Holds(config.expected_duration_s)
        self._drain: tuple[tuple[float, int, int, int], FloatArray] | None = None
        actions = [components.actions[name] for name in config.actions]
        rule = components.topology_rule(topology)
        self.room = Room(actions, rule)
        self.placer = Placer(ledger, framework, components.resource_filters, rule)
        self.round = Round()
        """This cycle's time, number and counts, as making room reads them."""
        if self.ledger.state.mig is not None:
            self.ledger.state.mig.mark_baseline()  # running pods' slices are the cluster's own
        pool.at(now)
        self.pool = pool
        self.backlog = backlog
        self.means = Means(
            ledger, pool, self.placer, self.order, self.round, restart_s=config.restart_s
        )
        self.under_limit = UnderLimit(self.means, self.admission)
        self.dispatcher = Dispatcher(
            backlog,
            self.order,
            self.holds,
            self.room,
            self.means,
            strict_fifo=config.strict_fifo,
            records=config.records,
            starvation_after_s=config.starvation_after_s,
        )
        self.commit = Commit(ledger, pool, now)
        self._start(now)

    def begin(self, now: float, *, act: bool = True) -> None:
        """Start another cycle at ``now`` on the state the previous ones left: the pods they
        bound become possible victims, fair shares follow the backlog. Without ``act`` the
        cycle only places jobs (a replay evicts on its periodic cycle only)."""
        fresh = [self.ledger.running[b.pod] for b in self.bindings if b.pod in self.ledger.running]
        self.pool.add([r for r in fresh if self.ledger.evictable(r.pod)])
        self.pool.at(now)
        self.round.act = act
        for key in [k for k in self.holds.reservations if k not in self.backlog]:
            self.holds.release(key)  # it was bound, or it left
        self._start(now)

    def _start(self, now: float) -> None:
        self.now = now
        self.cycles += 1
        self.order.start(self.backlog.demand, self.ledger.capacity)
        self.commit = Commit(self.ledger, self.pool, now)
        self.journal = Journal(records=self.config.records, watch=self.config.watch)
        turn = self.round
        turn.now, turn.cycles, turn.over_share = now, self.cycles, 0
        turn.bound_now = self.commit.bound_now
        self.room.start_cycle()
        self.placer.caps = {}
        self._stale_judged: set[str] = set()
        """Gangs below ``minMember`` whose stale-gang release this cycle judged."""
        self._reserved = False
        """Whether the job being tried holds a reservation after its try."""

    # -- what the actions read ----------------------------------------------------------

    @property
    def bindings(self) -> list[Binding]:
        return self.commit.bindings

    @property
    def evictions(self) -> list[Eviction]:
        return self.commit.evictions

    @property
    def act(self) -> bool:
        """Whether this cycle may evict (consolidate, reclaim, preempt)."""
        return self.round.act

    @property
    def fair(self) -> dict[str, FloatArray]:
        return self.order.fair

    @property
    def framework(self) -> Framework:
        """The policy's plugins (built on first use)."""
        return self.placer.framework

    @property
    def fit(self) -> Fit:
        return self.placer.fit

    def finish(self, key: str) -> Running:
        """Pod ``key`` ended (its job completed, or it was stopped): free what it held."""
        running = self.commit.drop(key)
        self.ledger.state.release(running.node, running.spec, running.gpus)
        return running

    # -- the cycle ----------------------------------------------------------------------

    def run(self) -> CycleResult:
        backlog = self.backlog
        backlog.start()
        self.journal.pending.extend(
            Pending(p.key, why(WhyCode.BLOCKED, detail=p.blocked))
            for p in self.pending
            if p.blocked and p.managed
        )
        unknown = [q for q in backlog.queues() if q not in self.ledger.tree.queues]
        for queue in unknown:
            problem = self.ledger.invalid_queues.get(queue)
            invalid = problem.text() if problem is not None else ""
            for job in backlog.behind(queue):
                reason = why(WhyCode.QUEUE_MISSING, queue=job.queue, invalid=invalid)
                self.journal.pend(job, job.pods, reason)
        for gang in sorted(self.ledger.partial):
            if gang not in backlog:
                self._stale_judged.add(gang)
                self.stale.release(self.commit, self.now, gang, None)
        self.dispatcher.serve(self.journal, self.evictions, self.schedule)
        # A gang whose job was not tried (its class failed before and nothing it waits on
        # changed) cannot be completed in this cycle either: its grace runs all the same.
        for gang in sorted(self.ledger.partial - self._stale_judged):
            self.stale.release(self.commit, self.now, gang, None)
        mig = self.ledger.state.mig
        reconfigurations = tuple(
            Reconfiguration(self.ledger.state.names[node], gpu, tuple(layout))
            for node, gpu, layout in (mig.reconfigurations() if mig is not None else ())
        )
        return CycleResult(
            tuple(self.bindings),
            tuple(self.evictions),
            tuple(sorted(self.journal.pending, key=lambda p: p.pod)),
            tuple(self.journal.records),
            self.journal.node_reasons,
            dict(self.fair) if self.config.records else {},
            reconfigurations,
            self.ledger.book.status(),
        )

    def settled(self) -> bool:
        """Whether a cycle now, without evicting, would do nothing (see ``dispatch.py``)."""
        return self.dispatcher.settled()

    def schedule(self, job: Job) -> bool:
        """Place ``job`` (or make room for it); False if it stays pending."""
        self._reserved = False
        held = self.holds.against(job, self.now)
        for kept in (
            self.admission.kept_nodes(job),
            provisioned_nodes(self.ledger.state, job.key),
        ):
            if kept is not None:
                held = kept if held is None else held.joined(kept)
        placed = self._schedule(job, held)
        if placed or not self._reserved:
            self.holds.release(job.key)  # bound, or pending for a reason no room cures
        return placed

    def _schedule(self, job: Job, held: Exclusion | None) -> bool:
        if job.strays:
            job = set_aside_strays(job, self.ledger.groups.get(job.key), self.journal)
        record = None
        if self.config.records:
            fair = self.fair.get(job.queue, vector())
            record = (fair, self.ledger.alloc[job.queue].copy(), self.order.ratio(job.queue))
        notes: list[Note] = []
        core = job.core
        if job.incomplete:
            reason = incomplete_reason(job)
            self.journal.pend(job, job.pods, self._stale(job, reason), notes=notes, record=record)
            return False
        if core:
            request = pods_request(core)
            blocked = (
                self.admission.blocked(job, request)
                or self.min_resources.queue_short(job)
                or self.ledger.claims_full(job.core)
            )
            plan = self._under_limit(job, request, blocked, held) if blocked is not None else None
            if plan is not None:
                self._apply(job, plan)
                self._extras(job, held)
                self.journal.record(job, record, "bound", notes)
                return True
            if blocked is not None:
                self.journal.pend(
                    job, job.pods, self._stale(job, blocked), notes=notes, record=record
                )
                return False
            short = self.min_resources.cluster_short(job)
            if short is not None:
                # Not tried, nor room made for it; but held nodes let the capacity it
                # waits for gather, as for a job that was tried.
                self._give_up(job, short, notes, record)
                return False
            self.placer.caps = self.admission.share_caps(job, core, request)
            txn = Transaction(self.ledger.state)
            failure = self.placer.job(job, txn, held)
            if failure is not None:
                self.journal.watch(job, failure.pod, self.framework, self.ledger.state)
                txn.rollback()
                plan = None
                if self.act and failure.status.code is not Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    plan = self.room.make(self.means, job, request, notes, held)
                if plan is None:
                    self._give_up(job, failure_reason(job, failure), notes, record)
                    return False
                self._apply(job, plan)
            else:
                for pod, (node, spec, gpus) in zip(core, txn.reserved(), strict=True):
                    self._bound(pod, node, spec, gpus)
        self._extras(job, held)
        self.journal.record(job, record, "bound" if core else "elastic", notes)
        return True

    def _under_limit(
        self, job: Job, request: FloatArray, blocked: Why, held: Exclusion | None
    ) -> Plan | None:
        """Room under the job's queue limit, made by preempting its queue's lower-priority
        work (``room/under_limit.py``) where the profile preempts, or None."""
        if not self.act or PREEMPT not in self.config.actions or blocked.code is not LIMIT:
            return None
        if self.min_resources.queue_short(job) or self.ledger.claims_full(job.core):
            return None  # held back by more than the limit: evicting would not start it
        self.placer.caps = self.admission.share_caps(job, job.core, request)
        return self.under_limit.plan(job, request, held)

    def _extras(self, job: Job, held: Exclusion | None) -> None:
        for pod in job.extras:
            request = pods_request((pod,))
            blocked = self.admission.blocked(job, request) or self.ledger.claims_full((pod,))
            if blocked is None:
                self.placer.caps = self.admission.share_caps(job, (pod,), request)
                where = self.placer.capped(pod, self.placer.extras_held(job, held, pod))
                outcome = place(self.framework, self.ledger.state, pod.spec, where)
                if isinstance(outcome, Placement):
                    self.ledger.state.reserve(outcome.node, outcome.pod, outcome.gpus)
                    self._bound(pod, outcome.node, outcome.pod, outcome.gpus)
                    continue
                self.journal.watch(job, pod, self.framework, self.ledger.state)
                blocked = why(WhyCode.UNSCHEDULABLE, status=outcome)
            reason = why(WhyCode.ELASTIC, job=job.key, then=blocked)
            self.journal.pending.append(Pending(pod.key, reason))

    def _apply(self, job: Job, plan: Plan) -> None:
        for pod in self.commit.apply(job.key, job.core, plan):
            self._count_share(pod)

    def _bound(self, pod: PodInfo, node: int, spec: PodSpec, gpus: tuple[int, ...]) -> None:
        """Record that ``pod`` runs on ``node`` (its capacity is reserved already)."""
        self.commit.bind(pod, node, spec, gpus)
        self._count_share(pod)

    def _count_share(self, pod: PodInfo) -> None:
        """Count a binding that left the pod's queue above its fair share, where an action
        depends on fair shares (``over_share``)."""
        if (
            self.act
            and self.room.watches_fair_share
            and pod.queue in self.ledger.tree.queues
            and any(self.order.ratio(q) > 1 + EPS for q in self.ledger.tree.paths[pod.queue])
        ):
            self.round.over_share += 1

    # -- pending, and why ---------------------------------------------------------------

    def _give_up(self, job: Job, reason: Why, notes: list[Note], record: Record | None) -> None:
        reason = self._stale(job, reason)
        waited = self.now - job.created
        after = self.config.starvation_after_s
        if waited >= after and any(p.spec.num_gpu for p in job.core):
            ledger = self.ledger
            group = ledger.groups.get(job.key)
            level = group.topology_required if group is not None else None
            held = self.holds.hold(
                job,
                ledger.state,
                self.fit.static_nodes,
                self._drained(),
                now=self.now,
                domains=Domains.of(ledger.state, level).ids if level else None,
            )
            if held is not None and held.job == job.key:
                self._reserved = True
                reason = why(
                    WhyCode.STARVING,
                    waited_s=waited,
                    after_s=after,
                    nodes=held.nodes,
                    start_in_s=held.start - self.now,
                    then=reason,
                )
        self.journal.pend(job, job.pods, reason, notes=notes, record=record)

    def _drained(self) -> FloatArray:
        """When each node's GPU pods are expected to have ended (``holds.drained_by``),
        found once per state of the ledger: several starving jobs may reserve in a cycle."""
        state = self.ledger.state
        key = (self.now, state.changes, self.ledger.started, self.ledger.released)
        if self._drain is None or self._drain[0] != key:
            free_at = drained_by(
                state, self.ledger.running.values(), self.now, self.config.expected_duration_s
            )
            self._drain = (key, free_at)
        return self._drain[1]

    def _stale(self, job: Job, reason: Why) -> Why:
        """A gang running below ``minMember`` that cannot be completed is released after the
        grace period (the reason says which)."""
        if job.key not in self.ledger.groups:
            return reason
        self._stale_judged.add(job.key)
        stale = self.stale.release(self.commit, self.now, job.key, reason)
        assert stale is not None
        return stale
