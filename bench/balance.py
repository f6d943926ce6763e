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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.docs import BENCHMARKS, ROOT, replace_section
from bench.traces import PHILLY, add_traces_option, require, unreadable
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.load.traces.servegen import ServingLoad, load_model
from gpufleet.model.balance import BalanceRun
from gpufleet.report.balance import markdown, targets
from gpufleet.report.balance_plot import plot_lending
from gpufleet.sim.balance import (
    BALANCE_POLICIES,
    SERVING,
    TRAINING,
    BalanceReplay,
    hourly_price,
    pool_nodes,
    training_nodes,
)
from gpufleet.sim.window import trace_window

DAY = 86_400.0
SINCE_DAY = 42
SERVING_NODES = 64
MODELS = Path("servegen") / "language"
SCENARIOS = (("m-large", 1.0), ("m-large", 0.75), ("m-large", 1.25), ("m-mid", 1.0))
"""(model, mu over its default) of a full run."""


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
    serving = pool_nodes(template, SERVING, SERVING_NODES)
    training = pool_nodes(template, TRAINING, pool)
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


def _scenario(load: ServingLoad, factor: float, span: float) -> Scenario:
    windows = min(load.rate.size, math.ceil(span / load.window_s))
    rate = load.rate[:windows]
    replicas = load.sized(SERVING_NODES, factor)
    return Scenario(load.model, factor, replicas[:windows], rate, load.window_s)


def _table(
    scenario: Scenario, runs: list[tuple[BalanceRun, float]], hourly: float, node_gpus: int
) -> list[str]:
    done = [r for r, _ in runs]
    elapsed = ["run (s)", *(f"{t:.1f}" for _, t in runs)]
    lines = [f"**{scenario.title}**", "", *markdown(done, hourly, elapsed)]
    return [*lines, "", *targets(done, scenario.replicas.tolist(), node_gpus), ""]


if __name__ == "__main__":
    raise SystemExit(main())
