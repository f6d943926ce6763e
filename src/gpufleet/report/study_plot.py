"""A study's plots: per replay experiment, cost per finished job against the mean and the
95th-percentile wait, every setting a point and the Pareto front joined; per fill
experiment, the unallocated GPU % of each setting, mean and standard deviation over seeds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from gpufleet.report.files import atomic_path
from gpufleet.report.study import COST, FRONTS, SettingSummary

UNALLOCATED = "unallocated GPU % at 100%"


def plot_experiment(members: Sequence[SettingSummary], path: Path) -> bool:
    """The plot of one experiment's settings on one set of inputs, to ``path`` (PNG);
    False where there is nothing to draw (every run failed)."""
    if members[0].protocol == "fill":
        return _fill(members, path)
    return _replay(members, path)


def _fill(members: Sequence[SettingSummary], path: Path) -> bool:
    drawn = [s for s in members if s.metrics[UNALLOCATED].mean is not None]
    if not drawn:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(drawn) + 1.5))
    y = range(len(drawn))
    ax.barh(
        list(y),
        [s.metrics[UNALLOCATED].mean or 0.0 for s in drawn],
        xerr=[s.metrics[UNALLOCATED].sd or 0.0 for s in drawn],
        color="#4c72b0",
    )
    ax.set_yticks(list(y), [s.setting for s in drawn])
    ax.invert_yaxis()
    ax.set_xlabel("unallocated GPU % at arrived 100% (lower is better)")
    ax.set_title(f"{drawn[0].experiment}: {drawn[0].inputs}", fontsize=9)
    _save(fig, path)
    return True


def _replay(members: Sequence[SettingSummary], path: Path) -> bool:
    fig, axes = plt.subplots(1, 2, figsize=(12, 5))
    drew = False
    for ax, (wait, label) in zip(axes, FRONTS, strict=True):
        known = [
            s
            for s in members
            if s.metrics[COST].mean is not None and s.metrics[wait].mean is not None
        ]
        if not known:
            continue
        drew = True
        xs = [s.metrics[wait].mean or 0.0 for s in known]
        ys = [s.metrics[COST].mean or 0.0 for s in known]
        on = [label in s.fronts for s in known]
        ax.scatter(xs, ys, c=["#c44e52" if o else "#8c8c8c" for o in on], zorder=3)
        front = sorted((x, y) for x, y, o in zip(xs, ys, on, strict=True) if o)
        ax.step([x for x, _ in front], [y for _, y in front], where="post", color="#c44e52", lw=1)
        labels: dict[tuple[float, float], list[str]] = {}
        for s, x, yv in zip(known, xs, ys, strict=True):  # settings at one point: one label
            labels.setdefault((round(x, 6), round(yv, 6)), []).append(s.setting)
        for (x, yv), names in labels.items():
            text = "\n".join(names)
            ax.annotate(text, (x, yv), fontsize=7, xytext=(4, 4), textcoords="offset points")
        ax.set_xlabel(f"{wait.replace(' h', '')} (hours, every job)")
        ax.set_ylabel("cost per finished job")
        ax.set_title(label.replace("front", "Pareto front"), fontsize=10)
        ax.grid(alpha=0.3)
    if not drew:
        plt.close(fig)
        return False
    fig.suptitle(f"{members[0].experiment}: {members[0].inputs}", fontsize=10)
    _save(fig, path)
    return True


def _save(fig: Figure, path: Path) -> None:
    fig.tight_layout()
    with atomic_path(path) as temporary:
        fig.savefig(temporary, format="png", dpi=110)
    plt.close(fig)
