"""gpufleet's policy against FGD on the 13 openb workloads with published results, and on
model-constrained variants of them.

Runs ``fgd`` and ``gpufleet`` over seeds 42-51 and prints, per workload, the mean
unallocated GPU % at arrived 100%: FGD as published, our ``fgd``, ``gpufleet``, the
reduction against the published FGD mean and the mean run times; then the same against our
``fgd`` on the variants whose GPU pods partly name GPU models (:mod:`bench.openb_constrained`;
the published results have none), the mean reductions and the run-time ratio.
Writes the tables into ``docs/benchmarks.md``.

    python -m bench.openb_gpufleet                 # about 20 min on 2 cores
    python -m bench.openb_gpufleet --workload default --seeds 42-43 --no-constrained
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench.docs import publish
from bench.openb_constrained import VARIANTS, write_variants
from bench.published import (
    NODES_FILE,
    RESULTS_FILE,
    chosen_workloads,
    fill_tasks,
    published_unallocated,
)
from bench.traces import add_traces_option, openb_dir, require
from gpufleet.model.results import FillRun
from gpufleet.sim.batch import FillTask, run_tasks, seed_range

SECTION = "openb-gpufleet"
POLICIES = ("fgd", "gpufleet")


def mean_of(runs: list[FillRun], workload: str, policy: str, field: str) -> float:
    values = [getattr(r, field) for r in runs if r.workload == workload and r.policy == policy]
    return statistics.fmean(v for v in values if v is not None)


def table_row(
    runs: list[FillRun], workload: str, label: str, published: float | None
) -> tuple[str, float]:
    """A table row (``label`` first, then the published mean if given, ours, gpufleet's,
    the reduction against the published mean or else our fgd, the run times) and that
    reduction."""
    ours = mean_of(runs, workload, "fgd", "unallocated_at_100")
    mine = mean_of(runs, workload, "gpufleet", "unallocated_at_100")
    reference = ours if published is None else published
    reduction = (reference - mine) / reference
    cells = [label, *([] if published is None else [f"{published:.2f}"]), f"{ours:.2f}"]
    cells += [f"{mine:.2f}", f"{100 * reduction:+.1f}%"]
    cells += [f"{mean_of(runs, workload, p, 'elapsed_s'):.1f}" for p in ("fgd", "gpufleet")]
    return "| " + " | ".join(cells) + " |", reduction


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--workload", action="append", help="e.g. default, cpu050 (repeatable)")
    parser.add_argument("--seeds", type=seed_range, default="42-51")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--constrained",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the model-constrained variants (bench.openb_constrained)",
    )
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    traces = openb_dir(args.traces)
    require(traces / RESULTS_FILE, traces / NODES_FILE)
    published = published_unallocated(traces)
    workloads = chosen_workloads(published, args.workload)
    require(*(traces / f"{w}.csv" for w in workloads))
    seeds: list[int] = args.seeds
    tasks = fill_tasks(traces, workloads, POLICIES, seeds)
    variants = [v for v in VARIANTS if not args.workload or v.base in args.workload]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        if args.constrained:
            tasks += [
                FillTask(path, traces / NODES_FILE, p, s)
                for path in write_variants(traces, Path(scratch), variants)
                for p in POLICIES
                for s in seeds
            ]
        runs = run_tasks(
            tasks,
            jobs=args.jobs,
            on_done=lambda r: print(
                f"{r.workload} {r.policy} seed {r.seed}: {r.unallocated_at_100}", file=sys.stderr
            ),
        )
    lines = [
        f"Unallocated GPU % at arrived 100%, mean over seeds {seeds[0]}-{seeds[-1]}; "
        "reduction is against the published FGD mean; mean run time per fill run.",
        "",
        "| workload | FGD published | fgd (ours) | gpufleet | reduction | fgd s | gpufleet s |",
        "|---|---|---|---|---|---|---|",
    ]
    reductions = []
    for w in workloads:
        theirs = published[w, "fgd"].mean
        line, reduction = table_row(runs, w, w.removeprefix("openb_pod_list_"), theirs)
        lines.append(line)
        reductions.append(reduction)
    time_ratio = statistics.fmean(r.elapsed_s for r in runs if r.policy == "gpufleet") / (
        statistics.fmean(r.elapsed_s for r in runs if r.policy == "fgd")
    )
    below = sum(r > 0 for r in reductions)
    lines += [
        "",
        f"gpufleet is below the published FGD mean on {below}/{len(workloads)} workloads; "
        f"mean reduction {100 * statistics.fmean(reductions):.1f}%.",
    ]
    if args.constrained and variants:
        lines += [
            "",
            "Model-constrained variants (`bench.openb_constrained`: the share of GPU pods that "
            "name GPU models in `gpu_spec`); no published results, so the reduction is against "
            "our fgd.",
            "",
            "| variant | constrained GPU pods | fgd (ours) | gpufleet | reduction "
            "| fgd s | gpufleet s |",
            "|---|---|---|---|---|---|---|",
        ]
        against_fgd = []
        for v in variants:
            line, reduction = table_row(
                runs, f"openb_pod_list_{v.name}", f"{v.name} | {100 * v.fraction:.0f}%", None
            )
            lines.append(line)
            against_fgd.append(reduction)
        lines += [
            "",
            f"gpufleet is below our fgd on {sum(r > 0 for r in against_fgd)}/{len(variants)} "
            f"variants; mean reduction {100 * statistics.fmean(against_fgd):.1f}%.",
        ]
    lines += [
        "",
        f"Run time per fill run, all of the above: {time_ratio:.2f} x fgd's. "
        f"{time.perf_counter() - started:.0f} s wall for the grid.",
        "Reproduce: `python -m bench.openb_gpufleet`.",
    ]
    publish(SECTION, "\n".join(lines), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
