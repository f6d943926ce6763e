"""``gpufleet cost``: what a cluster cost over a window, by namespace, queue, experiment, pod
or node, what sat unallocated and which GPUs were held idle.

A *source* reads the runs of pods and the nodes they ran on over the window
(:class:`Costing`); the rest is shared: the price sheet, OpenCost's allocation
(:mod:`gpufleet.cost.allocation`), the tables, the JSON and the FOCUS export (``--focus``).
The sources: a live cluster through Prometheus (``--prometheus``,
:mod:`gpufleet.load.costs.cluster_usage`) and a replay's recorded runs (``--results``,
:mod:`gpufleet.load.costs.cost_runs`).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from gpufleet.cli.output import make_console, warn
from gpufleet.cost.allocation import IDLE, CostAllocation, Nodes, Runs, allocate
from gpufleet.cost.focus import focus_columns, iter_focus_rows
from gpufleet.cost.idle import IdleArgs
from gpufleet.cost.prices import PriceSheet
from gpufleet.load.costs.cluster_usage import (
    DEFAULT_EXPERIMENT_LABEL,
    ENGINE_ACTIVE,
    read_cluster,
)
from gpufleet.load.costs.cost_runs import load_cost_runs
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.report.files import OutputPathError, check_file
from gpufleet.report.focus import write_focus

DIMENSIONS = ("namespace", "queue", "experiment", "pod", "node")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


@dataclass(frozen=True, slots=True)
class Costing:
    """What a source read: the runs and nodes to cost over ``window``, where they came from,
    the utilisation metrics behind the GPU figures (none: efficiency unknown) and notes."""

    runs: Runs
    nodes: Nodes
    window: tuple[float, float]
    source: str
    utilisation: tuple[str, ...]
    notes: tuple[str, ...] = ()


def duration(text: str, option: str) -> float:
    """Seconds of a Prometheus-style duration: ``90s``, ``30m``, ``1h30m``, ``1d``."""
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise typer.BadParameter(
            f"expected a duration such as 30s, 1m, 30m, 2h or 1d, got {text!r}", param_hint=option
        )
    seconds = sum(float(n) * _SECONDS[u] for n, u in parts)
    if seconds <= 0:
        raise typer.BadParameter(f"must be longer than 0, got {text!r}", param_hint=option)
    return seconds


def moment(text: str, option: str, now: float) -> float:
    """Seconds since the epoch of an RFC 3339 time (``2026-01-31T12:00:00Z``), a Unix time,
    ``now`` or ``now-<duration>``."""
    if text == "now":
        return now
    if text.startswith("now-"):
        return now - duration(text[4:], option)
    try:
        return float(text)
    except ValueError:
        pass
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        stamp = None
    if stamp is None or stamp.tzinfo is None:
        raise typer.BadParameter(
            "expected an RFC 3339 time with its zone (2026-01-31T12:00:00Z), a Unix time, "
            f"now or now-2h, got {text!r}",
            param_hint=option,
        )
    return stamp.timestamp()


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cost(
    prometheus: Annotated[
        str | None,
        typer.Option(help="Prometheus URL: costs the live cluster it watched in the window."),
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(help="Window start: RFC 3339 (2026-01-31T00:00:00Z), Unix time, now-24h."),
    ] = None,
    end: Annotated[str, typer.Option(help="Window end (exclusive), as --start.")] = "now",
    step: Annotated[str, typer.Option(help="Resolution of the samples read.")] = "1m",
    prices: Annotated[
        Path | None,
        typer.Option(help="Price sheet YAML (kind: PriceSheet).", show_default="the bundled one"),
    ] = None,
    by: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Aggregate by, repeatable: {', '.join(DIMENSIONS)}.",
            show_default="namespace; queue for --results",
        ),
    ] = None,
    share_idle: Annotated[
        bool, typer.Option(help="Share unallocated cost over the rows by their cost.")
    ] = False,
    output: Annotated[str, typer.Option("-o", "--output", help="table or json.")] = "table",
    idle_threshold: Annotated[
        float, typer.Option(help="A GPU is idle below this engine activity (0 to 1).")
    ] = 0.01,
    idle_window: Annotated[
        str, typer.Option(help="... and stays below it this long, in consecutive samples.")
    ] = "30m",
    experiment_label: Annotated[
        str,
        typer.Option(help="Pod label naming the experiment (else the PodGroup)."),
    ] = DEFAULT_EXPERIMENT_LABEL,
    results: Annotated[
        Path | None,
        typer.Option(help="A replay's output directory: costs its runs instead of a cluster."),
    ] = None,
    policy: Annotated[
        str | None, typer.Option(help="With --results: the policy's run, where it has several.")
    ] = None,
    seed: Annotated[
        int | None, typer.Option(help="With --results: the seed's run, where it has several.")
    ] = None,
    focus: Annotated[
        Path | None,
        typer.Option(help="Also write the window's charges as FOCUS 1.2 CSV to this file."),
    ] = None,
    billing_account: Annotated[
        str, typer.Option(help="FOCUS BillingAccountId of the rows --focus writes.")
    ] = "gpufleet",
) -> None:
    """What a cluster cost over a window: by namespace, queue, experiment, pod or node, as
    OpenCost allocates it; unallocated capacity (`__idle__`); GPUs allocated but idle.

    Reads requests and node capacity from kube-state-metrics, GPU utilisation from
    dcgm-exporter, CPU and memory usage from cAdvisor, all through --prometheus.
    """
    _check_options(output, by, idle_threshold, focus)
    idle = IdleArgs(idle_threshold, duration(idle_window, "'--idle-window'"))
    sheet = load_price_sheet(prices or DEFAULT_SHEET)
    if results is not None:
        if prometheus is not None:
            raise typer.BadParameter("give one source: --prometheus or --results")
        costing = results_source(results, policy, seed, sheet)
    else:
        if prometheus is None:
            raise typer.BadParameter("give the source to cost: --prometheus URL or --results DIR")
        costing = prometheus_source(
            prometheus, start, end, duration(step, "'--step'"), sheet, idle, experiment_label
        )
    for note in costing.notes:
        warn(note)
    dims = _dimensions(costing, by)
    alloc = allocate(costing.runs, costing.nodes, costing.window)
    if focus is not None:
        _write_focus(alloc, sheet, focus, billing_account)
    if output == "json":
        document = cost_json(alloc, costing, sheet, dims, share_idle=share_idle, idle=idle)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
        return
    print_cost(make_console(), alloc, costing, sheet, dims, share_idle=share_idle, idle=idle)


def _check_options(
    output: str, by: list[str] | None, idle_threshold: float, focus: Path | None
) -> None:
    """The options' values, and the --focus file, before anything is read or costed."""
    if output not in {"table", "json"}:
        raise typer.BadParameter(f"expected table or json, got {output!r}", param_hint="'-o'")
    for d in by or ():
        if d not in DIMENSIONS:
            raise typer.BadParameter(
                f"expected one of {', '.join(DIMENSIONS)}, got {d!r}", param_hint="'--by'"
            )
    if not 0 <= idle_threshold <= 1:
        raise typer.BadParameter(
            f"expected engine activity from 0 to 1, got {idle_threshold}",
            param_hint="'--idle-threshold'",
        )
    if focus is not None:
        try:
            check_file(focus, "--focus")
        except OutputPathError as exc:
            raise typer.BadParameter(str(exc)) from None


