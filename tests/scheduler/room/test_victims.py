"""The one victim search (``scheduler/room/victims.py``) that preempt, reclaim and consolidate
share: victims are taken cheapest first until the pod fits, then reprieved most expensive
first if it still fits without them; the node with the fewest victims (then the lowest
priorities, the fewest broken shares, the least work lost) wins; a gang without pods to
spare goes whole; a job that cannot be completed leaves the state as it found it.

The search runs here with preempt's rule (every lower-priority pod of the job's queue) on a
cycle of queue ``a``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from gpufleet.compose import COMPONENTS
from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import FilterVerdict
from gpufleet.framework.registry import PluginFactory, Registry
from gpufleet.framework.runtime import Exclusion
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.progress import NO_PROGRESS, Progress
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot, pods_request
from gpufleet.report.reasons import note_words
from gpufleet.scheduler.api.outcome import NoteCode, note
from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.cycle.components import Components
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.cycle.session import snapshot_session
from gpufleet.scheduler.room.preempt import Preempt
from gpufleet.scheduler.room.protocols import moving
from gpufleet.scheduler.room.victims import VictimSearch
from gpufleet.scheduler.state.pool import VictimPool
from tests.builders import InfoBuilder, cycle_of, free_of, info, job_of, node

NOW = 100.0
PREEMPT = Preempt()


def run(key: str, priority: int = 1) -> InfoBuilder:
    """A pod of queue ``a`` (bound with ``.on``, else pending)."""
    return info(key).queue("a").priority(priority)


def two(name: str) -> NodeSpec:
    return node(name, gpus=2)


def search_for(cycle: Cycle, key: str, held: Exclusion | None = None) -> VictimSearch:
    return VictimSearch(cycle.means, job_of(cycle, key), held)


def victims_for(
    nodes: list[NodeSpec],
    running: list[PodInfo],
    job: PodInfo,
    groups: tuple[GroupSpec, ...] = (),
) -> list[str]:
    cycle = cycle_of(nodes, [*running, job], queues=(QueueSpec("a"),), groups=groups, now=NOW)
    search = search_for(cycle, job.gang)
    plan, said = search.run(PREEMPT, pods_request(search.job.core))
    assert plan is not None, said
    assert said.code is NoteCode.FOUND
    return sorted(v.pod.key for v in plan.victims)


WANTS_2 = run("a/job", 10).gpus(2).obj()
WANTS_1 = run("a/job", 10).gpus(1).obj()


@pytest.mark.parametrize(
    ("nodes", "running", "job", "expected"),
    [
        pytest.param(
            [node("n0", gpus=4)],
            [
                run("a/p1", 1).gpus(1).on("n0", 0).obj(),
                run("a/p2", 2).gpus(2).on("n0", 1, 2).obj(),
                run("a/p3", 3).gpus(1).on("n0", 3).obj(),
            ],
            WANTS_2,
            # p1 and p2 are taken, cheapest first, until the job fits; p1 is then reprieved
            ["a/p2"],
            id="reprieve-what-is-not-needed",
        ),
        pytest.param(
            [two("n0"), two("n1")],
            [
                run("a/p1", 1).gpus(1).on("n0", 0).obj(),
                run("a/p2", 1).gpus(1).on("n0", 1).obj(),
                run("a/p3", 5).gpus(2).on("n1", 0, 1).obj(),
            ],
            WANTS_2,
            # two victims of priority 1 rather than one of priority 5
            ["a/p1", "a/p2"],
            id="lowest-priority-before-fewest-victims",
        ),
        pytest.param(
            [two("n0"), two("n1")],
            [
                run("a/young1").gpus(1).on("n0", 0, started=90.0).obj(),
                run("a/young2").gpus(1).on("n0", 1, started=90.0).obj(),
                run("a/old").gpus(2).on("n1", 0, 1, started=0.0).obj(),
            ],
            WANTS_2,
            # two victims that ran 10 s (20 GPU-s lost) rather than one that ran 100 s (200)
            ["a/young1", "a/young2"],
            id="least-work-lost-before-fewest-victims",
        ),
        pytest.param(
            [two("n0"), two("n1")],
            [run("a/p1", 3).gpus(2).on("n0").obj(), run("a/p2", 1).gpus(2).on("n1").obj()],
            WANTS_2,
            ["a/p2"],
            id="then-lowest-priority",
        ),
        pytest.param(
            [two("n0"), two("n1")],
            [
                run("a/old").gpus(2).on("n0", started=0.0).obj(),
                run("a/new").gpus(2).on("n1", started=80.0).obj(),
            ],
            WANTS_2,
            ["a/new"],
            id="then-least-work-lost",
        ),
        pytest.param(
            [two("n0")],
            [
                run("a/first").gpus(1).on("n0", 0, started=10.0).obj(),
                run("a/second").gpus(1).on("n0", 1, started=90.0).obj(),
            ],
            WANTS_1,
            ["a/second"],
            id="newest-first-on-a-node",
        ),
        pytest.param(
            [two("n0")],
            [
                run("a/whole").gpus(1).on("n0", 0, started=10.0).obj(),
                run("a/share").share(500).on("n0", 1, started=90.0).obj(),
            ],
            WANTS_1,
            # the share is newer, but a whole-GPU pod goes before a pod sharing a GPU
            ["a/whole"],
            id="whole-gpus-before-shares",
        ),
        pytest.param(
            [two("n0"), two("n1")],
            [
                run("a/g-0").gpus(1).gang("a/g").on("n0", 0).obj(),
                run("a/g-1").gpus(1).gang("a/g").on("n1", 0).obj(),
                run("a/y", 5).gpus(1).on("n0", 1).obj(),
                run("a/x", 5).gpus(1).on("n1", 1).obj(),
            ],
            WANTS_1,
            ["a/g-0", "a/g-1"],
            id="gang-without-spares-goes-whole",
        ),
    ],
)
def test_the_search_takes_the_fewest_cheapest_victims(
    nodes: list[NodeSpec], running: list[PodInfo], job: PodInfo, expected: list[str]
) -> None:
    groups = (GroupSpec("a/g", min_member=2, queue="a"),)
    assert victims_for(nodes, running, job, groups) == expected


def test_a_gang_with_a_spare_loses_one_pod() -> None:
    running = [
        run("a/g-0").gpus(1).gang("a/g").on("n0", 0).obj(),
        run("a/g-1").gpus(1).gang("a/g").on("n0", 1).obj(),
        run("a/g-2").gpus(1).gang("a/g").on("n1", 0).obj(),
        run("a/x", 5).gpus(1).on("n1", 1).obj(),
    ]
    groups = (GroupSpec("a/g", min_member=2, queue="a"),)
    # g-0 and g-2 cost the same alone; n0 comes first
    assert victims_for([two("n0"), two("n1")], running, WANTS_1, groups) == ["a/g-0"]


# -- the parts of the search -------------------------------------------------------------


def gang_cycle(running: int, min_member: int) -> Cycle:
    pods = [run(f"a/g-{i}").gpus(1).gang("a/g").on("n0", i).obj() for i in range(running)]
    pods += [run("a/solo").gpus(1).on("n1", 0).obj(), WANTS_1]
    groups = (GroupSpec("a/g", min_member=min_member, queue="a"),)
    return cycle_of([node("n0"), node("n1")], pods, queues=(QueueSpec("a"),), groups=groups)


@pytest.mark.parametrize(
    ("running", "min_member", "taken", "pod", "expected"),
    [
        pytest.param(3, 2, [], "a/solo", ["a/solo"], id="no-gang"),
        pytest.param(3, 1, [], "a/g-0", ["a/g-0"], id="min-member-one"),
        pytest.param(3, 2, [], "a/g-0", ["a/g-0"], id="gang-with-a-spare"),
        pytest.param(2, 2, [], "a/g-0", ["a/g-0", "a/g-1"], id="gang-without-spare"),
        pytest.param(3, 2, ["a/g-2"], "a/g-0", ["a/g-0", "a/g-1"], id="spare-already-taken"),
    ],
)
def test_unit(
    running: int, min_member: int, taken: list[str], pod: str, expected: list[str]
) -> None:
    cycle = gang_cycle(running, min_member)
    search = search_for(cycle, "a/job")
    unit = search.unit(cycle.ledger.running[pod], [cycle.ledger.running[k] for k in taken])
    assert [r.pod.key for r in unit] == expected


def placed(key: str, spec_of: PodInfo, gpus: tuple[int, ...], started: float | None) -> Running:
    pod = PodInfo(key, spec_of.spec, "a", priority=spec_of.priority, started=started)
    return Running(pod, 0, gpus, spec_of.spec)


def test_cost_orders_units_cheapest_first() -> None:
    search = search_for(gang_cycle(2, 2), "a/job")
    units = {
        "low-whole-old": (placed("a/1", run("x", 1).gpus(1).obj(), (0,), 10.0),),
        "low-whole-new": (placed("a/2", run("x", 1).gpus(1).obj(), (1,), 50.0),),
        "low-share-new": (placed("a/3", run("x", 1).share(500).obj(), (2,), 60.0),),
        "low-gang-new": (
            placed("a/4", run("x", 1).gpus(1).obj(), (3,), 50.0),
            placed("a/5", run("x", 1).gpus(1).obj(), (4,), 50.0),
        ),
        "high-whole-new": (placed("a/6", run("x", 5).gpus(1).obj(), (5,), 90.0),),
    }
    # At 100 s: the new whole pod lost 50 GPU-s, the old one 90, the gang of two 100.
    assert sorted(units, key=lambda name: search.cost(units[name])) == [
        "low-whole-new",
        "low-whole-old",
        "low-gang-new",
        "low-share-new",
        "high-whole-new",
    ]


def test_lost_work_is_the_gpu_time_the_victims_ran() -> None:
    search = search_for(gang_cycle(2, 2), "a/job")
    victims = [
        placed("a/1", run("x").gpus(2).obj(), (0, 1), 40.0),
        placed("a/2", run("x").share(500).obj(), (2,), 0.0),
        placed("a/3", run("x").gpus(1).obj(), (3,), None),
    ]
    assert search.lost_work(victims) == pytest.approx(2 * 60 + 0.5 * 100)
    # a start after now (clock skew, a what-if at an earlier time) loses nothing, not less
    ahead = placed("a/4", run("x").gpus(4).obj(), (4,), 150.0)
    assert search.lost_work([*victims, ahead]) == pytest.approx(2 * 60 + 0.5 * 100)


@pytest.mark.parametrize(
    ("progress", "restart_s", "lost_s"),
    [
        pytest.param(NO_PROGRESS, 0.0, 60.0, id="no-checkpoint-the-whole-run"),
        pytest.param(NO_PROGRESS, 300.0, 360.0, id="and-the-restart-time"),
        pytest.param(
            Progress(checkpoint_interval_s=25.0), 0.0, 10.0, id="since-the-50s-checkpoint"
        ),
        pytest.param(Progress(last_checkpoint=95.0), 30.0, 35.0, id="since-the-reported-one"),
        pytest.param(Progress(last_checkpoint=20.0), 0.0, 60.0, id="one-before-the-run-counts-not"),
    ],
)
def test_lost_work_counts_from_the_last_checkpoint_plus_the_restart(
    progress: Progress, restart_s: float, lost_s: float
) -> None:
    search = search_for(gang_cycle(2, 2), "a/job")
    search.means.restart_s = restart_s
    victim = placed("a/1", run("x").gpus(2).obj(), (0, 1), 40.0)  # ran 60 s at 100 s
    victim = replace(victim, pod=replace(victim.pod, progress=progress))
    assert search.lost_work([victim]) == pytest.approx(2 * lost_s)


@pytest.mark.parametrize(
    ("running", "expected"),
    [
        pytest.param(
            run("a/plain").gpus(2).obj(), run("a/plain").gpus(2).obj().spec, id="as-it-runs"
        ),
        pytest.param(
            run("a/mem").gpu_memory(20_480).obj(),
            run("a/mem").gpu_memory(20_480).obj().spec,
            id="memory-share-as-asked",
        ),
    ],
)
def test_a_moved_pod_asks_elsewhere(running: PodInfo, expected: object) -> None:
    sized = running.spec.sized_for(81_920)
    assert sized is not None
    assert moving(Running(running, 0, (0,), sized)) == expected


# -- when there is no room ---------------------------------------------------------------


def one_node(*running: PodInfo, job: PodInfo = WANTS_2) -> Cycle:
    return cycle_of([two("n0"), two("n1")], [*running, job], queues=(QueueSpec("a"),))


def test_hopeless_when_evicting_every_candidate_leaves_no_room() -> None:
    cycle = one_node(run("a/p").gpus(1).on("n0").obj(), job=run("a/job", 10).gpus(4).obj())
    search = search_for(cycle, "a/job")
    request = pods_request(search.job.core)
    assert search.hopeless(PREEMPT, request) == note(NoteCode.NO_ROOM)
    # the bound is the room's to ask (scheduler/room/room.py); the search itself finds no node
    assert search.run(PREEMPT, request) == (None, note(NoteCode.NOT_FOUND))


def test_a_job_that_never_preempts_has_no_candidates() -> None:
    cycle = one_node(
        run("a/p").gpus(2).on("n0").obj(),
        run("a/q").gpus(2).on("n1").obj(),
        job=run("a/job", 10).gpus(2).never_preempts().obj(),
    )
    search = search_for(cycle, "a/job")
    never = note(NoteCode.PREEMPTION_NEVER)
    assert search.hopeless(PREEMPT, pods_request(search.job.core)) == never
    assert search.candidates(PREEMPT, pods_request(search.job.core))[:2] == (None, never)
    assert note_words(never) == "the job's preemptionPolicy is Never"


def full(job: PodInfo, *, n1_priority: int = 50) -> Cycle:
    """n0 runs a low-priority 2-GPU pod, n1 one of ``n1_priority`` (by default higher than
    the job's)."""
    return one_node(
        run("a/low", 1).gpus(2).on("n0").obj(),
        run("a/n1", n1_priority).gpus(2).on("n1").obj(),
        job=job,
    )


Setup = tuple[Cycle, str, Exclusion | None]


def gang_half_fits() -> Setup:
    """A gang of two 2-GPU pods: only n0's victim is of lower priority."""
    gang = [run(f"a/g-{i}", 10).gpus(2).gang("a/g").obj() for i in range(2)]
    cycle = cycle_of(
        [two("n0"), two("n1")],
        [run("a/low", 1).gpus(2).on("n0").obj(), run("a/n1", 50).gpus(2).on("n1").obj(), *gang],
        queues=(QueueSpec("a"),),
        groups=(GroupSpec("a/g", min_member=2, queue="a"),),
    )
    return cycle, "a/g", None


def unresolvable() -> Setup:
    """The job asks for a GPU model no node has: no eviction can help."""
    return full(run("a/job", 10).gpus(2).models("H100").obj(), n1_priority=1), "a/job", None


def victims_on_held_nodes() -> Setup:
    return full(WANTS_2, n1_priority=1), "a/job", Exclusion(np.array([True, True]), "held")


@pytest.mark.parametrize(
    "setup",
    [
        pytest.param(gang_half_fits, id="gang-half-fits"),
        pytest.param(unresolvable, id="unresolvable"),
        pytest.param(victims_on_held_nodes, id="victims-only-on-held-nodes"),
    ],
)
def test_no_plan_leaves_the_state_as_it_was(setup: Callable[[], Setup]) -> None:
    cycle, key, held = setup()
    search = search_for(cycle, key, held)
    before = free_of(cycle.ledger.state)
    plan, note = search.run(PREEMPT, pods_request(search.job.core))
    assert plan is None
    assert note.code is NoteCode.NOT_FOUND
    assert free_of(cycle.ledger.state) == before


def test_pods_bound_in_this_cycle_are_never_victims() -> None:
    cycle = full(WANTS_2)
    cycle.commit.bound_now.add("a/low")
    search = search_for(cycle, "a/job")
    request = pods_request(search.job.core)
    assert search.hopeless(PREEMPT, request) is None  # the bound does not know them
    assert search.run(PREEMPT, request) == (None, note(NoteCode.NOT_FOUND))


def test_a_plan_places_the_job_where_its_victims_were() -> None:
    cycle = full(WANTS_2)
    search = search_for(cycle, "a/job")
    plan, _ = search.run(PREEMPT, pods_request(search.job.core))
    assert plan is not None
    assert plan.action == "preempt"
    assert [(v.pod.key, v.node, v.gpus) for v in plan.victims] == [("a/low", 0, (0, 1))]
    assert [(node_index, gpus) for node_index, _, gpus in plan.placements] == [(0, (0, 1))]
    assert plan.moved == ()


class EmptyNodesOnly:
    """A filter of a profile that judges more than resources: only nodes with every GPU
    free (a whole-node tenant). The victim search must obey it as placement does."""

    name = "EmptyNodesOnly"

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        ok = state.gpu_whole_free == state.gpu_count
        return FilterVerdict(ok, (("node(s) not empty", ~ok),))


def with_filter(extra: str, plugin: PluginFactory) -> Components:
    plugins: Registry[PluginFactory] = Registry("plugin")
    for name, factory in COMPONENTS.plugins.items():
        plugins.register(name, factory)
    plugins.register(extra, plugin)
    base = COMPONENTS.policies["best-fit"]
    policies: Registry[Profile] = Registry("policy")
    policies.register(
        "whole-node", replace(base, name="whole-node", filters=(*base.filters, extra))
    )
    return replace(COMPONENTS, plugins=plugins, policies=policies)


def test_a_filter_of_the_profile_is_obeyed_while_making_room() -> None:
    """One free GPU is not enough for the profile's filter: both victims go, not one."""
    components = with_filter("EmptyNodesOnly", lambda _handle: EmptyNodesOnly())
    snapshot = Snapshot(
        (node("n0", gpus=4),),
        (
            run("a/p1", 1).gpus(1).on("n0", 0).obj(),
            run("a/p2", 2).gpus(2).on("n0", 1, 2).obj(),
            WANTS_1,
        ),
        (),
        (QueueSpec("a"),),
    )
    config = CycleConfig(policy="whole-node", actions=("preempt",))
    cycle = snapshot_session(snapshot, config, NOW, components=components).cycle
    search = search_for(cycle, "a/job")
    plan, note = search.run(PREEMPT, pods_request(search.job.core))
    assert plan is not None, note
    assert sorted(v.pod.key for v in plan.victims) == ["a/p1", "a/p2"]


POOL_COLUMNS = (
    "node", "queue", "priority", "cpu", "memory", "gpu", "started", "preempt_min",
    "reclaim_min", "via_state", "claims", "single", "alive", "preempt_ok", "reclaim_ok",
)  # fmt: skip


def test_a_pool_grown_pod_by_pod_reads_as_one_built_at_once() -> None:
    queues = {q.name: q for q in (QueueSpec("a", preempt_min_runtime_s=50.0), QueueSpec("b"))}
    pods = [
        Running(
            info(f"p{k:03}").queue("ab"[k % 2]).gpus(1 + k % 3).priority(k % 5).obj(),
            k % 7,
            tuple(range(1 + k % 3)),
            info(f"p{k:03}").gpus(1 + k % 3).obj().spec,
        )
        for k in range(300)
    ]
    pods = [replace(r, pod=replace(r.pod, started=float(k))) for k, r in enumerate(pods)]
    grown = VictimPool([], queues, 0.0, 8)
    for k, r in enumerate(pods):
        grown.add([r] if k % 3 else [r, *pods[k + 1 : k + 12]])  # one, or many at once
        if k % 3:
            grown.discard(pods[k - 1].pod.key)  # the pool compacts as pods leave it
    grown.at(120.0)
    left = [r for r in pods if r.pod.key in grown.index]
    whole = VictimPool(left, queues, 120.0, 8)
    alive = np.flatnonzero(grown.alive)
    assert [grown.items[i].pod.key for i in alive] == [r.pod.key for r in whole.items]
    for name in POOL_COLUMNS:
        np.testing.assert_array_equal(getattr(grown, name)[alive], getattr(whole, name), name)
        assert len(getattr(grown, name)) == len(grown)
    assert len(grown) < len(pods)  # compacted


def test_evicting_every_pod_of_an_elastic_gang_stops_it() -> None:
    """Gang g (minMember 1) has nothing to spare once both its pods go: freeing n0 stops it,
    as freeing n1 stops p, which loses far less (it ran 10 s, g's pods 100 s)."""
    nodes = [node("n0", gpus=8), node("n1", gpus=8)]
    running = [
        run("a/g-0").gpus(4).gang("a/g").on("n0", 0, 1, 2, 3, started=0.0).obj(),
        run("a/g-1").gpus(4).gang("a/g").on("n0", 4, 5, 6, 7, started=0.0).obj(),
        run("a/p").gpus(8).on("n1", *range(8), started=NOW - 10.0).obj(),
    ]
    job = run("a/job", 10).gpus(8).obj()
    groups = (GroupSpec("a/g", min_member=1, queue="a"),)
    assert victims_for(nodes, running, job, groups) == ["a/p"]
