"""Soak and throughput of the live scheduler against the API emulator, on loopback.

**Soak** (``--soak-nodes`` 500 nodes of 8 GPUs, ``--soak-pods`` 5,000 pods): pods of 1, 2,
4 or 8 GPUs and gangs of 2-8 pods arrive over ``--arrive-s`` seconds; each bound pod runs for
a few seconds and is deleted (it completed). Two replicas elect a leader on a Lease; the
leader is killed (its task cancelled: no clean stop, no Lease released) ``--restarts`` times
and a new replica started, so that leadership moves and every new leader lists the cluster
afresh. Faults: every 1,000 writes all watches are dropped and the next ones answered 410;
2% of binds are answered 500 and 1% are applied with their reply dropped. It stops by itself
once every pod has run, and prints: pods bound, pods that fit but stayed unbound at the end
(must be 0), GPUs ever double-booked (checked from the emulator's own objects every 0.2 s;
must be 0), binds per second end to end, scheduling latency from a pod's creation to its
bind (p50, p99), restarts survived, peak memory.

**Throughput** (``--nodes`` 5,000 nodes, ``--pending`` 10,000 pods, no faults): the rate at
which one scheduler binds a backlog, against kube-scheduler's scheduler_perf figures
(680-810 pods/s at 5,000 nodes) and against the emulator's own ceiling, measured in the same
run: the rate at which it accepts bare binding POSTs from one client.

The emulator runs in this process (a thread): both sides share one interpreter, so the
figures are a floor for a real API server.

    python -m bench.live [--soak-pods 5000] [--restarts 20] [--nodes 5000] [--pending 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import platform
import random
import resource
import statistics
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from tests.apiserver.server import Emulator

from bench.docs import publish_table
from gpufleet.kube.leader import LeaseConfig
from gpufleet.kube.serve import Replica, ServeOptions

SECTION = "live"
GPUS = 8
SCHEDULER_PAPER = "680-810"


@dataclass
class Soak:
    bound: int = 0
    unbound_fit: int = 0
    double_booked: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    restarts: int = 0
    terms: int = 0


def _node(name: str) -> dict[str, Any]:
    allocatable = {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": str(GPUS), "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": allocatable}}


def _pod(name: str, gpus: int, group: str | None) -> dict[str, Any]:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "1"}}
    container = {"name": "main", "image": "x", "resources": resources}
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"schedulerName": "gpufleet", "containers": [container]},
    }


def _workload(count: int, rng: random.Random) -> list[tuple[str | None, list[tuple[str, int]]]]:
    """Jobs of ``count`` pods in all: single pods (1, 2, 4 or 8 GPUs) and gangs of 2-8."""
    jobs: list[tuple[str | None, list[tuple[str, int]]]] = []
    made = 0
    while made < count:
        if rng.random() < 0.2:
            size = min(rng.randint(2, 8), count - made)
            gpus = rng.choice((1, 2, 4))
            name = f"gang-{len(jobs)}"
            jobs.append((name, [(f"{name}-{i}", gpus) for i in range(size)]))
            made += size
        else:
            jobs.append((None, [(f"pod-{len(jobs)}", rng.choice((1, 1, 2, 4, 8)))]))
            made += 1
    return jobs


def _double_booked(emulator: Emulator) -> int:
    held: Counter[tuple[str, str]] = Counter()
    pods, _ = emulator.store.list(emulator.store.resource("", "v1", "pods"))
    for pod in pods:
        node = pod["spec"].get("nodeName")
        gpus = (pod["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
        if node and gpus:
            held.update((node, g) for g in gpus.split(","))
    return sum(1 for n in held.values() if n > 1)


async def _soak(args: argparse.Namespace) -> Soak:  # noqa: PLR0915 (one scenario, read top to bottom)
    rng = random.Random(args.seed)
    emulator = Emulator(seed=args.seed, bookmark_interval=1.0, window=5000).start()
    out = Soak()
    store = emulator.store
    pods_r = store.resource("", "v1", "pods")
    groups_r = store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    for i in range(args.soak_nodes):
        store.create(store.resource("", "v1", "nodes"), "", _node(f"node-{i:04d}"))
    jobs = _workload(args.soak_pods, rng)
    created: dict[str, float] = {}
    bound_at: dict[str, float] = {}
    done: set[str] = set()
    lease = LeaseConfig("kube-system", "gpufleet", "", 3.0, 2.0, 0.5)
    options = ServeOptions(period_s=0.5, batch_s=0.02, seed=args.seed)
    started = time.monotonic()
    try:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=30) as http:
            replicas: list[tuple[Replica, asyncio.Task[None], asyncio.Event]] = []

            def start(identity: str) -> None:
                config = LeaseConfig(lease.namespace, lease.name, identity, 3.0, 2.0, 0.5)
                replica = Replica(http, options, config)
                stop = asyncio.Event()
                replicas.append((replica, asyncio.create_task(replica.run(stop)), stop))

            start("replica-0")
            start("replica-1")

            async def arrive() -> None:
                pace = args.arrive_s / max(len(jobs), 1)
                for group, members in jobs:
                    if group is not None:
                        spec = {"minMember": len(members)}
                        store.create(
                            groups_r, "default", {"metadata": {"name": group}, "spec": spec}
                        )
                    for name, gpus in members:
                        store.create(pods_r, "default", _pod(name, gpus, group))
                        created[name] = time.monotonic()
                    await asyncio.sleep(pace)

            async def complete() -> None:
                """A job runs 1-4 s once all its pods are bound, then its pods are deleted
                (it completed): a gang's pods finish together."""
                ends: dict[int, float] = {}
                while len(done) < len(created) or len(created) < args.soak_pods:
                    now = time.monotonic()
                    listed, _ = store.list(pods_r, "default")
                    on = {p["metadata"]["name"] for p in listed if p["spec"].get("nodeName")}
                    for name in on:
                        bound_at.setdefault(name, now)
                    for j, (_, members) in enumerate(jobs):
                        names = [m for m, _ in members]
                        if j not in ends and all(m in on for m in names):
                            ends[j] = now + rng.uniform(1.0, 4.0)
                    for j, end in list(ends.items()):
                        if end <= now:
                            del ends[j]
                            for name, _ in jobs[j][1]:
                                with contextlib.suppress(Exception):
                                    store.delete(pods_r, "default", name)
                                done.add(name)
                    await asyncio.sleep(0.1)

            async def faults() -> None:
                """Every 1,000 writes a forced 410; of every 100 binds, 2 answered 500 and 1
                applied with its reply dropped; the GPUs checked every 0.2 s."""
                writes = armed = 0
                while len(done) < args.soak_pods:
                    total = len(store.writes)
                    if total - writes >= 1000:
                        writes = total
                        emulator.faults.expire_next_watch(len(replicas) * 6)
                        emulator.faults.drop_watches()
                    binds = sum(1 for w in store.writes if w.verb == "bind")
                    if binds - armed >= 100:
                        armed = binds
                        fail = r"/binding$"
                        emulator.faults.fail(2, code=500, method="POST", path=fail)
                        emulator.faults.drop_reply(1)
                    out.double_booked = max(out.double_booked, _double_booked(emulator))
                    await asyncio.sleep(0.2)

            async def kill() -> None:
                gap = args.arrive_s / (args.restarts + 1)
                for k in range(args.restarts):
                    await asyncio.sleep(gap)
                    leader = next((r for r in replicas if r[0].live is not None), None)
                    if leader is None:
                        continue
                    leader[1].cancel()  # killed: no clean stop, the Lease is not released
                    with contextlib.suppress(asyncio.CancelledError):
                        await leader[1]
                    replicas.remove(leader)
                    out.restarts += 1
                    start(f"replica-{k + 2}")

            tasks = [asyncio.create_task(c()) for c in (complete, faults, kill)]
            await arrive()
            deadline = time.monotonic() + args.soak_timeout_s
            while len(done) < args.soak_pods and time.monotonic() < deadline:
                await asyncio.sleep(0.2)
            for task in tasks:
                task.cancel()
            out.seconds = time.monotonic() - started
            out.terms = sum(r[0].terms for r in replicas) + out.restarts
            for _, _task, stop in replicas:
                stop.set()
            await asyncio.gather(*(r[1] for r in replicas), return_exceptions=True)
    finally:
        out.double_booked = max(out.double_booked, _double_booked(emulator))
        listed, _ = store.list(pods_r, "default")
        out.unbound_fit = sum(1 for p in listed if not p["spec"].get("nodeName"))
        emulator.stop()
    out.bound = len(bound_at)
    out.latencies = [bound_at[n] - created[n] for n in bound_at if n in created]
    return out


