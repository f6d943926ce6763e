"""GPUs an inference mix of MIG slices needs: static all-1g partitioning against gpufleet's
dynamic partitioning, on H100 80GB nodes of 8 GPUs.

The workload: ``--pods`` inference pods (default 2,000) drawn from a seeded generator with a
mix of H100 profiles (``MIX``: mostly small slices, some halves, a few whole-GPU 7g). With
static all-1g partitioning (the usual default: every GPU cut into seven 1g.10gb slices),
1g.10gb pods take slices and every larger request needs a whole GPU of its own. With
dynamic MIG, gpufleet partitions each GPU as pods arrive (one cycle, all pods pending),
packing slices of any profile onto partitioned GPUs (:mod:`gpufleet.model.mig`). The lower
bound is the larger of total compute slices / 7 and total memory slices / 8.

    python -m bench.mig [--pods 2000] [--seed 1]
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from bench.docs import publish
from gpufleet.compose import run_cycle
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.mig import TABLES
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import PodInfo, Snapshot

SECTION = "mig"
GPUS = 8
PRODUCT = "NVIDIA-H100-80GB-HBM3"
MIX = {"1g.10gb": 0.45, "1g.20gb": 0.15, "2g.20gb": 0.20, "3g.40gb": 0.15, "7g.80gb": 0.05}
"""Share of each profile in the inference mix."""


def workload(pods: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    names = list(MIX)
    return [names[i] for i in rng.choice(len(names), size=pods, p=list(MIX.values()))]


def static_all_1g(profiles: list[str]) -> int:
    """GPUs needed when every MIG GPU is cut into 7 x 1g.10gb: larger pods take whole GPUs."""
    small = sum(p == "1g.10gb" for p in profiles)
    return math.ceil(small / 7) + (len(profiles) - small)


def dynamic(profiles: list[str]) -> tuple[int, int, float]:
    """GPUs gpufleet partitions for the same pods (enough nodes for all), pods bound, seconds."""
    nodes = tuple(
        NodeSpec(f"h100-{i:03d}", 256_000, 2 << 20, GPUS, PRODUCT, mig_dynamic=True)
        for i in range(math.ceil(len(profiles) / GPUS))
    )
    pods = tuple(
        PodInfo(f"inf/p{i:05d}", PodSpec(f"inf/p{i:05d}", 1000, 4096, mig_profile=p), created=i)
        for i, p in enumerate(profiles)
    )
    started = time.perf_counter()
    result = run_cycle(Snapshot(nodes, pods), 1e6)
    elapsed = time.perf_counter() - started
    return len(result.reconfigurations), len(result.bindings), elapsed


def lower_bound(profiles: list[str]) -> int:
    table = TABLES["H100-80GB"]
    compute = sum(table[p].compute for p in profiles)
    memory = sum(table[p].memory_slices for p in profiles)
    return max(math.ceil(compute / 7), math.ceil(memory / 8))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    profiles = workload(args.pods, args.seed)
    static = static_all_1g(profiles)
    used, bound, seconds = dynamic(profiles)
    bound_text = f"{bound:,} of {len(profiles):,}"
    mix = ", ".join(f"{name} {share:.0%}" for name, share in MIX.items())
    lines = [
        f"{len(profiles):,} inference pods on H100 80GB (seed {args.seed}); mix: {mix}.",
        "",
        "| partitioning | GPUs needed | vs lower bound | pods bound | seconds |",
        "|---|---|---|---|---|",
        f"| static all-1g (larger slices on whole GPUs) | {static:,} | "
        f"+{static / lower_bound(profiles) - 1:.0%} | {len(profiles):,} | - |",
        f"| dynamic (gpufleet) | {used:,} | +{used / lower_bound(profiles) - 1:.0%} | "
        f"{bound_text} | {seconds:.1f} |",
        f"| lower bound (compute / 7, memory / 8) | {lower_bound(profiles):,} | - | - | - |",
        "",
        "Reproduce: `python -m bench.mig`.",
    ]
    publish(SECTION, "\n".join(lines), write_docs=not args.no_docs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
