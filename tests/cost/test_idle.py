"""Idle detection on synthetic DCGM series: engine activity sampled once a minute, idle below
1% for 30 minutes of consecutive samples; a gap never counts and breaks a stretch, one busy
sample resets the count."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cost.idle import IdleArgs, idle_hours, idle_stretches

MINUTE = 60.0
BUSY = 0.45
NOISE = (0.0, 0.003, 0.009, 0.0001, 0.0099)
"""What an idle GPU reports: zero, or a noise floor under the 1% threshold."""


def minutes(*parts: tuple[int, float | None]) -> tuple[np.ndarray, np.ndarray]:
    """A one-minute series from ``(count, value)`` parts; value None: ``count`` samples
    missing (a gap); ``NOISE`` cycles where the value is 0."""
    times: list[float] = []
    values: list[float] = []
    t = 0
    for count, value in parts:
        for i in range(count):
            if value is not None:
                times.append(t * MINUTE)
                values.append(NOISE[i % len(NOISE)] if value == 0 else value)
            t += 1
    return np.array(times), np.array(values)


DEFAULT = IdleArgs()


def hours_of(*parts: tuple[int, float | None], args: IdleArgs = DEFAULT) -> float:
    times, values = minutes(*parts)
    series = np.zeros(len(times), dtype=np.int64)
    return float(idle_hours(series, times, values, n_series=1, interval=MINUTE, args=args)[0])


CASES: Sequence[tuple[str, Sequence[tuple[int, float | None]], float]] = [
    ("busy throughout", [(120, BUSY)], 0.0),
    ("idle throughout", [(120, 0)], 2.0),
    ("noise floor under the threshold is idle", [(10, BUSY), (45, 0.009), (10, BUSY)], 0.75),
    ("exactly the window is idle", [(5, BUSY), (30, 0), (5, BUSY)], 0.5),
    ("a sample short of the window is not", [(5, BUSY), (29, 0), (5, BUSY)], 0.0),
    ("one busy sample resets the count", [(20, 0), (1, BUSY), (20, 0)], 0.0),
    ("after a reset, a full window counts again", [(20, 0), (1, BUSY), (40, 0)], 40 / 60),
    ("at the threshold is busy", [(20, 0), (1, 0.01), (20, 0)], 0.0),
    ("a gap breaks a stretch", [(20, 0), (15, None), (20, 0)], 0.0),
    ("a gap never counts as idle", [(40, 0), (30, None), (35, 0)], 75 / 60),
    ("a single missing sample is a gap", [(29, 0), (1, None), (30, 0)], 0.5),
    ("a NaN sample is unknown, not idle", [(20, 0), (1, float("nan")), (20, 0)], 0.0),
]


@pytest.mark.parametrize(("parts", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_idle_hours_of_one_series(
    parts: Sequence[tuple[int, float | None]], expected: float
) -> None:
    assert hours_of(*parts) == pytest.approx(expected)


def test_the_threshold_and_window_are_configurable() -> None:
    parts = [(10, BUSY), (12, 0.04), (10, BUSY)]
    assert hours_of(*parts) == 0.0
    assert hours_of(*parts, args=IdleArgs(threshold=0.05, window=10 * MINUTE)) == pytest.approx(0.2)


def test_stretches_are_found_per_series_in_any_sample_order() -> None:
    a_t, a_v = minutes((10, BUSY), (40, 0))
    b_t, b_v = minutes((35, 0), (1, BUSY), (5, 0))
    c_t, c_v = minutes((60, BUSY))
    series = np.repeat(np.array([0, 1, 2]), [len(a_t), len(b_t), len(c_t)])
    times = np.concatenate([a_t, b_t, c_t])
    values = np.concatenate([a_v, b_v, c_v])
    shuffled = np.random.default_rng(7).permutation(len(times))
    found = idle_stretches(series[shuffled], times[shuffled], values[shuffled], interval=MINUTE)
    assert sorted(
        zip(found.series.tolist(), found.start.tolist(), found.end.tolist(), strict=True)
    ) == [
        (0, 10 * MINUTE, 50 * MINUTE),
        (1, 0.0, 35 * MINUTE),
    ]
    np.testing.assert_allclose(found.hours(4), [40 / 60, 35 / 60, 0.0, 0.0])


def test_two_series_at_the_same_times_do_not_join() -> None:
    """The last sample of one series and the first of the next are not one stretch."""
    t, v = minutes((20, 0))
    series = np.repeat(np.array([0, 1]), len(t))
    hours = idle_hours(
        series, np.tile(t, 2), np.tile(v, 2) * 0, n_series=2, interval=MINUTE, args=IdleArgs()
    )
    np.testing.assert_allclose(hours, [0.0, 0.0])


def test_denser_samples_count_their_own_spacing() -> None:
    times = np.arange(0, 30 * MINUTE, 15.0)  # every 15 s for 30 minutes
    hours = idle_hours(
        np.zeros(len(times), dtype=np.int64), times, np.zeros(len(times)), n_series=1, interval=15.0
    )
    assert hours[0] == pytest.approx(0.5)


def test_no_samples_no_idle() -> None:
    empty = np.zeros(0)
    hours = idle_hours(np.zeros(0, np.int64), empty, empty, n_series=2, interval=MINUTE)
    assert hours.tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="interval must be positive"):
        idle_stretches(np.zeros(0, np.int64), empty, empty, interval=0.0)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.sampled_from([0.0, 0.005, 0.5, float("nan"), None]), min_size=0, max_size=150),
    st.integers(1, 60),
)
def test_idle_time_is_bounded_by_the_samples_below_the_threshold(
    values: list[float | None], window: int
) -> None:
    """Idle time never exceeds the minutes with a sample below the threshold, and every
    stretch found lasts the window or longer."""
    parts = [(1, v) for v in values]
    times, vals = minutes(*parts)
    series = np.zeros(len(times), dtype=np.int64)
    args = IdleArgs(window=window * MINUTE)
    found = idle_stretches(series, times, vals, interval=MINUTE, args=args)
    below = int(np.sum(vals < 0.01))
    assert found.hours(1)[0] <= below / 60 + 1e-9
    assert np.all(found.end - found.start >= window * MINUTE - 1e-6)
