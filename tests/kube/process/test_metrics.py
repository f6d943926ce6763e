"""``scheduler_pending_pods`` as kube-scheduler counts it: each pending pod in exactly one
queue — ``backoff`` (its bind backing off), ``gated`` (blocked otherwise) or ``active`` —
so that the queues add up to the pending pods (``kube/process/metrics.py``)."""

from __future__ import annotations

import pytest

from gpufleet.cost.prices import NodeType, PriceSheet, UnitPrices
from gpufleet.kube.process.metrics import Metrics, PodLatency
from gpufleet.model.pod import PodSpec
from gpufleet.model.progress import Progress
from gpufleet.model.workload import PodInfo, QueueSpec, vector
from gpufleet.scheduler.api.outcome import Binding, CycleResult, Eviction, Pending, WhyCode, why
from gpufleet.scheduler.state.changes import Event
from tests.scheduler.state.test_cache import bound, cache_of, gpu_node, pending

NO_CYCLE = CycleResult(bindings=(), evictions=(), pending=())
NO_ROOM = why(WhyCode.QUEUE_MISSING, queue="q")


def queues(metrics: Metrics) -> dict[str, float]:
    sample = metrics.registry.get_sample_value
    return {
        q: sample("scheduler_pending_pods", {"queue": q}) or 0.0
        for q in ("active", "backoff", "gated")
    }


def test_a_held_pod_is_in_backoff_only() -> None:
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")),
        Event("ADDED", "Pod", bound("ns/running", "n0", (0,))),
        Event("ADDED", "Pod", pending("ns/a")),
        Event("ADDED", "Pod", pending("ns/b")),
        Event("ADDED", "Pod", pending("ns/gated", blocked="waiting for its scheduling gates")),
        # held as ObjectStore.hold makes it: blocked, for the bind's backoff
        Event("ADDED", "Pod", pending("ns/held", blocked="bind failed: 500; retry in 1s")),
    )
    metrics = Metrics("gpufleet")
    # a held pod that is no longer pending (bound by now, or deleted) is in no queue
    metrics.cycle(NO_CYCLE, 0.01, cache, held={"ns/held", "ns/running", "ns/gone"})

    counted = queues(metrics)
    assert counted == {"active": 2, "backoff": 1, "gated": 1}
    assert sum(counted.values()) == len(cache.pending()) == 4


def test_without_holds_a_blocked_pod_is_gated() -> None:
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")),
        Event("ADDED", "Pod", pending("ns/a")),
        Event("ADDED", "Pod", pending("ns/gated", blocked="waiting for its scheduling gates")),
    )
    metrics = Metrics("gpufleet")
    metrics.cycle(NO_CYCLE, 0.01, cache)
    assert queues(metrics) == {"active": 1, "backoff": 0, "gated": 1}
    # set by the cycle, not left for the caller: the three always come from one count
    assert metrics.registry.get_sample_value("scheduler_pending_pods", {"queue": "backoff"}) == 0


def test_hourly_cost_per_queue_and_idle_by_the_price_sheet() -> None:
    sheet = PriceSheet(
        "test",
        "USD",
        "test prices",
        (
            NodeType(
                "h100", ("nvidia.com/gpu.product", "H100"), "on-demand", UnitPrices(3, 0.05, 0.01)
            ),
        ),
    )
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")),  # 4 H100s, 32 cores, 128 GiB: 14.88 $/h
        Event(
            "ADDED", "Pod", bound("ns/running", "n0", (0,), queue="team")
        ),  # 1 GPU, 1 core, 1 GiB
        Event("ADDED", "Pod", pending("ns/waiting", queue="other")),
    )
    metrics = Metrics("gpufleet", sheet)
    metrics.cycle(NO_CYCLE, 0.01, cache)
    sample = metrics.registry.get_sample_value
    assert sample("gpufleet_cluster_hourly_cost") == pytest.approx(14.88)
    team = {
        r: sample("gpufleet_queue_hourly_cost", {"queue": "team", "resource": r})
        for r in ("gpu", "cpu", "memory")
    }
    assert team == pytest.approx({"gpu": 3.0, "cpu": 0.05, "memory": 0.01})
    assert sample("gpufleet_queue_hourly_cost", {"queue": "other", "resource": "gpu"}) is None
    idle = {
        r: sample("gpufleet_idle_hourly_cost", {"resource": r}) for r in ("gpu", "cpu", "memory")
    }
    assert idle == pytest.approx({"gpu": 9.0, "cpu": 1.55, "memory": 1.27})
    assert Metrics("gpufleet").registry.get_sample_value("gpufleet_cluster_hourly_cost") == 0.0


