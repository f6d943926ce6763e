"""Training and inference on one cluster: lending idle serving GPUs to training, four ways.

Replays 14 days of a ServeGen language model's load (``servegen/language/<model>``) on a
serving pool of 64 nodes of 8 GPUs (512 GPUs), one replica of one node per ``ceil(rate x 1.2 /
mu)``, mu by default what makes the peak window need the whole pool; beside it, Philly
trace days 42-56 on a training pool sized so that they offer 1.1 of its capacity
(``sim/balance.py``: ``training_nodes``); checkpoints every 30 minutes, 2-minute restarts.
Four policies side by side (``sim/balance.py``): the static partition, naive loaning,
Lyra-greedy and gpufleet; on m-large, then with mu 25% lower and higher, then on m-mid.

Prints, per scenario and policy: the training jobs' mean / p50 / p95 wait and mean JCT
(hours; jobs never started count at their wait so far), finished and never started jobs,
the training work done (GPU-hours of the jobs at full size), the useful usage of the cluster
(training work plus the GPU-time of serving replicas, over capacity), the serving deficit
(share of windows ending with fewer replicas running than asked, replica-minutes short),
the reclaim latency (a replica's creation to its binding, p50 / p99 seconds), the jobs
stopped and shrunk by reclaim, the GPUs evicted, the GPU-hours lost, and dollars per finished
training job and per million requests served under the bundled price sheet; then, per
scenario, gpufleet against the issue's targets. A run of everything (no option) writes the
tables into docs/benchmarks.md and the plot of lent GPUs into docs/img/balance.png unless
``--no-docs``.

    python -m bench.balance [--model m-large] [--days 14] [--no-docs] [--traces DIR]
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bench.docs import BENCHMARKS, ROOT, replace_section
from bench.traces import PHILLY, add_traces_option, require, unreadable
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.load.traces.servegen import HEADROOM, ServingLoad, load_model
from gpufleet.model.cluster import NodeSpec
from gpufleet.report.balance_plot import plot_lending
from gpufleet.sim.balance import (
    BALANCE_POLICIES,
    POOL_LABEL,
    SERVING,
    TRAINING,
    BalanceReplay,
    BalanceRun,
    hourly_price,
    training_nodes,
)
from gpufleet.sim.window import trace_window

DAY = 86_400.0
SINCE_DAY = 42
SERVING_NODES = 64
MODELS = Path("servegen") / "language"
SCENARIOS = (("m-large", 1.0), ("m-large", 0.75), ("m-large", 1.25), ("m-mid", 1.0))
"""(model, mu over its default) of a full run."""
COLUMNS = (
    "policy",
    "wait mean / p50 / p95 (h)",
    "JCT (h)",
    "finished",
    "never started",
    "training work (GPU-h)",
    "useful usage",
    "deficit windows",
    "replica-min short",
    "reclaim p50 / p99 (s)",
    "jobs stopped",
    "shrunk",
    "GPUs evicted",
    "GPU-h lost",
    "$ / finished job",
    "$ / M requests",
    "run (s)",
)


@dataclass(frozen=True, slots=True)
class Scenario:
    model: str
    mu_factor: float
    replicas: np.ndarray
    rate: np.ndarray
    window_s: float

    @property
    def title(self) -> str:
        mu = "mu as sized" if self.mu_factor == 1 else f"mu x{self.mu_factor:g}"
        return f"{self.model}, {mu}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", action="append", help="a ServeGen language model (repeatable)")
    parser.add_argument("--days", type=float, default=14.0)
    parser.add_argument("--no-docs", action="store_true")
    add_traces_option(parser)
    args = parser.parse_args()
    if not 0 < args.days <= 14:
        parser.error("--days must be more than 0 and at most 14 (the models' load)")
    models = args.model or sorted({m for m, _ in SCENARIOS})
    require(args.traces / PHILLY, *(args.traces / MODELS / m for m in models))
    span = args.days * DAY
    try:
        trace = load_replay(args.traces / PHILLY)
        loads = {m: load_model(args.traces / MODELS / m) for m in models}
    except InputError as error:
        unreadable(error)
    jobs = [j for j in trace_window(trace.jobs, SINCE_DAY * DAY) if j.arrival_s < span]
    template = trace.nodes[0]
    pool = training_nodes(jobs, span, template.gpus)
    serving = [_node(template, SERVING, k) for k in range(SERVING_NODES)]
    training = [_node(template, TRAINING, k) for k in range(pool)]
    hourly = hourly_price([*serving, *training], load_price_sheet())
    print(
        f"Philly days {SINCE_DAY}-{SINCE_DAY + args.days:g}: {len(jobs):,} jobs on {pool} training "
        f"nodes ({pool * template.gpus} GPUs); serving pool {SERVING_NODES} nodes "
        f"({SERVING_NODES * template.gpus} GPUs); ${hourly:,.2f} an hour in all"
    )
    lines: list[str] = []
    lent: dict[str, list[float]] = {}
    wanted: list[int] = []
    window_s = 600.0
    for model, factor in SCENARIOS:
        if model not in loads or (args.model and factor != 1.0):
            continue
        scenario = _scenario(loads[model], factor, span)
        runs = []
        for policy in BALANCE_POLICIES:
            started = time.perf_counter()
            run = BalanceReplay(
                serving,
                training,
                jobs,
                policy,
                replicas=scenario.replicas,
                rate=scenario.rate.tolist(),
                window_s=scenario.window_s,
                workload=f"philly days {SINCE_DAY}+ / {scenario.title}",
            ).replay()
            runs.append((run, time.perf_counter() - started))
            print(f"  {scenario.title}: {policy.name} in {runs[-1][1]:.1f} s", file=sys.stderr)
            if model == "m-large" and factor == 1.0:
                lent[policy.name] = run.serving.lent_gpus
                wanted, window_s = run.serving.replicas, scenario.window_s
        lines += _table(scenario, runs, hourly, template.gpus)
    text = "\n".join(
        [
            *lines,
            f"Training pool: {pool} nodes of {template.gpus} GPUs for Philly days {SINCE_DAY}-"
            f"{SINCE_DAY + args.days:g} ({len(jobs):,} jobs); serving pool: {SERVING_NODES} "
            "nodes. Reproduce: `python -m bench.balance` (about 4 minutes).",
        ]
    )
    print(text)
    if not (args.no_docs or args.model or args.days != 14.0):
        replace_section(BENCHMARKS, "balance", text)
        plot_lending(
            {name: series for name, series in lent.items() if name != "static"},
            [w * template.gpus for w in wanted],
            window_s,
            ROOT / "docs" / "img" / "balance.png",
            title=f"m-large on {SERVING_NODES * template.gpus} serving GPUs beside Philly days "
            f"{SINCE_DAY}-{SINCE_DAY + 14}: GPUs lent to training",
        )
    return 0


def _node(template: NodeSpec, pool: str, k: int) -> NodeSpec:
    return replace(template, name=f"{pool}-{k}", labels={**template.labels, POOL_LABEL: pool})


def _scenario(load: ServingLoad, factor: float, span: float) -> Scenario:
    windows = min(load.rate.size, math.ceil(span / load.window_s))
    rate = load.rate[:windows]
    mu = float(load.rate.max()) * HEADROOM / SERVING_NODES * factor
    replicas = (
        load.replicas(SERVING_NODES, mu=mu) if factor != 1.0 else load.replicas(SERVING_NODES)
    )
    return Scenario(load.model, factor, replicas[:windows], rate, load.window_s)


def _table(
    scenario: Scenario, runs: list[tuple[BalanceRun, float]], hourly: float, node_gpus: int
) -> list[str]:
    lines = [f"**{scenario.title}**", "", "| " + " | ".join(COLUMNS) + " |"]
    lines.append("|---" * len(COLUMNS) + "|")
    for run, elapsed in runs:
        t, s = run.training, run.serving
        per_job, per_million = run.costs(hourly)
        lines.append(
            "| "
            + " | ".join(
                [
                    run.policy,
                    f"{_hours(t.mean_wait_s)} / {_hours(t.p50_wait_s)} / {_hours(t.p95_wait_s)}",
                    _hours(t.mean_jct_s),
                    f"{t.finished_jobs:,}",
                    f"{t.never_started_jobs:,}",
                    f"{run.work_gpu_hours:,.0f}",
                    f"{run.useful_usage():.1%}",
                    f"{s.short_windows} of {s.windows} ({s.short_share:.2%})",
                    f"{s.short_replica_s / 60:,.0f}",
                    f"{s.latency_s(0.5):.0f} / {s.latency_s(0.99):.0f}",
                    f"{t.preemptions:,}",
                    f"{run.shrinks:,}",
                    f"{run.evicted_gpus:,.0f}",
                    f"{t.lost_gpu_hours:,.0f}",
                    f"{per_job:.2f}",
                    f"{per_million:.2f}",
                    f"{elapsed:.1f}",
                ]
            )
            + " |"
        )
    lines += ["", *_targets(scenario, [r for r, _ in runs], node_gpus), ""]
    return lines


def _targets(scenario: Scenario, runs: list[BalanceRun], node_gpus: int) -> list[str]:
    """gpufleet against the issue's targets, each with its figures."""
    by = {r.policy: r for r in runs}
    ours, static = by["gpufleet"], by["static"]
    added = int(np.diff(scenario.replicas, prepend=0).clip(min=0).sum()) * node_gpus
    wait = _ratio(static.training.mean_wait_s, ours.training.mean_wait_s)
    jct = _ratio(static.training.mean_jct_s, ours.training.mean_jct_s)
    work = ours.work_gpu_hours / static.work_gpu_hours - 1 if static.work_gpu_hours else math.nan
    out = [
        f"gpufleet against static: mean wait {wait} lower (target 1.5x), mean JCT {jct} lower "
        f"(target 1.4x), training work {work:+.0%} (target +20%); serving deficit "
        f"{ours.serving.short_share:.2%} of windows (target 0.1%).",
    ]
    for other in ("naive-loaning", "lyra-greedy"):
        them = by[other]
        per_added = [1000 * r.preemptions / added if added else 0.0 for r in (ours, them)]
        out.append(
            f"Against {other}: jobs stopped or shrunk {_fewer(ours.preemptions, them.preemptions)}"
            f" ({ours.preemptions} against {them.preemptions}; per 1,000 GPUs the replicas asked "
            f"back, {per_added[0]:.1f} against {per_added[1]:.1f}; per GPU evicted, "
            f"{ours.per_reclaimed_gpu:.3f} against {them.per_reclaimed_gpu:.3f}), GPU-hours lost "
            f"{_fewer(ours.training.lost_gpu_hours, them.training.lost_gpu_hours)} "
            "(targets: 30% fewer)."
        )
    return out


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def _ratio(a: float | None, b: float | None) -> str:
    if a is None or b is None:
        return "-"
    return f"{a / b:.2f}x" if b > 0 else ("equal" if a == 0 else "inf")


def _fewer(a: float, b: float) -> str:
    return f"{1 - a / b:.0%} fewer" if b > 0 else "none either way"


if __name__ == "__main__":
    raise SystemExit(main())
