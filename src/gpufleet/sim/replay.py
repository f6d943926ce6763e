"""Time-driven replay: jobs arrive, wait, run and finish on a simulated clock.

One scheduling core, two clocks (STYLE.md): the replay keeps one
:class:`~gpufleet.scheduler.cycle.Cycle` for the whole trace and runs the same cycle as
``gpufleet schedule`` whenever something happens — jobs arrive, jobs finish — and on a
period while work is pending (so that min-runtime protection can expire into reclaim).
Events come off a heap keyed ``(time, priority, seq)``; completions go before arrivals of
the same second, so that a job arriving as another ends finds its GPUs free.

A job is a gang of identical pods. It starts when all its pods are bound and runs for its
duration; then its pods leave. A job whose pods are evicted (preempted, reclaimed, moved
by consolidation) loses the run — the GPU time it had is counted as lost — and goes back
to its queue in its old place, to run again from the start.

Policies (:data:`REPLAY_POLICIES`) are configurations of the one cycle, not code paths:

* ``kube-default`` — kube-scheduler: pods placed one at a time, no gangs (a job may hold
  some of its GPUs while the rest of it waits), whole GPUs, one queue, no preemption;
* ``fifo-gang`` — gangs all-or-nothing, one queue in strict first-come-first-served order
  (Kueue's StrictFIFO), best-fit placement, no preemption;
* ``gpufleet`` — one queue per tenant served in fair-share order, gangs with topology
  preference, backfill, consolidation and preemption. No reclaim and no starvation holds,
  as measured on Philly (docs/benchmarks.md): a reclaimed job reruns from the start, and
  over the full trace reclaim threw away 366,624 GPU-hours (a fifth of the cluster's
  time) while the mean wait tripled; nodes held for jobs waiting over 30 minutes (or 6
  hours) idled so much capacity that mean waits tripled too.
"""

from __future__ import annotations

import math
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpufleet.model.arrays import FloatArray
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.results import QueueUsage, ReplayRun, Timeline
from gpufleet.model.workload import (
    DEFAULT_QUEUE,
    GroupSpec,
    PodInfo,
    QueueSpec,
    ReplayJob,
    Snapshot,
    vector,
)
from gpufleet.scheduler.backlog import Backlog, job_shape
from gpufleet.scheduler.cycle import Cycle, CycleConfig
from gpufleet.scheduler.fairshare import QueueTree, fair_shares
from gpufleet.scheduler.job import Job
from gpufleet.sim.events import ARRIVAL, COMPLETION, PERIODIC, EventQueue

SAMPLES = 400
"""Timeline samples over the replayed span (for the plots)."""

PROGRESS_EVERY = 2048
"""Event batches between progress reports."""

Progress = Callable[[float], None]
"""Called with the simulated time reached."""


def pod_names(job: ReplayJob) -> list[str]:
    return [f"{job.name}/{k}" for k in range(job.pods)]


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """How the one cycle is configured to behave like a scheduler."""

    name: str
    placement: str
    """Placement policy (a name of :data:`~gpufleet.plugins.registry.POLICIES`)."""
    gangs: bool
    """Place a job's pods all or nothing (else one at a time)."""
    tenant_queues: bool
    """One queue per tenant with fair shares (else one queue for everyone)."""
    actions: tuple[str, ...] = ()
    strict_fifo: bool = False
    starvation_after_s: float = math.inf
    topology: bool = False
    """Gangs prefer one domain of the cluster's widest topology level."""


REPLAY_POLICIES: dict[str, ReplayPolicy] = {
    p.name: p
    for p in (
        ReplayPolicy("kube-default", "kube-default", gangs=False, tenant_queues=False),
        ReplayPolicy("fifo-gang", "best-fit", gangs=True, tenant_queues=False, strict_fifo=True),
        ReplayPolicy(
            "gpufleet",
            "gpufleet",
            gangs=True,
            tenant_queues=True,
            actions=("consolidate", "preempt"),
            topology=True,
        ),
    )
}

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
    """What happened to one job so far."""

    attempt: int = 0
    bound: int = 0
    start: float = math.nan
    first_start: float = math.nan
    finish: float = math.nan


