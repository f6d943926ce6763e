"""Reservations (``scheduler/queues/holds.py``): each starving job reserves, per pod of its
core, the allowed node expected to be free soonest outside older jobs' reservations; other
jobs may use the reserved nodes only if they are expected to end before the reservation's
start (or outrank its job); ``version`` changes only when reserved nodes do."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest

from gpufleet.compose import new_cache
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.model.workload import PodInfo
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Scheduler
from gpufleet.scheduler.queues.holds import (
    PROVISIONED,
    REASON,
    Holds,
    Reservation,
    drained_by,
    remaining_s,
)
from gpufleet.scheduler.state.changes import Event
from tests.builders import cluster, info, job, node

HOUR = 3600.0
NOW = 10 * HOUR


def state() -> ClusterState:
    return cluster(*(node(f"n{i}", gpus=8) for i in range(4)))


def running(node_index: int, gpus: int, started: float, expected: float = 0.0) -> Running:
    pod = info(f"run/{node_index}-{started}").gpus(gpus).on(f"n{node_index}", started=started)
    pod = pod.progress(expected_duration_s=expected)
    spec = pod.obj().spec
    return Running(pod.obj(), node_index, tuple(range(gpus)), spec)


RUNNING = [
    running(0, 8, NOW - 20 * HOUR),  # ran 20 h: expected to run 20 h more
    running(1, 4, NOW - 0.5 * HOUR, expected=2 * HOUR),  # 1.5 h left
    running(2, 8, NOW - 0.25 * HOUR, expected=1 * HOUR),  # 0.75 h left
    # n3 is empty: free now
]


def free(running: list[Running] = RUNNING, now: float = NOW) -> FloatArray:
    """When each node is expected to be free, with ``running`` on it at ``now``."""
    return drained_by(state(), running, now, HOUR)


def anywhere(_spec: PodSpec) -> IntArray:
    return np.arange(4)


def only(*nodes: int) -> Callable[[PodSpec], IntArray]:
    return lambda _spec: np.array(nodes, dtype=np.int64)


def gpu_job(
    key: str,
    gpus: int,
    pods: int = 1,
    *,
    created: float = 0.0,
    expected: float = 0.0,
    priority: int = 0,
) -> Job:
    return job(
        *(
            info(f"{key}-{i}")
            .gang(key)
            .gpus(gpus)
            .created(created)
            .priority(priority)
            .progress(expected_duration_s=expected)
            .obj()
            for i in range(pods)
        )
    )


def reserved(holds: Holds, asking: Job, states: ClusterState, now: float = NOW) -> list[str]:
    held = holds.against(asking, now)
    return [] if held is None else [states.names[i] for i in np.flatnonzero(held.mask)]


def assert_made(
    holds: Holds, made: Reservation | None, nodes: list[str], start_in_h: float | None
) -> None:
    """``made`` reserves ``nodes`` from ``start_in_h`` hours on (None: nothing reserved)."""
    if start_in_h is None:
        assert made is None
        assert not holds.reservations
        return
    assert made is not None
    assert list(made.nodes) == nodes
    assert made.start == NOW + start_in_h * HOUR


def test_a_running_pod_is_expected_to_run_its_estimate_or_as_long_again_as_it_ran() -> None:
    assert remaining_s(RUNNING[1].pod, NOW, HOUR) == 1.5 * HOUR
    assert remaining_s(RUNNING[0].pod, NOW, HOUR) == 20 * HOUR  # past its estimate
    free_at = free()
    assert (free_at - NOW).tolist() == [20 * HOUR, 1.5 * HOUR, 0.75 * HOUR, 0.0]


@pytest.mark.parametrize(
    ("starving", "static", "nodes", "start_in_h"),
    [
        pytest.param(gpu_job("ns/big", 8), anywhere, ["n3"], 0.0, id="an-empty-node"),
        pytest.param(gpu_job("ns/big", 8, 2), anywhere, ["n2", "n3"], 0.75, id="soonest-free"),
        pytest.param(gpu_job("ns/big", 4, 3), anywhere, ["n2", "n3"], 0.75, id="pods-share-nodes"),
        pytest.param(gpu_job("ns/big", 8), only(0, 1), ["n1"], 1.5, id="only-allowed-nodes"),
        pytest.param(gpu_job("ns/big", 16), anywhere, [], None, id="fits-no-node-ever"),
    ],
)
def test_the_reservation_takes_the_nodes_expected_free_soonest(
    starving: Job,
    static: Callable[[PodSpec], IntArray],
    nodes: list[str],
    start_in_h: float | None,
) -> None:
    holds = Holds(HOUR)
    made = holds.hold(starving, state(), static, free(), now=NOW)
    assert_made(holds, made, nodes, start_in_h)


@pytest.mark.parametrize(
    ("domains", "nodes", "start_in_h"),
    [
        pytest.param([0, 1, 0, 1], ["n1", "n3"], 1.5, id="the-domain-free-soonest"),
        pytest.param([0, 0, 1, 1], ["n2", "n3"], 0.75, id="soonest-nodes-share-a-domain"),
        pytest.param([0, 1, 2, 3], [], None, id="no-domain-holds-the-gang"),
        pytest.param([-1, -1, -1, -1], [], None, id="no-node-has-the-label"),
    ],
)
def test_a_gang_that_requires_a_domain_reserves_inside_one(
    domains: list[int], nodes: list[str], start_in_h: float | None
) -> None:
    holds = Holds(HOUR)
    ids = np.array(domains, dtype=np.int64)
    made = holds.hold(
        gpu_job("ns/big", 8, 2),
        state(),
        anywhere,
        free(),
        now=NOW,
        domains=ids,
    )
    assert_made(holds, made, nodes, start_in_h)


@pytest.mark.parametrize(
    ("asking", "now", "kept_off"),
    [
        pytest.param(gpu_job("ns/short", 1, expected=0.5 * HOUR), NOW, False, id="ends-before"),
        pytest.param(gpu_job("ns/long", 1, expected=2 * HOUR), NOW, True, id="ends-after"),
        pytest.param(gpu_job("ns/default", 1), NOW, True, id="default-estimate-ends-after"),
        pytest.param(
            gpu_job("ns/short", 1, expected=60.0), NOW + 2 * HOUR, True, id="no-backfill-after"
        ),
        pytest.param(gpu_job("ns/vip", 8, priority=10), NOW, False, id="higher-priority"),
        pytest.param(gpu_job("ns/big", 8, 2), NOW, False, id="its-own-job"),
    ],
)
def test_backfill_onto_reserved_nodes_only_by_jobs_that_end_before_the_start(
    asking: Job, now: float, kept_off: bool
) -> None:
    holds, states = Holds(HOUR), state()
    holds.hold(gpu_job("ns/big", 8, 2), states, anywhere, free(), now=NOW)  # starts in 0.75 h
    assert reserved(holds, asking, states, now) == (["n2", "n3"] if kept_off else [])


def test_the_reservation_carries_the_reason() -> None:
    holds, states = Holds(HOUR), state()
    holds.hold(gpu_job("ns/big", 8), states, anywhere, free(), now=NOW)
    held = holds.against(gpu_job("ns/small", 1, expected=HOUR), NOW)
    assert held is not None
    assert held.message == REASON


def test_each_starving_job_reserves_outside_older_reservations() -> None:
    """The young job reserves n3 (free now); the old one, older, reserves the two nodes
    free soonest, n2 and n3, taking n3 from the young one; the younger one reserves n1,
    the soonest left beside the old one's."""
    holds, states = Holds(HOUR), state()
    young, old, younger = (
        gpu_job("ns/young", 8, created=5.0),
        gpu_job("ns/old", 8, 2, created=1.0),
        gpu_job("ns/younger", 8, created=9.0),
    )
    made = holds.hold(young, states, anywhere, free(), now=NOW)
    assert made is not None
    assert made.nodes == ("n3",)
    version = holds.version
    made = holds.hold(old, states, anywhere, free(), now=NOW)
    assert made is not None
    assert made.nodes == ("n2", "n3")
    assert holds.version > version
    assert holds.of(young.key) is None  # made again at its next try
    made = holds.hold(younger, states, anywhere, free(), now=NOW)
    assert made is not None
    assert (made.nodes, made.start) == (("n1",), NOW + 1.5 * HOUR)
    assert sorted(holds.reservations) == ["ns/old", "ns/younger"]
    made = holds.hold(young, states, anywhere, free(), now=NOW)  # older than "younger"
    assert made is not None
    assert made.nodes == ("n1",)
    assert sorted(holds.reservations) == ["ns/old", "ns/young"]


