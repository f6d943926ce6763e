"""Pods placed per second by one scheduling cycle on a large generated cluster.

The cluster: ``--nodes`` nodes of 8 GPUs (1,000 and 5,000 by default; 96 CPUs, 1 TiB,
racks of 16 labelled ``topology.kubernetes.io/rack``) in 20 queues of equal quota, a quarter
of the GPUs already busy with running preemptible pods. The work: 10,000 pending pods in
mixed jobs: single pods of 1 GPU or a share of one, gangs of 2-4 pods of 1-4 GPUs and
gangs of 8 pods of 8 GPUs — drawn from a seeded generator. One cycle (fair-share order,
gangs, admission, reclaim/preempt/consolidate when a job does not fit) is timed; kube-
scheduler's scheduler_perf reaches 680-810 pods/s at 5,000 nodes for plain pods.

    python -m bench.cycle [--nodes 1000 --nodes 5000] [--pods 10000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

import numpy as np

from bench.docs import publish_table
from gpufleet.compose import run_cycle
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot, vector
from gpufleet.scheduler.cycle import CycleConfig

SECTION = "cycle-speed"
QUEUES = 20
GPUS = 8
BUSY = 0.25
NOW = 1_000_000.0


def generate(nodes: int, pending: int, seed: int) -> Snapshot:
    rng = np.random.default_rng(seed)
    node_specs = tuple(
        NodeSpec(
            f"node-{i:05d}",
            96_000,
            1_048_576,
            GPUS,
            "NVIDIA-H100-80GB-HBM3",
            {"topology.kubernetes.io/rack": f"rack-{i // 16:04d}"},
        )
        for i in range(nodes)
    )
    queue_names = [f"team-{q:02d}" for q in range(QUEUES)]
    quota = nodes * GPUS / QUEUES
    queues = tuple(
        QueueSpec(
            name,
            quota=vector(quota),
            weight=vector(1.0, 1.0, 1.0),
            quota_set=(True, False, False),
        )
        for name in queue_names
    )
    pods: list[PodInfo] = []
    # Running: whole nodes' worth of 1-GPU pods on the first quarter of the GPUs.
    busy_gpus = int(nodes * GPUS * BUSY)
    for i in range(busy_gpus):
        node, gpu = divmod(i, GPUS)
        key = f"run/r{i}"
        pods.append(
            PodInfo(
                key,
                PodSpec(key, 4000, 32_768, 1, MILLI),
                queue_names[int(rng.integers(QUEUES))],
                priority=10,
                node=node_specs[node].name,
                gpus=(gpu,),
                started=NOW - 7200,
            )
        )
    groups: list[GroupSpec] = []
    count = job = 0
    while count < pending:
        queue = queue_names[int(rng.integers(QUEUES))]
        kind = rng.random()
        if kind < 0.6:
            size, gpus = 1, 1
            milli = int(rng.choice([250, 500, MILLI]))
        elif kind < 0.9:
            size, gpus, milli = int(rng.integers(2, 5)), int(rng.integers(1, 5)), MILLI
        else:
            size, gpus, milli = 8, 8, MILLI
        size = min(size, pending - count)
        key = f"ml/job-{job}"
        created = NOW - 600 + job * 0.01
        if size > 1:
            groups.append(GroupSpec(key, size, queue, created=created))
        for k in range(size):
            name = f"{key}-{k}" if size > 1 else key
            pods.append(
                PodInfo(
                    name,
                    PodSpec(name, 2000 * gpus, 16_384 * gpus, gpus, milli),
                    queue,
                    key if size > 1 else "",
                    priority=int(rng.choice([0, 10, 50])),
                    created=created,
                )
            )
        count += size
        job += 1
    return Snapshot(node_specs, tuple(pods), tuple(groups), queues)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policy", default="gpufleet")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    lines = [
        f"One scheduling cycle, policy {args.policy}: {args.pods:,} pending pods in mixed "
        f"jobs over {QUEUES} queues, {BUSY:.0%} of GPUs busy; best and median of "
        f"{args.repeat} runs (Python {platform.python_version()}, numpy {np.__version__}).",
        "",
        "| nodes | GPUs | pending pods | bound | evictions | still pending | best s | "
        "median s | pods bound/s | pods decided/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for nodes in args.nodes or [1000, 5000]:
        snapshot = generate(nodes, args.pods, args.seed)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            result = run_cycle(snapshot, NOW, CycleConfig(policy=args.policy))
            times.append(time.perf_counter() - started)
            print(
                f"{nodes} nodes: {times[-1]:.2f} s, {len(result.bindings)} bound",
                file=sys.stderr,
            )
        best, median = min(times), statistics.median(times)
        lines.append(
            f"| {nodes:,} | {nodes * GPUS:,} | {args.pods:,} | {len(result.bindings):,} | "
            f"{len(result.evictions):,} | {len(result.pending):,} | {best:.2f} | "
            f"{median:.2f} | {len(result.bindings) / best:,.0f} | {args.pods / best:,.0f} |"
        )
    return publish_table("bench.cycle", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
