"""Cumulative cost over time, read off piecewise-constant rates, against the sum it stands
for: sum_i rate_i x max(0, min(t, end_i) - start_i)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cost.timeline import cumulative


def by_definition(
    start: np.ndarray, end: np.ndarray, rate: np.ndarray, times: np.ndarray
) -> np.ndarray:
    held = np.clip(np.minimum(times[:, None], end[None, :]) - start[None, :], 0.0, None)
    total: np.ndarray = (held * np.where(end > start, rate, 0.0)[None, :]).sum(axis=1)
    return total


def test_two_runs_by_hand() -> None:
    # 2 $/s over [0, 10), 1 $/s over [5, 20): at 5, 10; at 10, 20 + 5; at 30, 20 + 15.
    start, end, rate = np.array([0.0, 5.0]), np.array([10.0, 20.0]), np.array([2.0, 1.0])
    got = cumulative(start, end, rate, np.array([0.0, 5.0, 10.0, 30.0]))
    np.testing.assert_allclose(got, [0.0, 10.0, 25.0, 35.0])


def test_no_runs_cost_nothing() -> None:
    empty = np.zeros(0)
    assert cumulative(empty, empty, empty, np.array([1.0, 2.0])).tolist() == [0.0, 0.0]


spans = st.lists(
    st.tuples(st.integers(0, 100), st.integers(0, 100), st.floats(0, 50, allow_nan=False)),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(spans, st.lists(st.integers(-10, 120), min_size=1, max_size=20))
def test_cumulative_is_the_sum_it_stands_for(
    runs: list[tuple[int, int, float]], times: list[int]
) -> None:
    start = np.array([min(a, b) for a, b, _ in runs], dtype=float)
    end = np.array([max(a, b) for a, b, _ in runs], dtype=float)
    rate = np.array([r for _, _, r in runs], dtype=float)
    at = np.array(sorted(times), dtype=float)
    assert cumulative(start, end, rate, at) == pytest.approx(
        by_definition(start, end, rate, at), abs=1e-6
    )