def test_a_pod_made_again_under_its_name_enters_the_queue_anew() -> None:
    """The SLI counts from when a pod entered the queue: a pod deleted and made again under
    the same name (a new uid), with neither event seen in between (a relist), starts
    again, with no attempts counted."""
    first = pending("ns/a", uid="uid-1")
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0", gpus=0)), Event("ADDED", "Pod", first))
    latency = PodLatency()
    latency.pending("ns/a", 100.0, "uid-1")
    tried = CycleResult(bindings=(), evictions=(), pending=(Pending("ns/a", NO_ROOM),))
    latency.tried(tried, cache)
    assert (latency.seen, latency.attempts) == ({"ns/a": 100.0}, {"ns/a": 1})
    latency.pending("ns/a", 130.0, "uid-1")  # the same pod again: it keeps its entry
    assert latency.seen == {"ns/a": 100.0}
    again = pending("ns/a", uid="uid-2")
    cache.apply(Event("MODIFIED", "Pod", again))
    latency.tried(NO_CYCLE, cache)  # the cache shows another pod under the name
    assert latency.seen == {}
    latency.pending("ns/a", 160.0, "uid-2")
    assert (latency.seen, latency.attempts) == ({"ns/a": 160.0}, {})
    latency.pending("ns/a", 190.0, "uid-3")  # made again, seen by its watch event
    assert latency.seen == {"ns/a": 190.0}


def test_each_action_counts_its_evictions_the_work_they_lost_and_the_jobs_it_started() -> None:
    old = PodInfo("ns/old", PodSpec("old", 1000, 1024, 2, 1000), started=0.0)
    saved = PodInfo(
        "ns/saved",
        PodSpec("saved", 1000, 1024, 1, 1000),
        started=0.0,
        progress=Progress(checkpoint_interval_s=600.0),
    )
    job = PodInfo("ns/job", PodSpec("job", 1000, 1024, 4, 1000))
    result = CycleResult(
        bindings=(Binding("ns/job", "n0", (0, 1, 2, 3)),),
        evictions=(
            Eviction("ns/old", "preempt", "ns/job"),
            Eviction("ns/saved", "preempt", "ns/job"),
        ),
        pending=(),
    )
    metrics = Metrics("gpufleet")
    pods = {p.key: p for p in (old, saved, job)}
    metrics.evicted(result, pods, now=1000.0, restart_s=60.0)
    sample = metrics.registry.get_sample_value
    assert sample("gpufleet_evictions_total", {"action": "preempt"}) == 2
    # 2 GPUs x (1000 s + 60) and 1 GPU x (400 s since its 600 s checkpoint + 60)
    assert (
        sample("gpufleet_evicted_work_gpu_seconds_total", {"action": "preempt"}) == 2 * 1060 + 460
    )
    assert sample("gpufleet_room_made_jobs_total", {"action": "preempt"}) == 1


def test_lent_and_borrowed_gpus_per_queue_and_reclaims_by_the_queue_that_reclaimed() -> None:
    """Training runs 3 GPUs on a quota of 1: it borrows 2, which the serving queue (quota 4,
    1 in use) lends; a reclaim for the serving queue's replica counts for it."""
    serving = QueueSpec("inference", quota=vector(4.0), serving=True)
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")),
        Event("ADDED", "Queue", serving),
        Event("ADDED", "Queue", QueueSpec("train", quota=vector(1.0))),
        Event("ADDED", "Pod", bound("inference/r0", "n0", (0,), queue="inference")),
        Event("ADDED", "Pod", bound("train/a", "n0", (1, 2, 3), queue="train")),
        Event("ADDED", "Pod", pending("inference/r1", queue="inference")),
    )
    metrics = Metrics("gpufleet")
    metrics.cycle(NO_CYCLE, 0.01, cache)
    sample = metrics.registry.get_sample_value
    assert sample("gpufleet_queue_lent_gpus", {"queue": "inference"}) == 2.0
    assert sample("gpufleet_queue_borrowed_gpus", {"queue": "train"}) == 2.0
    assert sample("gpufleet_queue_borrowed_gpus", {"queue": "inference"}) == 0.0
    result = CycleResult(
        bindings=(Binding("inference/r1", "n0", (1,), pipelined=True),),
        evictions=(Eviction("train/a", "reclaim", "inference/r1"),),
        pending=(),
    )
    metrics.evicted(result, cache.pods, now=100.0, restart_s=0.0)
    assert sample("gpufleet_reclaims_total", {"queue": "inference"}) == 1.0
