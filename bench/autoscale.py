"""Autoscaling, five ways: what two weeks of Philly cost on a cluster that buys its nodes.

Replays Philly trace days 42-56 (day 0: the trace's first submission; a job of more than 8
GPUs takes ceil(GPUs/8) whole 8-GPU nodes, the others one node) from an empty cluster that
buys the node types of the bundled ``philly-autoscale.yaml`` (8-GPU and 4-GPU P100 servers on
demand, the 8-GPU server as spot at 60% off, all priced by the bundled price sheet, up 5
minutes after they are asked for), with checkpoints every 30 minutes and 2-minute restarts.
Policies (``sim/autoscale.py``): the static peak, Cluster Autoscaler's defaults with the
price and least-waste expanders, Karpenter's defaults, and gpufleet's planner; each over 5
seeds (the seeds drive spot availability and interruptions; the static peak buys no spot,
so one run serves all its seeds). Then the same with arrivals x1.5: trace days 42-63
replayed 1.5 times as fast, so that two weeks hold half as many jobs again.

Prints, per load, one row per policy (means over the seeds: ``report/autoscale.py``) and
gpufleet against the cheaper Cluster Autoscaler, target by target. A run of everything (no
option) writes the tables into docs/benchmarks.md and the plot of nodes over time into
docs/img/autoscale.png unless ``--no-docs``.

    python -m bench.autoscale [--seeds 5] [--days 14] [--load 1.0] [--no-docs] [--traces DIR]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from pathlib import Path

from bench.docs import BENCHMARKS, ROOT, replace_section
from bench.traces import PHILLY, add_traces_option, require, unreadable
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.traces.openb import bundled
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.model.autoscale import SupplyRun
from gpufleet.model.workload import ReplayJob
from gpufleet.report.autoscale import markdown, targets
from gpufleet.report.autoscale_plot import plot_supply
from gpufleet.sim.autoscale import SUPPLY_POLICIES, SupplyReplay, peak_nodes
from gpufleet.sim.window import trace_window

DAY = 86_400.0
SINCE_DAY = 42
CLUSTER = "philly-autoscale.yaml"
LOADS = (1.0, 1.5)
RELATIVE_COST = {"karpenter-like": 3.0, "gpufleet": 3.0, "static-peak": 0.5}
"""How long a run of each policy takes against Cluster Autoscaler's (measured here), to
start the longest first."""


def jobs_for(all_jobs: list[ReplayJob], days: float, load: float) -> list[ReplayJob]:
    """Trace days ``SINCE_DAY`` to ``SINCE_DAY + days * load``, replayed ``load`` times as
    fast: ``days`` days of arrivals, ``load`` times as many."""
    window = trace_window(all_jobs, SINCE_DAY * DAY)
    return [
        replace(j, arrival_s=j.arrival_s / load) for j in window if j.arrival_s < days * load * DAY
    ]


def _one(args: tuple[str, int, float, float, str]) -> tuple[float, int, SupplyRun, float]:
    policy_name, seed, load, days, traces = args
    started = time.perf_counter()
    jobs = jobs_for(_trace(traces), days, load)
    snapshot = load_snapshot(bundled(CLUSTER))
    policy = next(p for p in SUPPLY_POLICIES if p.name == policy_name)
    run = SupplyReplay(
        jobs,
        snapshot.offers,
        policy,
        sheet=load_price_sheet(),
        system=snapshot.nodes[0],
        seed=seed,
        static_nodes=peak_nodes(jobs, max(o.gpus for o in snapshot.offers)),
        workload=f"philly days {SINCE_DAY}+ x{load:g}",
    ).replay()
    return load, seed, run, time.perf_counter() - started


@functools.cache
def _trace(traces: str) -> list[ReplayJob]:
    """The trace's jobs, read once per process."""
    return load_replay(Path(traces) / PHILLY).jobs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--load", type=float, action="append", help="arrival factor (repeatable)")
    parser.add_argument("--policy", action="append", help="a policy (repeatable)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-docs", action="store_true")
    add_traces_option(parser)
    args = parser.parse_args()
    if args.seeds < 1 or not 0 < args.days <= 14:
        parser.error("--seeds must be at least 1 and --days from above 0 to 14")
    require(args.traces / PHILLY)
    try:
        load_replay(args.traces / PHILLY)
    except InputError as error:
        unreadable(error)
    loads = tuple(args.load or LOADS)
    names = [p.name for p in SUPPLY_POLICIES if not args.policy or p.name in args.policy]
    tasks = [
        (name, seed, load, args.days, str(args.traces))
        for load in loads
        for name in names
        for seed in (range(1) if name == "static-peak" else range(args.seeds))
    ]
    # the longest runs first, so that no worker is left with a long one at the end
    tasks.sort(key=lambda t: -RELATIVE_COST.get(t[0], 1.0) * t[2])
    started = time.perf_counter()
    results: dict[float, dict[str, list[SupplyRun]]] = {
        load: {name: [] for name in names} for load in loads
    }
    with ProcessPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for (name, *_), (load, seed, run, took) in zip(tasks, pool.map(_one, tasks), strict=True):
            results[load][name].append(run)
            print(f"  x{load:g} {name} seed {seed}: {took:.0f} s", file=sys.stderr)
    lines: list[str] = []
    for load in loads:
        title = (
            f"**Philly days {SINCE_DAY}-{SINCE_DAY + args.days:g}, arrivals as traced**"
            if load == 1
            else f"**Philly days {SINCE_DAY}-{SINCE_DAY + args.days * load:g} replayed x{load:g} "
            f"as fast ({args.days:g} days, arrivals x{load:g})**"
        )
        jobs = results[load][names[0]][0].replay.jobs
        lines += [
            title,
            "",
            f"{jobs:,} jobs; means over {args.seeds} seeds (static-peak: one run, it buys no "
            "spot).",
            "",
            *markdown(results[load]),
            "",
            *targets(results[load]),
            "",
        ]
    took = time.perf_counter() - started
    lines.append(
        f"Reproduce: `python -m bench.autoscale` ({took / 60:.0f} minutes on "
        f"{args.workers} processes here)."
    )
    text = "\n".join(lines)
    print(text)
    everything = not (args.no_docs or args.load or args.policy or args.days != 14)
    if everything and args.seeds == 5:
        replace_section(BENCHMARKS, "autoscale", text)
        first = {name: runs[0] for name, runs in results[1.0].items() if runs}
        plot_supply(
            first,
            ROOT / "docs" / "img" / "autoscale.png",
            title=f"Philly days {SINCE_DAY}-{SINCE_DAY + 14}, seed 0: GPUs bought over time",
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
