"""Soak and throughput of the live scheduler against the API emulator, on loopback.

**Soak** (``--soak-nodes`` 500 nodes of 8 GPUs, ``--soak-pods`` 5,000 pods): pods of 1, 2,
4 or 8 GPUs and gangs of 2-8 pods arrive over ``--arrive-s`` seconds; each job runs for a few
seconds once bound and its pods are deleted (it completed). Two replicas of ``gpufleet
serve`` — processes of their own, as a platform team runs them, connected through a
kubeconfig — elect a leader on a Lease; the leader is killed with SIGKILL (no clean stop, no
Lease released) ``--restarts`` times and a new replica started, so that leadership moves and
every new leader lists the cluster afresh. Faults: every 1,000 writes all watches are dropped
and the next ones answered 410; 2% of binds are answered 500 and 1% are applied with their
reply dropped. The replicas run as the Helm chart's ServiceAccount, with only what its
rendered ClusterRole and Role grant (the emulator enforces RBAC; without helm, from the dev
extra's kubectl wheel, the soak runs unrestricted and says so). It stops by itself once
every pod has run, and prints: pods bound, pods that
fit but stayed unbound at the end (must be 0), GPUs ever double-booked (from the emulator's
own write log, in the order it applied the writes; must be 0), binds per second end to end,
scheduling latency from a pod's creation to its bind (p50, p99), restarts survived, peak
memory of the scheduler processes and of the emulator, and the requests RBAC refused (must
be 0).

**Throughput** (``--nodes`` 1,000 and 5,000 nodes, ``--pending`` 5,000 pods, no faults),
for each ``--workload``: pods of one GPU, and gangs of 8 such pods (a PodGroup each). One
scheduler process (``--cpu-phases``) is started and ready (its first list is in its cache);
then the whole backlog is created at once. Reported: binds per second from the first pod
created to the last bind, against kube-scheduler's scheduler_perf figures (680-810 pods/s at
5,000 nodes) and against the emulator's own ceiling, measured in the same run: the rate at
which it accepts bare binding POSTs from one client process with as many in flight as the
scheduler keeps (16), through the scheduler's own lean writes (so that the rate is the
emulator's own). And the scheduler's CPU per bound pod: its process tree's CPU time
(user and system, the kernel's accounting in ``/proc``, children included) from ready until
the emulator has seen no write for a second, split by the scheduler's own
``gpufleet_cpu_seconds_total{phase}`` over the same span. The CPU a run takes moves with the
machine's load by 10-25% between runs of the same code, so each row is run ``--repeat`` times
(3) and the run of median CPU per pod is reported, with every run's figure beside it.

The emulator runs in this process (a thread, with the driver that creates and completes the
pods): it is slower than a real API server, so the rates are a floor.

    python -m bench.live [--no-soak] [--nodes 1000 5000] [--workload "1-GPU pods"] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import os
import platform
import random
import resource
import signal
import socket
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from tests.apiserver import kubectl
from tests.apiserver.rbac import Authorizer
from tests.apiserver.server import Emulator
from tests.deploy import chart

from bench.docs import publish_table
from gpufleet.kube.transport import AiohttpTransport, ApiClient, send_json
from gpufleet.kube.write.workers import at_most

SECTION = "live"
GPUS = 8
SCHEDULER_PAPER = "680-810"
TOKEN = "gpufleet-service-account"


@dataclass
class Soak:
    bound: int = 0
    unbound_fit: int = 0
    double_booked: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list)
    restarts: int = 0
    unread: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    rbac: str = ""
    """How RBAC was enforced, in words."""
    denials: int = 0


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


class Bindings:
    """What the emulator's own write log says was bound: each pod's first bind (its time, on
    this process's clock, within the scan period) and the GPUs every bound pod holds, so that
    a GPU given to a second pod while the first still holds it is counted — exactly, in the
    order the emulator applied the writes."""

    def __init__(self, emulator: Emulator) -> None:
        self.store = emulator.store
        self.pods_r = self.store.resource("", "v1", "pods")
        self.seen = 0
        self.at: dict[str, float] = {}
        self.holds: dict[tuple[str, str], str] = {}
        self.held_by: dict[str, list[tuple[str, str]]] = {}
        self.double_booked: set[tuple[str, str]] = set()
        self.unread = 0
        """Binds of pods deleted before the scan read their GPUs (none expected: pods run
        for a second or more)."""

    def scan(self) -> None:
        writes = self.store.writes[self.seen :]
        self.seen += len(writes)
        now = time.monotonic()
        for write in writes:
            if write.verb == "delete" and write.resource == "pods":
                for gpu in self.held_by.pop(write.name, []):
                    if self.holds.get(gpu) == write.name:
                        del self.holds[gpu]
            elif write.verb == "bind":  # pods/binding
                self.at.setdefault(write.name, now)
                self._hold(write.name)

    def _hold(self, name: str) -> None:
        try:
            pod = self.store.get(self.pods_r, "default", name)
        except Exception:  # noqa: BLE001 (deleted since: its GPUs can no longer be read)
            self.unread += 1
            return
        node = pod["spec"].get("nodeName")
        gpus = (pod["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
        if not node or not gpus:
            return
        for gpu in ((node, g) for g in gpus.split(",")):
            if gpu in self.holds and self.holds[gpu] != name:
                self.double_booked.add(gpu)
            self.holds[gpu] = name
            self.held_by.setdefault(name, []).append(gpu)


class Serve:
    """One ``gpufleet serve`` process (a replica), as a platform team runs it: its own
    interpreter, a kubeconfig, killed with SIGKILL as a crash would."""

    def __init__(self, kubeconfig: Path, *flags: str) -> None:
        self.command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
        self.port = _free_port()
        self.command += ["--bind-address", "127.0.0.1", "--secure-port", str(self.port), *flags]
        self.leading = False
        self.tail: list[str] = []
        self.process: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> Serve:
        env = {**os.environ, "KUBECONFIG": os.devnull}
        self.process = await asyncio.create_subprocess_exec(
            *self.command,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self._reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.process is not None
        assert self.process.stderr is not None
        async for raw in self.process.stderr:
            line = raw.decode(errors="replace").rstrip()
            self.tail = [*self.tail[-40:], line]
            if "became leader" in line:
                self.leading = True
            elif "lost leadership" in line:
                self.leading = False

    async def ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        # its self-signed certificate, and /readyz is served without credentials
        async with httpx.AsyncClient(verify=False) as http:
            while time.monotonic() < deadline:
                if self.process is not None and self.process.returncode is not None:
                    break
                with contextlib.suppress(httpx.HTTPError):
                    if (await http.get(f"https://127.0.0.1:{self.port}/readyz")).status_code == 200:
                        return
                await asyncio.sleep(0.1)
        raise RuntimeError("gpufleet serve never became ready:\n" + "\n".join(self.tail))

    largest_mib = 0.0
    """The peak resident memory of the largest scheduler process any Serve ran."""

    def _peak(self) -> None:
        """Note this scheduler's peak resident memory (the kernel's VmHWM) before it ends."""
        assert self.process is not None
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    Serve.largest_mib = max(Serve.largest_mib, int(line.split()[1]) / 1024)

    async def kill(self) -> None:
        """SIGKILL: no clean stop, the Lease is not released."""
        if self.process is not None and self.process.returncode is None:
            self._peak()
            self.process.kill()
            await self.process.wait()
        self.leading = False

    async def stop(self) -> None:
        if self.process is not None and self.process.returncode is None:
            self._peak()
            self.process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.process.wait(), 30)
            except TimeoutError:
                await self.kill()
        if self._reader is not None:
            await self._reader


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _chart_rbac(workdir: Path) -> tuple[Authorizer | None, str]:
    """RBAC as the chart renders it for the ServiceAccount's token, and how it is enforced in
    words; None (unrestricted) where helm cannot be had."""
    why = kubectl.unavailable()
    if why:
        return None, f"not enforced: helm is not available ({why})"
    rbac = chart.authorizer(chart.render(chart.helm(workdir / "helm")), TOKEN)
    return rbac, f"enforced from the chart ({len(rbac.rules)} rules)"


async def _soak(args: argparse.Namespace, workdir: Path) -> Soak:  # noqa: PLR0915 (one scenario, read top to bottom)
    rng = random.Random(args.seed)
    rbac, enforced = _chart_rbac(workdir)
    emulator = Emulator(seed=args.seed, bookmark_interval=1.0, window=5000, rbac=rbac).start()
    out = Soak(rbac=enforced)
    store = emulator.store
    namespaces = store.resource("", "v1", "namespaces")
    store.create(namespaces, "", {"metadata": {"name": chart.NAMESPACE}})
    pods_r = store.resource("", "v1", "pods")
    groups_r = store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    for i in range(args.soak_nodes):
        store.create(store.resource("", "v1", "nodes"), "", _node(f"node-{i:04d}"))
    jobs = _workload(args.soak_pods, rng)
    created: dict[str, float] = {}
    done: set[str] = set()
    kubeconfig = emulator.kubeconfig(workdir / "kubeconfig", TOKEN if rbac else "")
    lease = ["--leader-elect-resource-namespace", chart.NAMESPACE]  # the chart's Role is there
    lease += ["--leader-elect-lease-duration", "3", "--leader-elect-renew-deadline", "2"]
    lease += ["--leader-elect-retry-period", "0.5", "--period", "0.5"]
    bindings = Bindings(emulator)
    replicas: list[Serve] = []
    started = time.monotonic()
    try:
        replicas = [await Serve(kubeconfig, *lease).start() for _ in range(2)]

        async def arrive() -> None:
            pace = args.arrive_s / max(len(jobs), 1)
            for group, members in jobs:
                if group is not None:
                    spec = {"minMember": len(members)}
                    store.create(groups_r, "default", {"metadata": {"name": group}, "spec": spec})
                for name, gpus in members:
                    store.create(pods_r, "default", _pod(name, gpus, group))
                    created[name] = time.monotonic()
                await asyncio.sleep(pace)

        async def complete() -> None:
            """A job runs 1-4 s once all its pods are bound, then its pods are deleted (it
            completed): a gang's pods finish together."""
            ends: dict[int, float] = {}
            waiting = set(range(len(jobs)))
            while len(done) < len(created) or len(created) < args.soak_pods:
                bindings.scan()
                now = time.monotonic()
                for j in sorted(waiting):
                    if all(m in bindings.at for m, _ in jobs[j][1]):
                        waiting.discard(j)
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
            applied with its reply dropped."""
            writes = armed = binds = seen = 0
            while len(done) < args.soak_pods:
                total = len(store.writes)
                binds += sum(1 for w in store.writes[seen:total] if w.verb == "bind")
                seen = total
                if total - writes >= 1000:
                    writes = total
                    emulator.faults.expire_next_watch(len(replicas) * 12)
                    emulator.faults.drop_watches()
                if binds - armed >= 100:
                    armed = binds
                    emulator.faults.fail(2, code=500, method="POST", path=r"/binding$")
                    emulator.faults.drop_reply(1)
                await asyncio.sleep(0.2)

        async def kill() -> None:
            gap = args.arrive_s / (args.restarts + 1)
            for _ in range(args.restarts):
                await asyncio.sleep(gap)
                while (leader := next((r for r in replicas if r.leading), None)) is None:
                    await asyncio.sleep(0.1)  # the last kill's failover is still under way
                await leader.kill()
                replicas.remove(leader)
                out.restarts += 1
                replicas.append(await Serve(kubeconfig, *lease).start())

        killing = asyncio.create_task(kill())
        tasks = [asyncio.create_task(c()) for c in (complete, faults)]
        await arrive()
        deadline = time.monotonic() + args.soak_timeout_s
        while (len(done) < args.soak_pods or not killing.done()) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        tasks.append(killing)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        out.seconds = time.monotonic() - started
    finally:
        for replica in replicas:
            await replica.stop()
        bindings.scan()
        listed, _ = store.list(pods_r, "default")
        out.unbound_fit = sum(1 for p in listed if not p["spec"].get("nodeName"))
        out.faults = dict(emulator.faults.taken)
        out.denials = len(rbac.denied) if rbac is not None else 0
        emulator.stop()
    out.double_booked = len(bindings.double_booked)
    out.unread = bindings.unread
    out.bound = len(bindings.at)
    out.latencies = [bindings.at[n] - created[n] for n in bindings.at if n in created]
    return out


def _bare_binds(url: str, count: int, at_once: int, queue: Any) -> None:
    """In a process of its own, as the scheduler is: post ``count`` bare bindings, ``at_once``
    in flight, through the scheduler's own lean writes (``kube/http1.py``, the lightest
    client at hand, so that the rate is the emulator's); put the rate on ``queue``."""

    async def run() -> float:
        async with ApiClient(AiohttpTransport(None, at_once), base_url=url) as http:

            async def one(i: int) -> None:
                body = {
                    "metadata": {"name": f"bare-{i}"},
                    "target": {"kind": "Node", "name": "node-00000"},
                }
                await send_json(
                    http, "POST", f"/api/v1/namespaces/default/pods/bare-{i}/binding", body
                )

            t = time.monotonic()
            await at_most(at_once, one, range(count), what="bare bind")
            return count / (time.monotonic() - t)

    queue.put(asyncio.run(run()))


