"""Training beside a serving load, as tables, JSON and a page: one row per lending policy
(``sim/balance.py``), and gpufleet's figures against the targets it was built to meet."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.balance import BalanceRun
from gpufleet.report.html import page, table_html
from gpufleet.report.table import text_table

if TYPE_CHECKING:
    from rich.table import Table

COLUMNS = (
    "policy",
    "wait mean / p50 / p95 (h)",
    "JCT (h)",
    "finished",
    "never started",
    "training work (GPU-h)",
    "useful usage",
    "deficit windows",
    "replica-min short",
    "reclaim p50 / p99 (s)",
    "jobs stopped",
    "shrunk",
    "GPUs evicted",
    "GPU-h lost",
    "$ / finished job",
    "$ / M requests",
)
"""The columns of a run's row: training's waits (jobs never started at their wait so far) and
JCT, finished and never started jobs, the work kept (GPU-hours of the jobs at full size), the
useful usage of the cluster, the serving deficit, the reclaim latency, what reclaim took
and lost, and the costs."""


def row(run: BalanceRun, hourly: float) -> list[str]:
    t, s = run.training, run.serving
    per_job, per_million = run.costs(hourly)
    return [
        run.policy,
        f"{_hours(t.mean_wait_s)} / {_hours(t.p50_wait_s)} / {_hours(t.p95_wait_s)}",
        _hours(t.mean_jct_s),
        f"{t.finished_jobs:,}",
        f"{t.never_started_jobs:,}",
        f"{run.work_gpu_hours:,.0f}",
        f"{run.useful_usage():.1%}",
        f"{s.short_windows} of {s.windows} ({s.short_share:.2%})",
        f"{s.short_replica_s / 60:,.0f}",
        f"{_seconds(s.latency_s(0.5))} / {_seconds(s.latency_s(0.99))}",
        f"{t.preemptions:,}",
        f"{run.shrinks:,}",
        f"{run.evicted_gpus:,.0f}",
        f"{t.lost_gpu_hours:,.0f}",
        _dollars(per_job),
        _dollars(per_million),
    ]


def markdown(runs: Sequence[BalanceRun], hourly: float, extra: Sequence[str] = ()) -> list[str]:
    """The runs as a Markdown table (``extra``: a last column's header then one cell per
    run, for a benchmark's run times)."""
    header = [*COLUMNS, *extra[:1]]
    lines = ["| " + " | ".join(header) + " |", "|---" * len(header) + "|"]
    for k, run in enumerate(runs):
        cells = [*row(run, hourly), *([extra[k + 1]] if extra else [])]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def balance_table(runs: Sequence[BalanceRun], hourly: float, title: str) -> Table:
    return text_table(title, COLUMNS, [row(r, hourly) for r in runs])


def targets(runs: Sequence[BalanceRun], replicas: Sequence[int], node_gpus: int) -> list[str]:
    """gpufleet against the static partition, naive loaning and Lyra-greedy, each figure
    beside its target (empty where a policy is missing)."""
    by = {r.policy: r for r in runs}
    ours, static = by.get("gpufleet"), by.get("static")
    if ours is None or static is None:
        return []
    added = int(np.diff(np.asarray(replicas), prepend=0).clip(min=0).sum()) * node_gpus
    wait = _ratio(static.training.mean_wait_s, ours.training.mean_wait_s)
    jct = _ratio(static.training.mean_jct_s, ours.training.mean_jct_s)
    work = ours.work_gpu_hours / static.work_gpu_hours - 1 if static.work_gpu_hours else math.nan
    out = [
        f"gpufleet against static: mean wait {wait} lower (target 1.5x), mean JCT {jct} lower "
        f"(target 1.4x), training work {work:+.0%} (target +20%); serving deficit "
        f"{ours.serving.short_share:.2%} of windows (target 0.1%).",
    ]
    for other in ("naive-loaning", "lyra-greedy"):
        them = by.get(other)
        if them is None:
            continue
        per_added = [1000 * r.preemptions / added if added else 0.0 for r in (ours, them)]
        out.append(
            f"Against {other}: jobs stopped or shrunk {_fewer(ours.preemptions, them.preemptions)}"
            f" ({ours.preemptions} against {them.preemptions}; per 1,000 GPUs the replicas asked "
            f"back, {per_added[0]:.1f} against {per_added[1]:.1f}; per GPU evicted, "
            f"{ours.per_reclaimed_gpu:.3f} against {them.per_reclaimed_gpu:.3f}), GPU-hours lost "
            f"{_fewer(ours.training.lost_gpu_hours, them.training.lost_gpu_hours)} "
            "(targets: 30% fewer)."
        )
    return out


def balance_json(runs: Sequence[BalanceRun], hourly: float, about: dict[str, object]) -> str:
    """``results.json`` of a balance replay: what it ran on (``about``) and every run."""
    document = {**about, "hourly_cost": round(hourly, 6), "runs": [r.to_json(hourly) for r in runs]}
    return json.dumps(document, indent=1) + "\n"


def balance_html(
    runs: Sequence[BalanceRun], hourly: float, title: str, notes: Sequence[str]
) -> str:
    """The page: the table, the targets, and the plot of lent GPUs (``balance.png``)."""
    content = table_html(COLUMNS, [row(r, hourly) for r in runs])
    content += "".join(f"\n<p>{html.escape(n)}</p>" for n in notes)
    content += '\n<p><img src="balance.png" alt="GPUs lent to training over time"></p>'
    return page("gpufleet: training beside a serving load", title, content)


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _seconds(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.0f}"


def _dollars(value: float) -> str:
    return "-" if not math.isfinite(value) else f"{value:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    return f"{a / b:.2f}x" if b > 0 else ("equal" if a == 0 else "inf")


def _fewer(a: float, b: float) -> str:
    return f"{1 - a / b:.0%} fewer" if b > 0 else "none either way"
