"""Topology-aware gangs against topology-unaware placement, with Philly's job sizes.

The cluster: 4 blocks x 16 racks x 8 nodes x 8 H100 (512 nodes, 4,096 GPUs), labelled
``topology.kubernetes.io/block`` and ``.../rack``, with a Topology object of those levels.
Before the cycle, 1-GPU jobs of other schedulers hold GPUs as after a day of churn: a seeded
random 60% of the nodes run 2, 4, 6 or 8 of them (about 37% of the GPUs). The work: the
Philly trace's multi-GPU jobs (``num_gpus`` >= 2, ``philly/philly.csv`` in ``--traces``)
in arrival order until they ask for all the free GPUs; a job of N GPUs is a gang of
ceil(N/8) pods of N/ceil(N/8) GPUs. One scheduling cycle places them, with:

* ``kube-default scoring, unaware`` — kube-scheduler's LeastAllocated + BalancedAllocation
  (gangs still all-or-nothing), no topology constraint;
* ``gpufleet policy, unaware`` — gpufleet's placement policy, no topology constraint;
* ``preferred rack`` — PodGroups annotated ``gpufleet.io/topology-preferred: rack``;
* ``required rack`` — ``gpufleet.io/topology-required: rack``.

Printed per variant: multi-node gangs bound, the share of them inside one rack and inside
one block, GPUs allocated, gangs pending, seconds.

    python -m bench.topology [--traces DIR | --philly PATH] [--seeds 5]
"""

from __future__ import annotations

import argparse
import csv
import math
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from bench.docs import publish_table
from bench.traces import PHILLY, add_traces_option, require
from gpufleet.compose import run_cycle
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot
from gpufleet.scheduler.cycle.config import CycleConfig

SECTION = "topology"
BLOCK, RACK = "topology.kubernetes.io/block", "topology.kubernetes.io/rack"
BLOCKS, RACKS, NODES, GPUS = 4, 16, 8, 8
BUSY_NODES = 0.6
NOW = 1_000_000.0


def cluster() -> tuple[NodeSpec, ...]:
    nodes = []
    for b in range(BLOCKS):
        for r in range(RACKS):
            for n in range(NODES):
                labels = {BLOCK: f"b{b}", RACK: f"b{b}-r{r:02d}"}
                nodes.append(
                    NodeSpec(f"b{b}-r{r:02d}-n{n}", 96_000, 1_048_576, GPUS, "H100", labels)
                )
    return tuple(nodes)


def philly_sizes(path: Path) -> list[int]:
    with path.open(newline="", encoding="utf-8") as handle:
        rows = sorted(csv.DictReader(handle), key=lambda row: row["timestamp"])
    return [int(float(row["num_gpus"])) for row in rows]


