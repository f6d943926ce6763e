"""A session (``scheduler/cycle/session.py``): one cycle over the cluster cache. With ``assume``
the cycle works on the cache's own ledger and its result is assumed in the cache; without,
it works on a copy with the cache's content and leaves the cache as it was. Either way it
decides as a cycle over the same objects as a snapshot does."""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from gpufleet.compose import COMPONENTS, run_cycle, schedule_snapshot
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.devices import Claim, Device, DeviceClass, Pool, Request, Subrequest
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.cycle.components import Components
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Scheduler, Session
from gpufleet.scheduler.placement.topology import DomainTopology
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import Event, Topology, snapshot_events
from tests.builders import free_of, info, node

CONFIG = CycleConfig(records=False)
SCENARIOS = Path(__file__).parents[2] / "scenarios"


def cache_of(snapshot: Snapshot) -> ClusterCache[Components]:
    cache = ClusterCache(CONFIG.non_preemptible_priority, components=COMPONENTS)
    cache.apply_all(snapshot_events(snapshot))
    return cache


def decisions(result: CycleResult) -> tuple[object, ...]:
    return (
        [(b.pod, b.node, b.gpus, b.pipelined, b.claims) for b in result.bindings],
        [(e.pod, e.action, e.for_) for e in result.evictions],
        [(p.pod, why_text(p.why)) for p in result.pending],
    )


def preemption() -> Snapshot:
    """n0 (2 GPUs) runs a low-priority pod; a higher-priority one waits for both GPUs, and
    another pod waits for a GPU of n1."""
    return Snapshot(
        (node("n0", gpus=2), node("n1", gpus=1)),
        (
            info("ns/low").gpus(2).queue("a").priority(1).on("n0").obj(),
            info("ns/high").gpus(2).queue("a").priority(50).obj(),
            info("ns/one").gpus(1).queue("a").obj(),
        ),
        queues=(QueueSpec("a"),),
    )


def test_with_assume_the_cycle_works_on_the_caches_ledger_and_assumes_its_result() -> None:
    cache = cache_of(preemption())
    session = Session(cache, CONFIG, 100.0)
    assert session.cycle.ledger is cache.ledger()
    assert session.cycle.pool is cache.pool()
    result = session.run()
    assert decisions(result)[:2] == (
        [("ns/high", "n0", (0, 1), True, None), ("ns/one", "n1", (0,), False, None)],
        [("ns/low", "preempt", "ns/high")],
    )
    assert set(cache.assumed) == {"ns/high", "ns/one"}
    assert cache.evicted == {"ns/low"}
    assert sorted(cache.ledger().running) == ["ns/high", "ns/one"]
    assert cache.pending() == []


def test_without_assume_the_cycle_works_on_a_copy_and_the_cache_stays_as_it_was() -> None:
    cache = cache_of(preemption())
    ledger = cache.ledger()
    before = (free_of(ledger.state), sorted(ledger.running), ledger.alloc["a"].tolist())
    session = Session(cache, CONFIG, 100.0, assume=False)
    assert session.cycle.ledger is not ledger
    result = session.run()
    assert [e.pod for e in result.evictions] == ["ns/low"]
    assert cache.assumed == {}
    assert cache.evicted == set()
    assert cache.ledger() is ledger
    assert (free_of(ledger.state), sorted(ledger.running), ledger.alloc["a"].tolist()) == before
    assert [p.key for p in cache.pending()] == ["ns/high", "ns/one"]


def test_a_session_without_assume_decides_as_one_with() -> None:
    cache = cache_of(preemption())
    what_if = Session(cache, CONFIG, 100.0, assume=False).run()
    assert decisions(what_if) == decisions(Session(cache, CONFIG, 100.0).run())


def test_a_session_without_assume_sees_what_earlier_sessions_assumed() -> None:
    cache = cache_of(replace(preemption(), pods=preemption().pods[:2]))
    Session(cache, CONFIG, 100.0).run()  # ns/high assumed on n0
    cache.apply(Event("ADDED", "Pod", info("ns/late").gpus(2).queue("a").priority(60).obj()))
    what_if = Session(cache, CONFIG, 101.0, assume=False).run()
    # the assumed pod holds n0 and, bound by an earlier cycle, is a possible victim
    assert decisions(what_if)[:2] == (
        [("ns/late", "n0", (0, 1), True, None)],
        [("ns/high", "preempt", "ns/late")],
    )
    assert decisions(what_if) == decisions(Session(cache, CONFIG, 101.0).run())


