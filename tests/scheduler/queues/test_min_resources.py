"""A PodGroup's ``minResources`` (``scheduler/queues/min_resources.py``): a gang is not tried while
the cluster's free resources — with what its own running pods hold — fall short of them, nor
(Volcano's PodGroup) while one of its queues has less room under its limit; its pods wait
with a reason naming the PodGroup, the resource, what it asks and what is free. Such a gang
evicts nothing, as coscheduling's PreFilter and Volcano's enqueue keep it from preemption."""

from __future__ import annotations

import math

import pytest

from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, vector
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.queues import min_resources
from tests.builders import cycle_of, info, node

GANG = "ml/train"


def gang_pods(
    count: int = 2, gpus: int = 2, *, queue: str = "default", priority: int = 0
) -> list[PodInfo]:
    """The gang's pending pods, ``ml/train-0`` on."""
    return [
        info(f"{GANG}-{i}").gpus(gpus).gang(GANG).queue(queue).priority(priority).obj()
        for i in range(count)
    ]


def other(gpus: int, *, queue: str = "default") -> list[PodInfo]:
    """Another team's running pod on n0."""
    return [info("ml/other").gpus(gpus).queue(queue).on("n0").obj()]


def run(
    pods: list[PodInfo],
    group: GroupSpec,
    *,
    queues: tuple[QueueSpec, ...] = (),
    config: CycleConfig | None = None,
    now: float = 100.0,
) -> CycleResult:
    nodes = [node("n0", gpus=8)]
    return cycle_of(nodes, pods, groups=(group,), queues=queues, config=config, now=now).run()


def reasons(result: CycleResult) -> dict[str, str]:
    return {p.pod: why_text(p.why) for p in result.pending}


@pytest.mark.parametrize(
    ("asked", "bound"),
    [
        pytest.param(None, True, id="none-written"),
        pytest.param((6.0, 0.0, 0.0), True, id="exactly-the-free-gpus"),
        pytest.param((8.0, 0.0, 0.0), False, id="more-gpus-than-free"),
        pytest.param((0.0, 96000.0, 0.0), False, id="more-cpu-than-free"),
        pytest.param((0.0, 0.0, 0.0), True, id="nothing-asked"),
    ],
)
def test_a_gang_is_tried_only_when_the_cluster_has_its_min_resources_free(
    asked: tuple[float, ...] | None, bound: bool
) -> None:
    """n0 has 8 GPUs, 2 taken; the gang's two pods of 2 GPUs fit either way."""
    result = run(other(2) + gang_pods(), GroupSpec(GANG, 2, min_resources=asked))
    assert {b.pod for b in result.bindings} == ({f"{GANG}-0", f"{GANG}-1"} if bound else set())
    assert result.evictions == ()


def test_the_reason_names_the_pod_group_resource_ask_and_free() -> None:
    result = run(other(2) + gang_pods(), GroupSpec(GANG, 2, min_resources=(8.0, 9000.0, 0.0)))
    text = (
        "PodGroup ml/train waits until the cluster has its minResources free: it asks for "
        "8 GPUs, 6 GPUs free"
    )
    assert reasons(result) == {f"{GANG}-0": text, f"{GANG}-1": text}


def test_what_the_gangs_own_running_pods_hold_counts_as_free() -> None:
    """1 of the gang's 3 pods runs (2 GPUs), another pod takes 2: 4 GPUs free, 6 with the
    gang's own — enough for 6, not for 8."""
    running = [info(f"{GANG}-r").gpus(2).gang(GANG).on("n0").obj()]
    pods = other(2) + running + gang_pods()
    fits = run(pods, GroupSpec(GANG, 3, stale_since=100.0, min_resources=(6.0, 0.0, 0.0)))
    assert len(fits.bindings) == 2
    short = run(pods, GroupSpec(GANG, 3, stale_since=100.0, min_resources=(8.0, 0.0, 0.0)))
    assert short.bindings == ()
    assert "it asks for 8 GPUs, 6 GPUs free" in reasons(short)[f"{GANG}-0"]
    assert "is stale since" in reasons(short)[f"{GANG}-0"]  # and its grace still runs


def test_no_pod_is_evicted_for_a_gang_short_of_its_min_resources() -> None:
    """Without minResources the gang preempts the lower-priority pod; with minResources the
    free GPUs cannot meet, it is not tried, so nothing is preempted for it."""
    pods = other(6) + gang_pods(priority=50)
    preempts = run(pods, GroupSpec(GANG, 2))
    assert [(e.pod, e.action) for e in preempts.evictions] == [("ml/other", "preempt")]
    waits = run(pods, GroupSpec(GANG, 2, min_resources=(4.0, 0.0, 0.0)))
    assert (waits.bindings, waits.evictions) == ((), ())
    assert "it asks for 4 GPUs, 2 GPUs free" in reasons(waits)[f"{GANG}-0"]


