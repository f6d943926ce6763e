"""Fair shares: quota first, then the surplus by weight, capped by demand and limit."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpufleet.compose import run_cycle
from gpufleet.model.workload import PodInfo, QueueSpec, Snapshot, vector
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.state.fairshare import QueueTree, divide, fair_shares, share_ratio
from tests.builders import node, pod

INF = float("inf")


@pytest.mark.parametrize(
    ("available", "quota", "limit", "weight", "demand", "expected"),
    [
        pytest.param(8, [0, 0], [INF, INF], [1, 1], [8, 8], [4, 4], id="equal-split"),
        pytest.param(8, [0, 0], [INF, INF], [3, 1], [8, 8], [6, 2], id="by-weight"),
        pytest.param(8, [6, 0], [INF, INF], [1, 1], [8, 8], [7, 1], id="quota-first"),
        pytest.param(8, [0, 0], [INF, INF], [1, 1], [2, 8], [2, 6], id="demand-caps"),
        pytest.param(8, [0, 0], [3, INF], [1, 1], [8, 8], [3, 5], id="limit-caps"),
        pytest.param(8, [0, 0], [INF, INF], [1, 0], [8, 8], [8, 0], id="zero-weight"),
        pytest.param(8, [8, 8], [INF, INF], [1, 1], [8, 8], [4, 4], id="quotas-oversold"),
        pytest.param(8, [0, 0], [INF, INF], [1, 1], [1, 2], [1, 2], id="all-satisfied"),
    ],
)
def test_divide(  # noqa: PLR0917 (the parametrized columns)
    available: float,
    quota: list[float],
    limit: list[float],
    weight: list[float],
    demand: list[float],
    expected: list[float],
) -> None:
    def col(values: list[float]) -> np.ndarray:
        return np.array(values, dtype=float)[:, None]

    share = divide(
        np.array([available], dtype=float), col(quota), col(limit), col(weight), col(demand)
    )
    assert share[:, 0] == pytest.approx(expected)


def test_hierarchy_divides_the_parents_share() -> None:
    queues = [
        QueueSpec("dept-1"),
        QueueSpec("dept-2"),
        QueueSpec("a", "dept-1"),
        QueueSpec("b", "dept-1"),
        QueueSpec("c", "dept-2"),
    ]
    tree = QueueTree.of(queues)
    demand = {name: vector(8) for name in ("a", "b", "c")}
    shares = fair_shares(tree, demand, vector(8))
    assert {q: shares[q][0] for q in shares} == pytest.approx(
        {"dept-1": 4, "dept-2": 4, "a": 2, "b": 2, "c": 4}
    )


@pytest.mark.parametrize(
    ("allocated", "fair", "ratio"),
    [
        pytest.param(vector(2, 1000), vector(4, 1000), 1.0, id="dominant-is-cpu"),
        pytest.param(vector(), vector(4), 0.0, id="nothing-allocated"),
        pytest.param(vector(1), vector(0), INF, id="no-share"),
    ],
)
def test_share_ratio(allocated: np.ndarray, fair: np.ndarray, ratio: float) -> None:
    assert share_ratio(allocated, fair) == ratio


def test_one_resource_in_many_columns_divides_each_column_alone() -> None:
    queues = [QueueSpec("dept"), QueueSpec("a", "dept"), QueueSpec("b", "dept"), QueueSpec("c")]
    tree = QueueTree.of(queues)
    columns = [{"a": 8.0, "b": 1.0, "c": 8.0}, {"a": 0.0, "b": 3.0, "c": 1.0}, {"a": 5.0}]
    demand = {q: np.array([col.get(q, 0.0) for col in columns]) for q in ("a", "b", "c")}
    shares = fair_shares(tree, demand, np.full(len(columns), 8.0), resource=0)
    for j, col in enumerate(columns):
        alone = fair_shares(tree, {q: vector(d) for q, d in col.items()}, vector(8))
        assert {q: shares[q][j] for q in shares} == pytest.approx(
            {q: v[0] for q, v in alone.items()}
        )


# -- reclaim over several cycles ------------------------------------------------------------

HOUR = 3600.0


def _running(key: str, queue: str, gpus: int, node: str = "n1") -> PodInfo:
    return replace(_pending(key, queue, gpus), node=node, started=0.0)


def _pending(key: str, queue: str, gpus: int) -> PodInfo:
    return PodInfo(key, pod(key).gpus(gpus).obj(), queue=queue, priority=10)


def _apply(snapshot: Snapshot, result: CycleResult, now: float) -> Snapshot:
    """What the cluster looks like after the cycle: bound pods run, evicted pods wait again
    (their controller recreates them)."""
    bound = {b.pod: b for b in result.bindings}
    evicted = {e.pod for e in result.evictions}
    pods = []
    for p in snapshot.pods:
        after = p
        if p.key in evicted:
            after = replace(p, node=None, gpus=(), started=None)
        elif p.key in bound:
            b = bound[p.key]
            after = replace(p, node=b.node, gpus=tuple(b.gpus or ()), started=now)
        pods.append(after)
    return replace(snapshot, pods=tuple(pods))


def _cycles(snapshot: Snapshot, count: int) -> list[CycleResult]:
    results = []
    for i in range(count):
        now = (i + 1) * HOUR
        result = run_cycle(snapshot, now, CycleConfig(records=False))
        snapshot = _apply(snapshot, result, now)
        results.append(result)
    return results


def test_reclaim_takes_a_victim_larger_than_its_queues_excess_and_settles() -> None:
    # team-b's 6-GPU job holds more than its share of 4; team-a (share 4) reclaims it. Back
    # at 0 GPUs, team-b cannot take the job back: with it team-b would be over its own share
    # (6 of 4), and team-a, at its share, is never a victim. Its small job just fits.
    snapshot = Snapshot(
        (node("n1", gpus=8),),
        (
            _running("team-b/big", "team-b", 6),
            _pending("team-a/mine", "team-a", 4),
            _pending("team-b/small", "team-b", 2),
        ),
        queues=(QueueSpec("team-a"), QueueSpec("team-b")),
    )
    first, *rest = _cycles(snapshot, 5)
    assert [(e.pod, e.action) for e in first.evictions] == [("team-b/big", "reclaim")]
    assert {b.pod for b in first.bindings} == {"team-a/mine", "team-b/small"}
    for later in rest:
        assert (later.bindings, later.evictions) == ((), ())
        assert [p.pod for p in later.pending] == ["team-b/big"]


def test_reclaim_between_queues_over_their_shares_does_not_oscillate() -> None:
    # Three queues of equal weight on 12 GPUs (shares 4 each): team-c is within its share and
    # never a victim; team-a and team-b each reclaim from the other only while the other is
    # above its share, so the cluster settles instead of flipping pods back and forth.
    snapshot = Snapshot(
        (node("n1", gpus=8), node("n2", gpus=4)),
        (
            *(_running(f"team-a/run-{i}", "team-a", 2) for i in range(4)),
            _running("team-c/c-0", "team-c", 2, node="n2"),
            _running("team-c/c-1", "team-c", 2, node="n2"),
            *(_pending(f"team-b/wait-{i}", "team-b", 2) for i in range(3)),
            *(_pending(f"team-a/wait-{i}", "team-a", 2) for i in range(2)),
        ),
        queues=(QueueSpec("team-a"), QueueSpec("team-b"), QueueSpec("team-c")),
    )
    results = _cycles(snapshot, 6)
    evicted = [e.pod for r in results for e in r.evictions]
    assert len(evicted) == len(set(evicted)), "a pod was evicted twice: reclaim oscillates"
    assert all(e.action == "reclaim" and e.pod.startswith("team-a/") for e in results[0].evictions)
    assert results[0].evictions
    assert not any(r.evictions for r in results[1:])
    assert not any(r.bindings for r in results[2:])
    final = {b.pod for r in results for b in r.bindings}
    assert sum(k.startswith("team-b/") for k in final) == 2  # up to its share of 4 GPUs
