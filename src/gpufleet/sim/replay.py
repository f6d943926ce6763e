"""Time-driven replay: jobs arrive, wait, run and finish on a simulated clock.

One scheduling core, two clocks (STYLE.md): the replay keeps the cluster in a
:class:`~gpufleet.scheduler.state.cache.ClusterCache`, as the what-if and the live scheduler do,
and tells it what happens as watch events would: a job's arrival is its PodGroup (a gang)
and its pending pods ``ADDED``; a binding a cycle decided is confirmed by its pod
``MODIFIED`` with its node and GPUs; a completion is its pods (and PodGroup) ``DELETED``.
A :class:`~gpufleet.scheduler.cycle.session.Scheduler` over the cache runs the same cycle as
``gpufleet schedule`` whenever something happens — jobs arrive, jobs finish — and on a
period while work is pending (so that min-runtime protection can expire into reclaim).
Events come off a heap keyed ``(time, priority, seq)``; completions go before arrivals of
the same second, so that a job arriving as another ends finds its GPUs free.

A job is a gang of identical pods. It starts when all its pods are bound and runs for its
duration; then its pods leave. A job whose pods are evicted (preempted, reclaimed, moved
by consolidation) loses the work of its run since its last checkpoint: with a checkpoint
interval (``checkpoint_interval_s``, counted from the start of each run) it keeps what it
saved, without one it reruns from the start. A restarted run first spends ``restart_s``
making no progress (loading its checkpoint); that time is lost too. Each pod says both on
its ``progress`` (``model/progress.py``), as the annotations ``gpufleet.io/checkpoint-interval``
and ``gpufleet.io/expected-duration`` do in a cluster: the expected duration of a job is what
its tenant's finished jobs took (the mean of the last :data:`HISTORY` of them — run times
are heavy-tailed, and the median would promise reserved nodes far too early — else the
cycle's default) — never its own duration from the trace. An evicted pod
stops counting in the cache when the cycle evicts it; then its ``DELETED`` event comes,
and the job goes back to its queue in its old place (new pending pods, created when the
job arrived), to run again from its last checkpoint; a pod moved by consolidation is bound
again elsewhere by the same cycle, its move counted on its ``progress``. What is measured
is measured by :class:`~gpufleet.metering.meter.Meter`, from the facts of these events.

An elastic job (``ReplayJob.min_pods`` below its pods; its PodGroup's ``minMember``) starts
when ``min_pods`` of its pods are bound and runs at the speed of the pods it has:
:func:`elastic_rate`, the speed of ``n`` of ``N`` pods relative to all of them. Its
other pods join as they bind; the cycle may evict them again (reclaim takes pods beyond
``minMember`` first) while the job runs on. Each resize after the start pauses the job for
the restart time, the pods re-forming their group from the state in memory (an elastic
framework's re-rendezvous: no work is lost); the pause of a shrink is charged to the evicting
action as lost GPU-time. Work is counted in seconds of the job at full size: a job's
``duration_s`` is its run time with every pod, and its checkpoints save the work done by
their time.

Given a price sheet, the replay also costs what ran: a
:class:`~gpufleet.metering.runs.RunLog` is told the same facts (a pod starts on a node,
stops, is evicted), and after the run its runs are charged over ``[0, end)`` against the
nodes' prices (``sim/costing.py``, by the cost layer): the run's
:attr:`ReplayRun.cost`, and :attr:`Replay.allocation` for whoever writes the runs out.

Policies (:data:`~gpufleet.plugins.registry.REPLAY_POLICIES`, in the one catalogue beside
the placement policies they run) are configurations of the one cycle, not code paths.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.compose import new_cache
from gpufleet.cost.nodes import price_nodes
from gpufleet.metering.meter import Meter
from gpufleet.metering.runs import RunLog
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.progress import Progress as PodProgress
from gpufleet.model.results import ReplayRun
from gpufleet.model.workload import (
    DEFAULT_QUEUE,
    GroupSpec,
    PodInfo,
    QueueSpec,
    ReplayJob,
    vector,
)
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Scheduler
from gpufleet.scheduler.state.changes import Event, Topology
from gpufleet.sim.clock import ARRIVAL, COMPLETION, PERIODIC, EventQueue
from gpufleet.sim.costing import cost_replay

if TYPE_CHECKING:
    from gpufleet.cost.allocation import CostAllocation
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.costs import ReplayCost
    from gpufleet.model.pod import PodSpec
    from gpufleet.plugins.registry import ReplayPolicy
    from gpufleet.scheduler.api.outcome import Binding, Eviction

SAMPLES = 400
"""Timeline samples over the replayed span (for the plots); a replay that drains past twice
the span keeps between this many and twice as many, evenly spaced (``Meter.max_samples``)."""

PROGRESS_EVERY = 2048
"""Event batches between progress reports."""

Progress = Callable[[float], None]
"""Called with the simulated time reached."""


def pod_names(job: ReplayJob) -> list[str]:
    return [f"{job.name}/{k}" for k in range(job.pods)]


DOUBLING_EFFICIENCY = 0.9
"""An elastic job's speed per doubling of its pods: twice the pods run 1.8 times as fast."""
SCALING_EXPONENT = math.log2(2 * DOUBLING_EFFICIENCY)


