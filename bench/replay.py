"""Time-driven replay of openb default and of the Philly trace (full), per policy.

Prints, per trace and policy: jobs, finished, never started, mean / p50 / p95 wait, mean
JCT, time-weighted GPU allocation, preemptions, lost GPU-hours and the run time; then the
waits per job-size class, every job counted (one that never started at its wait so far).
openb default replays on its own 1,213 nodes; Philly on the bundled default cluster (80 x 8
GPUs, racks of 8). ``--until`` cuts the replays short (seconds of trace time); ``--policy``
picks policies and ``--trace`` traces (both repeatable); ``--variants`` adds gpufleet with
reclaim, with starvation holds (after 30 min, after 6 h), and without consolidation. A run
of everything (no option) writes its table into docs/benchmarks.md unless ``--no-docs``.

    python -m bench.replay [--trace philly] [--policy gpufleet] [--until 3000000] [--variants]
                           [--traces DIR]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from bench.docs import publish
from bench.traces import OPENB, PHILLY, add_traces_option, require
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy
from gpufleet.report.replay import (
    COLUMNS,
    SIZE_COLUMNS,
    replay_table,
    rows,
    size_rows,
    size_table,
)
from gpufleet.sim.replay import Replay

GPUFLEET = REPLAY_POLICIES["gpufleet"]
VARIANTS = [
    replace(GPUFLEET, name="gpufleet+reclaim", actions=("consolidate", "reclaim", "preempt")),
    replace(GPUFLEET, name="gpufleet+holds-30m", starvation_after_s=1800.0),
    replace(GPUFLEET, name="gpufleet+holds-6h", starvation_after_s=6 * 3600.0),
    replace(GPUFLEET, name="gpufleet-consolidate", actions=("preempt",)),
]

FILES = {
    "openb-default": Path(OPENB) / "openb_pod_list_default.csv",
    "philly": PHILLY,
}
"""Each trace's file inside the traces directory."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", action="append", choices=sorted(FILES))
    parser.add_argument("--policy", action="append", choices=sorted(REPLAY_POLICIES))
    parser.add_argument("--until", type=float, default=None)
    parser.add_argument("--variants", action="store_true")
    parser.add_argument("--no-docs", action="store_true")
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
    for trace in traces:
        data = load_replay(args.traces / FILES[trace])
        runs = [
            Replay(
                data.nodes,
                data.jobs,
                policy,
                queues=data.queues,
                topology=data.topology,
                workload=data.workload,
            ).run(until=args.until)
            for policy in policies
        ]
        gpus = sum(n.gpus for n in data.nodes)
        console.print(
            replay_table(runs, f"{trace}: {len(data.jobs):,} jobs, {gpus:,} GPUs ({data.cluster})")
        )
        console.print(size_table(runs, f"{trace}: waits by job size (never started: wait so far)"))
        lines += [f"| {trace} | " + " | ".join(row[:1] + row[2:]) + " |" for row in rows(runs)]
        sizes += [f"| {trace} | " + " | ".join(row) + " |" for row in size_rows(runs)]
    lines += [
        "",
        "Waits by job size (GPUs per job), every job counted: one that never started at its "
        "wait so far, to the end of the replay.",
        "",
        *sizes,
        "",
        "Reproduce: `python -m bench.replay` (hours; run time in seconds).",
    ]
    everything = not (args.trace or args.policy or args.until or args.variants)
    if everything:
        publish("replay", "\n".join(lines), write_docs=not args.no_docs)


if __name__ == "__main__":
    main()
