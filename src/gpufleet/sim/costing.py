"""Costing a replay: the runs its run log holds, charged against the nodes' prices.

After a replay (``sim/replay.py``) with a price sheet, the runs of pods on nodes that its
:class:`~gpufleet.metering.runs.RunLog` was told are labelled by job, queue, outcome and
node type, costed over ``[0, end)`` by the cost layer (``cost/allocation.py``) and summed up
(``cost/summary.py``). It reads nothing but the log and the jobs (and the wall clock, to time
itself); the replay decides when.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.allocation import CostAllocation, Nodes, Runs, allocate
from gpufleet.cost.summary import summarise
from gpufleet.metering.runs import OUTCOMES

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.cost.prices import PriceSheet
    from gpufleet.metering.runs import RunLog
    from gpufleet.model.arrays import IntArray
    from gpufleet.model.costs import ReplayCost
    from gpufleet.model.workload import ReplayJob


def cost_replay(
    log: RunLog,
    jobs: Sequence[ReplayJob],
    tenants: Sequence[str],
    *,
    nodes: Nodes,
    sheet: PriceSheet,
    parents: Mapping[str, str | None],
    finished: bytes,
    finished_jobs: int,
    end: float,
) -> tuple[CostAllocation, ReplayCost]:
    """The runs of ``log`` costed over ``[0, end)``, and their summary.

    ``tenants`` is the queue of each of ``jobs`` (the run log's owners are their indexes),
    ``parents`` each queue's parent, ``finished`` per job 1 once it finished and
    ``finished_jobs`` how many the meter read as finished; the summary's ``elapsed_s`` is
    the time the costing took.
    """
    started = time.perf_counter()
    columns = log.columns()

    def per_run(values: Sequence[str], index: IntArray) -> tuple[str, ...]:
        return tuple(np.array(values, dtype=object)[index].tolist())

    names = per_run([job.name for job in jobs], columns.owner)
    runs = Runs.of(
        columns.pods,
        node=columns.node,
        start=columns.start,
        end=columns.end,
        request=columns.request,
        dims={
            "queue": per_run(tenants, columns.owner),
            "job": names,
            "experiment": names,  # a replay's experiment: its job (its PodGroup)
            "outcome": per_run(OUTCOMES, columns.outcome),
            "nodeType": per_run(nodes.types, columns.node),
        },
    )
    allocation = allocate(runs, nodes, (0.0, end))
    done = np.flatnonzero(np.frombuffer(finished, dtype=np.uint8))
    work = sum(jobs[i].gpus * jobs[i].duration_s for i in done.tolist())
    cost = summarise(
        allocation,
        sheet=sheet,
        parents=parents,
        finished_jobs=finished_jobs,
        finished_gpu_hours=work / 3600.0,
    )
    return allocation, replace(cost, elapsed_s=time.perf_counter() - started)