def elastic_rate(running: int, pods: int) -> float:
    """The speed of a job running ``running`` of its ``pods`` pods, relative to all of them
    (:data:`DOUBLING_EFFICIENCY` per doubling: ``(running / pods) ** log2(1.8)``)."""
    return 1.0 if running >= pods else (running / pods) ** SCALING_EXPONENT


HISTORY = 100
"""Finished jobs per tenant whose durations estimate the next one's."""

RECLAIM_MIN_RUNTIME_S = 1800.0
"""Default queues protect a run for 30 minutes from reclaim and preemption."""


def tenant_queues(
    jobs: Sequence[ReplayJob], capacity_gpus: float, min_runtime_s: float = RECLAIM_MIN_RUNTIME_S
) -> tuple[QueueSpec, ...]:
    """One queue per tenant, its GPU quota its share of the trace's GPU-time demand."""
    demand: dict[str, float] = {}
    for job in jobs:
        demand[job.queue] = demand.get(job.queue, 0.0) + job.gpus * job.duration_s
    total = sum(demand.values()) or 1.0
    return tuple(
        QueueSpec(
            name,
            quota=vector(capacity_gpus * demand[name] / total),
            quota_set=(True, False, False),
            preempt_min_runtime_s=min_runtime_s,
            reclaim_min_runtime_s=min_runtime_s,
        )
        for name in sorted(demand)
    )


@dataclass(slots=True)
class _Progress:
    """Where one job stands: its current run, the work it saved, its moves."""

    attempt: int = 0
    bound: int = 0
    saved_s: float = 0.0
    """Work saved by checkpoints of earlier runs: a run needs only the rest."""
    run_start: float = math.nan
    """When the current run started (all its pods bound); NaN: not running."""
    delay_s: float = 0.0
    """The restart time of the current run, before it makes progress."""
    blame: str = ""
    """The action whose eviction made the current run a restart."""
    moves: int = 0
    moved_at: float | None = None
    epoch: int = 0
    """Which scheduled completion is the current one (a resize or an eviction moves it)."""
    rate: float = 1.0
    """The current run's speed (:func:`elastic_rate`)."""
    done_s: float = 0.0
    """Work the current run did by ``mark`` (seconds of the job at full size)."""
    mark: float = 0.0
    resume: float = 0.0
    """When the current run (again) makes progress: after its restart or resize pause."""
    checkpoint_done_s: float = 0.0
    """Work the current run had done at its last checkpoint."""
    checkpoint_at: float = 0.0
    """When that checkpoint was taken (the run's start before the first)."""


@dataclass(slots=True)
class _History:
    """Per tenant, the durations of its last finished jobs: what its next job is expected
    to take (their mean; ``default_s`` before any finished)."""

    default_s: float
    durations: dict[str, deque[float]] = field(default_factory=dict)
    known: dict[str, float] = field(default_factory=dict)

    def finished(self, tenant: str, duration_s: float) -> None:
        self.durations.setdefault(tenant, deque(maxlen=HISTORY)).append(duration_s)
        self.known.pop(tenant, None)

    def expected_s(self, tenant: str) -> float:
        estimate = self.known.get(tenant)
        if estimate is None:
            past = self.durations.get(tenant)
            estimate = statistics.fmean(past) if past else self.default_s
            self.known[tenant] = estimate
        return estimate


