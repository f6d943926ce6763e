"""``gpufleet sweep`` against running the same runs one after another.

The study: a subset of ``bench.openb_gpufleet``'s fill grid (the openb ``default`` and
``gpushare40`` workloads, ``fgd`` and ``gpufleet``, seeds 42-43: 8 fills of the 1,213 openb
GPU nodes) and a replay grid over policy parameters on one week of Philly (trace days
42-49 on the bundled 80-server cluster: ``kube-default``, ``gang-backfill``, and
``gpufleet`` with reservations after 30 minutes, 6 hours and a day, each without and with
30-minute checkpoints: 8 replays). 16 runs.

It is run four ways, each from an empty cache: one after another in this process (the
baseline: :func:`gpufleet.study.runs.compute` per run, each input loaded once), and through
the ``gpufleet sweep`` command on 1 and 2 local worker processes and on a local Ray with 2
CPUs. Printed per way: the wall time, the speed-up over the baseline, the start-up (command
launch to the first run's start: imports, the command's own check of the inputs, worker
processes, Ray), the inputs loaded by workers per run, and the overhead per run against
the mean run time: the gap between a worker's runs (dispatch, results, the next run's
arguments) plus the time a worker spends on a run beyond computing it and loading inputs.
Every way must give the baseline's results. Writes the table into docs/benchmarks.md unless
``--no-docs``.

    python -m bench.sweep [--no-docs] [--traces DIR]      # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.docs import publish
from bench.traces import PHILLY, add_traces_option, openb_dir, require
from gpufleet.load.study import load_study
from gpufleet.report.results import timeless
from gpufleet.study.runs import check, compute, source_paths

SECTION = "sweep"
STUDY = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {{name: bench-sweep}}
spec:
  experiments:
  - name: openb-fill
    protocol: fill
    traces:
    - {{path: {openb}/openb_pod_list_default.csv}}
    - {{path: {openb}/openb_pod_list_gpushare40.csv}}
    clusters: [{{path: {openb}/openb_node_list_gpu_node.csv}}]
    grid: {{policy: [fgd, gpufleet]}}
    seeds: [42, 43]
  - name: philly-week
    protocol: replay
    traces: [{{path: {philly}, format: philly}}]
    windows: [{{since: 1008h, until: 1176h}}]
    settings:
    - {{policy: kube-default}}
    - {{policy: gang-backfill}}
    grid:
      policy: [gpufleet]
      reserveAfter: [30m, 6h, 24h]
      checkpointInterval: [0, 30m]
"""
WAYS = (("pool, 1 worker", ("--workers", "1")), ("pool, 2 workers", ("--workers", "2")),
        ("Ray, 2 CPUs", ("--ray", "local", "--workers", "2")))  # fmt: skip


@dataclass(frozen=True)
class Baseline:
    """The runs one after another in this process: the wall time, the time loading the
    inputs (once each), each run's compute time, and the results."""

    wall_s: float
    load_s: float
    run_s: list[float]
    results: list[dict[str, object]]


def baseline(study: Path) -> Baseline:
    runs = load_study(study).runs
    started = time.perf_counter()
    for run in runs:
        check(run, lambda _: None)  # every input loaded, once
    loaded = time.perf_counter()
    results, run_s = [], []
    for run in runs:
        clock = time.perf_counter()
        results.append(compute(run, functools.partial(source_paths, run)))
        run_s.append(time.perf_counter() - clock)
        print(f"baseline: {run.experiment} {run.setting_label()} seed {run.seed}", file=sys.stderr)
    return Baseline(time.perf_counter() - started, loaded - started, run_s, results)


def overheads(doc: dict[str, Any], launched: float) -> tuple[float, float, float, float]:
    """Start-up (launch to the first run's start); per run, the mean gap between a worker's
    runs, the mean time a worker spends on a run beside computing it and loading inputs,
    and the mean time it spends loading inputs its process lacked."""
    timings = [r["timing"] for r in doc["runs"]]
    startup = min(t["started"] for t in timings) - launched
    by_worker: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for t in timings:
        by_worker.setdefault((t["host"], t["pid"]), []).append((t["started"], t["ended"]))
    gaps = []
    for spans in by_worker.values():
        spans.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    gap = sum(gaps) / len(timings)
    wrapper = statistics.fmean(t["busy_s"] - t["load_s"] - t["compute_s"] for t in timings)
    load = statistics.fmean(t["load_s"] for t in timings)
    return startup, gap, wrapper, load


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    openb = openb_dir(args.traces)
    philly = args.traces / PHILLY
    require(openb / "openb_pod_list_default.csv", openb / "openb_pod_list_gpushare40.csv", philly)
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        study = folder / "study.yaml"
        study.write_text(STUDY.format(openb=openb.resolve(), philly=philly.resolve()))
        base = baseline(study)
        base_wall, expected = base.wall_s, base.results
        mean_run = statistics.fmean(base.run_s)
        rows = [
            f"| one after another, in one process | {base_wall:.1f} | 1.00 | - | "
            f"{1000 * base.load_s / len(expected):.0f} | - | - |",
        ]
        for label, extra in WAYS:
            cache = folder / f"cache-{len(rows)}"
            launched = time.time()
            done = subprocess.run(
                [sys.executable, "-m", "gpufleet", "sweep", str(study), "--cache", str(cache),
                 "--out", str(folder / "report"), "--json", "-", *extra],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if done.returncode != 0:
                sys.stderr.write(done.stderr[-3000:])
                return 1
            doc = json.loads(done.stdout)
            got = [timeless(r["result"]) for r in doc["runs"]]
            if got != [timeless(r) for r in expected]:
                sys.stderr.write(f"bench: error: {label} gave other results than the baseline\n")
                return 1
            startup, gap, worker, load = overheads(doc, launched)
            per_run = gap + worker
            wall = time.time() - launched
            rows.append(
                f"| {label} | {wall:.1f} | {base_wall / wall:.2f} | {startup:.1f} | "
                f"{1000 * load:.0f} | {1000 * gap:.1f} + {1000 * worker:.1f} = "
                f"{1000 * per_run:.1f} | {100 * per_run / mean_run:.2f}% |"
            )
            print(rows[-1], file=sys.stderr)
    runs = len(expected)
    lines = [
        f"{runs} runs (8 openb fills, 8 Philly-week replays), each from an empty cache; a "
        f"run computes in {mean_run:.2f} s on average, one after another in one process; every "
        "way gave the same results. Wall time: from the command's launch to its exit (the "
        "baseline: its inputs loaded once, then its runs). Start-up: launch to the first "
        "run's start (imports, the command's own check of every input, worker processes, "
        "Ray). Inputs loaded per run: what workers spent writing and loading inputs their "
        "process lacked, per run (pool workers start with the inputs the command loaded; "
        "Ray's load their own; the baseline's row: its one load of each). Overhead per run: "
        "the mean gap between a worker's runs (dispatch, the result sent back, the next "
        "run's arguments), plus the time a worker spends on a run beside computing it and "
        "loading inputs; against the mean run time. The speed-up says the rest: runs of "
        "different lengths, and two runs sharing two cores with the command.",
        "",
        "| executor | wall s | speed-up | start-up s | inputs loaded per run, ms "
        "| overhead per run, ms (gap + worker) | of a run |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"Whole benchmark: {time.perf_counter() - begun:.0f} s. "
        "Reproduce: `python -m bench.sweep`.",
    ]
    publish(SECTION, "\n".join(lines), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
