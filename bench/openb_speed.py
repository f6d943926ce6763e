"""Seconds per fill run for every policy (openb default workload, inflate 1.3, seed 42).

Each policy runs ``--repeat`` times; the table shows the fastest and the median run, and the
pods placed per second. Writes the table into ``docs/benchmarks.md``.

    python -m bench.openb_speed [--repeat 3] [--policy fgd]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys

import numpy as np

from bench.docs import publish_table
from gpufleet.load.traces.openb import (
    BUNDLED_NODES,
    BUNDLED_WORKLOAD,
    bundled,
    load_nodes,
    load_pods,
)
from gpufleet.plugins.registry import POLICIES
from gpufleet.sim.fill import run_fill

SECTION = "openb-speed"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--policy", action="append", choices=list(POLICIES))
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    workload = load_pods(bundled(BUNDLED_WORKLOAD))
    nodes = load_nodes(bundled(BUNDLED_NODES))
    lines = [
        f"One fill run: {workload.name}, {len(nodes)} nodes, inflate 1.3, seed {args.seed}; "
        f"best and median of {args.repeat} runs (Python {platform.python_version()}, "
        f"numpy {np.__version__}).",
        "",
        "| policy | pods | best s | median s | pods/s |",
        "|---|---|---|---|---|",
    ]
    for name in args.policy or list(POLICIES):
        times = []
        pods = 0
        for _ in range(args.repeat):
            run = run_fill(
                nodes, workload.pods, POLICIES[name], workload=workload.name, seed=args.seed
            )
            times.append(run.elapsed_s)
            pods = run.pods
            print(f"{name}: {run.elapsed_s:.2f} s", file=sys.stderr)
        best = min(times)
        median = statistics.median(times)
        lines.append(f"| {name} | {pods} | {best:.2f} | {median:.2f} | {pods / best:,.0f} |")
    return publish_table("bench.openb_speed", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
