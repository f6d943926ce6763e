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
launch to the first run's start: imports, worker processes, Ray), and the overhead per run
against the mean run time: the gap between a worker's runs (dispatch, results, the next
run's arguments) plus the time a worker spends on a run beyond computing it (writing and
loading its input files once per process, the result's JSON). Every way must give the
baseline's results. Writes the table into docs/benchmarks.md unless ``--no-docs``.

    python -m bench.sweep [--no-docs] [--traces DIR]      # about 6 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.docs import publish
from bench.traces import PHILLY, add_traces_option, openb_dir, require
from gpufleet.load.study import load_study
from gpufleet.study.runs import compute, source_paths

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


def timeless(doc: object) -> object:
    if isinstance(doc, dict):
        return {k: timeless(v) for k, v in doc.items() if k != "elapsed_s"}
    if isinstance(doc, list):
        return [timeless(v) for v in doc]
    return doc


def baseline(study: Path) -> tuple[float, list[dict[str, object]]]:
    """Every run one after another in this process: the wall time and the results."""
    runs = load_study(study).runs
    started = time.perf_counter()
    results = []
    for run in runs:
        results.append(compute(run, source_paths(run)))
        print(f"baseline: {run.experiment} {run.setting_label()} seed {run.seed}", file=sys.stderr)
    return time.perf_counter() - started, results


def overheads(doc: dict[str, Any], launched: float) -> tuple[float, float, float]:
    """Start-up (launch to the first run's start), the mean gap between a worker's runs,
    and the mean time a worker spends on a run beyond computing it."""
    timings = [(r["timing"], r["result"]["elapsed_s"]) for r in doc["runs"]]
    startup = min(t["started"] for t, _ in timings) - launched
    by_worker: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for t, _ in timings:
        by_worker.setdefault((t["host"], t["pid"]), []).append((t["started"], t["ended"]))
    gaps = []
    for spans in by_worker.values():
        spans.sort()
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(spans)]
    gap = sum(gaps) / len(timings)
    extra = statistics.fmean(t["busy_s"] - elapsed for t, elapsed in timings)
    return startup, gap, extra


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
        base_wall, expected = baseline(study)
        mean_run = statistics.fmean(float(r["elapsed_s"]) for r in expected)  # type: ignore[arg-type]
        rows = [
            f"| one after another, in one process | {base_wall:.1f} | 1.00 | - | - | - |",
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
            startup, gap, worker = overheads(doc, launched)
            per_run = gap + worker
            wall = time.time() - launched
            rows.append(
                f"| {label} | {wall:.1f} | {base_wall / wall:.2f} | {startup:.1f} | "
                f"{1000 * gap:.0f} + {1000 * worker:.0f} = {1000 * per_run:.0f} | "
                f"{100 * per_run / mean_run:.1f}% |"
            )
            print(rows[-1], file=sys.stderr)
    runs = len(expected)
    lines = [
        f"{runs} runs (8 openb fills, 8 Philly-week replays), each from an empty cache; mean "
        f"run time {mean_run:.1f} s. Wall time from the command's launch to its exit; "
        "overhead per run = the mean gap between a worker's runs + the mean time a worker "
        "spends on a run beyond computing it (its input files written and loaded once per "
        "process, the result's JSON); every way gave the baseline's results.",
        "",
        "| executor | wall s | speed-up | start-up s | overhead per run, ms (gap + worker) "
        "| of a run |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
        f"Whole benchmark: {time.perf_counter() - begun:.0f} s. "
        "Reproduce: `python -m bench.sweep`.",
    ]
    publish(SECTION, "\n".join(lines), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
