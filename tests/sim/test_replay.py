"""The time-driven replay: determinism, conservation, each policy's defining behaviour, and
the cluster cache it drives equal to one built from its objects; cycle after cycle over a
cache, what a cycle learnt lasts (failed classes, failed searches for room)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import TYPE_CHECKING

import pytest

from gpufleet.compose import COMPONENTS, run_cycle
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import (
    GroupSpec,
    PodInfo,
    QueueSpec,
    ReplayJob,
    Snapshot,
)
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Scheduler, snapshot_session
from gpufleet.scheduler.queues.backlog import job_shape
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import Event
from gpufleet.sim.replay import Replay
from tests.scheduler.state.test_cache import (
    assert_same_ledger,
    decisions,
    fresh,
    pending_jobs,
    victims,
)

if TYPE_CHECKING:
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components

RECLAIM = replace(REPLAY_POLICIES["gpufleet"], actions=("consolidate", "reclaim", "preempt"))


def gpu_job(  # noqa: PLR0917 (a table row)
    name: str, queue: str, arrival: float, duration: float, pods: int, gpus: int
) -> ReplayJob:
    return ReplayJob(
        name, queue, arrival, duration, PodSpec(name, 1000 * gpus, 1024 * gpus, gpus, 1000), pods
    )


def nodes(count: int, gpus: int = 8) -> list[NodeSpec]:
    return [NodeSpec(f"node-{i}", 64_000, 512 * 1024, gpus, "V100") for i in range(count)]


def trace() -> list[ReplayJob]:
    jobs = []
    for i in range(60):
        pods = 2 if i % 7 == 0 else 1
        gpus = 8 if pods == 2 else 1 + i % 4
        jobs.append(gpu_job(f"j{i:03d}", "ab"[i % 2], 10.0 * i, 300.0 + 37 * (i % 11), pods, gpus))
    return jobs


@pytest.mark.parametrize("policy", sorted(REPLAY_POLICIES))
def test_same_input_same_json(policy: str) -> None:
    runs = [Replay(nodes(4), trace(), REPLAY_POLICIES[policy], seed=7).run() for _ in range(2)]
    first, second = (r.to_json() for r in runs)
    first.pop("elapsed_s")
    second.pop("elapsed_s")
    assert json.dumps(first) == json.dumps(second)


@pytest.mark.parametrize("policy", sorted(REPLAY_POLICIES))
@pytest.mark.parametrize("until", [None, 400.0])
def test_every_job_is_accounted_and_gpu_time_fits_capacity(
    policy: str, until: float | None
) -> None:
    run = Replay(nodes(3), trace(), REPLAY_POLICIES[policy]).run(until=until)
    assert run.jobs == run.finished_jobs + run.running_jobs + run.pending_jobs
    assert run.gpu_hours <= run.capacity_gpu_hours + 1e-9
    assert sum(q.gpu_hours for q in run.queues) == pytest.approx(run.gpu_hours)
    if until is None:
        assert run.finished_jobs == run.jobs  # every job fits the cluster: all finish
    else:
        assert run.jobs < len(trace())
        assert run.simulated_s == until


@pytest.mark.parametrize(("until", "window"), [(None, 10.0), (5.0, 5.0), (50.0, 10.0)])
def test_allocation_is_averaged_while_jobs_arrive(until: float | None, window: float) -> None:
    # 8 GPUs busy until the last arrival at 10 s; then 4 of 8 until 100 s (the drain).
    jobs = [gpu_job("full", "a", 0.0, 10.0, 1, 8), gpu_job("half", "a", 10.0, 90.0, 1, 4)]
    run = Replay(nodes(1), jobs, REPLAY_POLICIES["fifo-gang"]).run(until=until)
    assert run.allocation_window_s == window
    assert run.gpu_allocation_mean == pytest.approx(100.0)

    end = min(until or 100.0, 100.0)
    assert run.gpu_hours == pytest.approx((8 * min(end, 10) + 4 * max(end - 10, 0)) / 3600)


def test_allocation_of_jobs_that_all_arrive_at_once_is_averaged_to_the_end() -> None:
    # Nothing arrives after 0, so there is no window of arrivals: the whole run counts.
    # The 8-GPU job runs 0-10 s, the 4-GPU one 10-100 s: 440 of 800 GPU-seconds.
    jobs = [gpu_job("full", "a", 0.0, 10.0, 1, 8), gpu_job("half", "a", 0.0, 90.0, 1, 4)]
    run = Replay(nodes(1), jobs, REPLAY_POLICIES["fifo-gang"]).run()
    assert run.allocation_window_s == run.simulated_s == 100.0
    assert run.gpu_allocation_mean == pytest.approx(55.0)


def test_kube_default_lets_a_job_hold_gpus_while_the_rest_of_it_waits() -> None:
    # One 8-GPU node: a 2-pod job of 8 GPUs per pod can never start. kube-default binds
    # its first pod anyway and the 1-GPU job behind it waits; gangs keep the node free.
    jobs = [gpu_job("big", "a", 0.0, 100.0, 2, 8), gpu_job("small", "a", 1.0, 100.0, 1, 1)]
    kube = Replay(nodes(1), jobs, REPLAY_POLICIES["kube-default"]).run(until=500.0)
    assert (kube.finished_jobs, kube.pending_jobs) == (0, 2)
    assert kube.gpu_hours == pytest.approx(8 * 500 / 3600)
    gang = Replay(nodes(1), jobs, REPLAY_POLICIES["gpufleet"]).run(until=500.0)
    assert (gang.finished_jobs, gang.pending_jobs) == (1, 1)
    assert gang.gpu_hours == pytest.approx(100 / 3600)


def test_strict_fifo_blocks_behind_the_first_job_that_does_not_fit() -> None:
    # 8 GPUs: a 6-GPU job runs; an 8-GPU job waits for it; the 1-GPU job arriving next
    # waits behind it under fifo-gang, and passes it under gpufleet (backfill).
    jobs = [
        gpu_job("first", "a", 0.0, 1000.0, 1, 6),
        gpu_job("wide", "a", 1.0, 100.0, 1, 8),
        gpu_job("small", "a", 2.0, 100.0, 1, 1),
    ]
    fifo = Replay(nodes(1), jobs, REPLAY_POLICIES["fifo-gang"]).run()
    assert fifo.wait_quantiles_s[-1] == pytest.approx(1100.0 - 2.0)  # small: after wide
    for name in ("gpufleet", "gang-backfill"):
        backfill = Replay(nodes(1), jobs, REPLAY_POLICIES[name]).run()
        assert sorted([backfill.p50_wait_s or 0.0, backfill.wait_quantiles_s[-1]]) == [0.0, 999.0]


def test_gang_backfill_places_gangs_whole_and_evicts_nothing() -> None:
    run = Replay(nodes(3), trace(), REPLAY_POLICIES["gang-backfill"]).run()
    assert (run.preemptions, run.lost_gpu_hours) == (0, 0.0)
    assert run.finished_jobs == run.jobs == len(trace())


def test_a_job_that_never_starts_counts_in_its_size_class_at_its_wait_so_far() -> None:
    jobs = [gpu_job("huge", "a", 0.0, 100.0, 2, 8), gpu_job("one", "a", 5.0, 100.0, 1, 1)]
    run = Replay(nodes(1), jobs, REPLAY_POLICIES["gang-backfill"]).run(until=1000.0)
    assert run.never_started_jobs == 1
    sizes = {c.size: c for c in run.sizes}
    assert (sizes[">8"].jobs, sizes[">8"].never_started) == (1, 1)
    assert sizes[">8"].mean_wait_s == pytest.approx(1000.0)
    assert (sizes["1"].jobs, sizes["1"].never_started, sizes["1"].mean_wait_s) == (1, 0, 0.0)
    assert run.mean_wait_s == 0.0  # the overall waits are over the jobs that started


def test_reclaim_evicts_and_reruns_a_job_and_counts_the_lost_gpu_time() -> None:
    # Queue a fills the 8-GPU node before b arrives; b's quota (half, by demand) is
    # reclaimed after a's min runtime (30 min). The evicted job reruns from the start.
    # gpufleet's replay default does not reclaim: b waits for a's jobs instead.
    jobs = [
        *(gpu_job(f"a{i}", "a", 0.0, 20_000.0, 1, 4) for i in range(2)),
        gpu_job("b0", "b", 10.0, 40_000.0, 1, 4),
    ]
    default = Replay(nodes(1), jobs, REPLAY_POLICIES["gpufleet"]).run()
    assert (default.preemptions, default.lost_gpu_hours) == (0, 0.0)
    assert default.wait_quantiles_s[-1] == pytest.approx(20_000.0 - 10.0)
    run = Replay(nodes(1), jobs, RECLAIM).run()
    assert run.preemptions == 1
    assert run.finished_jobs == 3
    assert run.lost_gpu_hours == pytest.approx(4 * 1800 / 3600, rel=0.2)
    usage = {q.queue: q for q in run.queues}
    assert usage["b"].gpu_hours == pytest.approx(4 * 40_000 / 3600)


def test_room_probed_anywhere_is_made_once_inside_a_rack() -> None:
    """A rack-preferred gang that needs preemption: the search anywhere is only a probe, so
    the cluster's state afterwards is exactly what the bindings and evictions say."""
    rack = "topology.gpufleet.io/rack"
    racks = [
        NodeSpec(f"n{i}", 64_000, 512 * 1024, 8, "V100", labels={rack: f"r{i // 2}"})
        for i in range(4)
    ]
    low = [
        PodInfo(f"ns/low{i}", PodSpec(f"low{i}", 1000, 1024, 4, 1000), node=f"n{i}", started=0.0)
        for i in range(4)
    ]
    gang = [
        PodInfo(f"ns/g{k}", PodSpec(f"g{k}", 1000, 1024, 8, 1000), group="ns/g", priority=10)
        for k in range(2)
    ]
    snapshot = Snapshot(
        tuple(racks),
        (*low, *gang),
        (GroupSpec("ns/g", 2, topology_preferred=rack),),
        topology=(rack,),
    )
    cycle = snapshot_session(
        snapshot, CycleConfig(actions=("preempt",)), 10_000.0, components=COMPONENTS
    ).cycle
    result = cycle.run()
    assert sorted(b.pod for b in result.bindings) == ["ns/g0", "ns/g1"]
    nodes = {b.node for b in result.bindings}
    assert len({n.labels[rack] for n in racks if n.name in nodes}) == 1  # one rack
    evicted = {e.pod for e in result.evictions}
    assert evicted in ({"ns/low0", "ns/low1"}, {"ns/low2", "ns/low3"})
    used = 8 * 4 - int(cycle.ledger.state.gpu_idle.sum()) // 1000
    assert used == sum(r.spec.num_gpu for r in cycle.ledger.running.values()) == 16 + 8


