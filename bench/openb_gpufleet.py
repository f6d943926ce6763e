"""gpufleet's policy against FGD on the 13 openb workloads with published results.

Runs ``fgd`` and ``gpufleet`` over seeds 42-51 and prints, per workload, the mean
unallocated GPU % at arrived 100%: FGD as published, our ``fgd``, ``gpufleet``, and the
reduction against the published FGD mean; then the mean reduction and the run-time ratio.
Writes the table into ``docs/benchmarks.md``.

    python -m bench.openb_gpufleet                 # about 12 min on 2 cores
    python -m bench.openb_gpufleet --workload default --seeds 42-43
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

from bench.docs import publish
from bench.published import (
    NODES_FILE,
    RESULTS_FILE,
    chosen_workloads,
    fill_tasks,
    published_unallocated,
)
from bench.traces import add_traces_option, openb_dir, require
from gpufleet.model.results import FillRun
from gpufleet.sim.batch import run_tasks, seed_range

SECTION = "openb-gpufleet"
POLICIES = ("fgd", "gpufleet")


def mean_of(runs: list[FillRun], workload: str, policy: str, field: str) -> float:
    values = [getattr(r, field) for r in runs if r.workload == workload and r.policy == policy]
    return statistics.fmean(v for v in values if v is not None)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--workload", action="append", help="e.g. default, cpu050 (repeatable)")
    parser.add_argument("--seeds", type=seed_range, default="42-51")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    traces = openb_dir(args.traces)
    require(traces / RESULTS_FILE, traces / NODES_FILE)
    published = published_unallocated(traces)
    workloads = chosen_workloads(published, args.workload)
    require(*(traces / f"{w}.csv" for w in workloads))
    seeds: list[int] = args.seeds
    tasks = fill_tasks(traces, workloads, POLICIES, seeds)
    started = time.perf_counter()
    runs = run_tasks(
        tasks,
        jobs=args.jobs,
        on_done=lambda r: print(
            f"{r.workload} {r.policy} seed {r.seed}: {r.unallocated_at_100}", file=sys.stderr
        ),
    )
    lines = [
        f"Unallocated GPU % at arrived 100%, mean over seeds {seeds[0]}-{seeds[-1]}; "
        "reduction is against the published FGD mean.",
        "",
        "| workload | FGD published | fgd (ours) | gpufleet | reduction |",
        "|---|---|---|---|---|",
    ]
    reductions = []
    for w in workloads:
        theirs = published[w, "fgd"].mean
        ours = mean_of(runs, w, "fgd", "unallocated_at_100")
        mine = mean_of(runs, w, "gpufleet", "unallocated_at_100")
        reductions.append((theirs - mine) / theirs)
        lines.append(
            f"| {w.removeprefix('openb_pod_list_')} | {theirs:.2f} | {ours:.2f} | {mine:.2f} "
            f"| {100 * reductions[-1]:+.1f}% |"
        )
    time_ratio = statistics.fmean(r.elapsed_s for r in runs if r.policy == "gpufleet") / (
        statistics.fmean(r.elapsed_s for r in runs if r.policy == "fgd")
    )
    below = sum(r > 0 for r in reductions)
    lines += [
        "",
        f"gpufleet is below the published FGD mean on {below}/{len(workloads)} workloads; "
        f"mean reduction {100 * statistics.fmean(reductions):.1f}%. "
        f"Run time per fill run: {time_ratio:.2f} x fgd's. "
        f"{time.perf_counter() - started:.0f} s wall for the grid.",
        "Reproduce: `python -m bench.openb_gpufleet`.",
    ]
    publish(SECTION, "\n".join(lines), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
