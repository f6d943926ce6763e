"""What the live scheduler exports on ``/metrics``, in kube-scheduler's names where they exist.

kube-scheduler's: ``scheduler_schedule_attempts_total{result,profile}`` (``scheduled``,
``unschedulable``, ``error``), ``scheduler_scheduling_attempt_duration_seconds`` (its
buckets), ``scheduler_pending_pods{queue}`` — ``queue`` is kube-scheduler's internal queue
(``active``, ``backoff``, ``gated``), not a tenant queue — ``scheduler_preemption_victims``,
``scheduler_preemption_attempts_total`` and ``scheduler_pod_scheduling_sli_duration_seconds
{attempts}`` (:class:`PodLatency`). gpufleet's own: per tenant queue its pending
pods, allocation and fair share per resource; the share of GPUs allocated; bind failures;
watch restarts per kind; and, priced by the price sheet (``cost/``), what each queue's running
pods cost per hour, what the nodes cost per hour and how much of it no pod was charged for, in
OpenCost's hourly-cost style (``gpufleet_queue_hourly_cost``, ``gpufleet_cluster_hourly_cost``,
``gpufleet_idle_hourly_cost``); and per evicting action, what it cost and bought
(``gpufleet_evictions_total``, ``gpufleet_evicted_work_gpu_seconds_total``,
``gpufleet_room_made_jobs_total``). Each scheduler has its own registry (tests run many at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily

from gpufleet.cost.allocation import IDLE
from gpufleet.cost.nodes import price_nodes
from gpufleet.cost.rates import running_hourly
from gpufleet.kube.cpu import CLOCK
from gpufleet.model.progress import work_at_risk
from gpufleet.model.workload import RESOURCES
from gpufleet.plugins.stranding import Ratios, stranded
from gpufleet.scheduler.api.outcome import WhyCode
from gpufleet.scheduler.queues.admission import lending

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator, Mapping, Sequence

    from gpufleet.cost.allocation import Nodes
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache
    from gpufleet.scheduler.state.ledger import Ledger

ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
"""kube-scheduler's: exponential from 1 ms, factor 2, 15 buckets."""
SLI_BUCKETS = tuple(0.01 * 2**i for i in range(20))
"""kube-scheduler's: exponential from 10 ms, factor 2, 20 buckets."""
MAX_ATTEMPTS = 15
"""The ``attempts`` label counts up to this, then reads ``15+`` (kube-scheduler's cap)."""
VICTIM_BUCKETS = tuple(float(5**i) for i in range(7))
"""kube-scheduler's: exponential from 1, factor 5, 7 buckets."""

disable_created_metrics()  # type: ignore[no-untyped-call]  # kube-scheduler has no *_created


COST_RESOURCES = (("gpu", "gpuCost"), ("cpu", "cpuCost"), ("memory", "ramCost"))
"""The cost gauges' ``resource`` label and the allocation row's field it reads."""


