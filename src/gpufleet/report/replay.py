"""Replay runs as the terminal table and the HTML page (the plots: ``report/replay_plot.py``,
so that commands which plot nothing never load matplotlib)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from gpufleet.model.results import ReplayRun
from gpufleet.report.html import page, table_html
from gpufleet.report.table import text_table

COLUMNS = (
    "policy",
    "seed",
    "jobs",
    "finished",
    "never started",
    "mean wait h",
    "p50 wait h",
    "p95 wait h",
    "mean JCT h",
    "alloc %",
    "preemptions",
    "lost GPU-h",
    "time s",
)

DAY = 86400.0


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def rows(runs: Sequence[ReplayRun]) -> list[tuple[str, ...]]:
    return [
        (
            r.policy,
            str(r.seed),
            f"{r.jobs:,}",
            f"{r.finished_jobs:,}",
            f"{r.never_started_jobs:,}",
            hours(r.mean_wait_s),
            hours(r.p50_wait_s),
            hours(r.p95_wait_s),
            hours(r.mean_jct_s),
            f"{r.gpu_allocation_mean:.1f}",
            f"{r.preemptions:,}",
            f"{r.lost_gpu_hours:,.0f}",
            f"{r.elapsed_s:.1f}",
        )
        for r in runs
    ]


SIZE_COLUMNS = (
    "policy",
    "job GPUs",
    "jobs",
    "never started",
    "mean wait h",
    "p50 wait h",
    "p95 wait h",
)
"""The waits per job-size class: every job counts, one that never started at its wait so
far (the main table's waits are over the jobs that started)."""


def size_rows(runs: Sequence[ReplayRun]) -> list[tuple[str, ...]]:
    return [
        (
            r.policy,
            c.size,
            f"{c.jobs:,}",
            f"{c.never_started:,}",
            hours(c.mean_wait_s),
            hours(c.p50_wait_s),
            hours(c.p95_wait_s),
        )
        for r in first_seed(runs)
        for c in r.sizes
    ]


ACTION_COLUMNS = (
    "policy",
    "action",
    "evictions",
    "GPU-h lost",
    "jobs started",
    "their GPU-h waited",
)
"""What each evicting action cost (the runs it ended, the work they lost, restart time
included) and bought (the jobs it made room for that started, and how long they had
waited, in GPU-hours)."""


def action_rows(runs: Sequence[ReplayRun]) -> list[tuple[str, ...]]:
    return [
        (
            r.policy,
            a.action,
            f"{a.evictions:,}",
            f"{a.lost_gpu_hours:,.0f}",
            f"{a.jobs_started:,}",
            f"{a.waited_gpu_hours:,.0f}",
        )
        for r in first_seed(runs)
        for a in r.actions
    ]


def action_table(runs: Sequence[ReplayRun], title: str) -> Table:
    return text_table(title, ACTION_COLUMNS, action_rows(runs))


def replay_table(runs: Sequence[ReplayRun], title: str) -> Table:
    return text_table(title, COLUMNS, rows(runs))


def size_table(runs: Sequence[ReplayRun], title: str) -> Table:
    return text_table(title, SIZE_COLUMNS, size_rows(runs))


def first_seed(runs: Sequence[ReplayRun]) -> list[ReplayRun]:
    """One run per policy (its first), in the order the policies ran."""
    chosen: dict[str, ReplayRun] = {}
    for run in runs:
        chosen.setdefault(run.policy, run)
    return list(chosen.values())


NOTE = """<img src="replay.png"
 alt="GPUs allocated per queue over time, pending GPUs and job waits, per policy">
<p class="note">Time-driven replay: jobs arrive at their trace time, wait in their queue,
run for their trace duration and leave; an evicted job loses its work since its last
checkpoint (all of it, without checkpoints) and waits again. Wait
is arrival to first start (the first table: over the jobs that started; by job size: every
job, one that never started at its wait so far); JCT arrival to finish; allocation the
time-weighted share of GPUs held. Every run, with its timeline, is in
<a href="results.json">results.json</a>.</p>"""


def replay_html(runs: Sequence[ReplayRun], subtitle: str, extra: str = "") -> str:
    """The page: the table, GPU-hours per queue, the plot; then ``extra`` (HTML: the cost
    section, ``report/replay_cost.py``)."""
    shown = first_seed(runs)
    queues = sorted({q.queue for r in shown for q in r.queues})
    usage = {(r.policy, q.queue): q for r in shown for q in r.queues}
    queue_rows = [
        [
            queue,
            *(
                f"{u.gpu_hours:,.0f} / {u.fair_share_gpu_hours:,.0f}"
                if (u := usage.get((r.policy, queue))) is not None
                else "-"
                for r in shown
            ),
        ]
        for queue in queues
    ]
    content = "\n".join(
        part
        for part in (
            table_html(COLUMNS, rows(runs)),
            "<h2>Waits by job size (jobs that never started at their wait so far)</h2>",
            table_html(SIZE_COLUMNS, size_rows(runs)),
            "<h2>What each evicting action cost and bought</h2>" if action_rows(runs) else "",
            table_html(ACTION_COLUMNS, action_rows(runs)) if action_rows(runs) else "",
            "<h2>GPU-hours per queue against fair share</h2>",
            table_html(["queue", *(f"{r.policy} (held / fair)" for r in shown)], queue_rows),
            NOTE,
            extra,
        )
        if part
    )
    return page("gpufleet replay report", subtitle, content)