def test_a_starving_gang_short_of_its_min_resources_holds_nodes() -> None:
    config = CycleConfig(starvation_after_s=1800.0)
    result = run(
        other(2) + gang_pods(),
        GroupSpec(GANG, 2, min_resources=(8.0, 0.0, 0.0)),
        config=config,
        now=4000.0,
    )
    assert "Waiting 4000s (over 1800s): node(s) n0 reserved for it" in reasons(result)[f"{GANG}-0"]


def test_elastic_pods_of_a_started_gang_are_not_held_to_min_resources() -> None:
    running = [info(f"{GANG}-r").gpus(2).gang(GANG).on("n0").obj()]
    result = run(running + gang_pods(1), GroupSpec(GANG, 1, min_resources=(64.0, 0.0, 0.0)))
    assert [b.pod for b in result.bindings] == [f"{GANG}-0"]


TEAM = QueueSpec("team", limit=vector(4.0, math.inf, math.inf))


@pytest.mark.parametrize(
    ("in_queue", "bound"),
    [
        pytest.param(False, True, id="coscheduling-the-cluster-only"),
        pytest.param(True, False, id="volcano-the-queue-too"),
    ],
)
def test_a_volcano_gang_needs_its_min_resources_under_its_queues_limit(
    in_queue: bool, bound: bool
) -> None:
    """Queue ``team`` may hold 4 GPUs; the gang's pods ask 2, its minResources 6."""
    group = GroupSpec(
        GANG, 2, queue="team", min_resources=(6.0, 0.0, 0.0), min_resources_in_queue=in_queue
    )
    result = run(gang_pods(2, 1, queue="team"), group, queues=(TEAM,))
    assert bool(result.bindings) is bound
    if not bound:
        assert reasons(result)[f"{GANG}-0"] == (
            "PodGroup ml/train waits until queue team has room for its minResources: it asks "
            "for 6 GPUs, 4 GPUs left under the queue's limit of 4 GPUs"
        )


def test_the_queues_room_counts_what_the_gangs_own_pods_hold() -> None:
    """The gang runs 2 GPUs of queue ``team``'s 4, its last pod asks 1, its minResources 4:
    its own pods' GPUs are its room, another pod's GPU is not (the pods alone still fit the
    limit: 1 + 2 + 1)."""
    running = [info(f"{GANG}-r").gpus(2).gang(GANG).queue("team").on("n0").obj()]
    group = GroupSpec(
        GANG,
        2,
        "team",
        stale_since=100.0,
        min_resources=(4.0, 0.0, 0.0),
        min_resources_in_queue=True,
    )
    fits = run(running + gang_pods(1, 1, queue="team"), group, queues=(TEAM,))
    assert [b.pod for b in fits.bindings] == [f"{GANG}-0"]
    taken = other(1, queue="team") + running + gang_pods(1, 1, queue="team")
    short = run(taken, group, queues=(TEAM,))
    assert short.bindings == ()
    assert (
        "it asks for 4 GPUs, 3 GPUs left under the queue's limit of 4 GPUs"
        in (reasons(short)[f"{GANG}-0"])
    )


def test_the_free_resources_are_summed_once_until_the_cluster_changes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Ten gangs short of their minResources: one sum for all of them."""
    sums = []
    real = min_resources.free_resources

    def counted(ledger: object) -> object:
        sums.append(1)
        return real(ledger)  # type: ignore[arg-type]

    monkeypatch.setattr(min_resources, "free_resources", counted)
    pods = [info(f"ml/g{i}-0").gpus(1).gang(f"ml/g{i}").obj() for i in range(10)]
    groups = tuple(GroupSpec(f"ml/g{i}", 1, min_resources=(9.0, 0.0, 0.0)) for i in range(10))
    cycle = cycle_of([node("n0", gpus=8)], pods, groups=groups)
    result = cycle.run()
    assert (len(result.pending), len(sums)) == (10, 1)
    gate = cycle.min_resources
    gate.free()
    assert len(sums) == 1
    cycle.ledger.state.reserve(0, pods[0].spec, (0,))
    assert gate.free()[0] == 7.0
    assert len(sums) == 2
