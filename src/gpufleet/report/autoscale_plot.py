"""Nodes bought over time (``autoscale.png``): the GPUs of the nodes up per autoscaling
policy, beside what pending jobs asked for and what gpufleet's pods held (one seed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import matplotlib.pyplot as plt
import numpy as np

from gpufleet.report.balance_plot import DAY, save_gpus_by_day

if TYPE_CHECKING:
    from pathlib import Path

    from gpufleet.model.autoscale import SupplyRun


def plot_supply(runs: Mapping[str, SupplyRun], path: Path, *, title: str = "") -> None:
    """Per policy, the GPUs of its nodes up; shaded, the GPUs gpufleet's pending jobs asked
    for and its pods held; written atomically."""
    fig, ax = plt.subplots(figsize=(11, 4), constrained_layout=True)
    last = 0.0
    ours = runs.get("gpufleet")
    if ours is not None and ours.timeline:
        days = np.array([s[0] for s in ours.timeline]) / DAY
        ax.fill_between(
            days,
            [s[3] for s in ours.timeline],
            color="#fdd0a2",
            label="GPUs pending jobs ask for (gpufleet)",
        )
        ax.fill_between(
            days,
            [s[2] for s in ours.timeline],
            color="#d9d9d9",
            alpha=0.7,
            label="GPUs allocated (gpufleet)",
        )
    for name, run in runs.items():
        if run.timeline:
            days = np.array([s[0] for s in run.timeline]) / DAY
            last = max(last, float(days[-1]))
            ax.plot(days, [s[1] for s in run.timeline], linewidth=0.8, label=f"GPUs up: {name}")
    save_gpus_by_day(fig, ax, path, last, title)
