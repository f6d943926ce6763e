"""Replay runs as plots over time (``replay.png``).

Per policy, the GPUs each queue holds over time, stacked (one panel each); then the GPUs
pending over time and the CDF of job waits, one line per policy. With several seeds, the
plots show each policy's first seed (the table has all runs).

``replay-cost.png``: per costed policy, the cumulative cost of each queue over time,
stacked, with the unallocated cost on top: the top edge is what the cluster had cost by
then. The queues keep the colours they have in ``replay.png``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib as mpl

mpl.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt
import numpy as np

from gpufleet.model.costs import IDLE
from gpufleet.model.results import ReplayRun
from gpufleet.report.replay import DAY, first_seed

if TYPE_CHECKING:
    from matplotlib.figure import Figure


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


def plot_replay_cost(runs: Sequence[ReplayRun], path: Path) -> None:
    fig = replay_cost_figure(runs)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def replay_cost_figure(runs: Sequence[ReplayRun]) -> Figure:
    """The plots of ``replay-cost.png`` (module docstring); axes start at 0."""
    shown = [r for r in first_seed(runs) if r.cost is not None]
    queues = sorted({q for r in first_seed(runs) for q in r.timeline.allocated})
    colours = plt.get_cmap("tab20")
    fig, axes = plt.subplots(
        max(len(shown), 1),
        1,
        figsize=(11, 2.8 * max(len(shown), 1)),
        constrained_layout=True,
        squeeze=False,
    )
    for ax, run in zip(axes[:, 0], shown, strict=False):
        assert run.cost is not None
        cumulative = run.cost.timeline.cumulative
        days = np.asarray(run.cost.timeline.time_s) / DAY
        zeros = (0.0,) * len(days)
        names = [q for q in queues if q in cumulative]
        stacks = [np.maximum(cumulative.get(q, zeros), 0.0) for q in names]
        ax.stackplot(
            days,
            *stacks,
            np.maximum(cumulative.get(IDLE, zeros), 0.0),
            labels=[*names, "unallocated"],
            colors=[*(colours(queues.index(q) % 20) for q in names), "0.82"],
        )
        ax.set_title(
            f"{run.policy}: cumulative cost per queue ({run.cost.sheet.currency}), "
            "unallocated on top"
        )
        ax.set_ylabel(run.cost.sheet.currency)
        ax.set_xlim(0, days[-1] if days.size and days[-1] > 0 else 1)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
    if shown:
        axes[-1, 0].set_xlabel("day of the trace")
        if len(queues) <= 40:
            handles, labels = axes[0, 0].get_legend_handles_labels()
            fig.legend(handles, labels, loc="outside right upper", fontsize="small", title="queue")
    return fig
