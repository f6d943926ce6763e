"""A replay's cost records as CSV: its runs, its nodes with their prices, every job's cost.

``cost-runs.csv`` and ``cost-nodes.csv`` are what the cost was computed from, so that it can
be computed again by any dimension later (``load/costs/cost_runs.py`` reads them back); the window
and the sheet of each run are in ``results.json``. ``cost-jobs.csv`` is every job's cost, of
which ``results.json`` and the table list only the most costly. Columns:
:data:`~gpufleet.model.costs.RUN_COLUMNS`, :data:`~gpufleet.model.costs.NODE_COLUMNS`,
:data:`~gpufleet.model.costs.JOB_COLUMNS`. Floats are written as Python writes them, so they
read back exactly.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.allocation import CPU, GPU, RAM
from gpufleet.model.costs import JOB_COLUMNS, NODE_COLUMNS, RUN_COLUMNS

if TYPE_CHECKING:
    from gpufleet.cost.allocation import Nodes, Runs
    from gpufleet.model.results import ReplayRun


def _csv(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return out.getvalue()


def runs_csv(entries: Sequence[tuple[str, int, Runs, Nodes]]) -> str:
    """The runs of each ``(policy, seed, runs, nodes)``, one row per run."""

    def rows() -> Iterable[Sequence[object]]:
        for policy, seed, runs, nodes in entries:
            node = np.asarray(nodes.names, dtype=object)[runs.node].tolist()
            yield from zip(
                *(
                    [policy] * len(runs.pods),
                    [seed] * len(runs.pods),
                    runs.pods,
                    runs.dims["job"],
                    runs.dims["queue"],
                    runs.dims["outcome"],
                    node,
                    runs.start.tolist(),
                    runs.end.tolist(),
                    runs.request[:, GPU].tolist(),
                    runs.request[:, CPU].tolist(),
                    runs.request[:, RAM].tolist(),
                ),
                strict=True,
            )

    return _csv(RUN_COLUMNS, rows())


def nodes_csv(nodes: Nodes) -> str:
    """The nodes, their capacity and prices, one row each."""
    return _csv(
        NODE_COLUMNS,
        zip(
            nodes.names,
            nodes.types,
            nodes.categories,
            *nodes.capacity.T.tolist(),
            *nodes.prices.T.tolist(),
            nodes.start.tolist(),
            nodes.end.tolist(),
            strict=True,
        ),
    )


def jobs_csv(runs: Sequence[ReplayRun]) -> str:
    """Every job's cost, for each costed run, most costly first."""
    return _csv(
        JOB_COLUMNS,
        (
            (
                r.policy,
                r.seed,
                job.name,
                job.queue,
                round(job.gpu_hours, 6),
                round(job.cost.gpu, 6),
                round(job.cost.cpu, 6),
                round(job.cost.ram, 6),
                round(job.cost.total, 6),
            )
            for r in runs
            if r.cost is not None
            for job in r.cost.jobs
        ),
    )
