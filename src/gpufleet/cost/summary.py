"""A replay's cost in figures: the allocation of its runs summed up for the report.

From an :class:`~gpufleet.cost.allocation.CostAllocation` of a replay's runs (with dimensions
``queue``, ``job`` and ``outcome``), :func:`summarise` gives
:class:`~gpufleet.model.costs.ReplayCost`: what the cluster cost over the window, what pods
were charged and what no pod was (``__idle__``), per resource; the cost of evicted runs;
per queue — a parent's figures include its children's (:func:`rollup`) — and per job; the
cost per finished job and per finished GPU-hour of work; and the cumulative cost of each
queue over time (``cost/timeline.py``). No utilisation is known in a replay, so no
efficiency is given (the value says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.allocation import CPU, GPU, RAM
from gpufleet.cost.timeline import cost_over_time
from gpufleet.model.costs import CostTimeline, JobCost, QueueCost, ReplayCost, Sheet, Split

if TYPE_CHECKING:
    from gpufleet.cost.allocation import CostAllocation
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.arrays import FloatArray

SAMPLES = 200
"""Times at which the cumulative cost is read, over the window."""


def split(row: FloatArray) -> Split:
    """A ``(gpu, cpu, ram)`` row as a :class:`Split`."""
    return Split(float(row[GPU]), float(row[CPU]), float(row[RAM]))


def rollup(
    own: Mapping[str, FloatArray], parents: Mapping[str, str | None], width: int
) -> dict[str, FloatArray]:
    """Per queue, its ``own`` figures (``width`` of them) plus those of every queue below
    it. Queues are those of ``own`` and ``parents``; a queue's ancestors are followed
    through ``parents`` (a cycle is cut where it closes)."""
    names = sorted(set(own) | set(parents) | {p for p in parents.values() if p})
    total = {q: np.zeros(width) for q in names}
    for queue, values in own.items():
        seen: set[str] = set()
        at: str | None = queue
        while at is not None and at not in seen:
            seen.add(at)
            total[at] = total[at] + values
            at = parents.get(at)
    return total


def queue_costs(alloc: CostAllocation, parents: Mapping[str, str | None]) -> tuple[QueueCost, ...]:
    """Per queue of the runs' ``queue`` dimension and of ``parents`` (queue -> its parent,
    None at the top), its cost and GPU-hours with its children's, costliest first."""
    cost = alloc.cost
    queues, queue_of = np.unique(
        np.asarray(alloc.runs.dims["queue"], dtype=str), return_inverse=True
    )
    per_queue = np.stack(
        [np.bincount(queue_of, cost[:, k], minlength=len(queues)) for k in (GPU, CPU, RAM)]
        + [np.bincount(queue_of, alloc.amount_hours[:, GPU], minlength=len(queues))],
        axis=1,
    ).reshape(len(queues), 4)
    own_rows = {str(q): per_queue[j] for j, q in enumerate(queues)}
    totals = rollup(own_rows, parents, per_queue.shape[1])
    return tuple(
        sorted(
            (
                QueueCost(
                    name,
                    parents.get(name),
                    split(values[:3]),
                    float(own_rows[name][:3].sum()) if name in own_rows else 0.0,
                    float(values[3]),
                )
                for name, values in totals.items()
            ),
            key=lambda q: (-q.cost.total, q.name),
        )
    )


def summarise(
    alloc: CostAllocation,
    *,
    sheet: PriceSheet,
    parents: Mapping[str, str | None],
    finished_jobs: int,
    finished_gpu_hours: float,
    samples: int = SAMPLES,
) -> ReplayCost:
    """The figures of ``alloc`` (module docstring). ``parents`` maps each queue to its
    parent (None at the top); ``finished_gpu_hours`` is the work of the finished jobs."""
    cost = alloc.cost
    workload = cost.sum(axis=0)
    idle = alloc.idle.sum(axis=0)
    evicted = np.asarray(alloc.runs.dims["outcome"]) == "evicted"
    times = np.linspace(alloc.window[0], alloc.window[1], samples + 1)
    series = cost_over_time(alloc, "queue", times)
    return ReplayCost(
        sheet=Sheet(sheet.name, sheet.title, sheet.currency),
        window_s=alloc.window,
        cluster=split(alloc.asset.sum(axis=0)),
        allocated=split(workload),
        idle=split(idle),
        lost=float(cost[evicted].sum()),
        finished_jobs=finished_jobs,
        finished_gpu_hours=finished_gpu_hours,
        queues=queue_costs(alloc, parents),
        jobs=job_costs(alloc),
        timeline=CostTimeline(
            tuple(times.tolist()), {k: tuple(v.tolist()) for k, v in series.items()}
        ),
    )


def job_costs(alloc: CostAllocation) -> tuple[JobCost, ...]:
    """Every job's cost and GPU-hours, most costly first (then by name); its queue is that
    of its first run."""
    runs = alloc.runs
    jobs, first, job_of = np.unique(
        np.asarray(runs.dims["job"], dtype=str), return_index=True, return_inverse=True
    )
    g = len(jobs)
    cost = np.stack(
        [np.bincount(job_of, alloc.cost[:, k], minlength=g) for k in (GPU, CPU, RAM)], 1
    )
    gpu_hours = np.bincount(job_of, alloc.amount_hours[:, GPU], minlength=g)
    queue = np.asarray(runs.dims["queue"], dtype=str)[first]
    order = np.lexsort((jobs, -cost.sum(axis=1)))
    return tuple(
        JobCost(str(jobs[j]), str(queue[j]), float(gpu_hours[j]), split(cost[j])) for j in order
    )
