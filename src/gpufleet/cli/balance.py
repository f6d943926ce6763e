"""``simulate --protocol balance``: a training trace beside a serving load, per lending policy.

Loads the training trace (``--workload``, a Philly trace or an openb pod list, from
``--since``), its cluster's first node as the model of every node, and a ServeGen model's
load (``--serving``: the folder of its clients' CSVs). The serving pool is
``--serving-nodes`` such nodes, one replica each, sized per window by
``ceil(rate x 1.2 / mu)`` with mu ``--mu-factor`` times what makes the peak need the whole
pool; the training pool is sized so that the trace offers 1.1 of its capacity over the span
(``sim/balance.py``). Replays once per lending policy (``--policy``: static, naive-loaning,
lyra-greedy, gpufleet) and writes the report: the table, ``results.json``, ``balance.png``
and ``index.html``.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
import typer
from rich.console import Console

from gpufleet.cost.nodes import UnpricedNodeError
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.load.traces.servegen import load_model
from gpufleet.model.balance import BalanceRun
from gpufleet.report.balance import balance_html, balance_json, balance_table, targets
from gpufleet.report.files import write_text
from gpufleet.sim.balance import BALANCE_POLICIES, hourly_price, lending, replay_lending

if TYPE_CHECKING:
    from pathlib import Path

POLICIES = {p.name: p for p in BALANCE_POLICIES}
MAX_SERVING_NODES = 100_000
DAY = 86_400.0


def simulate_balance(
    workload: Path | None,
    serving: Path | None,
    trace: tuple[str | None, Path | None],
    window: tuple[float | None, float | None],
    pool: tuple[int, float],
    policy: list[str] | None,
    prices: Path | None,
    out: Path,
    console: Console,
) -> str:
    """The balance replay of the module docstring; returns ``results.json``'s text."""
    if workload is None or serving is None:
        raise typer.BadParameter(
            "--protocol balance needs --workload (a Philly trace or an openb pod list) and "
            "--serving (a ServeGen model's folder, e.g. servegen/language/m-large)"
        )
    names = _policies(policy)
    serving_nodes, mu_factor = _pool(*pool)
    since, until = window
    start = since or 0.0
    if not (math.isfinite(start) and start >= 0):
        raise typer.BadParameter(f"--since must be zero or more seconds, got {start:g}")
    fmt, cluster = trace
    data = load_replay(workload, fmt=fmt, cluster=cluster)
    load = load_model(serving)
    template = data.nodes[0]
    if not template.gpus:
        raise InputError(data.cluster, f"its first node {template.name} has no GPUs")
    if until is not None and not (math.isfinite(until - start) and until > start):
        raise typer.BadParameter(f"--until ({until:g}) must be after --since ({start:g})")
    setup = lending(
        data.jobs,
        template,
        window=(start, until),
        load=(load.rate.tolist(), load.window_s, load.sized(serving_nodes, mu_factor).tolist()),
        serving_nodes=serving_nodes,
    )
    jobs, span, size = setup.jobs, setup.span_s, setup.training_size
    if not jobs:
        raise InputError(str(workload), f"no job arrives from --since {start:g} for {span:g}s")
    sheet_path = prices or DEFAULT_SHEET
    try:
        pools = [*setup.serving_pool, *setup.training_pool]
        hourly = hourly_price(pools, load_price_sheet(sheet_path))
    except UnpricedNodeError as error:
        raise InputError(str(sheet_path), str(error)) from None
    replicas = np.array(setup.replicas, dtype=np.int64)
    runs: list[BalanceRun] = []
    for name in names:
        with console.status(f"{data.workload} beside {load.model}: {name}"):
            runs.append(replay_lending(setup, name, data.workload))
    title = (
        f"{data.workload} ({len(jobs):,} jobs, {size} training nodes) beside {load.model} "
        f"({serving_nodes} serving nodes, mu x{mu_factor:g}), {span / DAY:g} days"
    )
    notes = targets(runs, replicas.tolist(), template.gpus)
    console.print(balance_table(runs, hourly, title))
    for line in notes:
        console.print(line)
    about: dict[str, object] = {
        "workload": data.workload,
        "serving": load.model,
        "since_s": start,
        "span_s": span,
        "training_nodes": size,
        "serving_nodes": serving_nodes,
        "node_gpus": template.gpus,
        "mu_factor": mu_factor,
    }
    document = balance_json(runs, hourly, about)
    wanted = [w * template.gpus for w in replicas.tolist()]
    _write(out, document, runs, (hourly, title, notes), (wanted, load.window_s))
    return document


def _policies(policy: list[str] | None) -> list[str]:
    names = list(dict.fromkeys(policy or POLICIES))
    if unknown := [n for n in names if n not in POLICIES]:
        raise typer.BadParameter(
            f"unknown balance policy {unknown[0]!r}; known: {', '.join(POLICIES)}"
        )
    return names


def _pool(serving_nodes: int, mu_factor: float) -> tuple[int, float]:
    if serving_nodes < 1 or serving_nodes > MAX_SERVING_NODES:
        raise typer.BadParameter(
            f"--serving-nodes must be 1 to {MAX_SERVING_NODES}, got {serving_nodes}"
        )
    if not (math.isfinite(mu_factor) and 0.01 <= mu_factor <= 100):
        raise typer.BadParameter(f"--mu-factor must be from 0.01 to 100, got {mu_factor:g}")
    return serving_nodes, mu_factor


def _write(
    out: Path,
    document: str,
    runs: list[BalanceRun],
    page: tuple[float, str, list[str]],
    load: tuple[list[float], float],
) -> None:
    """``results.json``, ``balance.png`` and ``index.html``."""
    hourly, title, notes = page
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "results.json", document)
    from gpufleet.report.balance_plot import plot_lending  # matplotlib: only where it plots

    lent = {r.policy: r.serving.lent_gpus for r in runs if r.policy != "static"}
    plot_lending(lent, load[0], load[1], out / "balance.png", title=title)
    write_text(out / "index.html", balance_html(runs, hourly, title, notes))
