"""The live scheduler against the API emulator over real HTTP (``kube/process/live.py``): pods of
``schedulerName: gpufleet`` are bound with their GPU indexes and never share a GPU; a pod
that does not fit gets ``PodScheduled=False`` with gpufleet's reason; a bind that always
fails backs off instead of being retried every cycle, and the other pods are bound all the
same; a bind whose reply is lost is not sent twice; ``--dry-run`` writes nothing."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import httpx

from gpufleet.kube.process import endpoints
from gpufleet.kube.process.live import STALL_S, LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator

JSON = dict[str, Any]


class Runs(Protocol):
    async def run(self, stop: asyncio.Event) -> None: ...


R = TypeVar("R", bound=Runs)


def add_node(emulator: Emulator, name: str, gpus: int = 4) -> None:
    nodes = emulator.store.resource("", "v1", "nodes")
    allocatable = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
    emulator.store.create(
        nodes, "", {"metadata": {"name": name}, "status": {"allocatable": allocatable}}
    )


def add_pod(
    emulator: Emulator,
    name: str,
    gpus: int,
    *,
    group: str | None = None,
    scheduler: str = "gpufleet",
    labels: dict[str, str] | None = None,
) -> None:
    pods = emulator.store.resource("", "v1", "pods")
    labels = {**(labels or {}), **({"scheduling.x-k8s.io/pod-group": group} if group else {})}
    limits = {"nvidia.com/gpu": str(gpus)}
    spec = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }
    emulator.store.create(
        pods, "default", {"metadata": {"name": name, "labels": labels}, "spec": spec}
    )


def add_group(emulator: Emulator, name: str, min_member: int) -> None:
    groups = emulator.store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    emulator.store.create(
        groups, "default", {"metadata": {"name": name}, "spec": {"minMember": min_member}}
    )


def pods(emulator: Emulator) -> dict[str, JSON]:
    listed, _ = emulator.store.list(emulator.store.resource("", "v1", "pods"), "default")
    return {p["metadata"]["name"]: p for p in listed}


def double_booked(emulator: Emulator) -> list[tuple[str, str]]:
    """GPUs (node, index) held by more than one pod, from the API's own record."""
    held: Counter[tuple[str, str]] = Counter()
    for pod in pods(emulator).values():
        node = pod["spec"].get("nodeName")
        gpus = (pod["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
        if node and gpus:
            held.update((node, g) for g in gpus.split(","))
    return [gpu for gpu, n in held.items() if n > 1]


def serve(
    emulator: Emulator,
    done: Callable[[LiveScheduler], bool],
    options: ServeOptions | None = None,
    timeout: float = 10.0,
) -> LiveScheduler:
    """Run the live scheduler against ``emulator`` until ``done`` holds."""
    chosen = options or ServeOptions(period_s=0.2, batch_s=0.01)
    return run_until(
        emulator, lambda http: LiveScheduler(http, chosen), lambda s: s, done, timeout=timeout
    )


def run_until(
    emulator: Emulator,
    make: Callable[[httpx.AsyncClient], R],
    scheduler: Callable[[R], LiveScheduler | None],
    done: Callable[[LiveScheduler], bool],
    *,
    timeout: float,
    headers: dict[str, str] | None = None,
) -> LiveScheduler:
    """Run what ``make`` builds on a client of ``emulator`` until ``done`` holds of the
    scheduler it runs (``scheduler``: None while there is none, a replica standing by)."""

    async def main() -> LiveScheduler:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=5, headers=headers) as http:
            runner = make(http)
            stop = asyncio.Event()
            task = asyncio.create_task(runner.run(stop))
            deadline = time.monotonic() + timeout
            try:
                while (live := scheduler(runner)) is None or not done(live):
                    stats = live.stats if live is not None else None
                    assert time.monotonic() < deadline, f"timed out: {stats}"
                    assert not task.done(), task.exception()
                    await asyncio.sleep(0.05)
            finally:
                stop.set()
                await asyncio.wait_for(task, 10)
            return live

    return asyncio.run(main())


def bound(emulator: Emulator) -> dict[str, str]:
    return {
        n: p["spec"]["nodeName"] for n, p in pods(emulator).items() if p["spec"].get("nodeName")
    }


def test_pods_are_bound_with_their_gpus_and_never_share_one(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_node(emulator, "n1")
    for i, gpus in enumerate([2, 1, 1, 2, 1, 1]):
        add_pod(emulator, f"p{i}", gpus)
    add_pod(emulator, "theirs", 1, scheduler="default-scheduler")
    live = serve(emulator, lambda _live: len(bound(emulator)) == 6)
    assert "theirs" not in bound(emulator)
    assert double_booked(emulator) == []
    assert live.stats.bound == 6
    assert sum(1 for w in emulator.store.writes if w.verb == "bind") == 6


def test_a_pod_that_does_not_fit_is_told_why(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=2)
    add_pod(emulator, "big", 4)

    def told(_live: LiveScheduler) -> bool:
        conditions = pods(emulator)["big"].get("status", {}).get("conditions") or []
        return any(c["type"] == "PodScheduled" and c["status"] == "False" for c in conditions)

    serve(emulator, told)
    [condition] = [
        c for c in pods(emulator)["big"]["status"]["conditions"] if c["type"] == "PodScheduled"
    ]
    assert condition["reason"] == "Unschedulable"
    assert condition["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


def test_a_bind_that_always_fails_backs_off_and_the_others_are_bound(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "cursed", 1)
    add_pod(emulator, "fine", 1)
    emulator.faults.fail(None, code=500, path="/pods/cursed/binding$")
    started = time.monotonic()
    live = serve(emulator, lambda live: time.monotonic() - started > 3.0, timeout=6)
    assert bound(emulator) == {"fine": "n0"}
    # 1 s, 2 s, ...: at most three tries in three seconds, though a cycle ran every 0.2 s
    assert 1 <= live.stats.bind_failures <= 3
    assert live.stats.cycles > 10


def test_a_bind_whose_reply_is_lost_is_not_sent_twice(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "a", 2)
    emulator.faults.drop_reply()
    live = serve(emulator, lambda _live: "a" in bound(emulator) and _live.stats.bound == 1)
    assert sum(1 for w in emulator.store.writes if w.verb == "bind") == 1
    assert live.stats.bind_failures == 0


def test_a_gang_is_bound_whole(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_node(emulator, "n1")
    add_group(emulator, "g", 3)
    for i in range(3):
        add_pod(emulator, f"g-{i}", 2, group="g")
    serve(emulator, lambda _live: len(bound(emulator)) == 3)
    assert double_booked(emulator) == []


def test_dry_run_binds_nothing_and_tells_the_pods_once(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    before = len(emulator.store.writes)
    options = ServeOptions(period_s=0.1, batch_s=0.01, dry_run=True)
    serve(emulator, lambda live: live.stats.cycles >= 5, options)
    assert bound(emulator) == {}
    written = emulator.store.writes[before:]
    assert {(w.verb, w.resource) for w in written} == {("create", "events.events.k8s.io")}
    [told] = events(emulator)  # once, though five cycles decided it
    assert (told["reason"], told["type"]) == ("WouldSchedule", "Normal")
    assert told["note"] == "would assign default/a to n0 (GPUs 0)"


def test_dry_run_logs_only_writes_nothing(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    before = len(emulator.store.writes)
    options = ServeOptions(period_s=0.1, batch_s=0.01, dry_run=True, dry_run_events=False)
    serve(emulator, lambda live: live.stats.cycles >= 5, options)
    assert len(emulator.store.writes) == before
    assert bound(emulator) == {}


def events(emulator: Emulator) -> list[JSON]:
    listed, _ = emulator.store.list(emulator.store.resource("events.k8s.io", "v1", "events"))
    return listed


def test_users_are_told_by_events_once_per_change(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=2)
    add_pod(emulator, "small", 1)
    add_pod(emulator, "big", 4)
    pods_resource = emulator.store.resource("", "v1", "pods")
    limits = {"nvidia.com/gpu": "lots"}
    broken = {"name": "c", "image": "x", "resources": {"limits": limits}}
    emulator.store.create(
        pods_resource,
        "default",
        {
            "metadata": {"name": "broken"},
            "spec": {"schedulerName": "gpufleet", "containers": [broken]},
        },
    )

    def told(live: LiveScheduler) -> bool:
        reasons = {e["reason"] for e in events(emulator)}
        return {
            "Scheduled",
            "FailedScheduling",
            "FailedToRead",
        } <= reasons and live.stats.cycles > 5

    serve(emulator, told)
    by_reason: dict[str, list[JSON]] = {}
    for event in events(emulator):
        by_reason.setdefault(event["reason"], []).append(event)
    [scheduled] = by_reason["Scheduled"]
    assert scheduled["regarding"]["name"] == "small"
    assert scheduled["note"] == "Successfully assigned default/small to n0"
    [failed] = by_reason["FailedScheduling"]  # once: the reason did not change
    assert failed["regarding"]["name"] == "big"
    assert failed["type"] == "Warning"
    assert failed["note"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    [unreadable] = by_reason["FailedToRead"]
    assert unreadable["regarding"]["name"] == "broken"
    assert "nvidia.com/gpu" in unreadable["note"]


def test_a_preemptor_waits_for_its_victim_and_then_takes_its_gpus(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=2)
    classes = emulator.store.resource("scheduling.k8s.io", "v1", "priorityclasses")
    for name, value in (("low", 0), ("high", 50)):
        emulator.store.create(classes, "", {"metadata": {"name": name}, "value": value})
    pods_resource = emulator.store.resource("", "v1", "pods")
    limits = {"nvidia.com/gpu": "2"}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    emulator.store.create(
        pods_resource,
        "default",
        {
            "metadata": {"name": "low", "annotations": {"gpufleet.io/gpu-index": "0,1"}},
            "spec": {
                "schedulerName": "gpufleet",
                "nodeName": "n0",
                "priorityClassName": "low",
                "containers": [container],
            },
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        },
        keep_status=True,
    )
    emulator.store.create(
        pods_resource,
        "default",
        {
            "metadata": {"name": "high"},
            "spec": {
                "schedulerName": "gpufleet",
                "priorityClassName": "high",
                "containers": [container],
            },
        },
    )
    live = serve(emulator, lambda _live: bound(emulator) == {"high": "n0"})
    assert live.stats.evicted == 1
    assert "low" not in pods(emulator)
    assert double_booked(emulator) == []
    assert sum(1 for w in emulator.store.writes if w.verb == "bind") == 1
    [preempted] = [e for e in events(emulator) if e["reason"] == "Preempted"]
    assert preempted["regarding"]["name"] == "low"
    assert preempted["note"] == "Preempted by default/high (preempt)"


def test_a_node_whose_pods_contradict_each_other_is_fenced_not_fatal(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=2)
    add_node(emulator, "n1", gpus=2)
    pods_resource = emulator.store.resource("", "v1", "pods")
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    # Both recorded on GPU 0 of n0 (two replicas that both thought they led). Another
    # scheduler's pods could not do this: they count by their requests alone.
    for name in ("x", "y"):
        emulator.store.create(
            pods_resource,
            "default",
            {
                "metadata": {"name": name, "annotations": {"gpufleet.io/gpu-index": "0"}},
                "spec": {"schedulerName": "gpufleet", "nodeName": "n0", "containers": [container]},
                "status": {"phase": "Running"},
            },
            keep_status=True,
        )
    add_pod(emulator, "mine", 1)
    live = serve(emulator, lambda _live: "mine" in bound(emulator))
    assert bound(emulator)["mine"] == "n1"
    assert live.stats.cycle_errors == 0
    [conflict] = [e for e in events(emulator) if e["reason"] == "Conflict"]
    assert conflict["regarding"]["name"] == "y"


def test_bad_objects_are_reported_and_everything_else_is_scheduled(emulator: Emulator) -> None:
    """A Queue with a limit below its quota, a pod with an invalid GPU fraction and a pod
    whose spec is not even the right shape: each gets a FailedToRead event naming the field
    (the pending pod of gpufleet's also its PodScheduled condition), no cycle fails, and the
    pod that can be read is bound."""
    add_node(emulator, "n0")
    add_pod(emulator, "fine", 1)
    store = emulator.store
    queue = {
        "metadata": {"name": "team-a"},
        "spec": {"resources": {"gpu": {"quota": 4, "limit": 2}}},
    }
    store.create(store.resource("gpufleet.io", "v1alpha1", "queues"), "", queue)
    pods_resource = store.resource("", "v1", "pods")
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    fraction = {
        "metadata": {"name": "fraction", "annotations": {"gpufleet.io/gpu-fraction": "1.5"}},
        "spec": {"schedulerName": "gpufleet", "containers": [container]},
    }
    store.create(pods_resource, "default", fraction)
    poisoned = {"metadata": {"name": "poisoned"}, "spec": {"schedulerName": "gpufleet"}}
    store.create(pods_resource, "default", poisoned)
    store.update(
        pods_resource,
        "default",
        "poisoned",
        {**poisoned, "spec": {"schedulerName": "gpufleet", "containers": "not a list"}},
    )

    def told(live: LiveScheduler) -> bool:
        unreadable = {
            e["regarding"]["name"] for e in events(emulator) if e["reason"] == "FailedToRead"
        }
        return {"team-a", "fraction", "poisoned"} <= unreadable and live.stats.cycles > 3

    live = serve(emulator, told)
    assert live.stats.cycle_errors == 0
    assert bound(emulator) == {"fine": "n0"}
    notes = {
        e["regarding"]["name"]: e["note"] for e in events(emulator) if e["reason"] == "FailedToRead"
    }
    assert "spec.resources.gpu.limit" in notes["team-a"]
    assert "gpufleet.io/gpu-fraction" in notes["fraction"]
    assert "containers" in notes["poisoned"]
    [condition] = pods(emulator)["fraction"]["status"]["conditions"]
    assert (condition["type"], condition["status"], condition["reason"]) == (
        "PodScheduled",
        "False",
        "Unschedulable",
    )
    assert condition["message"] == notes["fraction"]


def test_gpus_that_no_cpu_is_left_to_feed_are_reported_stranded(emulator: Emulator) -> None:
    """A node of 4 GPUs and 8 CPUs running a pod of 1 GPU and 8 CPUs: its 3 free GPUs can
    take no pod of the cluster's kind (8 CPUs per GPU), so they are stranded; a second node
    with CPU to spare strands nothing."""
    store = emulator.store
    for name, cpu in (("starved", "8"), ("roomy", "64")):
        allocatable = {"cpu": cpu, "memory": "64Gi", "nvidia.com/gpu": "4"}
        node = {"metadata": {"name": name}, "status": {"allocatable": allocatable}}
        store.create(store.resource("", "v1", "nodes"), "", node)
    resources = {"requests": {"cpu": "8"}, "limits": {"nvidia.com/gpu": "1"}}
    spec = {
        "schedulerName": "gpufleet",
        "nodeName": "starved",
        "containers": [{"name": "c", "image": "x", "resources": resources}],
    }
    store.create(
        store.resource("", "v1", "pods"), "default", {"metadata": {"name": "a"}, "spec": spec}
    )
    live = serve(emulator, lambda live: live.stats.cycles >= 2)
    assert live.metrics.registry.get_sample_value("gpufleet_gpus_stranded") == 3.0


def test_an_unreadable_pod_is_told_once_not_at_every_cycle(emulator: Emulator) -> None:
    """Writing its condition changes the pod, and the watch brings it back to be read (and
    fail) again: it must still be reported once — one event, one status write."""
    add_node(emulator, "n0")
    store = emulator.store
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    fraction = {
        "metadata": {"name": "fraction", "annotations": {"gpufleet.io/gpu-fraction": "2"}},
        "spec": {"schedulerName": "gpufleet", "containers": [container]},
    }
    store.create(store.resource("", "v1", "pods"), "default", fraction)
    live = serve(emulator, lambda live: live.stats.cycles >= 12)
    writes = [w for w in store.writes if w.name == "fraction" and w.resource == "pods/status"]
    assert len(writes) == 1
    [told] = [e for e in events(emulator) if e["reason"] == "FailedToRead"]
    assert "series" not in told
    assert live.stats.problems == 1


def test_a_stalled_loop_fails_the_liveness_probe(emulator: Emulator) -> None:
    """A leader whose loop stops coming round (a hung cycle or write) still renews its
    Lease; /healthz fails so that the kubelet restarts it."""
    add_node(emulator, "n0")
    live = serve(emulator, lambda live: live.stats.cycles >= 1)
    assert live.stalled() is None

    async def probe() -> tuple[int, str]:
        runner = await endpoints.start(live, "127.0.0.1", 0, guard=None, tls=None)
        host, port = runner.addresses[0][:2]
        try:
            async with httpx.AsyncClient() as http:
                response = await http.get(f"http://{host}:{port}/healthz")
                return response.status_code, response.text
        finally:
            await runner.cleanup()

    assert asyncio.run(probe()) == (200, "ok")
    assert live.beat is not None
    live.beat -= STALL_S + 5
    code, text = asyncio.run(probe())
    assert code == 500
    assert text.startswith("unhealthy: no cycle for")