def test_consolidation_may_move_a_shared_pod_to_another_gpu_of_its_node() -> None:
    node = NodeSpec("n1", 64_000, 512 * 1024, 2, "V100")
    pods = (
        PodInfo("ns/r", PodSpec("r", 1000, 1024, 1, 300), node="n1", gpus=(0,), started=0.0),
        PodInfo("ns/s", PodSpec("s", 1000, 1024, 1, 600), node="n1", gpus=(1,), started=0.0),
        PodInfo("ns/new", PodSpec("new", 1000, 1024, 1, 800)),
    )
    result = snapshot_session(
        Snapshot((node,), pods), CycleConfig(actions=("consolidate",)), 100.0, components=COMPONENTS
    ).cycle.run()
    assert [e.pod for e in result.evictions] == ["ns/r"]
    assert {b.pod: b.gpus for b in result.bindings} == {"ns/new": (0,), "ns/r": (1,)}


def test_a_gang_no_node_can_run_keeps_the_filters_reason() -> None:
    node = NodeSpec("n1", 64_000, 512 * 1024, 8, "V100")
    spec = PodSpec("g", 1000, 1024, 8, 1000, frozenset({"H100"}))
    pods = tuple(PodInfo(f"ns/g{k}", spec, group="ns/g") for k in range(2))
    result = snapshot_session(
        Snapshot((node,), pods, (GroupSpec("ns/g", 2),)), CycleConfig(), 0.0, components=COMPONENTS
    ).cycle.run()
    assert "GPU model" in why_text(result.pending[0].why)


