"""Metering from facts: GPU time per queue, lost work, allocation over time, waits and JCT,
and the facts that can only come from a bug."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pytest

from gpufleet.metering.meter import Meter
from gpufleet.model.workload import QueueSpec, vector

Fact = Callable[[Meter], None]


def queue(pod: str, q: str, gpus: float, at: float) -> Fact:
    return lambda m: m.queued(pod, q, gpus, at)


def start(pod: str, q: str, gpus: float, at: float) -> Fact:
    return lambda m: m.started(pod, q, gpus, at)


def stop(pod: str, at: float) -> Fact:
    return lambda m: m.stopped(pod, at)


def evict(pod: str, at: float) -> Fact:
    return lambda m: m.stopped(pod, at, evicted=True)


def arrive(job: str, q: str, at: float, gpus: float = 1.0) -> Fact:
    return lambda m: m.arrived(job, q, at, gpus=gpus)


def run(job: str, at: float) -> Fact:
    return lambda m: m.job_started(job, at)


def finish(job: str, at: float) -> Fact:
    return lambda m: m.job_stopped(job, at)


def preempt(job: str, at: float) -> Fact:
    return lambda m: m.job_stopped(job, at, evicted=True)


def meter(
    facts: Sequence[Fact],
    *,
    capacity: float = 8.0,
    queues: Sequence[QueueSpec] = (QueueSpec("a"), QueueSpec("b")),
    sample_every: float = 10.0,
    average_until: float = math.inf,
    max_samples: int | None = None,
) -> Meter:
    m = Meter(
        queues,
        capacity,
        sample_every=sample_every,
        average_until=average_until,
        max_samples=max_samples,
    )
    for fact in facts:
        fact(m)
    return m


@pytest.mark.parametrize(
    ("facts", "end", "gpu_s", "lost_s"),
    [
        pytest.param(
            [start("p", "a", 2, 10), stop("p", 40)], 100, {"a": 60, "b": 0}, 0, id="one pod"
        ),
        pytest.param(
            [start("p", "a", 2, 10)], 100, {"a": 180, "b": 0}, 0, id="still running at the end"
        ),
        pytest.param(
            [start("p", "b", 0.25, 0), stop("p", 100)],
            100,
            {"a": 0, "b": 25},
            0,
            id="a share counts its fraction",
        ),
        pytest.param(
            [start("p", "a", 4, 100), evict("p", 400)],
            500,
            {"a": 1200, "b": 0},
            1200,
            id="an eviction loses the work done",
        ),
        pytest.param(
            [start("p", "a", 0.5, 0), evict("p", 10), start("p", "a", 0.5, 10), stop("p", 30)],
            50,
            {"a": 15, "b": 0},
            5,
            id="a moved pod loses only its first run",
        ),
        pytest.param(
            [
                start("p", "a", 1, 0),
                start("q", "a", 2, 5),
                start("r", "b", 3, 5),
                stop("p", 10),
                evict("q", 20),
                stop("r", 20),
            ],
            20,
            {"a": 40, "b": 45},
            30,
            id="overlapping pods of two queues",
        ),
        pytest.param(
            [queue("p", "a", 8, 0), stop("p", 50)], 100, {"a": 0, "b": 0}, 0, id="waiting is free"
        ),
    ],
)
def test_pods_give_their_gpu_time_to_their_queue(
    facts: list[Fact], end: float, gpu_s: dict[str, float], lost_s: float
) -> None:
    m = meter(facts)
    m.advance(end)
    assert m.queue_gpu_seconds() == pytest.approx(gpu_s)
    assert m.gpu_seconds == pytest.approx(sum(gpu_s.values()))
    assert m.lost_gpu_seconds == pytest.approx(lost_s)
    reading = m.reading(end)
    assert {u.queue: u.gpu_hours * 3600 for u in reading.queues} == pytest.approx(gpu_s)
    assert reading.lost_gpu_hours * 3600 == pytest.approx(lost_s)
    assert reading.gpu_hours * 3600 == pytest.approx(sum(gpu_s.values()))
    assert reading.capacity_gpu_hours * 3600 == pytest.approx(8 * end)


def test_overlapping_pods_give_the_allocation_curve() -> None:
    # a: 2 GPUs over [0, 30), 3 over [15, 45); b: a share of 0.5 that waits over [0, 25)
    # and runs over [25, 60). Every 10 s a sample takes what was held and asked for then.
    m = meter(
        [
            start("a1", "a", 2, 0),
            queue("w", "b", 0.5, 0),
            start("a2", "a", 3, 15),
            start("w", "b", 0.5, 25),
            stop("a1", 30),
            stop("a2", 45),
            stop("w", 60),
        ],
    )
    timeline = m.reading(60).timeline
    assert timeline.time_s == (0, 10, 20, 30, 40, 50)
    assert timeline.allocated == {"a": (2, 2, 5, 3, 3, 0), "b": (0, 0, 0, 0.5, 0.5, 0.5)}
    assert timeline.pending_gpus == (0.5, 0.5, 0.5, 0, 0, 0)


@pytest.mark.parametrize(
    ("end", "average_until", "allocation", "window"),
    [
        pytest.param(100, math.inf, 25.0, 100, id="to the end"),
        pytest.param(100, 50, 50.0, 50, id="to the window's end"),
        pytest.param(40, 50, 50.0, 40, id="the end comes first"),
        pytest.param(100, 0, 25.0, 100, id="an empty window: to the end"),
    ],
)
def test_allocation_is_time_weighted_over_its_window(
    end: float, average_until: float, allocation: float, window: float
) -> None:
    # 4 of 8 GPUs held over [0, 50)
    facts = [start("p", "a", 4, 0)] + ([stop("p", 50)] if end > 50 else [])
    m = meter(facts, average_until=average_until)
    reading = m.reading(end)
    assert reading.gpu_allocation_mean == pytest.approx(allocation)
    assert reading.allocation_window_s == window


def test_jobs_waits_and_completion_times() -> None:
    m = meter(
        [
            arrive("j1", "a", 0),
            arrive("j2", "b", 10),
            run("j1", 20),
            arrive("j3", "a", 20),
            preempt("j1", 50),  # waits again: its wait stays the one to its first start
            run("j2", 60),
            run("j1", 70),
            finish("j2", 90),
            arrive("j4", "b", 95),
        ]
    )
    reading = m.reading(100)
    assert (reading.jobs, reading.finished_jobs, reading.running_jobs) == (4, 1, 1)
    assert reading.pending_jobs == 2
    assert reading.preemptions == 1
    assert reading.mean_wait_s == pytest.approx((20 + 50) / 2)
    assert reading.p50_wait_s == pytest.approx(35)
    assert reading.wait_quantiles_s[0] == 20
    assert reading.wait_quantiles_s[100] == 50
    assert reading.mean_jct_s == 80
    assert [(u.queue, u.jobs) for u in reading.queues] == [("a", 2), ("b", 2)]


def test_waits_per_job_size_count_the_jobs_that_never_started() -> None:
    m = meter(
        [
            arrive("small", "a", 0, gpus=0.5),  # a share counts as the 1-GPU class
            arrive("one", "a", 0, gpus=1),
            arrive("four", "a", 0, gpus=4),
            run("small", 10),
            arrive("eight", "b", 20, gpus=8),  # never starts: waits from 20 to the end, 100
            run("one", 30),
            run("four", 40),
            arrive("big", "b", 60, gpus=16),  # never starts: waits 40 so far
        ]
    )
    reading = m.reading(100)
    sizes = {c.size: c for c in reading.sizes}
    assert list(sizes) == ["1", "2-4", "5-8", ">8"]
    assert (sizes["1"].jobs, sizes["1"].never_started, sizes["1"].mean_wait_s) == (2, 0, 20)
    assert (sizes["2-4"].jobs, sizes["2-4"].p95_wait_s) == (1, 40)
    assert (sizes["5-8"].never_started, sizes["5-8"].mean_wait_s) == (1, 80)
    assert (sizes[">8"].never_started, sizes[">8"].p50_wait_s) == (1, 40)
    assert reading.never_started_jobs == 2
    # The overall waits are over the jobs that started; the classes hide no starvation.
    assert reading.mean_wait_s == pytest.approx((10 + 30 + 40) / 3)


def test_a_size_class_without_jobs_has_no_waits() -> None:
    reading = meter([arrive("one", "a", 0, gpus=1), run("one", 5)]).reading(10)
    empty = [c for c in reading.sizes if c.size != "1"]
    assert all(c.jobs == 0 and c.mean_wait_s is None for c in empty)


def test_no_jobs_no_waits() -> None:
    reading = meter([]).reading(10)
    assert reading.mean_wait_s is reading.mean_jct_s is None
    assert reading.wait_quantiles_s == ()
    assert (reading.jobs, reading.gpu_allocation_mean) == (0, 0.0)


def test_fair_shares_are_integrated_over_demand() -> None:
    # Quotas 6 and 2 of 8 GPUs. Over [0, 10) only a asks (2 held + 8 waiting): all 8 are its
    # share. Over [10, 20) b asks for 4: it gets its quota of 2, and the 6 left go to a.
    queues = (
        QueueSpec("a", quota=vector(6), quota_set=(True, False, False)),
        QueueSpec("b", quota=vector(2), quota_set=(True, False, False)),
    )
    m = meter(
        [start("a1", "a", 2, 0), queue("a2", "a", 8, 0), queue("b1", "b", 4, 10)], queues=queues
    )
    fair = {u.queue: u.fair_share_gpu_hours * 3600 for u in m.reading(20).queues}
    assert fair == pytest.approx({"a": 80 + 60, "b": 20})


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        pytest.param([stop("ghost", 0)], "neither running nor queued", id="stop an unknown pod"),
        pytest.param([start("p", "a", 1, 0), stop("p", 5), stop("p", 6)], "neither", id="twice"),
        pytest.param([start("p", "a", 1, 0), start("p", "a", 1, 1)], "started twice", id="bind"),
        pytest.param([queue("p", "a", 1, 0), queue("p", "a", 1, 1)], "already", id="queue"),
        pytest.param([start("p", "nowhere", 1, 0)], "unknown queue", id="queue unknown"),
        pytest.param([start("p", "a", 1, 10), stop("p", 5)], "time went back", id="time"),
        pytest.param([start("p", "a", 6, 0), start("q", "b", 3, 0), stop("p", 10)], "9 GPUs"),
        pytest.param([run("j", 0)], "never arrived", id="job unknown"),
        pytest.param([arrive("j", "a", 0), arrive("j", "a", 1)], "arrived twice", id="arrive"),
        pytest.param([arrive("j", "a", 0), finish("j", 5)], "without running", id="not run"),
        pytest.param(
            [arrive("j", "a", 0), run("j", 1), run("j", 2)], "while it runs", id="run twice"
        ),
        pytest.param(
            [arrive("j", "a", 0), run("j", 1), finish("j", 2), preempt("j", 3)],
            "finished already",
            id="after the finish",
        ),
    ],
)
def test_impossible_facts_are_bugs(facts: list[Fact], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        meter(facts)


def test_sampling_needs_a_period() -> None:
    with pytest.raises(ValueError, match="sample_every"):
        meter([], sample_every=0)


def test_same_facts_same_reading() -> None:
    facts = [
        arrive("j", "a", 0),
        queue("j/0", "a", 0.3, 0),
        queue("j/1", "a", 0.3, 0),
        start("j/0", "a", 0.3, 7),
        start("j/1", "a", 0.3, 7),
        run("j", 7),
        evict("j/0", 13),
        evict("j/1", 13),
        preempt("j", 13),
        start("k", "b", 3, 21),
    ]
    first, second = (meter(facts).reading(100) for _ in range(2))
    assert first == second
    assert first.lost_gpu_hours > 0


def test_a_pod_is_in_the_meter_while_it_waits_or_runs() -> None:
    m = meter([queue("p", "a", 1, 0)])
    assert "p" in m
    m.started("p", "a", 1, 5)
    assert "p" in m
    m.stopped("p", 9)
    assert "p" not in m


def test_waiting_pods_are_pending_until_they_start_or_leave() -> None:
    m = meter([queue("p", "a", 2, 0), queue("q", "b", 3, 0), start("p", "a", 2, 10), stop("q", 20)])
    assert m.reading(30).timeline.pending_gpus == (5, 3, 0)


def test_a_long_run_thins_its_timeline_evenly() -> None:
    """With room for 4 samples every 10 s: at 4 samples every other one goes and the step
    doubles (0, 20; then 40, 60 and again 0, 40; then 80), each sample still what was held
    at its time. The totals are the intervals', not the samples'."""
    facts = [start("p", "a", 2, 0), start("q", "a", 3, 35), stop("p", 70), stop("q", 85)]
    m = meter(facts, max_samples=4)
    reading = m.reading(100)
    assert reading.timeline.time_s == (0, 40, 80)
    assert reading.timeline.allocated == {"a": (2, 5, 3), "b": (0, 0, 0)}
    assert reading.gpu_hours * 3600 == pytest.approx(2 * 70 + 3 * 50)
    unthinned = meter(facts).reading(100).timeline
    assert unthinned.time_s == tuple(range(0, 100, 10))
    assert unthinned.allocated["a"][::4] == reading.timeline.allocated["a"]


@pytest.mark.parametrize("bad", [0, 1, 3])
def test_max_samples_must_be_even_and_two_or_more(bad: int) -> None:
    with pytest.raises(ValueError, match="max_samples"):
        meter([], max_samples=bad)