class Metrics:
    def __init__(self, profile: str, sheet: PriceSheet | None = None) -> None:
        self.profile = profile
        self.sheet = sheet
        self._priced: tuple[int, Nodes] | None = None
        """The nodes of the last ledger priced (by its identity): prices change with nodes."""
        self.registry = registry = CollectorRegistry()
        self.attempts = Counter(
            "scheduler_schedule_attempts",
            "Number of attempts to schedule pods, by the result.",
            ["result", "profile"],
            registry=registry,
        )
        self.duration = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (one cycle, the pods it decided).",
            ["result", "profile"],
            buckets=ATTEMPT_BUCKETS,
            registry=registry,
        )
        self.sli = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod was first seen "
            "pending to its bind; may involve multiple scheduling attempts.",
            ["attempts"],
            buckets=SLI_BUCKETS,
            registry=registry,
        )
        self.pending = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type (active, backoff, gated).",
            ["queue"],
            registry=registry,
        )
        self.victims = Histogram(
            "scheduler_preemption_victims",
            "Number of selected preemption victims.",
            buckets=VICTIM_BUCKETS,
            registry=registry,
        )
        self.preemptions = Counter(
            "scheduler_preemption_attempts",
            "Total preemption attempts in the cluster till now.",
            registry=registry,
        )
        self.action_evictions = Counter(
            "gpufleet_evictions",
            "Pods evicted (or moved) to make room, by the action that evicted them.",
            ["action"],
            registry=registry,
        )
        self.action_lost = Counter(
            "gpufleet_evicted_work_gpu_seconds",
            "GPU-seconds of work the evictions threw away (since each pod's start or last "
            "checkpoint, plus the restart time), by action.",
            ["action"],
            registry=registry,
        )
        self.action_started = Counter(
            "gpufleet_room_made_jobs",
            "Jobs bound in the cycle that evicted pods to make room for them, by action.",
            ["action"],
            registry=registry,
        )
        self.queue_pending = Gauge(
            "gpufleet_queue_pending_pods",
            "Pending pods per gpufleet queue.",
            ["queue"],
            registry=registry,
        )
        self.queue_allocated = Gauge(
            "gpufleet_queue_allocated",
            "What each queue's running pods hold (GPUs, milli-CPU, MiB).",
            ["queue", "resource"],
            registry=registry,
        )
        self.queue_fair_share = Gauge(
            "gpufleet_queue_fair_share",
            "Each queue's fair share in the last cycle (GPUs, milli-CPU, MiB).",
            ["queue", "resource"],
            registry=registry,
        )
        self.queue_lent = Gauge(
            "gpufleet_queue_lent_gpus",
            "GPUs of a serving queue's quota that other queues run (lent).",
            ["queue"],
            registry=registry,
        )
        self.queue_borrowed = Gauge(
            "gpufleet_queue_borrowed_gpus",
            "GPUs a top-level queue's running pods hold beyond its GPU quota (borrowed).",
            ["queue"],
            registry=registry,
        )
        self.reclaims = Counter(
            "gpufleet_reclaims",
            "Pods the cycles reclaimed from other queues (evictions decided, as "
            "gpufleet_evictions_total), by the queue that took the capacity back.",
            ["queue"],
            registry=registry,
        )
        self.gpu_allocated = Gauge(
            "gpufleet_gpu_allocated_ratio",
            "The share of the cluster's GPUs that running pods hold.",
            registry=registry,
        )
        self.stranded = Gauge(
            "gpufleet_gpus_stranded",
            "Free GPUs that the free CPU and memory of their nodes cannot feed, at the CPU and "
            "memory per GPU that the cluster's GPU pods ask for (StrandedGpuScore's measure).",
            registry=registry,
        )
        currency = sheet.currency if sheet is not None else ""
        self.queue_cost = Gauge(
            "gpufleet_queue_hourly_cost",
            f"What each queue's running pods cost per hour ({currency}, by the price sheet), "
            "per resource, OpenCost's way: the request at the node's price.",
            ["queue", "resource"],
            registry=registry,
        )
        self.cluster_cost = Gauge(
            "gpufleet_cluster_hourly_cost",
            f"What the cluster's nodes cost per hour ({currency}, by the price sheet).",
            registry=registry,
        )
        self.idle_cost = Gauge(
            "gpufleet_idle_hourly_cost",
            f"The part of the nodes' hourly cost ({currency}) no pod requested (OpenCost's "
            "__idle__), per resource.",
            ["resource"],
            registry=registry,
        )
        self.bind_failures = Counter(
            "gpufleet_bind_failures",
            "Binds the API server refused or could not take (the pod backs off).",
            registry=registry,
        )
        self.provisioning = Counter(
            "gpufleet_provisioning_requests",
            "ProvisioningRequests of --autoscale by node pool and outcome: asked, provisioned, "
            "failed (Failed, BookingExpired, CapacityRevoked or deleted before the job ran).",
            ["pool", "outcome"],
            registry=registry,
        )
        self.protected_pods = Gauge(
            "gpufleet_pods_protected_from_scale_down",
            "Running pods gpufleet marked safe-to-evict=false and do-not-disrupt (nothing of "
            "their work saved yet).",
            registry=registry,
        )
        self.watch_restarts = Counter(
            "gpufleet_watch_restarts",
            "Relists after a watch fell out of the server's window (410) or failed.",
            ["kind"],
            registry=registry,
        )
        self.watch_bad_objects = Counter(
            "gpufleet_watch_bad_objects",
            "Watch events and objects that could not be read: each reported and skipped.",
            ["resource"],
            registry=registry,
        )
        ProcessCollector(registry=registry)  # process_cpu_seconds_total and the rest, as Go's
        registry.register(_PhaseCollector())

    def evicted(
        self, result: CycleResult, pods: Mapping[str, PodInfo], now: float, restart_s: float
    ) -> None:
        """Count what each action evicted, the work it threw away (read from the victims as
        the cycle saw them, before they are deleted) and the jobs it made room for."""
        bound = {b.pod for b in result.bindings}
        helped: dict[str, str] = {}
        queue_of = result.queues_served(pods)
        for eviction in result.evictions:
            self.action_evictions.labels(eviction.action).inc()
            helped.setdefault(eviction.for_, eviction.action)
            if eviction.action == "reclaim":
                self.reclaims.labels(queue_of.get(eviction.for_, "")).inc()
            pod = pods.get(eviction.pod)
            if pod is not None:
                lost = work_at_risk(pod.progress, pod.started, now, restart_s)
                self.action_lost.labels(eviction.action).inc(pod.spec.gpu_equivalent * lost)
        for job, action in helped.items():
            if any(pods[k].gang == job for k in bound if k in pods):
                self.action_started.labels(action).inc()

    def _lending(self, ledger: Ledger) -> None:
        self.queue_lent.clear()  # a queue deleted reads nothing, not its last figures
        self.queue_borrowed.clear()
        for queue, (lent, borrowed) in lending(ledger).items():
            self.queue_lent.labels(queue).set(lent)
            self.queue_borrowed.labels(queue).set(borrowed)

    def standby(self) -> None:
        """This replica no longer leads: its per-queue gauges say nothing of the cluster now
        (a serving queue's forecast reads gpufleet_queue_allocated a day later)."""
        for gauge in (
            self.queue_allocated,
            self.queue_fair_share,
            self.queue_pending,
            self.queue_lent,
            self.queue_borrowed,
        ):
            gauge.clear()

    def cycle(
        self,
        result: CycleResult,
        seconds: float,
        cache: ClusterCache[Components],
        *,
        held: Collection[str] = (),
    ) -> None:
        """Record one cycle: attempts by result, its duration, preemptions, the queues.

        ``held``: the keys of pods the live scheduler holds back (a bind backing off). Each
        pending pod is in one of ``scheduler_pending_pods``' queues, as in kube-scheduler:
        ``backoff`` if held (it reads as blocked too, for that reason), else ``gated`` if
        blocked (scheduling gates, victims terminating, a PodGroup or claim missing), else
        ``active``; the three add up to the pending pods.
        """
        scheduled, unschedulable = len(result.bindings), len(result.pending)
        for outcome, count in (("scheduled", scheduled), ("unschedulable", unschedulable)):
            if count:
                self.attempts.labels(outcome, self.profile).inc(count)
                self.duration.labels(outcome, self.profile).observe(seconds)
        by_job: dict[str, int] = {}
        for eviction in result.evictions:
            by_job[eviction.for_] = by_job.get(eviction.for_, 0) + 1
        for count in by_job.values():
            self.preemptions.inc()
            self.victims.observe(count)
        ledger = cache.ledger()
        for queue, allocated in ledger.alloc.items():
            for i, resource in enumerate(RESOURCES):
                self.queue_allocated.labels(queue, resource).set(float(allocated[i]))
        for queue, fair in result.fair_shares.items():
            for i, resource in enumerate(RESOURCES):
                self.queue_fair_share.labels(queue, resource).set(float(fair[i]))
        self._lending(ledger)
        pending: dict[str, int] = {}
        waiting = {"active": 0, "backoff": 0, "gated": 0}
        for pod in cache.pending():
            waiting[pending_queue(pod, held)] += 1
            pending[pod.queue] = pending.get(pod.queue, 0) + 1
        self.queue_pending.clear()  # a queue that drained reads 0, not its last count
        for queue, count in pending.items():
            self.queue_pending.labels(queue).set(count)
        for queue, count in waiting.items():
            self.pending.labels(queue).set(count)
        total = ledger.state.total_gpu_milli
        free = int(ledger.state.gpu_idle.sum())
        self.gpu_allocated.set((total - free) / total if total else 0.0)
        self.stranded.set(stranded_gpus(ledger.state, cache.workload_specs()))
        if self.sheet is not None:
            self._cost(ledger, cache)

    def _cost(self, ledger: Ledger, cache: ClusterCache[Components]) -> None:
        """The hourly cost gauges, from the running pods at their nodes' prices."""
        assert self.sheet is not None
        if self._priced is None or self._priced[0] != id(ledger):
            specs = [cache.get("Node", name) for name in ledger.state.names]
            priced = price_nodes(specs, self.sheet, ledger.book.gpus_by_node())  # type: ignore[arg-type]
            self._priced = (id(ledger), priced)
        alloc = running_hourly(list(ledger.running.values()), self._priced[1], ledger.book)
        self.queue_cost.clear()  # a queue that stopped running anything reads 0
        idle: dict[str, float] = {}
        for row in alloc.aggregate("queue"):
            if row["name"] == IDLE:
                idle = {resource: row[field] for resource, field in COST_RESOURCES}
                continue
            for resource, field in COST_RESOURCES:
                self.queue_cost.labels(row["name"], resource).set(row[field])
        for resource, _ in COST_RESOURCES:
            self.idle_cost.labels(resource).set(idle.get(resource, 0.0))
        self.cluster_cost.set(alloc.total)