def test_consolidation_is_retried_once_new_pods_may_move() -> None:
    """A failed consolidation is remembered until capacity is freed or pods join the pool."""
    cache, scheduler = _scheduler(
        [NodeSpec(f"n{i}", 64_000, 512 * 1024, 2, "V100") for i in (1, 2)],
        [PodInfo("ns/fixed", PodSpec("fixed", 1000, 1024, 1, 1000), node="n1", priority=200)],
        CycleConfig(policy="kube-default", actions=("consolidate",)),
    )
    # a is served first (a higher priority); b has waited long enough to earn moving a
    # (2 GPUs x 110 s against 1 GPU x 10 s)
    _wait(cache, "a", 1, 1.0, priority=10)
    _wait(cache, "b", 2, -100.0)
    first = scheduler.run(0.0)
    assert [b.pod for b in first.bindings] == ["ns/a"]
    _confirm(cache, first, 0.0)
    second = scheduler.run(10.0)
    assert [e.pod for e in second.evictions] == ["ns/a"]
    assert sorted(b.pod for b in second.bindings) == ["ns/a", "ns/b"]


def _scheduler(
    nodes: list[NodeSpec], running: list[PodInfo], config: CycleConfig
) -> tuple[ClusterCache[Components], Scheduler]:
    """A cache of ``nodes`` and ``running`` pods, and a Scheduler over it. FGD's workload
    is fixed, as in a replay: the Scheduler keeps its cycle across pods coming and going."""
    cache = ClusterCache(
        config.non_preemptible_priority, components=COMPONENTS, workload=[p.spec for p in running]
    )
    cache.apply_all(Event("ADDED", "Node", n) for n in nodes)
    cache.apply_all(Event("ADDED", "Pod", p) for p in running)
    return cache, Scheduler(cache, config)


