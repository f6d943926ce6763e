"""The DRA allocator: an unsatisfiable claim fails as fast as a satisfiable one succeeds.

(a) a claim for 9 GPUs that must ``matchAttribute`` on their NUMA node, where every NUMA
node has 8, tried on each of 200 nodes of 64 devices (8 NUMA nodes of 8) — unsatisfiable;
kubernetes/kubernetes#131730 reports upstream's depth-first search running for over 30 s
on such claims. (b) the same claim for 8 GPUs — satisfiable on every node. (c) allocation
throughput: 1,000 pods with one single-GPU claim each on 500 nodes of 8 GPUs, each pod on
the first node with a free GPU. (d) CEL: a request's selector on product name and memory
(``startsWith`` on an attribute, ``compareTo`` of a capacity quantity), evaluated on 10,000
devices by the metered interpreter — the price of the cost limit.

    python -m bench.dra
"""

from __future__ import annotations

import argparse
import time
from decimal import Decimal

from bench.docs import publish_table
from gpufleet.dra.allocator import Allocator, Unsatisfiable
from gpufleet.dra.cel import compile_selector
from gpufleet.model.devices import Claim, Constraint, Device, DeviceClass, Pool, Request, Subrequest

SECTION = "dra"
DRIVER = "gpu.nvidia.com"
CLASSES = {"gpu.nvidia.com": DeviceClass("gpu.nvidia.com", (f'device.driver == "{DRIVER}"',))}


def cluster(nodes: int, per_node: int, numa_size: int) -> list[Pool]:
    pools = []
    for n in range(nodes):
        node = f"node-{n:04d}"
        devices = tuple(
            Device(
                DRIVER,
                node,
                f"gpu-{g}",
                node,
                attributes={
                    f"{DRIVER}/numa": g // numa_size,
                    f"{DRIVER}/productName": "NVIDIA H100 80GB HBM3",
                },
                capacity={f"{DRIVER}/memory": Decimal(80 * 2**30)},
            )
            for g in range(per_node)
        )
        pools.append(Pool(DRIVER, node, 1, 1, 1, devices))
    return pools


def numa_claim(count: int) -> Claim:
    request = Request("gpus", (Subrequest("gpus", "gpu.nvidia.com", (), count),))
    return Claim("ml/train", (request,), (Constraint(match_attribute=f"{DRIVER}/numa"),))


def every_node(allocator: Allocator, claim: Claim, nodes: int) -> tuple[float, int]:
    started = time.perf_counter()
    satisfied = sum(
        not isinstance(allocator.allocate([claim], f"node-{n:04d}"), Unsatisfiable)
        for n in range(nodes)
    )
    return time.perf_counter() - started, satisfied


def throughput(pods: int, nodes: int) -> tuple[float, int]:
    allocator = Allocator(cluster(nodes, 8, 4), CLASSES)
    claim = Request("gpu", (Subrequest("gpu", "gpu.nvidia.com"),))
    free = {f"node-{n:04d}": 8 for n in range(nodes)}
    started = time.perf_counter()
    allocated = 0
    for p in range(pods):
        for node, left in free.items():
            if not left:
                continue
            result = allocator.allocate([Claim(f"ml/p{p}", (claim,))], node)
            if not isinstance(result, Unsatisfiable):
                allocator.inventory.commit(result)
                free[node] -= 1
                allocated += 1
                break
    return time.perf_counter() - started, allocated


SELECTOR = (
    f'device.attributes["{DRIVER}"].productName.startsWith("NVIDIA H100") && '
    f'device.capacity["{DRIVER}"].memory.compareTo(quantity("40Gi")) >= 0'
)


def selector_rate(devices: int) -> tuple[float, int]:
    """Seconds to evaluate ``SELECTOR`` on ``devices`` devices (each its own memory, so no
    device map is shared), and how many it selected."""
    selector = compile_selector(SELECTOR)
    pool = [
        Device(DRIVER, "p", f"gpu-{d}", capacity={f"{DRIVER}/memory": Decimal(40 * 2**30 + d)},
               attributes={f"{DRIVER}/productName": "NVIDIA H100 80GB HBM3"})
        for d in range(devices)
    ]  # fmt: skip
    started = time.perf_counter()
    selected = sum(selector.matches(device) for device in pool)
    return time.perf_counter() - started, selected


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()

    nodes = 200
    allocator = Allocator(cluster(nodes, 64, 8), CLASSES)
    allocator.allocate([numa_claim(1)], "node-0000")  # compile the selector once
    unsat_s, unsat_ok = every_node(allocator, numa_claim(9), nodes)
    sat_s, sat_ok = every_node(allocator, numa_claim(8), nodes)
    tp_s, tp_pods = throughput(1000, 500)
    cel_s, cel_ok = selector_rate(10_000)
    lines = [
        "| case | nodes | satisfied | seconds | per node |",
        "|---|---|---|---|---|",
        f"| (a) 9 GPUs, matchAttribute NUMA (8 per NUMA node), 64 devices per node | {nodes} "
        f"| {unsat_ok} | {unsat_s:.3f} | {1000 * unsat_s / nodes:.2f} ms |",
        f"| (b) 8 GPUs, same constraint | {nodes} | {sat_ok} | {sat_s:.3f} | "
        f"{1000 * sat_s / nodes:.2f} ms |",
        "",
        f"(a) takes {unsat_s / sat_s:.2f} x the time of (b).",
        "",
        f"(c) {tp_pods} pods with one single-GPU claim on 500 nodes x 8 GPUs: {tp_s:.2f} s, "
        f"{tp_pods / tp_s:,.0f} pods/s.",
        "",
        f"(d) a CEL selector on 10,000 devices ({cel_ok:,} selected): {cel_s:.2f} s, "
        f"{cel_ok / cel_s:,.0f} evaluations/s.",
    ]
    return publish_table("bench.dra", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
