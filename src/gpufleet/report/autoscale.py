"""Elastic supply as tables and a plot: one row per autoscaling policy (``sim/autoscale.py``),
averaged over seeds, and gpufleet's figures against the targets it was built to meet."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from rich.table import Table

from gpufleet.cost.autoscale import ScaleUp
from gpufleet.cost.calendar import iso_utc
from gpufleet.model.autoscale import SupplyRun

COLUMNS = (
    "policy",
    "spend ($)",
    "$ / finished job",
    "$ / useful GPU-h",
    "node-h",
    "idle node-h",
    "unallocated GPU-h",
    "incomplete gangs node-h ($)",
    "scale-down evictions (GPU-h lost)",
    "checkpoint moves",
    "spot interruptions: nodes / jobs (GPU-h lost)",
    "queueing mean / p95 (min)",
    "JCT (h)",
    "finished / never started",
    "peak nodes",
)
"""Per policy, the mean over seeds of: the spend; per finished job and per useful GPU-hour
(work done and kept); node-hours; idle node-hours (no GPU allocated) and their share;
GPU-hours bought but not allocated; node-hours and dollars paid while a gang could not
start; running jobs evicted so that a node could go, and the work they lost; jobs moved
right after a checkpoint to empty a node (gpufleet); spot nodes interrupted, the jobs they
stopped and the work lost; queueing (mean, p95: jobs never started count at their wait so
far) and JCT; jobs finished and never started; the most nodes up at once."""

CA = ("ca-price", "ca-least-waste")


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def row(name: str, runs: Sequence[SupplyRun]) -> list[str]:
    def m(get: object) -> float:
        return _mean([get(r) for r in runs])  # type: ignore[operator]

    return [
        name,
        f"{m(lambda r: r.spend):,.0f}",
        f"{m(lambda r: r.per_finished_job):,.2f}",
        f"{m(lambda r: r.per_useful_gpu_hour):.3f}",
        f"{m(lambda r: r.node_hours):,.0f}",
        f"{m(lambda r: r.idle_node_hours):,.0f} ({m(lambda r: r.idle_share):.1%})",
        f"{m(lambda r: r.unallocated_gpu_hours):,.0f}",
        f"{m(lambda r: r.incomplete_node_hours):,.1f} ({m(lambda r: r.incomplete_spend):,.0f})",
        f"{m(lambda r: r.scale_down_evictions):,.0f} "
        f"({m(lambda r: r.scale_down_lost_gpu_hours):,.0f})",
        f"{m(lambda r: r.checkpoint_moves):,.0f}",
        f"{m(lambda r: r.interruptions):,.0f} / {m(lambda r: r.interrupted_jobs):,.0f} "
        f"({m(lambda r: r.interruption_lost_gpu_hours):,.0f})",
        f"{m(lambda r: r.replay.mean_wait_s) / 60:.1f} / "
        f"{m(lambda r: r.replay.p95_wait_s) / 60:.1f}",
        f"{m(lambda r: r.replay.mean_jct_s) / 3600:.2f}",
        f"{m(lambda r: r.replay.finished_jobs):,.0f} / "
        f"{m(lambda r: r.replay.never_started_jobs):,.0f}",
        f"{m(lambda r: r.peak_nodes):.0f}",
    ]


def markdown(runs: Mapping[str, Sequence[SupplyRun]]) -> list[str]:
    """One row per policy (mean over its seeds), as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for name, done in runs.items():
        lines.append("| " + " | ".join(row(name, done)) + " |")
    return lines


def cheaper_ca(runs: Mapping[str, Sequence[SupplyRun]]) -> str | None:
    """The Cluster Autoscaler expander of the lower mean spend."""
    present = [name for name in CA if runs.get(name)]
    return min(present, key=lambda n: _mean([r.spend for r in runs[n]])) if present else None