def _backlog_scheduler(
    running: list[int], config: CycleConfig
) -> tuple[ClusterCache[Components], Scheduler]:
    """One 8-GPU node running pods of the given GPU counts, and nothing waiting."""
    pods = [
        PodInfo(f"ns/run{i}", PodSpec(f"run{i}", 1000, 1024, g, 1000), node="n1")
        for i, g in enumerate(running)
    ]
    return _scheduler([NodeSpec("n1", 64_000, 512 * 1024, 8, "V100")], pods, config)


def _wait(
    cache: ClusterCache[Components], name: str, gpus: int, created: float, priority: int = 0
) -> None:
    spec = PodSpec(name, 1000, 1024, gpus, 1000)
    pod = PodInfo(f"ns/{name}", spec, created=created, priority=priority)
    cache.apply(Event("ADDED", "Pod", pod))


def _finish(cache: ClusterCache[Components], key: str) -> None:
    cache.apply(Event("DELETED", "Pod", cache.pods[key]))


def _confirm(cache: ClusterCache[Components], result: CycleResult, now: float) -> None:
    """The bindings of ``result`` seen bound, as a watch reports them."""
    for b in result.bindings:
        pod = replace(cache.pods[b.pod], node=b.node, gpus=b.gpus or (), started=now)
        cache.apply(Event("MODIFIED", "Pod", pod))


def test_a_failed_class_is_tried_again_only_once_it_can_fit() -> None:
    cache, scheduler = _backlog_scheduler([4, 2, 2], CycleConfig(actions=()))
    _wait(cache, "wide", 8, 1.0)
    assert not scheduler.settled()  # never tried
    assert scheduler.run(1.0, act=False).bindings == ()  # judged before it is tried: no fit
    assert scheduler.settled()
    _finish(cache, "ns/run0")  # 4 GPUs free: still too few, so the class is not tried
    assert scheduler.settled()
    assert scheduler.run(2.0, act=False).pending == ()
    _finish(cache, "ns/run1")
    _finish(cache, "ns/run2")
    assert not scheduler.settled()
    assert [b.pod for b in scheduler.run(3.0, act=False).bindings] == ["ns/wide"]


