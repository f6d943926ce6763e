"""Cost over time: how much a group of runs had cost by each of a list of times.

A run costs at a constant rate while it holds its node (its charged amounts x its node's
prices), so the cost of a group of runs from the window's start to a time ``t`` is

    C(t) = sum_i rate_i * max(0, min(t, end_i) - start_i)

(starts and ends clipped to the window): piecewise linear in ``t``, its slope rising by
``rate_i`` at ``start_i`` and falling by it at ``end_i``. :func:`cumulative` sorts those
2R breakpoints once, integrates the slope between them with one cumulative sum and reads
``C`` at the times asked by interpolation, which is exact between breakpoints: O(R log R +
T log R) for R runs and T times, never an R x T matrix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.allocation import HOUR, IDLE

if TYPE_CHECKING:
    from gpufleet.cost.allocation import CostAllocation
    from gpufleet.model.arrays import FloatArray


def cumulative(
    start: FloatArray, end: FloatArray, rate: FloatArray, times: FloatArray
) -> FloatArray:
    """``C(t)`` (module docstring) at each of ``times``, for spans ``[start, end)`` costing
    ``rate`` per second each (spans may be empty; starts and ends finite)."""
    keep = end > start
    if not np.any(keep):
        return np.zeros(len(times))
    points = np.concatenate([start[keep], end[keep]])
    change = np.concatenate([rate[keep], -rate[keep]])
    order = np.argsort(points, kind="stable")
    points, change = points[order], change[order]
    slope = np.cumsum(change)
    # C at each breakpoint: the slope after each earlier breakpoint times the gap to the next.
    value = np.concatenate([[0.0], np.cumsum(slope[:-1] * np.diff(points))])
    at = np.searchsorted(points, times, side="right") - 1
    inside = at >= 0
    result = np.zeros(len(times))
    k = at[inside]
    result[inside] = value[k] + slope[k] * (times[inside] - points[k])
    return result


def cost_over_time(alloc: CostAllocation, by: str, times: FloatArray) -> dict[str, FloatArray]:
    """Per value of the runs' dimension ``by`` (``queue``, ``job``, ...), the cost of its
    runs from the window's start to each of ``times``; and :data:`IDLE`, what the nodes
    cost by then less what every run did (unallocated)."""
    lo, hi = alloc.window
    runs, nodes = alloc.runs, alloc.nodes
    start = np.clip(runs.start, lo, hi)
    end = np.clip(runs.end, lo, hi)
    per_hour = (alloc.charged * nodes.prices[runs.node]).sum(axis=1)
    rate = per_hour / HOUR
    names, group = np.unique(np.asarray(runs.dims[by], dtype=str), return_inverse=True)
    order = np.argsort(group, kind="stable")
    bounds = np.searchsorted(group[order], np.arange(len(names) + 1))
    series: dict[str, FloatArray] = {}
    workload = np.zeros(len(times))
    for j, name in enumerate(names):  # one pass per group, over its own runs
        rows = order[bounds[j] : bounds[j + 1]]
        series[str(name)] = cumulative(start[rows], end[rows], rate[rows], times)
        workload += series[str(name)]
    node_rate = (nodes.capacity * nodes.prices).sum(axis=1) / HOUR
    assets = cumulative(np.clip(nodes.start, lo, hi), np.clip(nodes.end, lo, hi), node_rate, times)
    series[IDLE] = assets - workload
    return series
