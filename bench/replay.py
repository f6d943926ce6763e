"""Time-driven replay of the Philly trace on the default Philly cluster, per policy.

Prints, per policy: jobs, finished, mean / p50 / p95 wait, mean JCT, time-weighted GPU
allocation, preemptions, lost GPU-hours and the run time. ``--until`` cuts the replay
short (seconds of trace time); ``--policy`` picks policies (repeatable).

    python -m bench.replay [--until 2200000] [--policy kube-default --policy fifo-gang]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.table import Table

from gpufleet.load.philly import load_philly
from gpufleet.sim.replay import REPLAY_POLICIES, Replay, philly_cluster, philly_jobs

TRACE = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "philly" / "philly.csv"


def hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--policy", action="append", choices=sorted(REPLAY_POLICIES))
    parser.add_argument("--until", type=float, default=None)
    args = parser.parse_args()
    jobs = philly_jobs(load_philly(args.trace))
    nodes, topology = philly_cluster()
    table = Table(title=f"Philly replay, {len(jobs):,} jobs, {len(nodes) * 8} GPUs")
    for column in (
        "policy", "jobs", "finished", "mean wait h", "p50 wait h", "p95 wait h", "mean JCT h",
        "alloc %", "preemptions", "lost GPU-h", "run time s",
    ):  # fmt: skip
        table.add_column(column, justify="right")
    for name in args.policy or list(REPLAY_POLICIES):
        run = Replay(nodes, jobs, REPLAY_POLICIES[name], topology=topology).run(until=args.until)
        table.add_row(
            name,
            f"{run.jobs:,}",
            f"{run.finished_jobs:,}",
            hours(run.mean_wait_s),
            hours(run.p50_wait_s),
            hours(run.p95_wait_s),
            hours(run.mean_jct_s),
            f"{run.gpu_allocation_mean:.1f}",
            str(run.preemptions),
            f"{run.lost_gpu_hours:,.0f}",
            f"{run.elapsed_s:.1f}",
        )
    Console().print(table)


if __name__ == "__main__":
    main()