@pytest.mark.parametrize("strict", [True, False])
def test_strict_fifo_waits_on_its_failed_head_across_cycles(strict: bool) -> None:
    cache, scheduler = _backlog_scheduler([4], CycleConfig(actions=(), strict_fifo=strict))
    _wait(cache, "wide", 8, 1.0)
    scheduler.run(1.0, act=False)
    assert scheduler.settled()
    _wait(cache, "small", 1, 2.0)  # behind the failed head: strict FIFO has nothing to try
    assert scheduler.settled() is strict
    bound = [b.pod for b in scheduler.run(2.0, act=False).bindings]
    assert bound == ([] if strict else ["ns/small"])


def test_queues_are_ordered_by_the_fair_shares_of_this_cycle() -> None:
    """A replay keeps one Cycle: when an arrival changes the fair shares, the order of the
    queues follows, although no allocation and no head job changed."""
    node = NodeSpec("n1", 64_000, 512 * 1024, 8, "V100")

    def pod(name: str, queue: str, gpus: int, **kw: object) -> PodInfo:
        return PodInfo(f"ns/{name}", PodSpec(name, 0, 0, gpus, 1000), queue=queue, **kw)  # type: ignore[arg-type]

    running = (pod("a-run", "a", 3, node="n1"), pod("b-run", "b", 1, node="n1"))
    queues = (QueueSpec("a"), QueueSpec("b"))
    cycle = snapshot_session(
        Snapshot((node,), running, queues=queues),
        CycleConfig(),
        0.0,
        components=COMPONENTS,
    ).cycle
    heads: dict[str, Job] = {}
    for name, queue, gpus, created in (
        ("a1", "a", 1, 1.0),
        ("a2", "a", 2, 2.0),
        ("b1", "b", 1, 1.0),
    ):
        p = pod(name, queue, gpus, created=created)
        job = Job(p.key, queue, 0, created, 1, (p,), 0, True)
        cycle.backlog.add(job, job_shape(job))
        heads.setdefault(queue, job)
    cycle.begin(1.0)  # demands a 6, b 2 GPUs: fair shares 6 and 2
    assert cycle.order.key("a", heads["a"]) < cycle.order.key("b", heads["b"])
    late = pod("b2", "b", 4, created=3.0)
    job = Job(late.key, "b", 0, 3.0, 1, (late,), 0, True)
    cycle.backlog.add(job, job_shape(job))
    cycle.begin(2.0)  # demands a 6, b 6 GPUs: fair shares 4 and 4
    assert cycle.fair["b"][0] == 4
    assert cycle.order.key("b", heads["b"]) < cycle.order.key("a", heads["a"])


def test_fair_shares_are_those_of_the_cycle_start() -> None:
    """A gang released as stale during the cycle still counts in the shares it was divided
    by: queue a held 6 GPUs and asked 2 more, b asked 8, on 8 GPUs: 4 and 4."""
    node = NodeSpec("n1", 64_000, 512 * 1024, 8, "V100")

    def pod(name: str, queue: str, gpus: int, **kw: object) -> PodInfo:
        return PodInfo(f"ns/{name}", PodSpec(name, 0, 0, gpus, 1000), queue=queue, **kw)  # type: ignore[arg-type]

    pods = [pod(f"g{i}", "a", 2, group="ns/g", node="n1", started=0.0) for i in range(3)]
    pods += [pod(f"a{i}", "a", 1, created=1.0) for i in range(2)]
    pods += [pod(f"b{i}", "b", 1, created=1.0) for i in range(8)]
    gang = GroupSpec("ns/g", 4, "a", 0.0, stale_since=0.0)
    snapshot = Snapshot((node,), tuple(pods), (gang,), (QueueSpec("a"), QueueSpec("b")))
    result = run_cycle(snapshot, 10_000.0, CycleConfig())
    assert [e.action for e in result.evictions] == ["stale-gang"] * 3
    assert {q: float(v[0]) for q, v in result.fair_shares.items()} == {
        "a": 4.0, "b": 4.0, "default": 0.0,
    }  # fmt: skip


