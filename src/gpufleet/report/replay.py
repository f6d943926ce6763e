"""Replay runs as the terminal table, the plots over time and the HTML page.

Plots (``replay.png``): per policy, the GPUs each queue holds over time, stacked (one
panel each); then the GPUs pending over time and the CDF of job waits, one line per
policy. With several seeds, the plots show each policy's first seed; the table all runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib as mpl

mpl.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt
import numpy as np
from rich.table import Table

from gpufleet.model.results import ReplayRun
from gpufleet.report.html import page, table_html

if TYPE_CHECKING:
    from matplotlib.figure import Figure

COLUMNS = (
    "policy",
    "seed",
    "jobs",
    "finished",
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


def replay_table(runs: Sequence[ReplayRun], title: str) -> Table:
    table = Table(title=title)
    for i, column in enumerate(COLUMNS):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in rows(runs):
        table.add_row(*row)
    return table


def first_seed(runs: Sequence[ReplayRun]) -> list[ReplayRun]:
    """One run per policy (its first), in the order the policies ran."""
    chosen: dict[str, ReplayRun] = {}
    for run in runs:
        chosen.setdefault(run.policy, run)
    return list(chosen.values())


def plot_replay(runs: Sequence[ReplayRun], path: Path, capacity_gpus: float) -> None:
    fig = replay_figure(runs, capacity_gpus)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replay_figure(runs: Sequence[ReplayRun], capacity_gpus: float) -> Figure:
    """The plots of ``replay.png``; every axis starts at 0 (GPUs, days, waits, % are never
    negative, and a symlog axis of all-zero waits would otherwise centre on 0)."""
    shown = first_seed(runs)
    queues = sorted({q for r in shown for q in r.timeline.allocated})
    colours = plt.get_cmap("tab20")
    fig, axes = plt.subplots(
        len(shown) + 1, 1, figsize=(11, 2.6 * (len(shown) + 1)), constrained_layout=True
    )
    for ax, run in zip(axes, shown, strict=False):
        days = np.asarray(run.timeline.time_s) / DAY
        stacks = [run.timeline.allocated.get(q, (0.0,) * len(days)) for q in queues]
        ax.stackplot(
            days, *stacks, labels=queues, colors=[colours(i % 20) for i in range(len(queues))]
        )
        ax.axhline(capacity_gpus, color="k", linewidth=0.8, linestyle="--")
        ax.set_title(f"{run.policy}: GPUs allocated per queue")
        ax.set_ylabel("GPUs")
        ax.set_xlim(0, days[-1] if days.size and days[-1] > 0 else 1)
        ax.set_ylim(0, max(capacity_gpus, 1.0) * 1.05)
        ax.grid(alpha=0.3)
    if shown and len(queues) <= 40:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize="small", title="queue")
    bottom = axes[-1]
    pending = bottom.inset_axes((0.0, 0.0, 0.47, 1.0))
    cdf = bottom.inset_axes((0.55, 0.0, 0.45, 1.0))
    bottom.axis("off")
    for run in shown:
        days = np.asarray(run.timeline.time_s) / DAY
        pending.plot(days, run.timeline.pending_gpus, linewidth=1.2, label=run.policy)
        waits = np.asarray(run.wait_quantiles_s) / 3600
        if waits.size:
            cdf.plot(waits, np.arange(waits.size), linewidth=1.6, label=run.policy)
    pending.set_xlim(left=0)
    pending.set_ylim(bottom=0)
    pending.set_title("GPUs pending")
    pending.set_xlabel("day of the trace")
    pending.grid(alpha=0.3)
    pending.legend(fontsize="small")
    cdf.set_title("job wait (CDF)")
    cdf.set_xscale("symlog", linthresh=0.1)
    longest = max((w for r in shown for w in r.wait_quantiles_s), default=0.0) / 3600
    cdf.set_xlim(0, max(longest, 1.0))
    cdf.set_ylim(0, 100)
    cdf.set_xlabel("wait (hours)")
    cdf.set_ylabel("% of jobs")
    cdf.grid(alpha=0.3)
    return fig


NOTE = """<img src="replay.png"
 alt="GPUs allocated per queue over time, pending GPUs and job waits, per policy">
<p class="note">Time-driven replay: jobs arrive at their trace time, wait in their queue,
run for their trace duration and leave; an evicted job loses its run and waits again. Wait
is arrival to first start; JCT arrival to finish; allocation the time-weighted share of
GPUs held. Every run, with its timeline, is in <a href="results.json">results.json</a>.</p>"""


def replay_html(runs: Sequence[ReplayRun], subtitle: str) -> str:
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
        (
            table_html(COLUMNS, rows(runs)),
            "<h2>GPU-hours per queue against fair share</h2>",
            table_html(["queue", *(f"{r.policy} (held / fair)" for r in shown)], queue_rows),
            NOTE,
        )
    )
    return page("gpufleet replay report", subtitle, content)
