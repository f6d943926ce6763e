"""Lending over time (``balance.png``): the GPUs lent to training per policy, over the GPUs
the serving replicas asked for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib as mpl

mpl.use("Agg")  # files only; never a window

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

DAY = 86_400.0


def plot_lending(
    lent: Mapping[str, Sequence[float]],
    wanted_gpus: Sequence[float],
    window_s: float,
    path: Path,
    *,
    title: str = "",
) -> None:
    """Per policy, the GPUs of the serving queue's quota that training held at each
    window's end, over the GPUs its replicas asked for (shaded); written atomically."""
    fig, ax = plt.subplots(figsize=(11, 4), constrained_layout=True)
    days = np.arange(len(wanted_gpus)) * window_s / DAY
    ax.fill_between(
        days,
        np.asarray(wanted_gpus, dtype=float),
        color="#d9d9d9",
        label="serving replicas asked (GPUs)",
    )
    for name, series in lent.items():
        ax.plot(days[: len(series)], series, linewidth=0.8, label=f"lent to training: {name}")
    save_gpus_by_day(fig, ax, path, days[-1] if days.size else 0.0, title)


def save_gpus_by_day(fig: Figure, ax: Axes, path: Path, last_day: float, title: str) -> None:
    """Label a plot of GPUs over days, and write it to ``path`` atomically."""
    ax.set_xlabel("day")
    ax.set_ylabel("GPUs")
    ax.set_xlim(0, last_day if last_day > 0 else 1)
    ax.set_ylim(bottom=0)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    tmp = path.with_name(f".{path.name}.tmp")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    tmp.replace(path)