def pending_queue(pod: PodInfo, held: Collection[str]) -> str:
    """Which of kube-scheduler's queues pending ``pod`` is in (:meth:`Metrics.cycle`)."""
    if pod.key in held:
        return "backoff"
    return "gated" if pod.blocked else "active"


def stranded_gpus(state: ClusterState, pods: Sequence[PodSpec]) -> float:
    """Free GPUs (whole GPUs, fractions summed) beyond what their nodes' free CPU and memory
    can feed, at the CPU and memory per GPU of ``pods``' GPU pods (none: nothing is
    stranded)."""
    gpu = sum(p.total_gpu_milli for p in pods)
    if not gpu:
        return 0.0
    cpu = sum(p.cpu_milli for p in pods if p.total_gpu_milli)
    memory = sum(p.memory_mib for p in pods if p.total_gpu_milli)
    idle = stranded(
        state.gpu_idle.astype(np.float64),
        state.cpu_free.astype(np.float64),
        state.memory_free.astype(np.float64),
        Ratios(cpu / gpu, memory / gpu),
    )
    return float(idle.sum()) / 1000


class PodLatency:
    """What ``scheduler_pod_scheduling_sli_duration_seconds`` measures, per pending pod:
    when the live scheduler first saw it pending (the watch event that brought it, or the
    first list), and how many cycles tried it.

    kube-scheduler measures from the pod's first entry into its scheduling queue, not from
    ``metadata.creationTimestamp``: the time a pod waited before any scheduler could see it
    (gpufleet down, the API server's clock) is not the scheduler's latency. A cycle *tries*
    a pod when it decides on it — binds it, or leaves it pending for a reason the cluster
    decides; a pod held back (its bind backing off, its victims terminating, scheduling
    gates, a PodGroup missing) is not tried, as kube-scheduler does not pop it.
    """

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.attempts: dict[str, int] = {}
        self.uids: dict[str, str] = {}
        """The uid of each pod seen: a pod deleted and made again under its name (between
        two cycles, or across a relist that shows neither event) enters the queue anew."""

    def pending(self, key: str, now: float, uid: str = "") -> None:
        """Pod ``key`` is pending (first time: it enters the queue at ``now``)."""
        if self.uids.get(key, uid) != uid:
            self.forget(key)
        self.seen.setdefault(key, now)
        self.uids[key] = uid

    def tried(self, result: CycleResult, cache: ClusterCache[Components]) -> None:
        """Count one attempt for each pod ``result`` decided on; forget the pods that are
        gone, made again under their name, or bound meanwhile by someone else."""
        pods = cache.pods
        for key in [
            k
            for k in self.seen
            if (p := pods.get(k)) is None or p.bound or p.uid != self.uids.get(k, p.uid)
        ]:
            self.forget(key)
        tried = [b.pod for b in result.bindings]
        tried += [p.pod for p in result.pending if p.why.code is not WhyCode.BLOCKED]
        for key in tried:
            if key in self.seen:
                self.attempts[key] = self.attempts.get(key, 0) + 1

    def bound(self, key: str, now: float, metrics: Metrics) -> None:
        """Pod ``key``'s bind was accepted at ``now``: observe it and forget it."""
        seen = self.seen.get(key)
        if seen is not None:
            attempts = max(self.attempts.get(key, 1), 1)
            label = f"{MAX_ATTEMPTS}+" if attempts >= MAX_ATTEMPTS else str(attempts)
            metrics.sli.labels(label).observe(max(now - seen, 0.0))
        self.forget(key)

    def forget(self, key: str) -> None:
        self.seen.pop(key, None)
        self.attempts.pop(key, None)
        self.uids.pop(key, None)


class _PhaseCollector:
    """``gpufleet_cpu_seconds_total{phase}``, once ``--cpu-phases`` started the clock
    (``kube/cpu.py``)."""

    def collect(self) -> Iterator[CounterMetricFamily]:
        if not CLOCK.on:
            return
        family = CounterMetricFamily(
            "gpufleet_cpu_seconds",
            "CPU seconds of the scheduler's event loop by phase, and of its cycles (what "
            "no phase took is process_cpu_seconds_total less these).",
            labels=["phase"],
        )
        for name, seconds in CLOCK.snapshot().items():
            family.add_metric([name], seconds)
        yield family
