"""Unallocated GPU % against arrived workload, one line per policy (the FGD paper's Fig. 9a).

With several seeds, each policy's line is the median over seeds at each arrived percent.
The dashed line is the ideal: nothing unallocated that could have been placed
(``100 - arrived`` until the cluster is full). The right panel zooms on 75-130%, where
policies part ways.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt

from gpufleet.model.results import ARRIVED_MAX_PCT, FillRun


def median_unallocated(runs: Sequence[FillRun]) -> list[float | None]:
    curve: list[float | None] = []
    for x in range(ARRIVED_MAX_PCT + 1):
        values = [v for r in runs if (v := r.allocation_curve[x]) is not None]
        curve.append(100.0 - statistics.median(values) if values else None)
    return curve


def plot_unallocated(runs: Sequence[FillRun], path: Path) -> None:
    by_policy: dict[str, list[FillRun]] = {}
    for run in runs:
        by_policy.setdefault(run.policy, []).append(run)
    workloads = sorted({r.workload for r in runs})
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), constrained_layout=True)
    xs = list(range(ARRIVED_MAX_PCT + 1))
    ideal = [max(0.0, 100.0 - x) for x in xs]
    for ax, (lo, hi) in zip(axes, ((0, ARRIVED_MAX_PCT), (75, ARRIVED_MAX_PCT)), strict=True):
        ax.plot(xs[lo : hi + 1], ideal[lo : hi + 1], "k--", linewidth=1, label="ideal")
        for policy, group in by_policy.items():
            curve = median_unallocated(group)
            points = [
                (x, y) for x, y in zip(xs, curve, strict=True) if y is not None and lo <= x <= hi
            ]
            ax.plot([p[0] for p in points], [p[1] for p in points], linewidth=1.8, label=policy)
        ax.set_xlim(lo, hi)
        ax.set_xlabel("arrived workload (% of cluster GPU capacity)")
        ax.set_ylabel("unallocated GPU (%)")
        ax.grid(alpha=0.3)
    axes[1].set_ylim(0, 30)
    axes[0].set_title(f"{', '.join(workloads)}: unallocated GPU vs arrived workload")
    axes[1].set_title("zoom: 75-130%")
    axes[1].legend(loc="upper right")
    fig.savefig(path, dpi=120)
    plt.close(fig)
