"""What the full Philly replay costs under each policy, in dollars, and what costing costs.

Replays the Philly trace (82,247 jobs on the bundled 80 x 8-GPU cluster) under
``kube-default``, ``best-fit`` and ``fgd`` (kube-scheduler's shape — pods one at a time, no
gangs, one queue — with best fit's or FGD's placement), ``fifo-gang`` and ``gpufleet``, and
costs each run under the bundled illustrative price sheet (or ``--prices FILE``). Prints per
policy: what the cluster cost over the replay (each run from 0 to its last event), what
pods were charged, what no pod was (unallocated) and its share, the cost of evicted runs,
the cost per finished job and per finished GPU-hour of work; the cost of the most costly
queues; and what costing adds to the replay's run time — each policy is replayed twice,
without a price sheet and with one, and the run times compared; ``log s`` is the time the
run log's facts take alone (the same runs logged again into a fresh log), ``cost s`` the
costing after the run, and ``log + cost %`` their sum against the run time without cost:
the share of the run time costing accounts for, which the difference of two run times
measures only as well as the machine keeps still. ``--until`` cuts the replays short
(seconds of trace time); a run of everything (no option but ``--traces``) writes its tables
into docs/benchmarks.md unless ``--no-docs``.

    python -m bench.cost [--policy gpufleet]... [--until 3000000] [--prices FILE]
                         [--traces DIR] [--no-docs]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from bench.docs import publish
from bench.traces import PHILLY, add_traces_option, require
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.metering.runs import RunLog
from gpufleet.model.results import ReplayRun
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy
from gpufleet.sim.replay import Replay

POLICIES: dict[str, ReplayPolicy] = {
    "kube-default": REPLAY_POLICIES["kube-default"],
    "best-fit": ReplayPolicy("best-fit", "best-fit", gangs=False, tenant_queues=False),
    "fgd": ReplayPolicy("fgd", "fgd", gangs=False, tenant_queues=False),
    "fifo-gang": REPLAY_POLICIES["fifo-gang"],
    "gpufleet": REPLAY_POLICIES["gpufleet"],
}
TOP_QUEUES = 8

COLUMNS = (
    "policy",
    "finished",
    "cluster $",
    "unallocated $",
    "unalloc %",
    "lost $",
    "$ / finished job",
    "finished GPU-h",
    "$ / finished GPU-h",
    "time s (no cost)",
    "time s (cost)",
    "overhead %",
    "log s",
    "cost s",
    "log + cost %",
)


def log_again(replay: Replay) -> float:
    """Seconds to log the replay's runs again into a fresh log: the facts' own cost."""
    assert replay.allocation is not None
    runs = replay.allocation.runs
    pods, node = runs.pods, runs.node.tolist()
    start, end = runs.start.tolist(), runs.end.tolist()
    gpus, cores, gib = (runs.request[:, k].tolist() for k in range(3))
    log = RunLog()
    began = time.perf_counter()
    for k, pod in enumerate(pods):  # a pod evicted and bound again has several runs
        log.started(pod, node[k], start[k], gpus[k], cores[k], gib[k], k)
        log.stopped(pod, end[k])
    return time.perf_counter() - began


def money(value: float | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--policy", action="append", choices=sorted(POLICIES))
    parser.add_argument("--until", type=float, default=None)
    parser.add_argument("--prices", type=Path, default=DEFAULT_SHEET)
    parser.add_argument("--no-docs", action="store_true")
    add_traces_option(parser)
    args = parser.parse_args()
    require(args.traces / PHILLY)
    sheet = load_price_sheet(args.prices)
    data = load_replay(args.traces / PHILLY)
    gpus = sum(n.gpus for n in data.nodes)
    print(f"philly: {len(data.jobs):,} jobs, {gpus:,} GPUs ({data.cluster}); {sheet.title}")

    def replay(policy: ReplayPolicy, *, costed: bool) -> tuple[Replay, ReplayRun]:
        subject = Replay(
            data.nodes,
            data.jobs,
            policy,
            queues=data.queues,
            topology=data.topology,
            workload=data.workload,
            prices=sheet if costed else None,
        )
        return subject, subject.run(until=args.until)

    lines = ["| " + " | ".join(COLUMNS) + " |", "|---" * len(COLUMNS) + "|"]
    costs: list[ReplayRun] = []
    for name in args.policy or list(POLICIES):
        policy = POLICIES[name]
        _, plain = replay(policy, costed=False)
        subject, run = replay(policy, costed=True)
        cost = run.cost
        assert cost is not None
        costs.append(run)
        overhead = 100 * (run.elapsed_s - plain.elapsed_s) / plain.elapsed_s
        logging = log_again(subject)
        row = (
            name,
            f"{cost.finished_jobs:,}",
            money(cost.cluster.total),
            money(cost.idle.total),
            f"{100 * cost.idle_share:.1f}",
            money(cost.lost),
            money(cost.per_finished_job),
            f"{cost.finished_gpu_hours:,.0f}",
            money(cost.per_finished_gpu_hour),
            f"{plain.elapsed_s:.1f}",
            f"{run.elapsed_s:.1f}",
            f"{overhead:+.1f}",
            f"{logging:.2f}",
            f"{cost.elapsed_s:.2f}",
            f"{100 * (logging + cost.elapsed_s) / plain.elapsed_s:.1f}",
        )
        print(" | ".join(row), flush=True)
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *queue_lines(costs)]
    lines += [
        "",
        f"Prices: {sheet.title} (sheet `{sheet.name}`, {sheet.currency}). GPU efficiency: "
        "unknown — the trace has no utilisation.",
        "",
        "Reproduce: `python -m bench.cost` (run times in seconds).",
    ]
    everything = not (args.policy or args.until or args.prices != DEFAULT_SHEET)
    publish("cost", "\n".join(lines), write_docs=everything and not args.no_docs)


def queue_lines(runs: list[ReplayRun]) -> list[str]:
    """The most costly queues under the first policy, a column per policy ($)."""
    if not runs or runs[0].cost is None:
        return []
    top = [q.name for q in runs[0].cost.queues[:TOP_QUEUES]]
    by_run = [{q.name: q.cost.total for q in r.cost.queues} if r.cost else {} for r in runs]
    lines = [
        "| queue | " + " | ".join(f"{r.policy} $" for r in runs) + " |",
        "|---" * (len(runs) + 1) + "|",
    ]
    lines += [
        f"| {name} | " + " | ".join(money(costs.get(name)) for costs in by_run) + " |"
        for name in top
    ]
    lines.append(
        "| unallocated | "
        + " | ".join(money(r.cost.idle.total if r.cost else None) for r in runs)
        + " |"
    )
    return lines


if __name__ == "__main__":
    main()