@pytest.mark.parametrize("records", [True, False])
def test_a_cycle_without_records_binds_the_same(records: bool) -> None:
    """A replay reads no per-job records or fair shares (explain does): without them a
    cycle decides the same and reports neither."""
    cache, scheduler = _backlog_scheduler([4], CycleConfig(records=records))
    _wait(cache, "fits", 2, 1.0)
    _wait(cache, "also", 2, 2.0)
    result = scheduler.run(1.0)
    assert [b.pod for b in result.bindings] == ["ns/fits", "ns/also"]
    assert [r.outcome for r in result.jobs] == (["bound", "bound"] if records else [])
    assert bool(result.fair_shares) is records


@pytest.mark.parametrize(
    ("policy", "jobs", "until"),
    [
        *(
            pytest.param(REPLAY_POLICIES[name], "trace", until, id=f"{name}-{until:g}")
            for name in sorted(REPLAY_POLICIES)
            for until in (150.0, 400.0)
        ),
        pytest.param(RECLAIM, "reclaim", 2500.0, id="reclaimed"),
    ],
)
def test_the_replays_cache_equals_one_built_from_its_objects(
    policy: ReplayPolicy, jobs: str, until: float
) -> None:
    """Whatever arrived, ran, finished or was evicted, the cache the replay applied its events
    to holds what a cache built from scratch from its objects holds — what runs where, each
    queue's allocation, the victims, the decisions of a cycle — every bind is confirmed,
    every evicted pod deleted, and the jobs waiting are those its pending pods make."""
    trace_jobs = trace() if jobs == "trace" else _reclaim_jobs()
    replay = Replay(nodes(3 if jobs == "trace" else 1), trace_jobs, policy)
    run = replay.run(until=until)
    assert run.preemptions == (1 if jobs == "reclaim" else 0)
    cache = replay.cache
    assert (cache.assumed, cache.evicted) == ({}, set())
    bound = {k for k, p in cache.pods.items() if p.bound}
    assert bound == set(cache.ledger().running)
    assert all(key in replay.meter for key in cache.pods)  # no pod outlives its job
    scratch = fresh(cache)
    assert_same_ledger(cache.ledger(), scratch.ledger())
    assert victims(cache, set()) == victims(scratch, set())
    assert replay.scheduler.jobs() == pending_jobs(scratch)
    assert decisions(cache, until) == decisions(scratch, until)


def _reclaim_jobs() -> list[ReplayJob]:
    """Queue a fills an 8-GPU node; b's job reclaims half of it after a's min runtime."""
    return [
        *(gpu_job(f"a{i}", "a", 0.0, 20_000.0, 1, 4) for i in range(2)),
        gpu_job("b0", "b", 10.0, 40_000.0, 1, 4),
    ]


def test_checkpoints_keep_work_and_a_restart_costs_its_time() -> None:
    # As above, one 4-GPU job of a is reclaimed after running about 30 minutes. With
    # checkpoints every 10 minutes it keeps 30 of them; its restart costs 2 minutes.
    jobs = [
        *(gpu_job(f"a{i}", "a", 0.0, 20_000.0, 1, 4) for i in range(2)),
        gpu_job("b0", "b", 10.0, 40_000.0, 1, 4),
    ]
    plain = Replay(nodes(1), jobs, RECLAIM).run()
    saved = Replay(nodes(1), jobs, RECLAIM, checkpoint_interval_s=600.0, restart_s=120.0).run()
    assert saved.lost_gpu_hours == pytest.approx(plain.lost_gpu_hours - 4 * (1800 - 120) / 3600)
    (tally,) = saved.actions
    assert (tally.action, tally.evictions, tally.jobs_started) == ("reclaim", 1, 1)
    assert tally.lost_gpu_hours == pytest.approx(saved.lost_gpu_hours)
    assert tally.waited_gpu_hours > 0
    assert saved.finished_jobs == 3
    # the evicted job needs only the rest of its run, after its restart
    assert saved.mean_jct_s is not None
    assert plain.mean_jct_s is not None
    assert saved.mean_jct_s < plain.mean_jct_s
