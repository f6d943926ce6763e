"""Time-driven replay of openb default, of the Philly trace (full) and of the Pollux
workloads, per policy.

Prints, per trace and policy: jobs, finished, never started, mean / p50 / p95 wait, mean
JCT, time-weighted GPU allocation, preemptions, lost GPU-hours and the run time; then the
waits per job-size class, every job counted (one that never started at its wait so far);
then what each evicting action cost and bought. openb default replays on its own 1,213
nodes (nothing waits there), and, as openb-busy, trace days 137-140 on the 24 GPUs of
``gpufleet simulate --protocol replay``'s default; Philly on the bundled default cluster
(80 x 8 GPUs, racks of 8), where gpufleet also runs with a restart time of 5 minutes, with
checkpoints every 30 minutes, and with both; the Pollux authors' eight workloads (160 jobs
each, sampled from Philly; run times from their Tiresias runs, ``load/traces/pollux.py``)
one a week on their 16 x 4-GPU cluster.

``--until`` cuts the replays short (seconds of trace time); ``--policy`` picks policies and
``--trace`` traces (both repeatable); ``--restart-time`` and ``--checkpoint-interval`` set
both for every run; ``--variants`` adds gpufleet with reclaim, with its reservation after
30 min or 6 h, without a reservation, and without consolidation. A run of everything (no
option) writes its tables into docs/benchmarks.md unless ``--no-docs``.

    python -m bench.replay [--trace philly|pollux] [--policy gpufleet] [--until 3000000]
                           [--variants] [--restart-time 300] [--checkpoint-interval 1800]
                           [--traces DIR]
"""

from __future__ import annotations

import argparse
import math
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from bench.docs import publish
from bench.traces import OPENB, PHILLY, POLLUX, add_traces_option, require, unreadable
from gpufleet.cli.replay import DEFAULT_REPLAY_CLUSTER, DEFAULT_REPLAY_WINDOW
from gpufleet.load.errors import InputError
from gpufleet.load.traces.openb import bundled
from gpufleet.load.traces.replay_inputs import ReplayInput, load_pollux, load_replay
from gpufleet.model.workload import ReplayJob
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy
from gpufleet.report.replay import (
    ACTION_COLUMNS,
    COLUMNS,
    DAY,
    SIZE_COLUMNS,
    action_rows,
    action_table,
    replay_table,
    rows,
    size_rows,
    size_table,
)
from gpufleet.sim.replay import Replay
from gpufleet.sim.window import trace_window

GPUFLEET = REPLAY_POLICIES["gpufleet"]
VARIANTS = [
    replace(GPUFLEET, name="gpufleet+reclaim", actions=("consolidate", "reclaim", "preempt")),
    replace(GPUFLEET, name="gpufleet+reserve-30m", starvation_after_s=1800.0),
    replace(GPUFLEET, name="gpufleet+reserve-6h", starvation_after_s=6 * 3600.0),
    replace(GPUFLEET, name="gpufleet-reserve", starvation_after_s=math.inf),
    replace(GPUFLEET, name="gpufleet-consolidate", actions=("preempt",)),
]
RUN_MODELS = [
    (replace(GPUFLEET, name="gpufleet restart 5m"), 0.0, 300.0),
    (replace(GPUFLEET, name="gpufleet checkpoints 30m"), 1800.0, 0.0),
    (replace(GPUFLEET, name="gpufleet both"), 1800.0, 300.0),
]
"""gpufleet on Philly as jobs restart: a restart time, checkpoints every 30 minutes, both."""

FILES = {
    "openb-default": Path(OPENB) / "openb_pod_list_default.csv",
    "openb-busy": Path(OPENB) / "openb_pod_list_default.csv",
    "philly": PHILLY,
    "pollux": POLLUX,
}
"""Each trace's file inside the traces directory."""


