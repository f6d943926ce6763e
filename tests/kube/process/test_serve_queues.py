"""A Queue's status as the live scheduler writes it, against the API emulator over real
HTTP: what it holds, its fair share and what waits in it, written once per change, not in a
dry run, and not again after a restart (``kube/write/queues.py``)."""

from __future__ import annotations

from typing import Any

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, bound, events, serve
from tests.kube.process.test_serve_config import add_kai_queue

JSON = dict[str, Any]


def add_queue(emulator: Emulator, name: str, gpu_quota: int) -> None:
    queues = emulator.store.resource("gpufleet.io", "v1alpha1", "queues")
    spec = {"resources": {"gpu": {"quota": gpu_quota}}}
    emulator.store.create(queues, "", {"metadata": {"name": name}, "spec": spec})


def add_pod(emulator: Emulator, name: str, gpus: int, queue: str) -> None:
    pods = emulator.store.resource("", "v1", "pods")
    limits = {"nvidia.com/gpu": str(gpus)}
    spec = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }
    meta = {"name": name, "labels": {"gpufleet.io/queue": queue}}
    emulator.store.create(pods, "default", {"metadata": meta, "spec": spec})


def status(emulator: Emulator, name: str) -> JSON:
    queues = emulator.store.resource("gpufleet.io", "v1alpha1", "queues")
    [queue] = [q for q in emulator.store.objects(queues) if q["metadata"]["name"] == name]
    found: JSON = queue.get("status") or {}
    return found


def status_writes(emulator: Emulator) -> int:
    return sum(1 for w in emulator.store.writes if w.resource == "queues.gpufleet.io/status")


def settled(emulator: Emulator, *, cycles: int = 5) -> Any:
    """Done once team-a holds its bound pod's GPUs and ``cycles`` more cycles ran."""
    seen: dict[str, int] = {}

    def done(live: LiveScheduler) -> bool:
        if "seen" not in seen:
            if status(emulator, "team-a").get("allocated", {}).get("gpu") != 2:
                return False
            seen["seen"], seen["writes"] = live.stats.cycles, status_writes(emulator)
        return live.stats.cycles >= seen["seen"] + cycles

    return done, seen


def test_a_queue_shows_what_it_holds_its_fair_share_and_what_waits(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=4)
    add_queue(emulator, "team-a", 4)
    add_pod(emulator, "runs", 2, "team-a")
    add_pod(emulator, "waits", 8, "team-a")  # more than the cluster has
    done, seen = settled(emulator)
    live = serve(emulator, done)
    assert "runs" in bound(emulator)
    found = status(emulator, "team-a")
    assert found["allocated"] == {"gpu": 2, "cpu": 0, "memory": 0}
    assert found["fairShare"]["gpu"] > 0
    assert (found["pendingJobs"], found["pendingPods"]) == (1, 1)
    assert status_writes(emulator) == seen["writes"] == live.queues.patches  # once per change


def test_a_restarted_scheduler_does_not_write_an_unchanged_status(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=4)
    add_queue(emulator, "team-a", 4)
    add_pod(emulator, "runs", 2, "team-a")
    done, _ = settled(emulator, cycles=1)
    serve(emulator, done)
    before = status_writes(emulator)
    again = serve(emulator, lambda live: live.stats.cycles >= 3)
    assert again.queues.patches == 0
    assert status_writes(emulator) == before


def test_a_dry_run_writes_no_queue_status(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=4)
    add_queue(emulator, "team-a", 4)
    add_pod(emulator, "waits", 2, "team-a")
    options = ServeOptions(period_s=0.2, batch_s=0.01, dry_run=True)
    serve(emulator, lambda live: live.stats.cycles >= 3, options)
    assert status_writes(emulator) == 0
    assert not status(emulator, "team-a")


def test_a_kai_queue_named_as_a_gpufleet_queue_is_reported_on_itself_and_not_read(
    emulator: Emulator,
) -> None:
    add_node(emulator, "n0", gpus=4)
    add_queue(emulator, "team-a", 2)
    add_kai_queue(emulator, "team-a", gpus=1)
    for name in ("p", "q"):  # the KAI queue's limit of 1 GPU would keep one pending
        add_pod(emulator, name, 1, "team-a")

    def told(live: LiveScheduler) -> bool:
        return any(e.get("reason") == "FailedToRead" for e in events(emulator)) and (
            status(emulator, "team-a").get("allocated", {}).get("gpu") == 2
        )

    options = ServeOptions(period_s=0.2, batch_s=0.01, vocabularies=frozenset({"kai"}))
    serve(emulator, told, options)
    [event] = [e for e in events(emulator) if e.get("reason") == "FailedToRead"]
    regarding = event["regarding"]
    assert (regarding["kind"], regarding["apiVersion"], regarding["name"]) == (
        "Queue",
        "scheduling.run.ai/v2",
        "team-a",
    )
    assert "defined twice" in event["note"]
    assert set(bound(emulator)) == {"p", "q"}
