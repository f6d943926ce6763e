"""Watch events per second into the cluster cache, and the cycle that follows them.

The cluster: ``--nodes`` nodes of 8 H100s (1,000 and 5,000 by default; 128 CPUs, 1 TiB,
racks of 16), each running 8 pods — 4 of one GPU, 4 CPU-only — so 40,000 running pods at
5,000 nodes, half the GPUs busy, in 10 queues. The stream: ``--events`` watch events
(100,000 by default) drawn from a seeded generator — a pending pod created (30%; of one
GPU or CPU-only, half and half, as the running ones), a running pod deleted (30%), a
binding the cycle made seen bound (30%, while there are any), a node's labels changed
(10%) — with a scheduling cycle (policy ``gpufleet``, bindings assumed in the cache)
after every 100 events. Then ``--probes`` times: one new pending pod, one cycle, its
binding confirmed.

It prints the events applied per second (cycles apart), the cycle times, the time of a
cycle for one new pending pod (median and p99), the time to build the cache from scratch
(every object applied to an empty cache, then its ledger and victim pool), and the median
time from a node joining or leaving to the next session's ledger and victim pool, beside a
rebuild of both from the objects (what a node joining cost before). The cost of an event
does not depend on the cluster's size: compare the rows.

    python -m bench.events [--nodes 1000 --nodes 5000] [--events 100000] [--probes 200]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from dataclasses import dataclass, field, replace

import numpy as np

from bench.docs import publish_table
from gpufleet.compose import COMPONENTS
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import NON_PREEMPTIBLE_PRIORITY, PodInfo, QueueSpec, vector
from gpufleet.scheduler.cycle.components import Components
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Session
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import Event

SECTION = "events"
GPUS = 8
QUEUES = 10
CYCLE_EVERY = 100
JOINS = 10
"""Nodes that join and leave again at the end."""
CONFIG = CycleConfig(records=False)
GPU_POD = PodSpec("", 2_000, 16_384, 1, MILLI)
CPU_POD = PodSpec("", 2_000, 8_192)


def nodes_of(count: int) -> list[NodeSpec]:
    return [
        NodeSpec(
            f"node-{i:05d}",
            128_000,
            1_048_576,
            GPUS,
            "NVIDIA-H100-80GB-HBM3",
            {"topology.kubernetes.io/rack": f"rack-{i // 16:04d}"},
        )
        for i in range(count)
    ]


def running_pods(nodes: list[NodeSpec]) -> list[PodInfo]:
    pods = []
    for n, node in enumerate(nodes):
        for k in range(8):
            key = f"run/p{n:05d}-{k}"
            gpu = k < 4
            spec = replace(GPU_POD if gpu else CPU_POD, name=key)
            pods.append(
                PodInfo(
                    key,
                    spec,
                    queue=f"team-{(n + k) % QUEUES}",
                    node=node.name,
                    gpus=(k,) if gpu else (),
                    started=0.0,
                )
            )
    return pods


def queues(nodes: int) -> list[QueueSpec]:
    quota = nodes * GPUS / QUEUES
    return [
        QueueSpec(f"team-{q}", quota=vector(quota), quota_set=(True, False, False))
        for q in range(QUEUES)
    ]


def build(nodes: list[NodeSpec], pods: list[PodInfo], nodes_count: int) -> ClusterCache[Components]:
    """Every object applied to an empty cache, then its ledger and victim pool."""
    cache = ClusterCache(
        NON_PREEMPTIBLE_PRIORITY, components=COMPONENTS, workload=[GPU_POD, CPU_POD] * 4
    )
    cache.apply_all(Event("ADDED", "Node", n) for n in nodes)
    cache.apply_all(Event("ADDED", "Queue", q) for q in queues(nodes_count))
    cache.apply_all(Event("ADDED", "Pod", p) for p in pods)
    cache.pool()
    return cache


@dataclass
class Stream:
    """The seeded event stream and what it needs to know of the cluster."""

    cache: ClusterCache[Components]
    rng: np.random.Generator
    running: list[str]
    nodes: list[NodeSpec]
    now: float = 1_000.0
    serial: int = 0
    seen: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)
    """Bindings the cycles made, to be seen bound (name, node, GPUs)."""
    cycle_s: list[float] = field(default_factory=list)

    def event(self) -> Event:
        draw = self.rng.random()
        while self.seen and self.seen[-1][0] not in self.cache.pods:
            self.seen.pop()  # deleted before its bind was seen
        if self.seen and draw < 0.3:
            key, node, gpus = self.seen.pop()
            pod = self.cache.pods[key]
            return Event("MODIFIED", "Pod", replace(pod, node=node, gpus=gpus, started=self.now))
        if draw < 0.6 and self.running:
            i = int(self.rng.integers(len(self.running)))
            self.running[i], self.running[-1] = self.running[-1], self.running[i]
            return Event("DELETED", "Pod", self.cache.pods[self.running.pop()])
        if draw < 0.9:
            return Event("ADDED", "Pod", self.new_pod())
        i = int(self.rng.integers(len(self.nodes)))
        labels = dict(self.nodes[i].labels)
        if labels.pop("example.com/maintenance", None) is None:
            labels["example.com/maintenance"] = "true"
        self.nodes[i] = replace(self.nodes[i], labels=labels)
        return Event("MODIFIED", "Node", self.nodes[i])

    def new_pod(self, *, gpu: bool | None = None) -> PodInfo:
        """A pending pod: of one GPU or CPU-only, half and half as the running ones, so
        that the cluster stays about as full as it started."""
        self.serial += 1
        key = f"new/p{self.serial:07d}"
        queue = f"team-{int(self.rng.integers(QUEUES))}"
        if gpu is None:
            gpu = bool(self.rng.random() < 0.5)
        shape = GPU_POD if gpu else CPU_POD
        return PodInfo(key, replace(shape, name=key), queue=queue, created=self.now)

    def cycle(self) -> None:
        self.now += 1.0
        started = time.perf_counter()
        result = Session(self.cache, CONFIG, self.now).run()
        self.cycle_s.append(time.perf_counter() - started)
        for binding in result.bindings:
            self.seen.append((binding.pod, binding.node, binding.gpus or ()))
            self.running.append(binding.pod)


def measure(nodes_count: int, events: int, probes: int, seed: int) -> dict[str, float]:
    nodes = nodes_of(nodes_count)
    pods = running_pods(nodes)
    started = time.perf_counter()
    cache = build(nodes, pods, nodes_count)
    build_s = time.perf_counter() - started
    stream = Stream(cache, np.random.default_rng(seed), [p.key for p in pods], list(nodes))
    stream.cycle()  # the first cycle builds the policy's per-node caches
    stream.cycle_s.clear()
    apply_s = 0.0
    for done in range(1, events + 1):
        event = stream.event()
        t = time.perf_counter()
        cache.apply(event)
        apply_s += time.perf_counter() - t
        if done % CYCLE_EVERY == 0:
            stream.cycle()
    for key, node, gpus in stream.seen:  # settle: every binding seen bound
        if key in cache.pods:
            seen = replace(cache.pods[key], node=node, gpus=gpus)
            cache.apply(Event("MODIFIED", "Pod", seen))
    for pod in cache.pending():  # and nothing else waits when the probes start
        cache.apply(Event("DELETED", "Pod", pod))
    probe_s = []
    for _ in range(probes):
        new = stream.new_pod(gpu=True)
        cache.apply(Event("ADDED", "Pod", new))
        stream.now += 1.0
        t = time.perf_counter()
        result = Session(cache, CONFIG, stream.now).run()
        probe_s.append(time.perf_counter() - t)
        assert [b.pod for b in result.bindings] == [new.key], "room for one more pod"
        binding = result.bindings[0]
        pod = cache.pods[binding.pod]
        seen = replace(pod, node=binding.node, gpus=binding.gpus or ())
        cache.apply(Event("MODIFIED", "Pod", seen))
    join_s, rebuild_s = joins(cache, nodes, JOINS)
    cycles = np.array(stream.cycle_s) * 1000
    probe = np.array(probe_s) * 1000
    print(
        f"{nodes_count} nodes: {events / apply_s:,.0f} events/s, cycles "
        f"{np.median(cycles):.1f} ms, one pod {np.median(probe):.2f} ms, build {build_s:.2f} s, "
        f"node joins {join_s * 1000:.0f} ms (rebuild {rebuild_s * 1000:.0f} ms)",
        file=sys.stderr,
    )
    return {
        "pods": len(pods),
        "events_per_s": events / apply_s,
        "us_per_event": apply_s / events * 1e6,
        "cycles": len(cycles),
        "cycle_median_ms": float(np.median(cycles)),
        "probe_median_ms": float(np.median(probe)),
        "probe_p99_ms": float(np.percentile(probe, 99)),
        "build_s": build_s,
        "join_ms": join_s * 1000,
        "rebuild_ms": rebuild_s * 1000,
    }


def joins(
    cache: ClusterCache[Components], nodes: list[NodeSpec], count: int
) -> tuple[float, float]:
    """Median seconds from a node joining (or leaving) to the ledger and victim pool the
    next session reads, and of a rebuild from the objects, as every node joining cost
    before the ledger copied the rows of the nodes that stay."""
    moved, rebuilt = [], []
    for i in range(count):
        node = replace(nodes[i % len(nodes)], name=f"joined-{i:04d}")
        for event in (Event("ADDED", "Node", node), Event("DELETED", "Node", node)):
            cache.apply(event)
            t = time.perf_counter()
            cache.pool()
            moved.append(time.perf_counter() - t)
        cache.accounting.invalidate()
        t = time.perf_counter()
        cache.pool()
        rebuilt.append(time.perf_counter() - t)
    return float(np.median(moved)), float(np.median(rebuilt))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--probes", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    lines = [
        f"{args.events:,} watch events into the cluster cache, a cycle (policy gpufleet) "
        f"after every {CYCLE_EVERY}; then {args.probes} cycles of one new pending pod each "
        f"(Python {platform.python_version()}, numpy {np.__version__}).",
        "",
        "| nodes | running pods | events/s | µs/event | cycles | cycle median ms | "
        "one-pod cycle median ms | one-pod cycle p99 ms | build from scratch s | "
        "node joins or leaves ms | ledger rebuild ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for count in args.nodes or [1000, 5000]:
        m = measure(count, args.events, args.probes, args.seed)
        lines.append(
            f"| {count:,} | {int(m['pods']):,} | {m['events_per_s']:,.0f} | "
            f"{m['us_per_event']:.1f} | {int(m['cycles']):,} | {m['cycle_median_ms']:.1f} | "
            f"{m['probe_median_ms']:.2f} | {m['probe_p99_ms']:.2f} | {m['build_s']:.2f} | "
            f"{m['join_ms']:.0f} | {m['rebuild_ms']:.0f} |"
        )
    return publish_table("bench.events", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    raise SystemExit(main())
