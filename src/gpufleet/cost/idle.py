"""Reserved but idle: which GPUs a pod held and did not use, from utilisation samples.

The samples are what an exporter such as NVIDIA's dcgm-exporter reports per GPU: the graphics
engine's activity, 0 to 1, at regular times (``load/costs/cluster_usage.py`` reads them, one
series per GPU and pod). A GPU is *idle* over a stretch of consecutive samples each below
``threshold`` that lasts at least ``window``:

* a sample stands for the time until the next one, at most ``interval`` (the spacing of the
  samples, e.g. a query's step): a stretch of ``n`` samples ``interval`` apart lasts
  ``n x interval``, so 30 one-minute samples make exactly 30 minutes, enough for the default
  window;
* two samples further apart than ``interval`` have missing samples between them: the missing
  time never counts as idle and the stretch ends there (a GPU that stopped reporting may have
  been busy);
* one sample at or above the threshold, or not a number, ends the stretch; the next one below
  starts counting from zero;
* a value below the threshold but above zero (the noise floor of an idle GPU) is idle.

Idle GPU-hours per series are the summed durations of the stretches that last ``window`` or
longer. Pure and vectorised: one sort, then cumulative sums and ``bincount`` over all series
at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.model.arrays import FloatArray, IntArray

HOUR = 3600.0
_SLACK = 1e-9
"""Relative slack on time comparisons: samples ``interval`` apart in floating point are not a
gap, and a stretch of exactly ``window`` is long enough."""


@dataclass(frozen=True, slots=True)
class IdleArgs:
    """What counts as idle: engine activity below ``threshold`` (0 to 1) for at least
    ``window`` seconds of consecutive samples."""

    threshold: float = 0.01
    window: float = 30 * 60.0


@dataclass(frozen=True, slots=True)
class IdleStretches:
    """The idle stretches found, each as its series and ``[start, end)`` in seconds."""

    series: IntArray
    start: FloatArray
    end: FloatArray

    def hours(self, n_series: int) -> FloatArray:
        """Idle hours per series ``0 .. n_series - 1`` (0 for one without a stretch)."""
        hours: FloatArray = np.bincount(
            self.series, (self.end - self.start) / HOUR, minlength=n_series
        ).astype(np.float64)
        return hours


def idle_stretches(
    series: IntArray,
    times: FloatArray,
    values: FloatArray,
    *,
    interval: float,
    args: IdleArgs = IdleArgs(),
) -> IdleStretches:
    """The idle stretches of samples ``(series[i], times[i], values[i])``, in any order, that
    come ``interval`` seconds apart where none is missing (module docstring)."""
    if not interval > 0:
        raise ValueError(f"the sample interval must be positive, got {interval}")
    empty = IdleStretches(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))
    if len(times) == 0:
        return empty
    order = np.lexsort((times, series))
    s, t, v = series[order], times[order], values[order]
    same_next = np.zeros(len(t), dtype=bool)
    same_next[:-1] = s[1:] == s[:-1]
    step = np.full(len(t), np.inf)
    step[:-1] = t[1:] - t[:-1]
    step[~same_next] = np.inf
    limit = interval * (1 + _SLACK)
    # A sample lasts until the next one of its series, or one interval where none follows
    # in time (the last sample, or one before missing samples).
    lasts = np.where(step <= limit, step, interval)
    below = v < args.threshold  # NaN compares False: unknown is never idle
    joins_previous = np.zeros(len(t), dtype=bool)
    joins_previous[1:] = below[1:] & below[:-1] & (step[:-1] <= limit)
    starts = below & ~joins_previous
    stretch = np.cumsum(starts) - 1  # the stretch of each sample below the threshold
    idx = np.flatnonzero(below)
    if len(idx) == 0:
        return empty
    k = int(stretch[idx[-1]]) + 1
    duration = np.bincount(stretch[idx], lasts[idx], minlength=k)
    first = np.flatnonzero(starts)
    long_enough = duration >= args.window * (1 - _SLACK)
    begin = t[first][long_enough]
    return IdleStretches(
        s[first][long_enough].astype(np.int64), begin, begin + duration[long_enough]
    )


def idle_hours(
    series: IntArray,
    times: FloatArray,
    values: FloatArray,
    *,
    n_series: int,
    interval: float,
    args: IdleArgs = IdleArgs(),
) -> FloatArray:
    """Idle GPU-hours of each series ``0 .. n_series - 1`` (module docstring)."""
    found = idle_stretches(series, times, values, interval=interval, args=args)
    return found.hours(n_series)
