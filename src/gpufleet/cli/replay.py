"""``simulate --protocol replay``: a trace's jobs arrive, wait, run and finish on a simulated clock.

Checks the replay's policies and its window of trace time (with no ``--workload``: three
busy days of the bundled openb pod list on the bundled 24-GPU cluster, so that jobs queue),
loads the trace, cluster, queues and price sheet (the bundled one unless ``--prices``;
a node it cannot price stops the command before anything runs), replays once per policy
and seed with a progress bar in trace days, and writes the report: the tables (cost
included), ``results.json``, the plots, ``index.html``, ``cost.html`` and the cost records
(``cost-runs.csv``, ``cost-nodes.csv``, ``cost-jobs.csv``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from gpufleet.cli.options import positive
from gpufleet.cli.output import make_progress, warn
from gpufleet.cost.allocation import Nodes, Runs
from gpufleet.cost.nodes import UnpricedNodeError, price_nodes
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.traces.openb import BUNDLED_WORKLOAD, bundled
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.model.costs import JOBS_FILE, NODES_FILE, RUNS_FILE
from gpufleet.model.results import ReplayRun
from gpufleet.model.study import Value, labelled
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy, tuned
from gpufleet.report.cost_files import jobs_csv, nodes_csv, runs_csv
from gpufleet.report.cost_page import cost_page
from gpufleet.report.files import write_text
from gpufleet.report.replay import DAY, action_table, replay_html, replay_table, size_table
from gpufleet.report.replay_cost import COST_PAGE, cost_html, cost_tables
from gpufleet.report.results import results_json
from gpufleet.sim.replay import Replay
from gpufleet.sim.window import trace_window

DEFAULT_REPLAY_CLUSTER = "openb-replay-cluster.yaml"
"""The bundled cluster of the default replay: 3 servers, 24 GPUs (see the file)."""
DEFAULT_REPLAY_WINDOW = (137 * DAY, 140 * DAY)
"""The trace time of the default replay: three busy days of the bundled openb pod list."""


def _days(progress: Progress, task: TaskID, now: float) -> None:
    progress.update(task, completed=round(now / DAY, 1))


def _replay_window(
    bundled_workload: bool, since: float | None, until: float | None
) -> tuple[float, float | None]:
    """The trace time to replay, checked: (start, stop or None for the end)."""
    if bundled_workload:  # the demonstration (see simulate's help)
        since = DEFAULT_REPLAY_WINDOW[0] if since is None else since
        until = DEFAULT_REPLAY_WINDOW[1] if until is None else until
    if until is not None:
        positive(until, "--until")
    if since is not None and not 0 <= since < math.inf:
        raise typer.BadParameter(f"--since must be zero or more seconds, got {since:g}")
    start = since or 0.0
    if until is not None and until <= start:
        raise typer.BadParameter(f"--until ({until:g}) must be after --since ({start:g})")
    return start, until


def _seconds(value: float, option: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise typer.BadParameter(f"{option} must be a number of seconds >= 0, got {value:g}")
    return value


def simulate_replay(
    workload: Path | None,
    nodes: Path | None,
    policy: list[str] | None,
    seed_list: list[int],
    trace_format: str | None,
    cluster: Path | None,
    queues: Path | None,
    window: tuple[float | None, float | None],
    run_model: tuple[float, float],
    parameters: Mapping[str, Value],
    prices: Path | None,
    out: Path,
    console: Console,
) -> str:
    policies = list(dict.fromkeys(policy or REPLAY_POLICIES))
    for name in policies:
        if name not in REPLAY_POLICIES:
            raise typer.BadParameter(
                f"unknown replay policy {name!r}; known: {', '.join(REPLAY_POLICIES)}"
            )
    if workload is None and nodes is None and cluster is None:
        cluster = bundled(DEFAULT_REPLAY_CLUSTER)
    start, until = _replay_window(workload is None, *window)
    checkpoint_s, restart_s = (
        _seconds(run_model[0], "--checkpoint-interval"),
        _seconds(run_model[1], "--restart-time"),
    )
    data = load_replay(
        workload or bundled(BUNDLED_WORKLOAD),
        fmt=trace_format,
        nodes=nodes,
        cluster=cluster,
        queues=queues,
        warn=warn,
    )
    sheet_path = prices or DEFAULT_SHEET
    sheet = load_price_sheet(sheet_path)
    try:
        nodes_priced = price_nodes(data.nodes, sheet)
    except UnpricedNodeError as error:
        raise InputError(str(sheet_path), str(error)) from None
    where = (
        f"bundled {DEFAULT_REPLAY_CLUSTER}"
        if cluster == bundled(DEFAULT_REPLAY_CLUSTER)
        else data.cluster
    )
    jobs = trace_window(data.jobs, start)
    if not jobs:
        raise InputError(
            str(workload or BUNDLED_WORKLOAD), f"no job arrives at or after --since {start:g}"
        )
    stop = None if until is None else until - start
    end = stop if stop is not None else max(j.arrival_s for j in jobs)
    days = max(end / DAY, 1e-9)
    runs: list[ReplayRun] = []
    records: list[tuple[str, int, Runs, Nodes]] = []
    idle: list[tuple[str, int, list[dict[str, Any]]]] = []
    with make_progress() as progress:
        for name in policies:
            for seed in seed_list:
                task = progress.add_task(
                    f"{data.workload} · {name} · seed {seed} · trace days", total=round(days, 1)
                )
                replay = Replay(
                    data.nodes,
                    jobs,
                    _tuned(name, parameters),
                    queues=data.queues,
                    topology=data.topology,
                    seed=seed,
                    workload=data.workload,
                    prices=sheet,
                    checkpoint_interval_s=checkpoint_s,
                    restart_s=restart_s,
                )
                runs.append(replay.run(until=stop, progress=partial(_days, progress, task)))
                if replay.allocation is not None:
                    records.append((name, seed, replay.allocation.runs, nodes_priced))
                    idle.append((name, seed, replay.allocation.idle_rows()))
                progress.remove_task(task)
    capacity = sum(n.gpus for n in data.nodes)
    arrived = sum(stop is None or j.arrival_s <= stop for j in jobs)
    if start and until is not None:
        span = f", trace days {start / DAY:g}-{until / DAY:g}"
    elif start:
        span = f", from trace day {start / DAY:g}"
    else:
        span = "" if until is None else f", until {until:g}s"
    title = f"{data.workload} replay — {arrived:,} jobs, {capacity:,} GPUs ({where}){span}"
    _print_tables(console, runs, title)
    return _write_report(out, runs, records, idle, nodes_priced, title, capacity)


def _tuned(name: str, parameters: Mapping[str, Value]) -> ReplayPolicy:
    """Replay policy ``name`` with ``--param`` s set, named as a study names the setting."""
    if not parameters:
        return REPLAY_POLICIES[name]
    return tuned(REPLAY_POLICIES[name], parameters, labelled(name, parameters))


def _print_tables(console: Console, runs: list[ReplayRun], title: str) -> None:
    console.print(replay_table(runs, title))
    console.print(size_table(runs, "Waits by job size (jobs that never started: wait so far)"))
    if any(r.actions for r in runs):
        console.print(action_table(runs, "What each evicting action cost and bought"))
    for table in cost_tables(runs):
        console.print(table)


def _write_report(
    out: Path,
    runs: list[ReplayRun],
    records: list[tuple[str, int, Runs, Nodes]],
    idle: list[tuple[str, int, list[dict[str, Any]]]],
    nodes_priced: Nodes,
    title: str,
    capacity: int,
) -> str:
    """``results.json``, the cost records, the plots, ``index.html`` and ``cost.html``."""
    document = results_json(runs)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "results.json", document)
    write_text(out / RUNS_FILE, runs_csv(records))
    write_text(out / NODES_FILE, nodes_csv(nodes_priced))
    write_text(out / JOBS_FILE, jobs_csv(runs))
    from gpufleet.report.replay_plot import (  # matplotlib: only where it plots
        plot_replay,
        plot_replay_cost,
    )

    plot_replay(runs, out / "replay.png", capacity)
    plot_replay_cost(runs, out / "replay-cost.png")
    write_text(out / "index.html", replay_html(runs, title, cost_html(runs)))
    if costs := cost_page(runs, idle, title):
        write_text(out / COST_PAGE, costs)
    return document