class Replay:
    """The replay of ``jobs`` on ``nodes`` under ``policy`` (see the module docstring);
    ``other_pods``: the pods an edge adds besides the trace's (their shapes are part of the
    workload placement expects, as the jobs' are); costed under ``prices``, if given (a node
    the sheet cannot price is a :class:`~gpufleet.cost.nodes.UnpricedNodeError` error here,
    before anything runs)."""

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        jobs: Sequence[ReplayJob],
        policy: ReplayPolicy,
        *,
        queues: Sequence[QueueSpec] = (),
        topology: tuple[str, ...] = (),
        seed: int = 0,
        period_s: float = 300.0,
        workload: str = "",
        prices: PriceSheet | None = None,
        checkpoint_interval_s: float = 0.0,
        restart_s: float = 0.0,
        other_pods: Sequence[PodSpec] = (),
    ) -> None:
        self.workload, self.seed = workload, seed
        self.checkpoint_interval_s, self.restart_s = checkpoint_interval_s, restart_s
        self.jobs = sorted(jobs, key=lambda j: (j.arrival_s, j.name))
        self.policy = policy
        self.period_s = period_s
        self.index = {job.name: i for i, job in enumerate(self.jobs)}
        self.progress = [_Progress() for _ in self.jobs]
        capacity = float(sum(n.gpus for n in nodes))
        tenants = tuple(queues) or tenant_queues(self.jobs, capacity)
        known = {q.name for q in tenants}
        self.queue_of = {
            job.queue: job.queue if job.queue in known else DEFAULT_QUEUE for job in self.jobs
        }
        if DEFAULT_QUEUE not in known and DEFAULT_QUEUE in self.queue_of.values():
            tenants = (*tenants, QueueSpec(DEFAULT_QUEUE))
        self.tenants = tenants
        """The queues metered: one per tenant, whether or not the cycle has them."""
        config = CycleConfig(
            policy=policy.placement,
            actions=policy.actions,
            strict_fifo=policy.strict_fifo,
            starvation_after_s=policy.starvation_after_s,
            restart_s=restart_s,
            records=False,
        )
        self.history = _History(config.expected_duration_s)
        self.topology = topology
        self.cache = new_cache(config, workload=[*(job.spec for job in self.jobs), *other_pods])
        """The cluster: what runs is its ledger."""
        self.cache.apply_all(Event("ADDED", "Node", n) for n in nodes)
        if policy.tenant_queues:
            self.cache.apply_all(Event("ADDED", "Queue", q) for q in self.tenants)
        if topology:
            self.cache.apply(Event("ADDED", "Topology", Topology("default", topology)))
        self.scheduler = Scheduler(self.cache, config, rng=np.random.default_rng(seed))
        self.capacity = capacity
        self.meter: Meter
        """Meters the run (made by :meth:`run`, which knows how far it goes)."""
        self.pod_job: dict[str, int] = {}
        self.events: EventQueue[tuple[int, int]] = EventQueue()
        for i, job in enumerate(self.jobs):
            self.events.push(job.arrival_s, ARRIVAL, (i, 0))
        self.other_events = len(self.jobs)
        self.periodic = False
        self.timed = bool(policy.actions) or math.isfinite(policy.starvation_after_s)
        """Whether waiting alone can change what the cycle does (min runtimes expiring into
        reclaim, starvation): then a periodic cycle runs while jobs wait."""
        self.prices = prices
        self.priced = None if prices is None else price_nodes(nodes, prices)
        self.node_index = {n.name: k for k, n in enumerate(nodes)}
        self.runlog = None if prices is None else RunLog()
        """The runs of pods on nodes, to cost (only with a price sheet)."""
        self.finished = bytearray(len(self.jobs))
        """Per job: 1 once it finished."""
        self.shrinks = 0
        """Times a running elastic job lost pods to an eviction and ran on."""
        self.evicted_gpus = 0.0
        """GPUs of the trace's pods that the cycles evicted (moved ones included)."""
        self.allocation: CostAllocation | None = None
        """The runs costed over the replay's window (after :meth:`run`, with prices)."""

    # -- jobs in and out of the cluster --------------------------------------------------

    def _cycle_queue(self, job: ReplayJob) -> str:
        return self.queue_of[job.queue] if self.policy.tenant_queues else DEFAULT_QUEUE

    def _tenant(self, job: ReplayJob) -> str:
        return self.queue_of[job.queue]

    def _gang(self, job: ReplayJob) -> bool:
        """Whether ``job`` is a PodGroup (else its pods are placed one at a time)."""
        return self.policy.gangs and job.pods > 1

    def _arrive(self, i: int, now: float) -> None:
        job = self.jobs[i]
        self.meter.arrived(job.name, self._tenant(job), now, gpus=job.gpus)
        if job.gpus > self.capacity and (self._gang(job) or job.pods > self.capacity):
            # It can never start (a gang larger than the cluster; without gangs, more pods
            # than GPUs): it waits for good, counted as never started, and none of its pods
            # is made — a trace row of 1e15 GPUs would be as many pods.
            return
        if self._gang(job):
            queue = self._cycle_queue(job)
            preferred = self.topology[0] if self.policy.topology and self.topology else None
            group = GroupSpec(
                job.name, job.core_pods, queue, job.arrival_s, topology_preferred=preferred
            )
            self.cache.apply(Event("ADDED", "PodGroup", group))
        self._enqueue(i, now)

    def _enqueue(self, i: int, now: float) -> None:
        """Job ``i`` waits (again): its pods are created, pending, as when it arrived."""
        self._create(i, pod_names(self.jobs[i]))
        self._wait(i, now)

    def _create(self, i: int, names: Sequence[str]) -> None:
        """Pods ``names`` of job ``i`` are created, pending."""
        job = self.jobs[i]
        queue = self._cycle_queue(job)
        group = job.name if self._gang(job) else ""
        state = self.progress[i]
        progress = PodProgress(
            self.history.expected_s(self._tenant(job)),
            self.checkpoint_interval_s if self.policy.reads_checkpoints else 0.0,
            moves=state.moves,
            moved_at=state.moved_at,
        )
        for name in names:
            self.pod_job[name] = i
            pod = PodInfo(
                name,
                replace(job.spec, name=name),
                queue=queue,
                group=group,
                created=job.arrival_s,
                progress=progress,
            )
            self.cache.apply(Event("ADDED", "Pod", pod))

    def _wait(self, i: int, now: float) -> None:
        """The pods of job ``i`` wait, none bound yet."""
        job = self.jobs[i]
        for name in pod_names(job):
            self.meter.queued(name, self._tenant(job), job.spec.gpu_equivalent, now)
        self.progress[i].bound = 0

    def _stop(
        self,
        i: int,
        now: float,
        *,
        evicted: bool = False,
        keep: frozenset[str] = frozenset(),
        action: str = "",
    ) -> None:
        """End the run of job ``i``: its pods are deleted (those the cycle evicted stopped
        counting already; ``keep`` the ones it moved, which run on). An eviction (by
        ``action``) loses each pod's time since the run's last checkpoint; a finished run
        lost its restart time, charged to the action that caused the restart."""
        job, state = self.jobs[i], self.progress[i]
        saved = self._saved_s(i, now) if evicted else 0.0
        pods = self.cache.pods
        runlog = self.runlog
        blame = action if evicted else state.blame
        for name in pod_names(job):
            pod = pods.get(name)
            if name in self.meter:
                lost = state.delay_s
                if evicted:
                    started = pod.started if pod is not None and pod.started is not None else now
                    lost = (  # an elastic job's saved work is not its time: time-based
                        max(0.0, now - max(started, state.checkpoint_at))
                        if job.core_pods < job.pods
                        else max(0.0, now - started - saved)
                    )
                self.meter.stopped(name, now, evicted=evicted, lost_s=lost, action=blame)
                if runlog is not None:
                    runlog.stopped(name, now, evicted=evicted)
            if pod is not None and name not in keep:
                self.cache.apply(Event("DELETED", "Pod", pod))
        if evicted:
            state.saved_s += saved
            state.blame = action
        state.run_start = math.nan
        state.epoch += 1
        self.meter.job_stopped(job.name, now, evicted=evicted, action=action)

    def _saved_s(self, i: int, now: float) -> float:
        """The work job ``i``'s current run saved by ``now``: what it had done at its last
        checkpoint (checkpoints counted from the run's start; no progress in the restart
        time before it made any)."""
        state = self.progress[i]
        if self.checkpoint_interval_s <= 0 or math.isnan(state.run_start):
            return 0.0
        self._advance(i, now)
        return min(self.jobs[i].duration_s - state.saved_s, state.checkpoint_done_s)

    def _advance(self, i: int, now: float) -> None:
        """Count job ``i``'s progress up to ``now``, and the work at its last checkpoint."""
        state, interval = self.progress[i], self.checkpoint_interval_s

        def done_at(t: float) -> float:
            return state.done_s + state.rate * max(0.0, t - max(state.mark, state.resume))

        if interval > 0:
            taken = state.run_start + math.floor((now - state.run_start) / interval) * interval
            if taken > state.mark:
                state.checkpoint_done_s, state.checkpoint_at = done_at(taken), taken
        state.done_s, state.mark = done_at(now), now

    def work_done_s(self, i: int, now: float) -> float:
        """The work job ``i`` has done and kept by ``now`` (seconds at full size): all of it
        once finished, else what its checkpoints saved and its current run has done."""
        if self.finished[i]:
            return self.jobs[i].duration_s
        state = self.progress[i]
        if math.isnan(state.run_start):
            return state.saved_s
        self._advance(i, now)
        return min(self.jobs[i].duration_s, state.saved_s + state.done_s)

    def _end(self, i: int, now: float) -> None:
        """(Re)schedule the completion of job ``i``'s run at its current speed."""
        state = self.progress[i]
        state.epoch += 1
        left = self.jobs[i].duration_s - state.saved_s - state.done_s
        end = max(now, state.resume) + max(0.0, left) / state.rate
        self.events.push(end, COMPLETION, (i, state.epoch))
        self.other_events += 1

    def _resize(self, i: int, now: float, running: int) -> None:
        """Running job ``i`` now has ``running`` pods: it pauses for the restart time (none
        at the instant it started) and goes on at their speed."""
        state, job = self.progress[i], self.jobs[i]
        self._advance(i, now)
        state.rate = elastic_rate(running, job.pods)
        if now > state.run_start:
            state.resume = max(state.resume, now + self.restart_s)
        self._end(i, now)

    def _shrink(self, i: int, keys: Sequence[str], now: float, action: str) -> None:
        """``action`` evicted pods ``keys`` of running elastic job ``i``, which keeps at least
        its ``min_pods``: they wait again, and the rest pause for the restart time (charged
        to ``action``, spread over the evicted pods' GPU-time)."""
        job, state = self.jobs[i], self.progress[i]
        running = state.bound - len(keys)
        pause = self.restart_s * running / len(keys)
        for key in keys:
            self.meter.stopped(key, now, evicted=True, lost_s=pause, action=action)
            if self.runlog is not None:
                self.runlog.stopped(key, now, evicted=True)
            pod = self.cache.pods.get(key)
            if pod is not None:
                self.cache.apply(Event("DELETED", "Pod", pod))
        self._create(i, keys)
        for key in keys:
            self.meter.queued(key, self._tenant(job), job.spec.gpu_equivalent, now)
        state.bound = running
        self.shrinks += 1
        self._resize(i, now, running)

    def _complete(self, i: int, epoch: int, now: float) -> None:
        if epoch != self.progress[i].epoch:
            return  # the run this completion belonged to was evicted or resized
        self.finished[i] = 1
        job = self.jobs[i]
        self._stop(i, now)
        self.history.finished(self._tenant(job), job.duration_s)
        group = self.cache.get("PodGroup", job.name)
        if group is not None:
            self.cache.apply(Event("DELETED", "PodGroup", group))

    def _evicted(self, key: str, now: float, moved: frozenset[str], action: str) -> None:
        """Job of pod ``key`` lost its run: back to its queue, or, if the cycle moved the
        pod (consolidation moves only jobs of one pod), restarted by the binding that
        follows in the same result."""
        i = self.pod_job[key]
        state = self.progress[i]
        state.attempt += 1
        self._stop(i, now, evicted=True, keep=moved, action=action)
        if key in moved:
            state.moves += 1
            state.moved_at = now
            self._wait(i, now)
        else:
            self._enqueue(i, now)

    def _bound(self, binding: Binding, now: float) -> bool:
        """A cycle bound pod ``binding.pod``: the bind is confirmed (the cache assumed it).
        True when that started its job's run."""
        key = binding.pod
        pod = self.cache.pods[key]
        if pod.bound:  # moved: bound again elsewhere, its move counted
            pod = replace(pod, progress=pod.progress.moved(now))
        pod = pod.placed(binding.node, binding.gpus or (), now)
        self.cache.apply(Event("MODIFIED", "Pod", pod))
        i = self.pod_job[key]
        progress, job = self.progress[i], self.jobs[i]
        spec = job.spec
        running = self.cache.ledger().running.get(key)
        gpus = (running.spec if running is not None else spec).gpu_equivalent  # at its worth
        self.meter.started(key, self._tenant(job), gpus, now)
        if self.runlog is not None:
            self.runlog.started(
                key,
                self.node_index[binding.node],
                now,
                gpus,
                spec.cpu_milli / 1000.0,
                spec.memory_mib / 1024.0,
                i,
            )
        progress.bound += 1
        if not math.isnan(progress.run_start):
            self._resize(i, now, progress.bound)  # an elastic pod joined the run
            return False
        if progress.bound == job.core_pods:
            self.meter.job_started(job.name, now)
            progress.run_start = progress.mark = progress.checkpoint_at = now
            progress.delay_s = self.restart_s if progress.attempt else 0.0
            progress.resume = now + progress.delay_s
            progress.done_s = progress.checkpoint_done_s = 0.0
            progress.rate = elastic_rate(progress.bound, job.pods)
            self._end(i, now)
            return True
        return False

    # -- pods that are not the trace's (an edge that adds its own: sim/balance.py) -------

    def _other_event(self, payload: tuple[int, int], now: float) -> bool:  # noqa: ARG002
        """An event of negative job index that the trace did not schedule; True: the
        cycle it is followed by may evict (as a periodic one)."""
        raise ValueError(f"no job {payload[0]} in the trace")

    def _other_bound(self, binding: Binding, now: float) -> None:  # noqa: ARG002
        """The cycle bound a pod that is not a trace job's."""
        raise ValueError(f"pod {binding.pod} is no trace job's")

    def _other_evicted(self, eviction: Eviction, now: float) -> None:  # noqa: ARG002
        """The cycle evicted a pod that is not a trace job's."""
        raise ValueError(f"pod {eviction.pod} is no trace job's")

    # -- the clock ----------------------------------------------------------------------

    def run(self, until: float | None = None, progress: Progress | None = None) -> ReplayRun:
        started = time.perf_counter()
        last_arrival = max((j.arrival_s for j in self.jobs), default=0.0)
        span = until if until is not None else last_arrival
        meter = self.meter = Meter(
            self.tenants,
            self.capacity,
            sample_every=max(span, 1.0) / SAMPLES,
            # after the last arrival the cluster only drains: allocation is averaged before
            average_until=min(span, last_arrival),
            max_samples=2 * SAMPLES,  # a drain far longer than the arrivals stays cheap
        )
        batches = 0
        while self.events:
            if until is not None and self.events.peek_time() > until:
                break
            batch = self.events.pop_batch()
            now = self.events.now
            meter.advance(now)
            periodic = False
            for event in batch:
                i, attempt = event.payload
                if event.priority == COMPLETION:
                    self.other_events -= 1
                    self._complete(i, attempt, now)
                elif event.priority == ARRIVAL:
                    self.other_events -= 1
                    if i >= 0:
                        self._arrive(i, now)
                    elif self._other_event(event.payload, now):
                        periodic = True
                else:
                    self.periodic = False
                    periodic = True
            scheduler = self.scheduler
            if len(scheduler) and (periodic or not scheduler.settled()):
                self._cycle(now, periodic)
            if len(scheduler) and self.timed and not self.periodic and self.other_events:
                self.events.push(now + self.period_s, PERIODIC, (-1, 0))
                self.periodic = True
            batches += 1
            if progress is not None and batches % PROGRESS_EVERY == 0:
                progress(now)
        end = until if until is not None else self.events.now
        elapsed = time.perf_counter() - started
        reading = meter.reading(end)
        cost = self._cost(end, reading.finished_jobs)
        if cost is not None:
            elapsed += cost.elapsed_s  # the run time counts the costing
        return ReplayRun(
            workload=self.workload,
            policy=self.policy.name,
            seed=self.seed,
            jobs=reading.jobs,
            finished_jobs=reading.finished_jobs,
            running_jobs=reading.running_jobs,
            pending_jobs=reading.pending_jobs,
            mean_wait_s=reading.mean_wait_s,
            p50_wait_s=reading.p50_wait_s,
            p95_wait_s=reading.p95_wait_s,
            mean_jct_s=reading.mean_jct_s,
            gpu_allocation_mean=reading.gpu_allocation_mean,
            allocation_window_s=reading.allocation_window_s,
            preemptions=reading.preemptions,
            lost_gpu_hours=reading.lost_gpu_hours,
            gpu_hours=reading.gpu_hours,
            capacity_gpu_hours=reading.capacity_gpu_hours,
            simulated_s=end,
            cycles=self.scheduler.cycles,
            queues=reading.queues,
            wait_quantiles_s=reading.wait_quantiles_s,
            timeline=reading.timeline,
            elapsed_s=elapsed,
            never_started_jobs=reading.never_started_jobs,
            sizes=reading.sizes,
            all_waits=reading.all_waits,
            actions=reading.actions,
            most_moves=max((p.moves for p in self.progress), default=0),
            cost=cost,
        )

    def _cost(self, end: float, finished_jobs: int) -> ReplayCost | None:
        """The runs logged, costed over ``[0, end)`` (None without prices or time)."""
        if self.runlog is None or self.priced is None or self.prices is None or end <= 0:
            return None
        self.allocation, cost = cost_replay(
            self.runlog,
            self.jobs,
            [self._tenant(job) for job in self.jobs],
            nodes=self.priced,
            sheet=self.prices,
            parents={q.name: q.parent for q in self.tenants},
            finished=bytes(self.finished),
            finished_jobs=finished_jobs,
            end=end,
        )
        return cost

    def _cycle(self, now: float, periodic: bool) -> None:
        result = self.scheduler.run(now, act=periodic)
        moved = frozenset(e.pod for e in result.evictions if e.moved)
        evicted: dict[int, list[Eviction]] = {}
        room_for: dict[int, str] = {}
        pod_job = self.pod_job
        for eviction in result.evictions:
            by = self.index.get(eviction.for_, pod_job.get(eviction.for_))
            if by is not None:
                room_for.setdefault(by, eviction.action)
            if eviction.pod in pod_job:
                i = pod_job[eviction.pod]
                evicted.setdefault(i, []).append(eviction)
                self.evicted_gpus += self.jobs[i].spec.gpu_equivalent
            else:
                self._other_evicted(eviction, now)
        for i, evictions in evicted.items():
            first = evictions[0]
            state = self.progress[i]
            running = not math.isnan(state.run_start) and first.pod not in moved
            if running and state.bound - len(evictions) >= self.jobs[i].core_pods:
                # an elastic job lost pods beyond its minimum: it runs on without them
                self._shrink(i, [e.pod for e in evictions], now, first.action)
                continue
            self._evicted(first.pod, now, moved, first.action)
        for binding in result.bindings:
            if binding.pod not in pod_job:
                self._other_bound(binding, now)
            elif self._bound(binding, now):
                i = self.pod_job[binding.pod]
                if i in room_for:
                    self.meter.made_room(room_for[i], self.jobs[i].name, now)