def snapshot(nodes: tuple[NodeSpec, ...], sizes: list[int], seed: int) -> Snapshot:
    rng = np.random.default_rng(seed)
    total = len(nodes) * GPUS
    # After a day of churn: 60% of nodes run 2, 4, 6 or 8 GPUs' worth of small jobs.
    busy = [
        node * GPUS + g
        for node in range(len(nodes))
        if rng.random() < BUSY_NODES
        for g in range(int(rng.choice([2, 4, 6, 8])))
    ]
    pods = [
        PodInfo(
            f"other/busy-{i}",
            PodSpec(f"other/busy-{i}", 1000, 8192, 1, MILLI),
            "",
            node=nodes[int(slot) // GPUS].name,
            gpus=(int(slot) % GPUS,),
            managed=False,
        )
        for i, slot in enumerate(sorted(busy))
    ]
    free = total - len(busy)
    groups = []
    asked = 0
    for job, size in enumerate(s for s in sizes if s >= 2):
        if asked + size > free:
            break
        asked += size
        count = math.ceil(size / GPUS)
        per_pod = size // count
        key = f"ml/job-{job:05d}"
        groups.append(GroupSpec(key, count, created=float(job)))
        pods.extend(
            PodInfo(
                f"{key}-{k}",
                PodSpec(f"{key}-{k}", 4000 * per_pod, 32_768 * per_pod, per_pod, MILLI),
                group=key,
                created=float(job),
            )
            for k in range(count)
        )
    return Snapshot(nodes, tuple(pods), tuple(groups), topology=(BLOCK, RACK))


def measure(snap: Snapshot, nodes: tuple[NodeSpec, ...], policy: str) -> dict[str, float]:
    started = time.perf_counter()
    result = run_cycle(snap, NOW, CycleConfig(policy=policy))
    elapsed = time.perf_counter() - started
    where = {n.name: n.labels for n in nodes}
    by_gang: dict[str, list[str]] = {}
    for b in result.bindings:
        by_gang.setdefault(b.pod.rsplit("-", 1)[0], []).append(b.node)
    multi = [hosts for hosts in by_gang.values() if len(hosts) > 1]
    one_rack = sum(len({where[h][RACK] for h in hosts}) == 1 for hosts in multi)
    one_block = sum(len({where[h][BLOCK] for h in hosts}) == 1 for hosts in multi)
    specs = {p.key: p.spec for p in snap.pods}
    bound_gpus = sum(specs[b.pod].num_gpu for b in result.bindings)
    pending_gangs = len({p.pod.rsplit("-", 1)[0] for p in result.pending})
    total = len(nodes) * GPUS
    running = sum(p.spec.num_gpu for p in snap.pods if p.node is not None)
    return {
        "multi": len(multi),
        "rack": 100 * one_rack / max(1, len(multi)),
        "block": 100 * one_block / max(1, len(multi)),
        "allocated": 100 * (running + bound_gpus) / total,
        "pending": pending_gangs,
        "seconds": elapsed,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--philly", type=Path, help="the Philly CSV (default: in --traces)")
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N, summed")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    philly = args.philly or args.traces / PHILLY
    require(philly)
    nodes = cluster()
    sizes = philly_sizes(philly)
    names = (
        "kube-default scoring, unaware",
        "gpufleet policy, unaware",
        "gpufleet, preferred rack",
        "gpufleet, required rack",
    )
    totals = {
        name: {
            "multi": 0.0,
            "rack": 0.0,
            "block": 0.0,
            "allocated": 0.0,
            "pending": 0.0,
            "seconds": 0.0,
        }
        for name in names
    }
    gangs = multi_node = 0
    busy_share = 0.0
    for seed in range(1, args.seeds + 1):
        base = snapshot(nodes, sizes, seed)
        gangs += len(base.groups)
        multi_node += sum(g.min_member > 1 for g in base.groups)
        busy_share += 100 * sum(p.node is not None for p in base.pods) / (len(nodes) * GPUS)
        preferred = replace(
            base, groups=tuple(replace(g, topology_preferred=RACK) for g in base.groups)
        )
        required = replace(
            base, groups=tuple(replace(g, topology_required=RACK) for g in base.groups)
        )
        runs = (
            (base, "kube-default"),
            (base, "gpufleet"),
            (preferred, "gpufleet"),
            (required, "gpufleet"),
        )
        for name, (snap, policy) in zip(names, runs, strict=True):
            m = measure(snap, nodes, policy)
            t = totals[name]
            t["rack"] += m["rack"] * m["multi"] / 100
            t["block"] += m["block"] * m["multi"] / 100
            for key in ("multi", "allocated", "pending", "seconds"):
                t[key] += m[key]
    lines = [
        f"{BLOCKS} blocks x {RACKS} racks x {NODES} nodes x {GPUS} GPUs ({len(nodes)} nodes), "
        f"{busy_share / args.seeds:.0f}% of GPUs busy on average; seeds 1-{args.seeds} summed: "
        f"{gangs} Philly jobs of >= 2 GPUs ({multi_node} multi-node gangs), each seed's jobs "
        "asking for every free GPU; one cycle per seed.",
        "",
        "| placement | multi-node gangs bound | in one rack | in one block | GPUs allocated "
        "(mean) | gangs pending | seconds (mean) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in names:
        t = totals[name]
        multi = max(1.0, t["multi"])
        lines.append(
            f"| {name} | {t['multi']:.0f} | {100 * t['rack'] / multi:.0f}% | "
            f"{100 * t['block'] / multi:.0f}% | {t['allocated'] / args.seeds:.1f}% | "
            f"{t['pending']:.0f} | {t['seconds'] / args.seeds:.1f} |"
        )
    return publish_table("bench.topology", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