def test_a_job_is_kept_off_every_reservation_it_would_outlast() -> None:
    holds, states = Holds(HOUR), state()
    holds.hold(
        gpu_job("ns/a", 8, created=1.0),
        states,
        only(2),
        free(),
        now=NOW,
    )  # 0.75 h
    holds.hold(
        gpu_job("ns/b", 8, created=2.0),
        states,
        only(1),
        free(),
        now=NOW,
    )  # 1.5 h
    assert reserved(holds, gpu_job("ns/x", 1, expected=HOUR), states) == ["n2"]
    assert reserved(holds, gpu_job("ns/y", 1, expected=2 * HOUR), states) == ["n1", "n2"]
    assert reserved(holds, gpu_job("ns/z", 1, expected=0.5 * HOUR), states) == []
    assert reserved(holds, gpu_job("ns/a", 8, expected=2 * HOUR), states) == ["n1"]  # not its own


def test_nodes_and_start_stay_fixed_until_the_start_then_only_the_nodes_change() -> None:
    holds, states, big = Holds(HOUR), state(), gpu_job("ns/big", 8, 2)
    first = holds.hold(big, states, anywhere, free(), now=NOW)
    assert first is not None
    assert (
        holds.hold(
            big,
            states,
            anywhere,
            free(RUNNING[:2], NOW + 0.5 * HOUR),
            now=NOW + 0.5 * HOUR,
        )
        is first
    )
    # past its start, n2's pod still runs: the nodes are chosen again (n2 is still the
    # soonest of the busy ones), and the start stays: no backfill from now on
    later = holds.hold(big, states, anywhere, free(RUNNING, NOW + HOUR), now=NOW + HOUR)
    assert later is not None
    assert later.start == first.start
    assert later.nodes == ("n2", "n3")
    drained = holds.hold(
        big, states, anywhere, free(RUNNING[:1], NOW + HOUR), now=NOW + HOUR
    )  # n1, n2 empty
    assert drained is not None
    assert drained.nodes == ("n1", "n2")  # the free nodes first, by index
    assert drained.start == first.start


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        pytest.param(None, anywhere, True, id="starts-holding"),
        pytest.param(anywhere, None, True, id="released"),
        pytest.param(anywhere, anywhere, False, id="holds-on"),
    ],
)
def test_the_version_changes_only_when_the_reserved_nodes_do(
    before: Callable[[PodSpec], IntArray] | None,
    after: Callable[[PodSpec], IntArray] | None,
    changed: bool,
) -> None:
    holds, states, starving = Holds(HOUR), state(), gpu_job("ns/big", 8)
    if before is not None:
        holds.hold(starving, states, before, free(), now=NOW)
    version = holds.version
    if after is None:
        holds.release(starving.key)
        holds.release("ns/other")  # not the holder: nothing changes
    else:
        holds.hold(starving, states, after, free(), now=NOW)
    assert holds.version == version + changed
    assert (holds.of(starving.key) is not None) == (after is not None)


