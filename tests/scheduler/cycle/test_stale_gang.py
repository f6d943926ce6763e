"""Stale-gang release (``scheduler/cycle/stale_gang.py``): a gang running below its
``minMember`` that has been stale (``gpufleet.io/stale-since``) for the grace period or
longer has its running pods released — evicted with action ``stale-gang`` — and the
reason of its pending pods says which case holds."""

from __future__ import annotations

import pytest

from gpufleet.model.workload import GroupSpec
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.api.outcome import Eviction, Why, WhyCode, why
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.cycle.stale_gang import StaleGangs
from tests.builders import cycle_of, info, node

GRACE = 60.0
NOW = 100.0

X = why(WhyCode.QUEUE_MISSING, queue="x")
"""The job's own reason, which the stale gang's adds to ("queue x does not exist")."""


def text(reason: Why | None) -> str:
    assert reason is not None
    return why_text(reason).replace("queue x does not exist", "X")


def release(cycle: Cycle, gang: str, reason: Why | None) -> Why | None:
    """What the release of ``gang`` after the grace period says, on ``cycle``'s ledger."""
    return StaleGangs(cycle.ledger, GRACE).release(cycle.commit, cycle.now, gang, reason)


def gang(running: int, min_member: int, stale_since: float | None) -> Cycle:
    """A gang ``ns/g`` with ``running`` of its pods on n0 (2 GPUs each) and one pending."""
    pods = [info(f"ns/g-{i}").gpus(2).gang("ns/g").on("n0").obj() for i in range(running)]
    pods.append(info("ns/g-new").gpus(2).gang("ns/g").obj())
    group = GroupSpec("ns/g", min_member, stale_since=stale_since)
    return cycle_of([node("n0", gpus=8)], pods, groups=(group,), now=NOW)


@pytest.mark.parametrize(
    ("running", "min_member", "stale_since", "reason"),
    [
        pytest.param(2, 2, 0.0, "X", id="complete-gang"),
        pytest.param(0, 2, 0.0, "X", id="nothing-running"),
        pytest.param(
            1,
            2,
            None,
            "gang ns/g has 1 of 2 pods running and is stale since now; its pods are released "
            "after 60s unless it is completed. X",
            id="stale-since-unknown",
        ),
        pytest.param(
            1,
            2,
            50.0,
            "gang ns/g has 1 of 2 pods running and is stale since 50s ago; its pods are "
            "released after 60s unless it is completed. X",
            id="within-the-grace-period",
        ),
    ],
)
def test_a_gang_is_kept_within_its_grace_period(
    running: int, min_member: int, stale_since: float | None, reason: str
) -> None:
    cycle = gang(running, min_member, stale_since)
    idle = cycle.ledger.state.gpu_idle.tolist()
    assert text(release(cycle, "ns/g", X)) == reason
    assert cycle.evictions == []
    assert len(cycle.ledger.gang_running.get("ns/g", ())) == running
    assert cycle.ledger.state.gpu_idle.tolist() == idle


@pytest.mark.parametrize(
    ("running", "min_member", "stale_since", "waited"),
    [
        pytest.param(1, 2, NOW - GRACE, 60, id="grace-just-over"),
        pytest.param(2, 3, 0.0, 100, id="long-past"),
    ],
)
def test_a_gang_past_its_grace_period_is_released(
    running: int, min_member: int, stale_since: float, waited: int
) -> None:
    cycle = gang(running, min_member, stale_since)
    keys = [f"ns/g-{i}" for i in range(running)]
    assert text(release(cycle, "ns/g", X)) == (
        f"gang ns/g had {running} of {min_member} pods running for {waited}s (grace 60s); "
        "its running pods were released. X"
    )
    assert cycle.evictions == [Eviction(k, "stale-gang", "ns/g") for k in keys]
    assert "ns/g" not in cycle.ledger.gang_running
    assert not any(k in cycle.ledger.running or k in cycle.pool.index for k in keys)
    assert cycle.ledger.state.gpu_whole_free.tolist() == [8]


def test_a_cycle_releases_a_stale_gang_whose_rest_does_not_fit() -> None:
    pods = [
        info("ns/g-0").gpus(2).gang("ns/g").on("n0").obj(),
        info("ns/other").gpus(6).priority(200).on("n0").obj(),
        info("ns/g-1").gpus(2).gang("ns/g").obj(),
    ]
    group = GroupSpec("ns/g", 2, stale_since=0.0)
    result = cycle_of([node("n0", gpus=8)], pods, groups=(group,), now=NOW).run()
    assert [(e.pod, e.action) for e in result.evictions] == [("ns/g-0", "stale-gang")]
    assert [p.pod for p in result.pending] == ["ns/g-1"]
    assert "its running pods were released" in why_text(result.pending[0].why)


@pytest.mark.parametrize(
    ("own_grace", "stale_since", "released", "reason"),
    [
        pytest.param(
            10.0,
            NOW - 30,
            True,
            "gang ns/g had 1 of 2 pods running for 30s (grace 10s); its running pods were "
            "released. X",
            id="shorter-grace-past",
        ),
        pytest.param(
            40.0,
            NOW - 30,
            False,
            "gang ns/g has 1 of 2 pods running and is stale since 30s ago; its pods are "
            "released after 40s unless it is completed. X",
            id="shorter-grace-within",
        ),
        pytest.param(
            600.0,
            0.0,
            False,
            "gang ns/g has 1 of 2 pods running and is stale since 100s ago; its pods are "
            "released after 600s unless it is completed. X",
            id="longer-grace-within",
        ),
    ],
)
def test_a_pod_groups_own_grace_replaces_the_cycles(
    own_grace: float, stale_since: float, released: bool, reason: str
) -> None:
    """A PodGroup's ``scheduleTimeoutSeconds`` (``stale_grace_s``) against the cycle's 60 s."""
    pods = [
        info("ns/g-0").gpus(2).gang("ns/g").on("n0").obj(),
        info("ns/g-new").gpus(2).gang("ns/g").obj(),
    ]
    group = GroupSpec("ns/g", 2, stale_since=stale_since, stale_grace_s=own_grace)
    cycle = cycle_of([node("n0", gpus=8)], pods, groups=(group,), now=NOW)
    assert text(release(cycle, "ns/g", X)) == reason
    assert cycle.evictions == ([Eviction("ns/g-0", "stale-gang", "ns/g")] if released else [])