def targets(runs: Mapping[str, Sequence[SupplyRun]]) -> list[str]:
    """gpufleet against the cheaper Cluster Autoscaler, target by target (means over seeds)."""
    ours, base = runs.get("gpufleet"), cheaper_ca(runs)
    if not ours or base is None:
        return []
    theirs = runs[base]

    def mean(done: Sequence[SupplyRun], get: object) -> float:
        return _mean([get(r) for r in done])  # type: ignore[operator]

    spend = 1 - mean(ours, lambda r: r.spend) / mean(theirs, lambda r: r.spend)
    jct = mean(ours, lambda r: r.replay.mean_jct_s) / mean(theirs, lambda r: r.replay.mean_jct_s)
    p95 = mean(ours, lambda r: r.replay.p95_wait_s), mean(theirs, lambda r: r.replay.p95_wait_s)
    incomplete = mean(ours, lambda r: r.incomplete_spend)
    evictions = mean(ours, lambda r: r.scale_down_evictions)
    idle = mean(ours, lambda r: r.idle_share)
    checks = [
        (f"spend {spend:.1%} lower than {base}", spend >= 0.30, "at least 30% lower"),
        (f"mean JCT x{jct:.3f} of {base}'s", jct <= 1.05, "at most 5% higher"),
        (
            f"p95 queueing {p95[0] / 60:.1f} min against {p95[1] / 60:.1f}",
            p95[0] <= p95[1] + 1e-9,
            "no worse",
        ),
        (f"spend on incomplete gangs ${incomplete:,.2f}", incomplete == 0, "0"),
        (f"scale-down evictions {evictions:g}", evictions == 0, "0"),
        (f"idle node-hours {idle:.1%} of node-hours", idle <= 0.05, "at most 5%"),
    ]
    return [f"- {'met' if ok else 'NOT met'}: {what} (target: {goal})" for what, ok, goal in checks]


def plan_table(plan: ScaleUp, currency: str) -> Table:
    """``gpufleet schedule --autoscale``: each purchase (pool, nodes, hourly cost, the job it
    is for and the jobs packed beside it), then each job left waiting and why."""
    table = Table(title=f"nodes to buy ({plan.nodes}, {plan.hourly:,.2f} {currency} an hour)")
    for column in ("for", "pool", "nodes", f"{currency} / h", "also for"):
        table.add_column(column)
    for p in plan.purchases:
        table.add_row(
            p.key,
            p.pool,
            ", ".join(p.names),
            f"{p.hourly:,.2f}",
            ", ".join(p.also),
        )
    for w in plan.waiting:
        table.add_row(w.key, "", "", "", f"waits: {w.reason}")
    return table


def release_table(plan: ScaleUp, currency: str) -> Table:
    """``gpufleet schedule --autoscale``: each node that may go (pool, what it saves an hour),
    empty or emptied by moving its jobs right after their next checkpoints."""
    saved = sum(r.hourly for r in plan.releases)
    table = Table(
        title=f"nodes that may go ({len(plan.releases)}, {saved:,.2f} {currency} an hour saved)"
    )
    for column in ("node", "pool", f"{currency} / h", "how"):
        table.add_column(column)
    for r in plan.releases:
        how = (
            "; ".join(f"move {job} at {iso_utc(at)} (after its checkpoint)" for job, at in r.moves)
            if r.moves
            else "empty"
        )
        table.add_row(r.name, r.pool, f"{r.hourly:,.2f}", how)
    return table


def waits_for(plan: ScaleUp, job: str, currency: str) -> dict[str, object] | None:
    """What the plan says job ``job`` waits for (``explain``): the nodes bought for it, or
    the nodes it fits on now or once what runs there finishes, or why it gets none; None
    when the plan does not name the job (it is not pending)."""
    for purchase in plan.purchases:
        if purchase.key == job:
            return {
                "waitsFor": "nodes to buy",
                "pool": purchase.pool,
                "nodes": list(purchase.names),
                "hourly": round(purchase.hourly, 4),
                "currency": currency,
            }
    for waiting in plan.waiting:
        if waiting.key == job:
            return {"waitsFor": waiting.reason, "nodes": list(waiting.nodes)}
    return None


def waits_for_lines(said: Mapping[str, object] | None, held: Sequence[str]) -> list[str]:
    """:func:`waits_for` and the nodes already held for the job, as ``explain`` prints
    them."""
    lines = []
    if held:
        lines.append(f"  nodes provisioned for it, kept off every other job: {', '.join(held)}")
    if said is None:
        return lines
    nodes = ", ".join(str(n) for n in said.get("nodes") or ())  # type: ignore[attr-defined]
    if said["waitsFor"] == "nodes to buy":
        lines.append(
            f"  autoscaling: waits for nodes to be bought: {nodes} (pool {said['pool']}, "
            f"{said['hourly']:,.2f} {said['currency']} an hour)"
        )
    elif nodes:
        lines.append(f"  autoscaling: waits for node(s) {nodes}: {said['waitsFor']}")
    else:
        lines.append(f"  autoscaling: gets no node: {said['waitsFor']}")
    return lines