def load(trace: str, traces: Path) -> tuple[ReplayInput, list[ReplayJob], float | None, str]:
    """A trace's inputs, the jobs replayed, where the replay stops (None: the end) and the
    cluster's name.
    ``openb-busy`` is ``gpufleet simulate --protocol replay``'s default: trace days 137-140
    on three servers of 24 GPUs, where jobs queue (on the openb cluster's own 6,212 GPUs
    nothing waits)."""
    if trace == "pollux":
        data = load_pollux(traces / FILES[trace])
        return data, list(data.jobs), None, f"{data.cluster}, 8 workloads a week apart"
    if trace != "openb-busy":
        data = load_replay(traces / FILES[trace])
        return data, list(data.jobs), None, data.cluster
    data = load_replay(traces / FILES[trace], cluster=bundled(DEFAULT_REPLAY_CLUSTER))
    since, until = DEFAULT_REPLAY_WINDOW
    where = f"bundled {DEFAULT_REPLAY_CLUSTER}, trace days {since / DAY:g}-{until / DAY:g}"
    return data, trace_window(data.jobs, since), until - since, where


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", choices=sorted(FILES))
    parser.add_argument("--policy", action="append", choices=sorted(REPLAY_POLICIES))
    parser.add_argument("--until", type=float, default=None)
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--restart-time", type=float, default=None)
    parser.add_argument("--checkpoint-interval", type=float, default=None)
    add_traces_option(parser)
    args = parser.parse_args()
    traces = args.trace or list(FILES)
    require(*(args.traces / FILES[t] for t in traces))
    console = Console(width=200)
    lines = ["| trace | " + " | ".join(COLUMNS[:1] + COLUMNS[2:]) + " |"]
    lines.append("|---" * (len(COLUMNS)) + "|")
    sizes = ["| trace | " + " | ".join(SIZE_COLUMNS) + " |", "|---" * (len(SIZE_COLUMNS) + 1) + "|"]
    policies: list[ReplayPolicy] = [REPLAY_POLICIES[n] for n in args.policy or REPLAY_POLICIES]
    if args.variants:
        policies += VARIANTS
    actions = ["| trace | " + " | ".join(ACTION_COLUMNS) + " |"]
    actions.append("|---" * (len(ACTION_COLUMNS) + 1) + "|")
    chosen = args.restart_time is not None or args.checkpoint_interval is not None
    everything = not (args.trace or args.policy or args.until or args.variants or chosen)
    for trace in traces:
        try:
            data, jobs, stop, where = load(trace, args.traces)
        except InputError as error:
            unreadable(error)
        if args.until is not None:
            stop = args.until if stop is None else min(stop, args.until)
        plans = [(p, args.checkpoint_interval or 0.0, args.restart_time or 0.0) for p in policies]
        if trace == "philly" and not chosen and (everything or args.variants):
            plans += RUN_MODELS
        runs = [
            Replay(
                data.nodes,
                jobs,
                policy,
                queues=data.queues,
                topology=data.topology,
                workload=data.workload,
                checkpoint_interval_s=checkpoint,
                restart_s=restart,
            ).run(until=stop)
            for policy, checkpoint, restart in plans
        ]
        gpus = sum(n.gpus for n in data.nodes)
        console.print(replay_table(runs, f"{trace}: {len(jobs):,} jobs, {gpus:,} GPUs ({where})"))
        console.print(size_table(runs, f"{trace}: waits by job size (never started: wait so far)"))
        console.print(action_table(runs, f"{trace}: what each evicting action cost and bought"))
        lines += [f"| {trace} | " + " | ".join(row[:1] + row[2:]) + " |" for row in rows(runs)]
        sizes += [f"| {trace} | " + " | ".join(row) + " |" for row in size_rows(runs)]
        actions += [f"| {trace} | " + " | ".join(row) + " |" for row in action_rows(runs)]
    lines += [
        "",
        "Waits by job size (GPUs per job), every job counted: one that never started at its "
        "wait so far, to the end of the replay.",
        "",
        *sizes,
        "",
        "What each evicting action cost (the runs it ended, the GPU-hours they lost, restart "
        "time included) and bought (the jobs it made room for that started, and the GPU-hours "
        "they had waited).",
        "",
        *actions,
        "",
        "Reproduce: `python -m bench.replay` (hours; run time in seconds).",
    ]
    publish("replay", "\n".join(lines), write_docs=everything and not args.no_docs)


if __name__ == "__main__":
    main()
