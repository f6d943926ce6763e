"""Pods placed per second by one scheduling cycle on a large generated cluster.

The cluster: ``--nodes`` nodes of 8 GPUs (1,000 and 5,000 by default; 96 CPUs, 1 TiB,
racks of 16 labelled ``topology.kubernetes.io/rack``) in 20 queues of equal quota, a quarter
of the GPUs already busy with running preemptible pods. The work: 10,000 pending pods in
mixed jobs: single pods of 1 GPU or a share of one, gangs of 2-4 pods of 1-4 GPUs and
gangs of 8 pods of 8 GPUs — drawn from a seeded generator. One cycle (fair-share order,
gangs, admission, reclaim/preempt/consolidate when a job does not fit) is timed; kube-
scheduler's scheduler_perf reaches 680-810 pods/s at 5,000 nodes for plain pods.

A second table runs an inference-style workload: the same mix, but ``--inference`` (10%)
of the pending pods are replicas of Deployments of 4-32 pods of one GPU each, every
Deployment with required anti-affinity among its replicas on ``kubernetes.io/hostname``
or a zone spread (``maxSkew`` 1 over 4 zones), half and half; every pod, running or
pending, carries its labels as pods read from a cluster do. It is run with those
constraints and without them (the same pods and labels), so that the cost of the inter-pod
filters is the difference of the two rows.

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
from gpufleet.model.interpod import LabelSelector, PodPlacement, PodTerm, SpreadConstraint
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import Requirement
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot, vector
from gpufleet.scheduler.cycle.config import CycleConfig

SECTION = "cycle-speed"
QUEUES = 20
GPUS = 8
BUSY = 0.25
NOW = 1_000_000.0
ZONES = 4
HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"


def labelled(app: str) -> PodPlacement:
    """A pod as read from a cluster: labels, no term of its own."""
    return PodPlacement("ml", {"app": app})


def replica(app: str, *, spread: bool) -> PodPlacement:
    """A Deployment's replica kept apart from its siblings: anti-affinity on the hostname,
    or a zone spread of skew 1."""
    siblings = LabelSelector((Requirement("app", "In", (app,)),))
    if spread:
        return PodPlacement("ml", {"app": app}, spread=(SpreadConstraint(1, ZONE, siblings),))
    term = PodTerm(siblings, frozenset({"ml"}), HOSTNAME)
    return PodPlacement("ml", {"app": app}, anti_affinity=(term,))


def generate(
    nodes: int, pending: int, seed: int, inference: float = 0.0, *, constrained: bool = True
) -> Snapshot:
    """The cluster and its pods (see the module doc); ``inference``: the share of pending
    pods that are Deployment replicas, with their constraints if ``constrained``."""
    rng = np.random.default_rng(seed)
    node_specs = tuple(
        NodeSpec(
            f"node-{i:05d}",
            96_000,
            1_048_576,
            GPUS,
            "NVIDIA-H100-80GB-HBM3",
            {"topology.kubernetes.io/rack": f"rack-{i // 16:04d}"}
            | ({HOSTNAME: f"node-{i:05d}", ZONE: f"zone-{i % ZONES}"} if inference else {}),
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
                PodSpec(
                    key, 4000, 32_768, 1, MILLI, placement=labelled("run") if inference else None
                ),
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
        if inference and rng.random() < inference:
            count += _deployment(rng, pods, job, queue, pending - count, constrained=constrained)
            job += 1
            continue
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
                    PodSpec(
                        name,
                        2000 * gpus,
                        16_384 * gpus,
                        gpus,
                        milli,
                        placement=labelled(key) if inference else None,
                    ),
                    queue,
                    key if size > 1 else "",
                    priority=int(rng.choice([0, 10, 50])),
                    created=created,
                )
            )
        count += size
        job += 1
    return Snapshot(node_specs, tuple(pods), tuple(groups), queues)


def _deployment(
    rng: np.random.Generator,
    pods: list[PodInfo],
    job: int,
    queue: str,
    room: int,
    *,
    constrained: bool,
) -> int:
    """Append the replicas of one Deployment (4-32, at most ``room``); how many."""
    app = f"serve-{job}"
    size = min(int(rng.integers(4, 33)), room)
    spread = bool(rng.random() < 0.5)
    placement = replica(app, spread=spread) if constrained else labelled(app)
    created = NOW - 600 + job * 0.01
    for k in range(size):
        name = f"ml/{app}-{k}"
        pods.append(
            PodInfo(
                name,
                PodSpec(name, 4000, 32_768, 1, MILLI, placement=placement),
                queue,
                priority=int(rng.choice([0, 10, 50])),
                created=created,
            )
        )
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--policy", default="gpufleet")
    parser.add_argument("--inference", type=float, default=0.10)
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
    sizes = args.nodes or [1000, 5000]
    for nodes in sizes:
        row, _ = _timed(generate(nodes, args.pods, args.seed), nodes, args)
        lines.append(row)
    lines += [
        "",
        f"Inference-style: {args.inference:.0%} of the pending pods are replicas of "
        "Deployments of 4-32 one-GPU pods, each Deployment with required anti-affinity on "
        "the hostname or a zone spread (maxSkew 1, 4 zones), half and half; every pod "
        "carries labels. `constrained` says whether the replicas' terms are set (the same "
        "pods without them otherwise).",
        "",
        "| nodes | constrained | bound | evictions | still pending | best s | median s | "
        "pods bound/s | pods decided/s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for nodes in sizes:
        for constrained in (False, True):
            snapshot = generate(
                nodes, args.pods, args.seed, args.inference, constrained=constrained
            )
            _, cells = _timed(snapshot, nodes, args)
            lines.append(f"| {nodes:,} | {'yes' if constrained else 'no'} | {cells} |")
    return publish_table("bench.cycle", SECTION, lines, write_docs=not args.no_docs)


def _timed(snapshot: Snapshot, nodes: int, args: argparse.Namespace) -> tuple[str, str]:
    """One size's row of the first table, and its cells from ``bound`` on."""
    times = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        result = run_cycle(snapshot, NOW, CycleConfig(policy=args.policy))
        times.append(time.perf_counter() - started)
        print(f"{nodes} nodes: {times[-1]:.2f} s, {len(result.bindings)} bound", file=sys.stderr)
    best, median = min(times), statistics.median(times)
    cells = (
        f"{len(result.bindings):,} | {len(result.evictions):,} | {len(result.pending):,} | "
        f"{best:.2f} | {median:.2f} | {len(result.bindings) / best:,.0f} | "
        f"{args.pods / best:,.0f}"
    )
    return f"| {nodes:,} | {nodes * GPUS:,} | {args.pods:,} | {cells} |", cells


if __name__ == "__main__":
    raise SystemExit(main())