class Replay:
    """The replay of ``jobs`` on ``nodes`` under ``policy`` (see the module docstring)."""

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
    ) -> None:
        self.workload, self.seed = workload, seed
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
        self.held = {q.name: 0.0 for q in tenants}
        """Per tenant: GPUs its bound pods hold now."""
        self.waiting = {q.name: 0.0 for q in tenants}
        """Per tenant: GPUs its waiting pods ask for now."""
        self.cycles = 0
        config = CycleConfig(
            policy=policy.placement,
            actions=policy.actions,
            strict_fifo=policy.strict_fifo,
            starvation_after_s=policy.starvation_after_s,
            records=False,
        )
        cycle_queues = self.tenants if policy.tenant_queues else ()
        self.topology = topology
        self.cycle = Cycle(
            Snapshot(tuple(nodes), queues=cycle_queues, topology=topology),
            config,
            0.0,
            workload=[job.spec for job in self.jobs],
            backlog=Backlog(skip_failed=True),
            rng=np.random.default_rng(seed),
        )
        self.capacity = capacity
        self.fair_tree = QueueTree.of(self.tenants)
        self.pod_job: dict[str, int] = {}
        self.events: EventQueue[tuple[int, int]] = EventQueue()
        for i, job in enumerate(self.jobs):
            self.events.push(job.arrival_s, ARRIVAL, (i, 0))
        self.other_events = len(self.jobs)
        self.periodic = False
        self.timed = bool(policy.actions) or math.isfinite(policy.starvation_after_s)
        """Whether waiting alone can change what the cycle does (min runtimes expiring into
        reclaim, starvation): then a periodic cycle runs while jobs wait."""
        self.preemptions = 0
        self.lost_gpu_s = 0.0

    # -- jobs in and out of the cycle ---------------------------------------------------

    def _cycle_queue(self, job: ReplayJob) -> str:
        return self.queue_of[job.queue] if self.policy.tenant_queues else DEFAULT_QUEUE

    def _enqueue(self, i: int) -> None:
        """Job ``i`` waits (again): as one gang, or as pods of their own."""
        job, progress = self.jobs[i], self.progress[i]
        queue = self._cycle_queue(job)
        names = pod_names(job)
        for name in names:
            self.pod_job[name] = i
        gang = self.policy.gangs and job.pods > 1
        pods = tuple(
            PodInfo(
                name,
                replace(job.spec, name=name),
                queue=queue,
                group=job.name if gang else "",
                created=job.arrival_s,
            )
            for name in names
        )
        if gang:
            preferred = self.topology[0] if self.policy.topology and self.topology else None
            self.cycle.groups[job.name] = GroupSpec(
                job.name, job.pods, queue, job.arrival_s, topology_preferred=preferred
            )
            units = [Job(job.name, queue, 0, job.arrival_s, job.pods, pods, 0, True)]
        else:
            units = [Job(p.key, queue, 0, job.arrival_s, 1, (p,), 0, True) for p in pods]
        for unit in units:
            self.cycle.backlog.add(unit, job_shape(unit, self.cycle.groups.get(unit.key)))
        self.waiting[self.queue_of[job.queue]] += job.gpus
        progress.bound = 0
        progress.start = math.nan

    def _stop(self, i: int, keep: frozenset[str] = frozenset()) -> None:
        """End the pods of job ``i`` (those the cycle evicted are gone already; ``keep``
        the ones it moved)."""
        job = self.jobs[i]
        self.held[self.queue_of[job.queue]] -= self.progress[i].bound * job.spec.gpu_equivalent
        for name in pod_names(job):
            if name in self.cycle.running and name not in keep:
                self.cycle.finish(name)
        self.cycle.groups.pop(job.name, None)

    def _complete(self, i: int, attempt: int, now: float) -> None:
        progress = self.progress[i]
        if attempt != progress.attempt:
            return  # the run this completion belonged to was evicted
        self._stop(i)
        progress.finish = now

    def _evicted(self, key: str, now: float, moved: frozenset[str]) -> None:
        """Job of pod ``key`` lost its run: back to its queue, or, if the cycle moved the
        pod (consolidation moves only jobs of one pod), restarted by the binding that
        follows in the same result."""
        i = self.pod_job[key]
        progress = self.progress[i]
        job = self.jobs[i]
        if not math.isnan(progress.start):
            self.lost_gpu_s += job.gpus * (now - progress.start)
        self.preemptions += 1
        progress.attempt += 1
        self._stop(i, moved)
        if key in moved:
            self.waiting[self.queue_of[job.queue]] += job.gpus
            progress.bound = 0
            progress.start = math.nan
        else:
            self._enqueue(i)

    def _bound(self, key: str, now: float) -> None:
        i = self.pod_job[key]
        progress = self.progress[i]
        tenant = self.queue_of[self.jobs[i].queue]
        self.held[tenant] += self.jobs[i].spec.gpu_equivalent
        self.waiting[tenant] -= self.jobs[i].spec.gpu_equivalent
        progress.bound += 1
        if progress.bound == self.jobs[i].pods:
            progress.start = now
            if math.isnan(progress.first_start):
                progress.first_start = now
            self.events.push(now + self.jobs[i].duration_s, COMPLETION, (i, progress.attempt))
            self.other_events += 1

    # -- the clock ----------------------------------------------------------------------

    def run(self, until: float | None = None, progress: Progress | None = None) -> ReplayRun:
        started = time.perf_counter()
        meter = _Meter(self, until)
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
                    self._enqueue(i)
                else:
                    self.periodic = False
                    periodic = True
            if len(self.cycle.backlog) and (periodic or not self.cycle.settled()):
                self._cycle(now, periodic)
            if len(self.cycle.backlog) and self.timed and not self.periodic and self.other_events:
                self.events.push(now + self.period_s, PERIODIC, (-1, 0))
                self.periodic = True
            batches += 1
            if progress is not None and batches % PROGRESS_EVERY == 0:
                progress(now)
        end = until if until is not None else self.events.now
        meter.advance(end)
        return meter.result(end, time.perf_counter() - started)

    def _cycle(self, now: float, periodic: bool) -> None:
        cycle = self.cycle
        cycle.begin(now, act=periodic)
        self.cycles += 1
        result = cycle.run()
        moved = frozenset(e.pod for e in result.evictions if e.action == "consolidate")
        evicted: set[int] = set()
        for eviction in result.evictions:
            if self.pod_job[eviction.pod] not in evicted:
                evicted.add(self.pod_job[eviction.pod])
                self._evicted(eviction.pod, now, moved)
        for binding in result.bindings:
            self._bound(binding.pod, now)