def now_of(path: Path) -> float:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    expect = next(d for d in docs if d.get("kind") == "Expectation")
    stamp = dt.datetime.fromisoformat(str(expect["now"]))
    return stamp.timestamp()


@pytest.mark.parametrize(
    "name",
    [
        "preempt-minimal",
        "reclaim-over-fair-share",
        "consolidate-moves-pods",
        "gang-stale-released",
        "dra-preempt-frees-device",
        "starving-job-holds-nodes",
        "starving-gang-reserves-in-one-rack",
        "topology-required-preempts-in-rack",
        "mig-dynamic-repartition",
        "gpu-memory-consolidate-resizes",
    ],
)
def test_every_edge_decides_as_a_cycle_over_the_snapshot(name: str) -> None:
    path = SCENARIOS / f"{name}.yaml"
    snapshot, now = load_snapshot(path, warn=lambda _: None), now_of(path)
    expected = decisions(run_cycle(snapshot, now, CONFIG))
    assert decisions(schedule_snapshot(snapshot, now, CONFIG)) == expected
    assert decisions(Session(cache_of(snapshot), CONFIG, now, assume=False).run()) == expected


def test_the_caches_topology_confines_a_gang_to_one_rack() -> None:
    nodes = tuple(replace(node(f"n{i}", gpus=2), labels={"rack": f"r{i // 2}"}) for i in range(4))
    pods: tuple[PodInfo, ...] = (
        info("ns/x").gpus(1).on("n0", 0).obj(),
        *(info(f"ns/g-{i}").gpus(2).gang("ns/g").obj() for i in range(2)),
    )
    snapshot = Snapshot(
        nodes, pods, (GroupSpec("ns/g", 2, topology_required="rack"),), topology=("rack",)
    )
    cache = cache_of(snapshot)
    assert cache.get("Topology", "default") == Topology("default", ("rack",))
    session = Session(cache, CONFIG, 100.0)
    rule = session.cycle.room.topology
    assert isinstance(rule, DomainTopology)
    assert rule.levels == ("rack",)
    assert sorted(b.node for b in session.run().bindings) == ["n2", "n3"]


def test_the_caches_pending_pods_are_grouped_into_jobs() -> None:
    snapshot = Snapshot(
        (node("n0", gpus=0),),
        (
            info("ns/g-0").cpu(200).gang("ns/g").obj(),
            info("ns/g-1").cpu(200).gang("ns/g").obj(),
            info("ns/solo").cpu(1).obj(),
            info("ns/ran").cpu(1).on("n0").obj(),
        ),
        (GroupSpec("ns/g", 2),),
    )
    session = Session(cache_of(snapshot), CONFIG, 100.0)
    jobs = {j.key: [p.key for p in j.pods] for j in session.cycle.backlog.jobs()}
    assert jobs == {"ns/g": ["ns/g-0", "ns/g-1"], "ns/solo": ["ns/solo"]}


# -- ResourceClaims allocated by an assumed binding -------------------------------------

DRIVER = "gpu.nvidia.com"


def two_gpu_claims() -> Snapshot:
    """One node with two GPUs as DRA devices; two pods, each with a claim for both."""

    def claim(key: str) -> Claim:
        return Claim(key, (Request("gpu", (Subrequest("gpu", DRIVER, count=2),)),))

    devices = tuple(Device(DRIVER, "n1", f"g{i}", "n1") for i in range(2))
    return Snapshot(
        (node("n1", gpus=0),),
        (info("ml/a").claims("ml/ca").obj(), info("ml/b").claims("ml/cb").obj()),
        device_classes=(DeviceClass(DRIVER, (f'device.driver == "{DRIVER}"',)),),
        pools=(Pool(DRIVER, "n1", 1, 1, 1, devices),),
        claims=(claim("ml/ca"), claim("ml/cb")),
    )


def test_a_session_without_assume_sees_the_devices_an_assumed_binding_took() -> None:
    cache = cache_of(two_gpu_claims())
    first = Session(cache, CONFIG, 100.0).run()
    assert [b.pod for b in first.bindings] == ["ml/a"]  # its claim takes both devices
    assumed = Session(cache, CONFIG, 101.0, assume=False)
    assert assumed.cycle.ledger.alloc["default"][0] == cache.ledger().alloc["default"][0] == 2
    what_if = assumed.run()
    assert [b.pod for b in what_if.bindings] == []
    assert decisions(what_if) == decisions(Session(cache, CONFIG, 102.0).run())


