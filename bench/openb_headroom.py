"""How much better than FGD could any placement be? A packing estimate per openb workload.

For each workload and seed, takes the pods that arrive before arrived = 100% of capacity
(the fill protocol's order) and packs their GPU requests offline, largest first, each into
the fullest GPU that still holds it (best-fit decreasing), keeping the fullest GPUs the
cluster has. The capacity left unallocated estimates what even an offline placement would
leave. It ignores CPU, memory and node boundaries (which only make things harder) and
best-fit decreasing is not optimal (which makes it pessimistic), so it is an estimate of
the headroom, not a bound. Beside it, what online best fit leaves on one flat pool of
GPUs (the same pods in arrival order, no nodes, no CPU or memory): the gap between the two
is what placing online costs before nodes and CPU come in.

    python -m bench.openb_headroom [--seeds 42-44]
"""

from __future__ import annotations

import argparse
import bisect
import statistics

import numpy as np

from bench.docs import publish_table
from bench.published import NODES_FILE, RESULTS_FILE, published_unallocated
from bench.traces import add_traces_option, openb_dir, require
from gpufleet.load.traces.openb import load_nodes, load_pods
from gpufleet.model.arrays import MILLI
from gpufleet.model.packing import best_fit_decreasing
from gpufleet.model.pod import PodSpec
from gpufleet.sim.batch import seed_range
from gpufleet.sim.fill import tune

SECTION = "openb-headroom"


def packed_milli(shares: list[int], gpus: int) -> int:
    """Milli-GPU that fits on ``gpus`` GPUs when ``shares`` are packed best-fit decreasing.

    Everything is packed into as many GPUs as needed; if that is more than ``gpus``, the
    fullest ``gpus`` GPUs are kept and the rest of the shares count as not placed.
    """
    placed = 0
    for packed, count in best_fit_decreasing(shares):  # fullest first
        kept = min(count, gpus)
        placed, gpus = placed + kept * sum(packed), gpus - kept
    return placed


def online_best_fit_milli(pods: list[PodSpec], gpus: int) -> int:
    """Milli-GPU placed when ``pods`` arrive in order on ``gpus`` GPUs of one flat pool (no
    nodes, no CPU or memory): a share takes the partly used GPU that holds it most
    tightly, else a free GPU; a pod of whole GPUs takes free GPUs. What online best fit
    would leave if node boundaries and CPU cost nothing."""
    free_gpus, placed = gpus, 0
    gaps: list[int] = []  # free milli of the partly used GPUs, sorted
    for pod in pods:
        if pod.is_gpu_share:
            i = bisect.bisect_left(gaps, pod.gpu_milli)
            if i < len(gaps):
                left = gaps.pop(i)
            elif free_gpus:
                free_gpus, left = free_gpus - 1, MILLI
            else:
                continue
            if left > pod.gpu_milli:
                bisect.insort(gaps, left - pod.gpu_milli)
        elif pod.num_gpu:
            if free_gpus < pod.num_gpu:
                continue
            free_gpus -= pod.num_gpu
        placed += pod.total_gpu_milli
    return placed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_traces_option(parser)
    parser.add_argument("--seeds", type=seed_range, default="42-44")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    traces = openb_dir(args.traces)
    require(traces / RESULTS_FILE, traces / NODES_FILE)
    published = published_unallocated(traces)
    require(*(traces / f"{w}.csv" for w, _ in published))
    capacity = sum(n.gpus for n in load_nodes(traces / NODES_FILE))
    capacity_milli = capacity * MILLI
    seeds: list[int] = args.seeds
    lines = [
        f"Packing estimate (best-fit decreasing, GPU only) of unallocated GPU % at arrived "
        f"100%, mean over seeds {seeds[0]}-{seeds[-1]}, beside FGD's published mean.",
        "",
        "| workload | FGD published | packing estimate | FGD minus estimate "
        "| online best fit, flat |",
        "|---|---|---|---|---|",
    ]
    for workload in sorted({w for w, _ in published}):
        pods = load_pods(traces / f"{workload}.csv").pods
        estimates, online = [], []
        for seed in seeds:
            order_seed, _ = np.random.SeedSequence(seed).spawn(2)
            arrivals = tune(pods, 1.3, capacity_milli, np.random.default_rng(order_seed))
            arrived, until_full = 0, []
            for pod in arrivals:
                if arrived + pod.total_gpu_milli > capacity_milli:
                    break
                arrived += pod.total_gpu_milli
                until_full.append(pod)
            shares = [pod.gpu_milli for pod in until_full for _ in range(pod.num_gpu)]
            placed = packed_milli(shares, capacity)
            estimates.append(100.0 * (capacity_milli - placed) / capacity_milli)
            placed = online_best_fit_milli(until_full, capacity)
            online.append(100.0 * (capacity_milli - placed) / capacity_milli)
        fgd = published[workload, "fgd"].mean
        estimate = statistics.fmean(estimates)
        lines.append(
            f"| {workload.removeprefix('openb_pod_list_')} | {fgd:.2f} | {estimate:.2f} "
            f"| {fgd - estimate:+.2f} | {statistics.fmean(online):.2f} |"
        )
    return publish_table("bench.openb_headroom", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