def test_pods_without_gpus_do_not_hold_a_node_back() -> None:
    daemon = info("kube-system/exporter").on("n3", started=NOW - 60 * 24 * HOUR).obj()
    running = [*RUNNING, Running(daemon, 3, (), daemon.spec)]
    assert (drained_by(state(), running, NOW, HOUR) - NOW)[3] == 0.0


def test_a_job_no_node_can_run_any_more_gives_its_reservation_up() -> None:
    holds, states, big = Holds(HOUR), state(), gpu_job("ns/big", 8)
    assert holds.hold(big, states, anywhere, free(), now=NOW) is not None
    # past its start, its nodes were relabelled: nothing left to reserve
    assert (
        holds.hold(
            big,
            states,
            only(),
            free(RUNNING, NOW + 30 * HOUR),
            now=NOW + 30 * HOUR,
        )
        is None
    )
    assert not holds.reservations


def test_nodes_provisioned_for_a_job_take_only_that_job() -> None:
    """Node ``n1`` was bought for job ``ml/b`` (label ``gpufleet.io/provisioned-for``): the
    older job ``ml/a`` of the same shape may not take it and stays pending, naming why; ``b``
    is not skipped as ``a``'s equal and binds there."""
    config = CycleConfig(policy="best-fit", records=False)
    spec = PodSpec("p", 1000, 1024, 8, 1000)
    cache = new_cache(config, workload=[spec])
    labels = {PROVISIONED_FOR_LABEL: provisioned_for("ml/b")}
    cache.apply(Event("ADDED", "Node", NodeSpec("n1", 64_000, 512 * 1024, 8, "P100", labels)))
    for name, created in (("a", 1.0), ("b", 2.0)):
        cache.apply(Event("ADDED", "Pod", PodInfo(f"ml/{name}", spec, created=created)))
    result = Scheduler(cache, config, rng=np.random.default_rng(0)).run(10.0)
    assert [(b.pod, b.node) for b in result.bindings] == [("ml/b", "n1")]
    (pending,) = result.pending
    assert pending.pod == "ml/a"
    assert PROVISIONED in str(pending)


def test_a_starving_job_does_not_reserve_nodes_bought_for_another() -> None:
    """n3 is free now but was bought for ``ns/other``: the starving job reserves elsewhere
    (else it would hold the other job off its own nodes, and never use them itself)."""
    nodes = [node(f"n{i}", gpus=8) for i in range(4)]
    bought = replace(nodes[3], labels={PROVISIONED_FOR_LABEL: provisioned_for("ns/other")})
    states = cluster(*nodes[:3], bought)
    made = Holds(HOUR).hold(gpu_job("ns/old", 8, created=1.0), states, anywhere, free(), now=NOW)
    assert made is not None
    assert "n3" not in made.nodes