def test_a_scheduler_follows_the_plugins_another_session_built_on_its_cache() -> None:
    cache = cache_of(preemption())
    scheduler = Scheduler(cache, CONFIG)
    assert len(scheduler) == 2
    built = scheduler.framework
    Session(cache, replace(CONFIG, policy="fgd"), 0.0, assume=False).run()  # FGD's plugins
    assert len(scheduler) == 2
    assert scheduler.framework is not built  # its own policy's plugins, built again
    assert scheduler.framework is cache.framework(
        CONFIG.policy, cache.ledger().state, scheduler.rng
    )
    again = scheduler.framework
    assert len(scheduler) == 2
    assert scheduler.framework is again  # nothing changed: nothing built


def stale_gang(stale_since: float | None = None) -> Snapshot:
    """A gang of 3 (minMember 3) with 2 pods running on n0 and its third pending, which
    asks for more GPUs than any node has: it cannot be completed."""
    return Snapshot(
        (node("n0", gpus=4), node("n1", gpus=2)),
        (
            info("ns/g-0").gpus(1).gang("ns/g").on("n0").obj(),
            info("ns/g-1").gpus(1).gang("ns/g").on("n0").obj(),
            info("ns/g-2").gpus(8).gang("ns/g").obj(),
        ),
        (GroupSpec("ns/g", 3, stale_since=stale_since),),
    )


def released(result: CycleResult) -> list[str]:
    return sorted(e.pod for e in result.evictions if e.action == "stale-gang")


def test_a_scheduler_releases_a_stale_gang_a_grace_after_it_first_saw_it_stale() -> None:
    """No PodGroup annotation: the gang is stale from the scheduler's first cycle that
    found it below minMember, and released once the grace (60 s) has passed since."""
    scheduler = Scheduler(cache_of(stale_gang()), CONFIG)
    assert released(scheduler.run(1000.0)) == []
    assert scheduler.stale == {"ns/g": 1000.0}
    assert released(scheduler.run(1059.0)) == []
    assert released(scheduler.run(1060.0)) == ["ns/g-0", "ns/g-1"]


def test_a_scheduler_starts_from_the_podgroups_stale_since() -> None:
    """A restarted or new leader: the PodGroup's annotation says since when."""
    scheduler = Scheduler(cache_of(stale_gang(stale_since=900.0)), CONFIG)
    assert released(scheduler.run(1000.0)) == ["ns/g-0", "ns/g-1"]


def test_a_gang_whole_again_is_forgotten_and_stale_anew_later() -> None:
    """Whole again, the gang is forgotten. When a member fails again and its replacement
    cannot be placed, its time starts anew — even though its PodGroup still carries the
    mark of the first time (its removal not yet seen)."""
    cache = cache_of(stale_gang())
    scheduler = Scheduler(cache, CONFIG)
    scheduler.run(1000.0)
    cache.apply(Event("MODIFIED", "PodGroup", GroupSpec("ns/g", 3, stale_since=1000.0)))
    whole = info("ns/g-2").gpus(1).gang("ns/g").on("n1").obj()
    cache.apply(Event("MODIFIED", "Pod", whole))
    assert released(scheduler.run(1030.0)) == []
    assert scheduler.stale == {}
    cache.apply(Event("DELETED", "Pod", whole))
    cache.apply(Event("ADDED", "Pod", info("ns/g-3").gpus(8).gang("ns/g").obj()))
    assert released(scheduler.run(1100.0)) == []  # stale since 1100, not since 1000
    assert scheduler.stale == {"ns/g": 1100.0}
    assert released(scheduler.run(1160.0)) == ["ns/g-0", "ns/g-1"]


def test_a_gang_one_of_whose_pods_succeeded_is_not_stale() -> None:
    """A member succeeded: it leaves the cluster's running pods, and its PodGroup counts it
    (as the live translation and a snapshot do). The other member runs on to its own end,
    never released; had the member failed instead, the gang would be stale."""
    running = [info(f"ns/w-{i}").gpus(1).gang("ns/g").on("n0").obj() for i in range(2)]
    snapshot = Snapshot((node("n0", gpus=4),), tuple(running), (GroupSpec("ns/g", 2),))
    finished, failed = cache_of(snapshot), cache_of(snapshot)
    for cache, succeeded in ((finished, 1), (failed, 0)):
        cache.apply(Event("DELETED", "Pod", running[0]))
        cache.apply(Event("MODIFIED", "PodGroup", GroupSpec("ns/g", 2, succeeded=succeeded)))
    scheduler = Scheduler(finished, CONFIG)
    for now in (1001.0, 1061.0, 5000.0):
        assert released(scheduler.run(now)) == []
    assert scheduler.stale == {}
    other = Scheduler(failed, CONFIG)
    other.run(1001.0)
    assert released(other.run(1061.0)) == ["ns/w-1"]