async def _throughput(args: argparse.Namespace) -> tuple[float, float, int]:
    """Binds per second of one scheduler over a backlog, and the emulator's own ceiling."""
    emulator = Emulator(seed=args.seed, bookmark_interval=5.0, window=50_000).start()
    store = emulator.store
    pods_r = store.resource("", "v1", "pods")
    try:
        for i in range(args.nodes):
            store.create(store.resource("", "v1", "nodes"), "", _node(f"node-{i:05d}"))
        ceiling_pods = 2000
        for i in range(ceiling_pods):
            store.create(pods_r, "default", _pod(f"bare-{i}", 0, None))
        async with httpx.AsyncClient(base_url=emulator.url, timeout=30) as http:
            t = time.monotonic()
            for i in range(ceiling_pods):
                body = {
                    "metadata": {"name": f"bare-{i}"},
                    "target": {"kind": "Node", "name": "node-00000"},
                }
                await http.post(f"/api/v1/namespaces/default/pods/bare-{i}/binding", json=body)
            ceiling = ceiling_pods / (time.monotonic() - t)
            for i in range(ceiling_pods):
                store.delete(pods_r, "default", f"bare-{i}")
            rng = random.Random(args.seed)
            for i in range(args.pending):
                store.create(pods_r, "default", _pod(f"p-{i}", rng.choice((1, 1, 2, 4)), None))
            replica = Replica(http, ServeOptions(period_s=0.5, batch_s=0.05), None)
            stop = asyncio.Event()
            task = asyncio.create_task(replica.run(stop))
            while replica.live is None or not replica.live.ready:
                await asyncio.sleep(0.05)
            t = time.monotonic()
            deadline = t + args.throughput_timeout_s
            live = replica.live
            while live.stats.bound < args.pending and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            rate = live.stats.bound / (time.monotonic() - t)
            bound = live.stats.bound
            stop.set()
            await task
        return rate, ceiling, bound
    finally:
        emulator.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak-nodes", type=int, default=500)
    parser.add_argument("--soak-pods", type=int, default=5000)
    parser.add_argument("--arrive-s", type=float, default=60.0)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--soak-timeout-s", type=float, default=200.0)
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--pending", type=int, default=10000)
    parser.add_argument("--throughput-timeout-s", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    soak = asyncio.run(_soak(args))
    rate, ceiling, bound = asyncio.run(_throughput(args))
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lat = sorted(soak.latencies) or [0.0]
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    header = (
        "| run | nodes | pods | bound | fit but unbound | GPUs double-booked | binds/s "
        "| latency p50 s | latency p99 s | restarts | seconds |"
    )
    soak_row = (
        f"| soak with faults | {args.soak_nodes:,} | {args.soak_pods:,} | {soak.bound:,} "
        f"| {soak.unbound_fit} | {soak.double_booked} | {soak.bound / soak.seconds:,.0f} "
        f"| {statistics.median(lat):.2f} | {p99:.2f} | {soak.restarts} | {soak.seconds:.0f} |"
    )
    throughput_row = (
        f"| throughput | {args.nodes:,} | {args.pending:,} | {bound:,} | {args.pending - bound} "
        f"| - | {rate:,.0f} | - | - | 0 | - |"
    )
    lines = [
        f"Live scheduler against the API emulator on loopback (Python "
        f"{platform.python_version()}).",
        "",
        header,
        "|---|---|---|---|---|---|---|---|---|---|---|",
        soak_row,
        throughput_row,
        "",
        f"Throughput: {rate:,.0f} binds/s at {args.nodes:,} nodes, against kube-scheduler's "
        f"scheduler_perf {SCHEDULER_PAPER} pods/s and the emulator's own ceiling of "
        f"{ceiling:,.0f} bare binding POSTs/s from one client in this run. Peak memory "
        f"{peak_mib:,.0f} MiB.",
    ]
    return publish_table("bench.live", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    sys.exit(main())
