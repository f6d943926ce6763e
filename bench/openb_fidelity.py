"""Fidelity of gpufleet's fill simulator against the FGD paper's published results.

For every workload with published results and every published policy, runs the fill
protocol over seeds 42-51 and compares the mean unallocated GPU % at arrived 100% with the
authors' mean: a row passes when ``|ours - theirs| <= max(0.5, 2 x published sd)``.
Prints the table and writes it into ``docs/benchmarks.md``.

    python -m bench.openb_fidelity                      # everything (about 25 min, 2 cores)
    python -m bench.openb_fidelity --workload default --policy fgd --seeds 42-43
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench.docs import ROOT, publish
from bench.published import (
    NODES_FILE,
    PUBLISHED_POLICIES,
    RESULTS_FILE,
    Published,
    chosen_workloads,
    fill_tasks,
    published_unallocated,
)
from bench.traces import OPENB, add_traces_option, openb_dir, require
from bench.traces import TRACES as TRACES_ROOT
from gpufleet.model.results import FillRun
from gpufleet.sim.batch import run_tasks, seed_range

SECTION = "openb-fidelity"
TRACES = TRACES_ROOT / OPENB
"""The default openb folder (kept for scripts that import it; ``--traces`` takes either)."""


def tolerance(published: Published) -> float:
    return max(0.5, 2.0 * published.sd)


def render(
    rows: list[tuple[str, str, Published, float, float]], seeds: list[int], elapsed: float
) -> str:
    lines = [
        f"Unallocated GPU % at arrived 100%, mean over seeds {seeds[0]}-{seeds[-1]} "
        f"({len(seeds)} seeds); a row passes when "
        "|ours - published| <= max(0.5, 2 x published sd).",
        "",
        "| workload | policy | published | ours | diff | tolerance | ok |",
        "|---|---|---|---|---|---|---|",
    ]
    passed = 0
    for workload, policy, pub, ours, sd in rows:
        diff = ours - pub.mean
        ok = abs(diff) <= tolerance(pub)
        passed += ok
        lines.append(
            f"| {workload} | {policy} | {pub.mean:.2f} ± {pub.sd:.2f} | {ours:.2f} ± {sd:.2f} "
            f"| {diff:+.2f} | {tolerance(pub):.2f} | {'yes' if ok else '**no**'} |"
        )
    lines += [
        "",
        f"{passed}/{len(rows)} rows within tolerance; {elapsed:.0f} s wall for the grid.",
        "Reproduce: `python -m bench.openb_fidelity`.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--workload", action="append", help="e.g. default, cpu050 (repeatable)")
    parser.add_argument("--policy", action="append", choices=PUBLISHED_POLICIES)
    parser.add_argument("--seeds", type=seed_range, default="42-51")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--raw", type=Path, default=ROOT / "gpufleet-report" / "fidelity.json")
    parser.add_argument("--no-docs", action="store_true", help="do not rewrite docs/benchmarks.md")
    args = parser.parse_args()

    traces = openb_dir(args.traces)
    require(traces / RESULTS_FILE, traces / NODES_FILE)
    published = published_unallocated(traces)
    workloads = chosen_workloads(published, args.workload)
    require(*(traces / f"{w}.csv" for w in workloads))
    seeds: list[int] = args.seeds
    policies = args.policy or list(PUBLISHED_POLICIES)
    tasks = fill_tasks(traces, workloads, policies, seeds)
    started = time.perf_counter()
    done = 0

    def report(run: FillRun) -> None:
        nonlocal done
        done += 1
        print(
            f"[{done}/{len(tasks)}] {run.workload} {run.policy} seed {run.seed}: "
            f"unallocated@100 {run.unallocated_at_100} ({run.elapsed_s:.1f} s)",
            file=sys.stderr,
        )

    runs = run_tasks(tasks, jobs=args.jobs, on_done=report)
    elapsed = time.perf_counter() - started
    args.raw.parent.mkdir(parents=True, exist_ok=True)
    args.raw.write_text(json.dumps({"runs": [r.to_json() for r in runs]}))

    rows = []
    for w in workloads:
        for p in policies:
            values = [
                r.unallocated_at_100
                for r in runs
                if r.workload == w and r.policy == p and r.unallocated_at_100 is not None
            ]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            rows.append(
                (
                    w.removeprefix("openb_pod_list_"),
                    p,
                    published[w, p],
                    statistics.fmean(values),
                    sd,
                )
            )
    publish(SECTION, render(rows, seeds, elapsed), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