def test_released_pods_that_terminate_are_not_evicted_again() -> None:
    """Live, an accepted eviction leaves its pod holding its GPUs until it is gone
    (``ClusterCache.terminating``): later cycles do not evict it again."""
    cache = cache_of(stale_gang())
    scheduler = Scheduler(cache, CONFIG)
    scheduler.run(1000.0)
    first = scheduler.run(1060.0)
    assert released(first) == ["ns/g-0", "ns/g-1"]
    for eviction in first.evictions:
        cache.terminating(eviction.pod)
    for now in (1061.0, 1062.0):
        assert scheduler.run(now).evictions == ()


def test_a_what_if_knows_only_the_annotation() -> None:
    """One cycle over a snapshot has no earlier cycle: without the annotation the gang's
    pods stay, and its pending pod says it is stale since a time not known."""
    result = schedule_snapshot(stale_gang(), 1000.0, CONFIG)
    assert released(result) == []
    assert "stale" in why_text(next(p for p in result.pending if p.pod == "ns/g-2").why)
    assert released(schedule_snapshot(stale_gang(900.0), 1000.0, CONFIG)) == [
        "ns/g-0",
        "ns/g-1",
    ]


def test_another_schedulers_stale_gang_is_left_to_it() -> None:
    """Its PodGroup says stale for long, but its pods are another scheduler's: neither a
    what-if nor a scheduler releases them, and the scheduler keeps no time for it."""
    snapshot = stale_gang(stale_since=0.0)
    theirs = replace(
        snapshot, pods=tuple(replace(p, managed=False) if p.bound else p for p in snapshot.pods)
    )
    assert released(schedule_snapshot(theirs, 1000.0, CONFIG)) == []
    scheduler = Scheduler(cache_of(theirs), CONFIG)
    assert released(scheduler.run(1000.0)) == []
    assert scheduler.stale == {}


def starving() -> Snapshot:
    """An 8-GPU job waits on three full nodes; their pods expect to run 10 h, 2 h and 5 h."""
    hour = 3600.0
    return Snapshot(
        tuple(node(f"n{i}", gpus=8) for i in range(3)),
        (
            *(
                info(f"x/run-{i}")
                .gpus(8)
                .on(f"n{i}", started=0.0)
                .progress(expected_duration_s=h * hour)
                .obj()
                for i, h in enumerate((10, 2, 5))
            ),
            info("ml/big").gpus(8).created(0.0).obj(),
        ),
    )


def test_a_reservation_outlives_a_rebuild_of_the_cycle() -> None:
    """Made at 1 h on n1 (expected free at 2 h), it keeps its nodes and start when a new
    node rebuilds the ledger at 1.4 h, though n1's pod, past half its estimate, would now
    be expected to run until 2.8 h; when n1 goes, it is due: its nodes are chosen again
    and no backfill reopens."""
    cache = cache_of(starving())
    scheduler = Scheduler(cache, CONFIG)
    scheduler.run(3600.0)
    made = scheduler.cycle.holds.of("ml/big")
    assert made is not None
    assert (made.job, made.nodes, made.start) == ("ml/big", ("n1",), 7200.0)
    before = scheduler.cycle
    cache.apply(Event("ADDED", "Node", node("n3", gpus=8)))
    late = info("x/run-3").gpus(8).on("n3", started=0.0).progress(expected_duration_s=72000.0)
    cache.apply(Event("ADDED", "Pod", late.obj()))
    scheduler.run(5000.0)
    assert scheduler.cycle is not before  # rebuilt
    kept = scheduler.cycle.holds.of("ml/big")
    assert kept is not None
    assert (kept.nodes, kept.start, kept.mask.tolist()) == (("n1",), 7200.0, [0, 1, 0, 0])
    cache.apply(Event("DELETED", "Pod", info("x/run-1").gpus(8).on("n1", started=0.0).obj()))
    cache.apply(Event("DELETED", "Node", node("n1", gpus=8)))
    scheduler.run(5100.0)
    due = scheduler.cycle.holds.of("ml/big")
    assert due is not None
    assert (due.nodes, due.start) == (("n2",), 5100.0)