@dataclass
class Throughput:
    """One backlog run: what it bound, how fast, and the scheduler's CPU for it."""

    workload: str
    nodes: int
    pods: int
    bound: int = 0
    rate: float = 0.0
    """Binds per second, from the first pod created to the last bind."""
    ceiling: float = 0.0
    """Bare binding POSTs per second the emulator accepted in the same run."""
    cpu_s: float = 0.0
    """CPU seconds of the scheduler's process tree, from ready to its last write."""
    phases: dict[str, float] = field(default_factory=dict)
    """CPU seconds by phase (``gpufleet_cpu_seconds_total``), over the same span."""

    tries: tuple[float, ...] = ()
    """CPU ms per pod of every run of the same row (:func:`median_run`)."""

    def per_pod_ms(self, seconds: float) -> float:
        return 1000 * seconds / max(self.bound, 1)


def median_run(tries: list[Throughput]) -> Throughput:
    """Of runs of one workload and size, the one of median CPU per pod, with every run's
    CPU per pod: the CPU a run takes moves with the machine's load by 10-25% between runs
    of the same code, so one run says little."""
    ordered = sorted(tries, key=lambda run: run.per_pod_ms(run.cpu_s))
    middle = ordered[(len(ordered) - 1) // 2]
    middle.tries = tuple(run.per_pod_ms(run.cpu_s) for run in tries)
    return middle


WORKLOADS = {"1-GPU pods": 1, "gangs of 8": 8}
"""Backlog workloads: pods of one GPU each, alone or in gangs of this many."""


def tree_cpu(pid: int) -> float:
    """CPU seconds (user and system) of ``pid`` and every process under it, the reaped
    ones included, from the kernel's accounting (``/proc/PID/stat``)."""
    tick = os.sysconf("SC_CLK_TCK")
    parent: dict[int, int] = {}
    spent: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        fields = stat[stat.rindex(")") + 2 :].split()
        # after the name: state, ppid, ..., utime (14th field), stime, cutime, cstime
        parent[int(entry.name)] = int(fields[1])
        spent[int(entry.name)] = sum(int(f) for f in fields[11:15])
    tree, frontier = {pid}, [pid]
    while frontier:
        here = frontier.pop()
        for child, up in parent.items():
            if up == here and child not in tree:
                tree.add(child)
                frontier.append(child)
    return sum(spent.get(p, 0) for p in tree) / tick


async def _phases(url: str, token: str) -> dict[str, float]:
    """``gpufleet_cpu_seconds_total`` by phase, and ``process_cpu_seconds_total``."""
    async with httpx.AsyncClient(verify=False) as http:  # its self-signed certificate
        reply = await http.get(f"{url}/metrics", headers={"Authorization": f"Bearer {token}"})
        reply.raise_for_status()
    seconds: dict[str, float] = {}
    for line in reply.text.splitlines():
        if line.startswith("gpufleet_cpu_seconds_total{"):
            name = line.split('phase="', 1)[1].split('"', 1)[0]
            seconds[name] = float(line.rsplit(" ", 1)[1])
    return seconds


async def _quiet(store: Any, still_s: float) -> None:
    """Wait until the emulator has applied no write for ``still_s`` (the scheduler's last
    events and status writes are in)."""
    seen, since = len(store.writes), time.monotonic()
    while time.monotonic() - since < still_s:
        await asyncio.sleep(0.05)
        if len(store.writes) != seen:
            seen, since = len(store.writes), time.monotonic()


async def _throughput(
    args: argparse.Namespace, workdir: Path, nodes: int, workload: str
) -> Throughput:
    """One scheduler binds a backlog of ``args.pending`` pods arriving at once on ``nodes``
    nodes; the emulator's own ceiling is measured first, in the same run."""
    out = Throughput(workload, nodes, args.pending)
    gang = WORKLOADS[workload]
    emulator = Emulator(seed=args.seed, bookmark_interval=5.0, window=50_000).start()
    store = emulator.store
    pods_r = store.resource("", "v1", "pods")
    groups_r = store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    try:
        for i in range(nodes):
            store.create(store.resource("", "v1", "nodes"), "", _node(f"node-{i:05d}"))
        out.ceiling = await _ceiling(emulator, store, pods_r)
        kubeconfig = emulator.kubeconfig(workdir / "kubeconfig")
        flags = ("--leader-elect=false", "--period", "0.5", "--cpu-phases")
        scheduler = await Serve(kubeconfig, *flags).start()
        try:
            await scheduler.ready(120)
            assert scheduler.process is not None
            metrics = f"https://127.0.0.1:{scheduler.port}"
            cpu, phases = tree_cpu(scheduler.process.pid), await _phases(metrics, emulator.token)
            bindings = Bindings(emulator)
            bindings.seen = len(store.writes)
            t = time.monotonic()
            for i in range(0, args.pending, gang):
                group = f"g-{i}" if gang > 1 else None
                if group is not None:
                    spec = {"minMember": gang}
                    store.create(groups_r, "default", {"metadata": {"name": group}, "spec": spec})
                for j in range(i, min(i + gang, args.pending)):
                    store.create(pods_r, "default", _pod(f"p-{j}", 1, group))
                if i % 500 == 0:
                    await asyncio.sleep(0)  # the binds already seen are scanned meanwhile
            deadline = t + args.throughput_timeout_s
            while len(bindings.at) < args.pending and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
                bindings.scan()
            last = max(bindings.at.values(), default=t)
            await _quiet(store, 1.0)
            out.cpu_s = tree_cpu(scheduler.process.pid) - cpu
            after = await _phases(metrics, emulator.token)
            out.phases = {k: after[k] - phases.get(k, 0.0) for k in after}
            out.bound = len(bindings.at)
            out.rate = out.bound / max(last - t, 1e-9)
        finally:
            await scheduler.stop()
        return out
    finally:
        emulator.stop()


async def _ceiling(emulator: Emulator, store: Any, pods_r: Any) -> float:
    """Bare binding POSTs per second the emulator accepts from one client process with as
    many in flight as the scheduler keeps (16)."""
    count = 2000
    for i in range(count):
        store.create(pods_r, "default", _pod(f"bare-{i}", 0, None))
    spawn = multiprocessing.get_context("spawn")
    queue = spawn.Queue()
    client = spawn.Process(target=_bare_binds, args=(emulator.url, count, 16, queue))
    client.start()
    ceiling = float(await asyncio.to_thread(queue.get))
    client.join()
    for i in range(count):
        store.delete(pods_r, "default", f"bare-{i}")
    return ceiling


PHASE_COLUMNS = ("watch", "cycle", "bind", "events", "status", "sockets", "gc")


def _throughput_lines(runs: list[Throughput]) -> list[str]:
    header = (
        "| workload | nodes | pods | bound | binds/s | emulator ceiling/s | CPU ms/pod "
        "| each run | " + " | ".join(PHASE_COLUMNS) + " | rest |"
    )
    lines = [header, "|" + "---|" * (header.count("|") - 1)]
    for run in runs:
        named = sum(run.phases.get(p, 0.0) for p in PHASE_COLUMNS)
        cells = [f"{run.per_pod_ms(run.phases.get(p, 0.0)):.3f}" for p in PHASE_COLUMNS]
        cells.append(f"{run.per_pod_ms(run.cpu_s - named):.3f}")
        lines.append(
            f"| {run.workload} | {run.nodes:,} | {run.pods:,} | {run.bound:,} | {run.rate:,.0f} "
            f"| {run.ceiling:,.0f} | {run.per_pod_ms(run.cpu_s):.3f} "
            f"| {' / '.join(f'{t:.2f}' for t in run.tries) or '-'} | " + " | ".join(cells) + " |"
        )
    return lines


def _soak_lines(args: argparse.Namespace, soak: Soak) -> list[str]:
    lat = sorted(soak.latencies) or [0.0]
    p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    return [
        "| run | nodes | pods | bound | fit but unbound | GPUs double-booked | binds/s "
        "| latency p50 s | latency p99 s | restarts | seconds |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        f"| soak with faults | {args.soak_nodes:,} | {args.soak_pods:,} | {soak.bound:,} "
        f"| {soak.unbound_fit} | {soak.double_booked} | {soak.bound / soak.seconds:,.0f} "
        f"| {statistics.median(lat):.2f} | {p99:.2f} | {soak.restarts} | {soak.seconds:.0f} |",
        "",
        f"Binds whose GPUs the check could not read back (the pod gone first): {soak.unread}. "
        f"Faults injected: {soak.faults.get('expire_watch', 0)} watches answered 410, "
        f"{soak.faults.get('fail', 0)} binds answered 500, {soak.faults.get('drop_reply', 0)} "
        f"bind replies dropped after the bind was applied. RBAC: {soak.rbac}, "
        f"{soak.denials} denials.",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--soak-nodes", type=int, default=500)
    parser.add_argument("--soak-pods", type=int, default=5000)
    parser.add_argument("--arrive-s", type=float, default=120.0)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--soak-timeout-s", type=float, default=200.0)
    parser.add_argument("--no-soak", action="store_true", help="Only the throughput runs.")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1000, 5000])
    parser.add_argument("--workload", choices=sorted(WORKLOADS), nargs="+", default=list(WORKLOADS))
    parser.add_argument("--pending", type=int, default=5000)
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="Throughput runs per row; the row is the run of median CPU per pod.",
    )
    parser.add_argument("--throughput-timeout-s", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args(argv)
    lines = [
        f"Live scheduler against the API emulator on loopback (Python "
        f"{platform.python_version()}, {os.cpu_count()} cores).",
        "",
    ]
    runs: list[Throughput] = []
    with tempfile.TemporaryDirectory() as workdir:
        soak = None if args.no_soak else asyncio.run(_soak(args, Path(workdir)))
        for nodes in args.nodes:
            for workload in args.workload:
                tries = []
                for _ in range(args.repeat):
                    tries.append(asyncio.run(_throughput(args, Path(workdir), nodes, workload)))
                    print(_throughput_lines(tries)[-1], file=sys.stderr, flush=True)
                runs.append(median_run(tries))
    if soak is not None:
        lines += [*_soak_lines(args, soak), ""]
    scheduler_mib = Serve.largest_mib
    emulator_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    lines += [
        *_throughput_lines(runs),
        "",
        f"Throughput: each row is the run of median CPU per pod of {args.repeat} (each "
        "run: CPU ms/pod of every run, in order). One scheduler process binds a backlog of "
        "pods created at once, after it is ready; binds/s from the first pod created to "
        "the last bind, against "
        f"kube-scheduler's scheduler_perf {SCHEDULER_PAPER} pods/s at 5,000 nodes and "
        "against the emulator's own ceiling in the same run (bare binding POSTs from one "
        "client process, 16 in flight, the scheduler's lean writes). CPU ms/pod: the CPU "
        "of the scheduler's process tree (the kernel's accounting) from ready until its "
        "last write, per bound pod; "
        "the phases are its gpufleet_cpu_seconds_total (--cpu-phases) over the same span, "
        "gc is the garbage collector's collections, and rest is what no phase took (the "
        "event loop's own wait and bookkeeping, start-up of threads). Peak memory "
        f"{emulator_mib:,.0f} MiB for the emulator and this driver, "
        f"{scheduler_mib:,.0f} MiB for the largest scheduler process.",
    ]
    published = publish_table("bench.live", SECTION, lines, write_docs=not args.no_docs)
    return published or (1 if soak is not None and soak.denials else 0)


if __name__ == "__main__":
    sys.exit(main())