class _Meter:
    """Integrates what the replay measures over time, between event batches."""

    def __init__(self, replay: Replay, until: float | None) -> None:
        self.replay = replay
        self.last = 0.0
        self.tenants = [q.name for q in replay.tenants]
        self._spans = array("d")
        """The intervals between event batches, in which nothing changed."""
        self._held = array("d")
        """Per interval, per tenant: the GPUs its pods held."""
        self._waiting = array("d")
        """Per interval, per tenant: the GPUs its waiting pods asked for."""
        self.gpu_s = 0.0
        last_event = max((j.arrival_s for j in replay.jobs), default=0.0)
        span = until if until is not None else last_event
        self.window = min(span, last_event)
        """Allocation is averaged while jobs arrive (after, the cluster only drains)."""
        self.window_gpu_s = 0.0
        self.step = max(span, 1.0) / SAMPLES
        self.next_sample = 0.0
        self.times: list[float] = []
        self.samples: dict[str, list[float]] = {q: [] for q in self.tenants}
        self.pending: list[float] = []

    def advance(self, now: float) -> None:
        """Account the interval since the last call, in which nothing changed."""
        dt = now - self.last
        if dt <= 0:
            return
        replay = self.replay
        held = replay.held
        total = sum(held.values())
        if total > replay.capacity + 1e-6:
            raise AssertionError(f"{total:g} GPUs held on a cluster of {replay.capacity:g}")
        self.gpu_s += total * dt
        self.window_gpu_s += total * max(0.0, min(now, self.window) - min(self.last, self.window))
        while self.next_sample < now:
            self.times.append(self.next_sample)
            for q in self.tenants:
                self.samples[q].append(round(held[q], 3))
            self.pending.append(round(sum(replay.waiting.values()), 3))
            self.next_sample += self.step
        self._spans.append(dt)
        self._held.extend(held[q] for q in self.tenants)
        self._waiting.extend(replay.waiting[q] for q in self.tenants)
        self.last = now

    def usage(self) -> tuple[FloatArray, FloatArray]:
        """Per tenant: the GPU-seconds it held, and its fair share's, over the replay.

        The fair shares of every interval are divided at once, one column each."""
        spans = np.frombuffer(self._spans, dtype=np.float64)
        if not spans.size:
            return np.zeros(len(self.tenants)), np.zeros(len(self.tenants))
        held = np.frombuffer(self._held, dtype=np.float64).reshape(spans.size, -1)
        demand = held + np.frombuffer(self._waiting, dtype=np.float64).reshape(spans.size, -1)
        capacity = np.full(spans.size, self.replay.capacity)
        fair = fair_shares(
            self.replay.fair_tree,
            {q: demand[:, j] for j, q in enumerate(self.tenants)},
            capacity,
            resource=0,
        )
        shares = np.stack([fair.get(q, np.zeros(spans.size)) for q in self.tenants], axis=1)
        return spans @ held, spans @ shares

    def result(self, end: float, elapsed: float) -> ReplayRun:
        replay = self.replay
        held_s, fair_s = self.usage()
        progress = replay.progress
        arrived = [i for i, job in enumerate(replay.jobs) if job.arrival_s <= end]
        finished = [i for i in arrived if not math.isnan(progress[i].finish)]
        started = [i for i in arrived if not math.isnan(progress[i].first_start)]
        running = [
            i
            for i in started
            if math.isnan(progress[i].finish) and not math.isnan(progress[i].start)
        ]
        waits = np.array(
            [progress[i].first_start - replay.jobs[i].arrival_s for i in started], dtype=np.float64
        )
        jcts = np.array(
            [progress[i].finish - replay.jobs[i].arrival_s for i in finished], dtype=np.float64
        )
        capacity_s = replay.capacity * end
        window, window_gpu_s = min(self.window, end), self.window_gpu_s
        if window <= 0:  # every job arrived at 0
            window, window_gpu_s = end, self.gpu_s
        jobs_of: dict[str, int] = {}
        for i in arrived:
            tenant = replay.queue_of[replay.jobs[i].queue]
            jobs_of[tenant] = jobs_of.get(tenant, 0) + 1
        return ReplayRun(
            workload=replay.workload,
            policy=replay.policy.name,
            seed=replay.seed,
            jobs=len(arrived),
            finished_jobs=len(finished),
            running_jobs=len(running),
            pending_jobs=len(arrived) - len(finished) - len(running),
            mean_wait_s=float(waits.mean()) if waits.size else None,
            p50_wait_s=float(np.percentile(waits, 50)) if waits.size else None,
            p95_wait_s=float(np.percentile(waits, 95)) if waits.size else None,
            mean_jct_s=float(jcts.mean()) if jcts.size else None,
            gpu_allocation_mean=(
                100.0 * window_gpu_s / (replay.capacity * window)
                if replay.capacity * window
                else 0.0
            ),
            allocation_window_s=window,
            preemptions=replay.preemptions,
            lost_gpu_hours=replay.lost_gpu_s / 3600,
            gpu_hours=self.gpu_s / 3600,
            capacity_gpu_hours=capacity_s / 3600,
            simulated_s=end,
            cycles=replay.cycles,
            queues=tuple(
                QueueUsage(q, jobs_of.get(q, 0), float(held_s[j]) / 3600, float(fair_s[j]) / 3600)
                for j, q in enumerate(self.tenants)
            ),
            wait_quantiles_s=tuple(
                float(w) for w in (np.percentile(waits, np.arange(101)) if waits.size else ())
            ),
            timeline=Timeline(
                tuple(self.times),
                {q: tuple(v) for q, v in self.samples.items()},
                tuple(self.pending),
            ),
            elapsed_s=elapsed,
        )