def _dimensions(costing: Costing, by: list[str] | None) -> list[str]:
    """What to aggregate by: ``by``, else ``namespace`` where the source knows namespaces (a
    cluster's) and ``queue`` where it does not (a replay's runs); a dimension the source
    does not have is an error naming the ones it has."""
    known = {"node", *costing.runs.dims}
    dims = by or (["namespace"] if "namespace" in known else ["queue"])
    for d in dims:
        if d not in known:
            raise InputError(
                costing.source,
                f"has no {d!r} to aggregate by (--by): it has {', '.join(sorted(known))}",
            )
    return dims


def results_source(
    directory: Path, policy: str | None, seed: int | None, sheet: PriceSheet
) -> Costing:
    """A replay's runs (``gpufleet simulate --protocol replay``), priced as the replay priced
    them: ``sheet`` must be the one the replay used."""
    records = load_cost_runs(directory, policy=policy, seed=seed)
    if records.sheet != sheet.name:
        raise InputError(
            str(directory),
            f"its runs were priced by price sheet {records.sheet}, not {sheet.name}: pass "
            "that sheet with --prices (or replay again with this one)",
        )
    return Costing(
        records.runs,
        records.nodes,
        records.window,
        f"replay results {directory}",
        (),
        ("gpuEfficiency: unknown — a replayed trace has no utilisation",),
    )


