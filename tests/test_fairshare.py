"""Fair shares: quota first, then the surplus by weight, capped by demand and limit."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.model.workload import QueueSpec, vector
from gpufleet.scheduler.fairshare import QueueTree, divide, fair_shares, share_ratio

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
