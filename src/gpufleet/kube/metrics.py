"""What the live scheduler exports on ``/metrics``, in kube-scheduler's names where they exist.

kube-scheduler's: ``scheduler_schedule_attempts_total{result,profile}`` (``scheduled``,
``unschedulable``, ``error``), ``scheduler_scheduling_attempt_duration_seconds`` (its
buckets), ``scheduler_pending_pods{queue}`` — ``queue`` is kube-scheduler's internal queue
(``active``, ``backoff``, ``gated``), not a tenant queue — ``scheduler_preemption_victims``
and ``scheduler_preemption_attempts_total``. gpufleet's own: per tenant queue its pending
pods, allocation and fair share per resource; the share of GPUs allocated; bind failures;
watch restarts per kind. Each scheduler has its own registry (tests run many at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from gpufleet.model.workload import RESOURCES

if TYPE_CHECKING:
    from gpufleet.scheduler.cache import ClusterCache
    from gpufleet.scheduler.outcome import CycleResult

ATTEMPT_BUCKETS = tuple(0.001 * 2**i for i in range(15))
"""kube-scheduler's: exponential from 1 ms, factor 2, 15 buckets."""
VICTIM_BUCKETS = tuple(float(5**i) for i in range(7))
"""kube-scheduler's: exponential from 1, factor 5, 7 buckets."""

disable_created_metrics()  # type: ignore[no-untyped-call]  # kube-scheduler has no *_created


class Metrics:
    def __init__(self, profile: str) -> None:
        self.profile = profile
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
        self.gpu_allocated = Gauge(
            "gpufleet_gpu_allocated_ratio",
            "The share of the cluster's GPUs that running pods hold.",
            registry=registry,
        )
        self.bind_failures = Counter(
            "gpufleet_bind_failures",
            "Binds the API server refused or could not take (the pod backs off).",
            registry=registry,
        )
        self.watch_restarts = Counter(
            "gpufleet_watch_restarts",
            "Relists after a watch fell out of the server's window (410) or failed.",
            ["kind"],
            registry=registry,
        )

    def cycle(self, result: CycleResult, seconds: float, cache: ClusterCache) -> None:
        """Record one cycle: attempts by result, its duration, preemptions, the queues."""
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
        pending: dict[str, int] = {}
        gated = 0
        for pod in cache.pending():
            if pod.blocked:
                gated += 1
            pending[pod.queue] = pending.get(pod.queue, 0) + 1
        self.queue_pending.clear()  # a queue that drained reads 0, not its last count
        for queue, count in pending.items():
            self.queue_pending.labels(queue).set(count)
        self.pending.labels("active").set(sum(pending.values()) - gated)
        self.pending.labels("gated").set(gated)
        total = ledger.state.total_gpu_milli
        free = int(ledger.state.gpu_idle.sum())
        self.gpu_allocated.set((total - free) / total if total else 0.0)