def _write_focus(alloc: CostAllocation, sheet: PriceSheet, path: Path, account: str) -> None:
    """The FOCUS CSV of ``alloc`` (``cost/focus.py``). FOCUS times are whole seconds: a window
    that is not (a replay's end) is costed again on the whole seconds inside it."""
    lo, hi = alloc.window
    whole = alloc
    if (lo, hi) != (math.ceil(lo), math.floor(hi)) and math.floor(hi) > math.ceil(lo):
        whole = allocate(alloc.runs, alloc.nodes, (float(math.ceil(lo)), float(math.floor(hi))))
    try:
        rows = iter_focus_rows(whole, sheet, billing_account_id=account)
        write_focus(rows, path, focus_columns(whole))
    except ValueError as exc:
        raise InputError(str(path), f"cannot write FOCUS rows: {exc}") from None
    except OSError as exc:
        raise InputError(str(path), f"cannot be written ({exc.strerror})") from None


def prometheus_source(
    url: str,
    start: str | None,
    end: str,
    step: float,
    sheet: PriceSheet,
    idle: IdleArgs,
    experiment_label: str,
) -> Costing:
    """A live cluster over ``[start, end)``, as the Prometheus at ``url`` watched it."""
    if start is None:
        raise typer.BadParameter("--prometheus needs the window's start", param_hint="'--start'")
    now = dt.datetime.now(dt.UTC).timestamp()
    window = (moment(start, "'--start'", now), moment(end, "'--end'", now))
    usage = read_cluster(
        url,
        window=window,
        step=step,
        now=now,
        sheet=sheet,
        experiment_label=experiment_label,
        idle=idle,
    )
    return Costing(
        usage.runs, usage.nodes, usage.window, f"Prometheus {url}", usage.utilisation, usage.notes
    )


def _gpu_idle(alloc: CostAllocation, by: str) -> list[dict[str, Any]]:
    """Rows with GPU time held idle (or not known to be used), largest cost first."""
    rows = [
        {k: r[k] for k in ("name", "gpuHours", "gpuIdleHours", "gpuIdleCost")}
        for r in alloc.aggregate(by)
        if r["name"] != IDLE
        and r["gpuHours"] > 0
        and (r["gpuIdleHours"] is None or r["gpuIdleHours"] > 0)
    ]
    rows.sort(key=lambda r: (r["gpuIdleCost"] is None, -(r["gpuIdleCost"] or 0.0), r["name"]))
    return rows


def cost_json(
    alloc: CostAllocation,
    costing: Costing,
    sheet: PriceSheet,
    dims: Sequence[str],
    *,
    share_idle: bool,
    idle: IdleArgs,
) -> dict[str, Any]:
    """The report as one JSON document; allocation rows named as OpenCost names them."""
    lo, hi = costing.window
    return {
        "window": {"start": _iso(lo), "end": _iso(hi)},
        "source": costing.source,
        "priceSheet": {"name": sheet.name, "title": sheet.title, "currency": sheet.currency},
        "utilisation": list(costing.utilisation),
        "idleGpu": {"threshold": idle.threshold, "windowSeconds": idle.window},
        "allocations": {d: alloc.aggregate(d, share_idle=share_idle) for d in dims},
        "gpuIdle": {d: _gpu_idle(alloc, d) for d in ("pod", "queue")},
        "nodes": alloc.idle_rows(),
        "idleCost": float(alloc.idle.sum()),
        "totalCost": alloc.total,
    }


