"""What replay runs cost, as terminal tables and the report's HTML section (the cost plot:
``report/replay_plot.py``; the runs, nodes and jobs as CSV: ``report/cost_files.py``).

Per run: the cluster's cost over the replay, what pods were charged and what no pod was
(unallocated, ``__idle__``), the cost of evicted runs, the cost per finished job and per
finished GPU-hour of work. Per queue (a parent's figure includes its children's) and the
most costly jobs, for each policy's first seed. Every table says which price sheet it used,
and that GPU efficiency is unknown: a trace records requests, not utilisation.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from gpufleet.model.costs import (
    IDLE,
    JOBS_FILE,
    NO_UTILISATION,
    NODES_FILE,
    RUNS_FILE,
    ReplayCost,
)
from gpufleet.model.results import ReplayRun
from gpufleet.report.html import table_html
from gpufleet.report.replay import first_seed
from gpufleet.report.table import text_table

TOP_QUEUES = 15
"""Queues in the per-queue table (the most costly under the first policy shown)."""
COST_PAGE = "cost.html"
"""The cost page beside ``index.html`` (``report/cost_page.py``)."""
TOP_JOBS = 5
"""Jobs per policy in the jobs table."""


def costed(runs: Sequence[ReplayRun]) -> list[tuple[ReplayRun, ReplayCost]]:
    return [(r, r.cost) for r in runs if r.cost is not None]


def money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def cost_columns(currency: str) -> tuple[str, ...]:
    return (
        "policy",
        "seed",
        f"cluster {currency}",
        f"allocated {currency}",
        f"unallocated {currency}",
        "unalloc %",
        f"lost {currency}",
        "finished",
        f"per job {currency}",
        "finished GPU-h",
        f"per GPU-h {currency}",
    )


def cost_rows(runs: Sequence[ReplayRun]) -> list[tuple[str, ...]]:
    return [
        (
            r.policy,
            str(r.seed),
            money(c.cluster.total),
            money(c.allocated.total),
            money(c.idle.total),
            f"{100 * c.idle_share:.1f}",
            money(c.lost),
            f"{c.finished_jobs:,}",
            money(c.per_finished_job),
            f"{c.finished_gpu_hours:,.0f}",
            money(c.per_finished_gpu_hour),
        )
        for r, c in costed(runs)
    ]


def queue_rows(
    runs: Sequence[ReplayRun], top: int = TOP_QUEUES
) -> tuple[list[str], list[list[str]]]:
    """The per-queue table: a row per queue (children indented under their parent's name,
    the most costly ``top`` by the first policy), a column per policy (first seeds)."""
    shown = costed(first_seed(runs))
    if not shown:
        return [], []
    by_run = [{q.name: q for q in c.queues} for _, c in shown]
    first = shown[0][1]
    chosen = [q.name for q in first.queues[:top]]
    depth = {q.name: _depth(q.name, {x.name: x.parent for x in first.queues}) for q in first.queues}
    header = ["queue", *(r.policy for r, _ in shown)]
    body = [
        [
            "  " * depth.get(name, 0) + name,
            *(money(row[name].cost.total) if name in row else "-" for row in by_run),
        ]
        for name in chosen
    ]
    body.append([IDLE, *(money(c.idle.total) for _, c in shown)])
    return header, body


def _depth(name: str, parents: dict[str, str | None]) -> int:
    depth, seen, at = 0, {name}, parents.get(name)
    while at is not None and at not in seen:
        seen.add(at)
        depth += 1
        at = parents.get(at)
    return depth


def job_rows(runs: Sequence[ReplayRun], top: int = TOP_JOBS) -> list[tuple[str, ...]]:
    return [
        (r.policy, job.name, job.queue, f"{job.gpu_hours:,.1f}", money(job.cost.total))
        for r, c in costed(first_seed(runs))
        for job in c.jobs[:top]
    ]


def sheet_line(runs: Sequence[ReplayRun]) -> str:
    """Which sheet the costs are under, and what is not known."""
    found = costed(runs)
    if not found:
        return ""
    sheet = found[0][1].sheet
    return (
        f"prices: {sheet.title} (sheet {sheet.name}, {sheet.currency}); each run over [0, its "
        f"end); gpuEfficiency: {NO_UTILISATION}; every job's cost: {JOBS_FILE}"
    )


def cost_tables(runs: Sequence[ReplayRun]) -> list[Table | Text]:
    """The cost tables for the terminal, and the line naming the sheet, as plain text (a
    sheet's title is the user's: never markup); nothing when no run was costed."""
    found = costed(runs)
    if not found:
        return []
    currency = found[0][1].sheet.currency
    columns = cost_columns(currency)
    summary = text_table("cost of the replay", columns, cost_rows(runs))
    header, body = queue_rows(runs)
    queues = text_table(
        f"cost per queue, {currency} (a parent includes its children)",
        header,
        [(Text(line[0]), *line[1:]) for line in body],  # names are the user's: never markup
    )
    jobs = Table(title=f"most costly jobs, {currency}")
    for i, column in enumerate(("policy", "job", "queue", "GPU-h", "cost")):
        jobs.add_column(column, justify="left" if i < 3 else "right", no_wrap=i < 3)
    for job in job_rows(runs):
        jobs.add_row(job[0], Text(job[1]), Text(job[2]), *job[3:])
    return [summary, queues, jobs, Text(sheet_line(runs))]


COST_NOTE = f"""<img src="replay-cost.png"
 alt="Cumulative cost per queue and unallocated cost over time, per policy">
<p class="note">Cost as OpenCost allocates it: a pod is charged its requests (GPUs, a share
or MIG slice as its fraction; CPU cores; memory) for the time it ran, at its node's prices;
what no pod requested is unallocated (<code>__idle__</code>). Runs that were evicted are
charged too (<em>lost</em>). Per finished job and per finished GPU-hour of work divide what
the cluster cost by the jobs that finished and their GPUs x trace duration. Every pod's runs
are in <a href="{RUNS_FILE}">{RUNS_FILE}</a> (the nodes and their prices in
<a href="{NODES_FILE}">{NODES_FILE}</a>), every job's cost in
<a href="{JOBS_FILE}">{JOBS_FILE}</a>.</p>"""


def cost_html(runs: Sequence[ReplayRun]) -> str:
    """The report's cost section (empty when no run was costed)."""
    found = costed(runs)
    if not found:
        return ""
    currency = found[0][1].sheet.currency
    header, body = queue_rows(runs)
    return "\n".join(
        (
            "<h2>Cost</h2>",
            f'<p><a href="{COST_PAGE}">The cost page</a>: the price sheet, cost per queue over'
            " time, unallocated cost per node type, the most costly experiments and a table of"
            " every queue's cost that sorts.</p>",
            f"<p>{html.escape(sheet_line(runs))}</p>",
            table_html(cost_columns(currency), cost_rows(runs)),
            f"<h3>Cost per queue, {html.escape(currency)} (a parent includes its children)</h3>",
            table_html(header, body),
            f"<h3>Most costly jobs, {html.escape(currency)}</h3>",
            table_html(("policy", "job", "queue", "GPU-h", "cost"), job_rows(runs)),
            COST_NOTE,
        )
    )