def _money(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _hours(value: float | None) -> str:
    return "unknown" if value is None else f"{value:,.2f}"


def _share(value: float | None) -> str:
    return "unknown" if value is None else f"{100 * value:.1f}%"


def _efficiency(row: dict[str, Any], resource: str, amount: str) -> str:
    """A row's efficiency of ``resource``; ``-`` where it was charged none of it."""
    if row[amount] <= 0:
        return "-"
    return _share(row[f"{resource}Efficiency"])


def _allocation_table(alloc: CostAllocation, by: str, *, share_idle: bool, title: str) -> Table:
    table = Table(title=title)
    columns = ("GPU h", "GPU eff", "CPU eff", "RAM eff", "GPU", "CPU", "RAM", "shared", "total")
    table.add_column(by, no_wrap=True)
    for column in columns:
        table.add_column(column, justify="right")
    for r in alloc.aggregate(by, share_idle=share_idle):
        if r["name"] == IDLE:
            figures = ["", "", "", ""]
        else:
            figures = [
                _hours(r["gpuHours"]),
                _efficiency(r, "gpu", "gpuHours"),
                _efficiency(r, "cpu", "cpuCoreHours"),
                _efficiency(r, "ram", "ramByteHours"),
            ]
        costs = (r["gpuCost"], r["cpuCost"], r["ramCost"], r["sharedCost"], r["totalCost"])
        table.add_row(
            r["name"],
            *figures,
            *map(_money, costs),
            style="dim" if r["name"] == IDLE else None,
        )
    table.add_section()
    asset = alloc.asset.sum(axis=0)
    table.add_row("total", "", "", "", "", *map(_money, asset), "", _money(alloc.total))
    return table


def _idle_gpu_table(alloc: CostAllocation, by: str, idle: IdleArgs, currency: str) -> Table:
    table = Table(
        title=f"Idle allocated GPUs by {by}",
        caption=f"idle: activity < {idle.threshold:g} for {idle.window / 60:g} min or more",
    )
    table.add_column(by, no_wrap=True)
    for column in ("GPU h", "idle GPU h", f"idle {currency}"):
        table.add_column(column, justify="right")
    for r in _gpu_idle(alloc, by):
        table.add_row(
            r["name"], _hours(r["gpuHours"]), _hours(r["gpuIdleHours"]), _money(r["gpuIdleCost"])
        )
    return table


def _unallocated_table(alloc: CostAllocation, currency: str) -> Table:
    table = Table(title=f"Unallocated ({IDLE}) by node")
    table.add_column("node", no_wrap=True)
    table.add_column("price entry")
    table.add_column("category")
    for column in ("hours", f"cost {currency}", f"idle {currency}", "idle %"):
        table.add_column(column, justify="right")
    for r in alloc.idle_rows():
        share = r["idleCost"] / r["totalCost"] if r["totalCost"] else None
        table.add_row(
            r["node"],
            r["nodeType"],
            r["category"],
            _hours(r["hours"]),
            _money(r["totalCost"]),
            _money(r["idleCost"]),
            _share(share),
        )
    return table


def print_cost(
    console: Console,
    alloc: CostAllocation,
    costing: Costing,
    sheet: PriceSheet,
    dims: Sequence[str],
    *,
    share_idle: bool,
    idle: IdleArgs,
) -> None:
    """The report as tables: one per aggregation, idle GPUs per pod and queue, unallocated
    cost per node; each figure in the sheet's currency."""
    lo, hi = costing.window
    hours = (hi - lo) / 3600
    console.print(f"window: {_iso(lo)} to {_iso(hi)} ({hours:.4g} h), {costing.source}")
    console.print(f"prices: {sheet.name} — {sheet.title} ({sheet.currency})")
    if costing.utilisation:
        names = [m if m == ENGINE_ACTIVE else f"{m} / 100" for m in costing.utilisation]
        console.print(f"GPU utilisation: {', '.join(names)}")
    else:
        console.print("GPU utilisation: none found; GPU efficiency and idle GPUs unknown")
    for d in dims:
        title = f"Cost by {d} ({sheet.currency}{', idle shared' if share_idle else ''})"
        console.print(_allocation_table(alloc, d, share_idle=share_idle, title=title))
    for d in ("pod", "queue"):
        console.print(_idle_gpu_table(alloc, d, idle, sheet.currency))
    console.print(_unallocated_table(alloc, sheet.currency))
    total = alloc.total
    unallocated = float(alloc.idle.sum())
    console.print(
        f"unallocated ({IDLE}): {_money(unallocated)} of {_money(total)} {sheet.currency}"
        + (f" ({100 * unallocated / total:.1f}%)" if total else "")
    )
