"""A bound pod holds what it was bound with, live, over real HTTP against the API emulator:
an annotation gpufleet cannot read — put on a running pod after its bind, or on another
scheduler's running pod, or a GPU index out of range — is reported (FailedToRead) and frees
nothing, so the next pod is never bound onto GPUs that are taken."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, add_pod, bound, events, pods, serve
from tests.kube.process.test_serve_queues import status

JSON = dict[str, Any]


def running(
    emulator: Emulator, name: str, gpus: int, *, scheduler: str = "gpufleet", notes: JSON
) -> None:
    """A pod bound to n0 and running, with ``notes`` as its annotations."""
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    obj = {
        "metadata": {"name": name, "annotations": notes},
        "spec": {"schedulerName": scheduler, "nodeName": "n0", "containers": [container]},
        "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
    }
    emulator.store.create(emulator.store.resource("", "v1", "pods"), "default", obj)


def unreadable(emulator: Emulator) -> set[str]:
    return {e["regarding"]["name"] for e in events(emulator) if e["reason"] == "FailedToRead"}


@pytest.mark.parametrize(
    ("scheduler", "notes"),
    [
        pytest.param("gpufleet", {"gpufleet.io/gpu-fraction": "oops"}, id="fraction"),
        pytest.param("default-scheduler", {"gpufleet.io/gpu-memory": "lots"}, id="other-scheduler"),
        pytest.param("gpufleet", {"gpufleet.io/gpu-index": "99"}, id="index-out-of-range"),
        pytest.param("gpufleet", {"gpufleet.io/gpu-index": "abc"}, id="index-not-a-number"),
    ],
)
def test_a_bound_pod_first_read_unreadable_frees_nothing(
    emulator: Emulator, scheduler: str, notes: JSON
) -> None:
    add_node(emulator, "n0", gpus=8)
    running(emulator, "mine", 8, scheduler=scheduler, notes=notes)
    add_pod(emulator, "next", 1)

    def done(live: LiveScheduler) -> bool:
        return "mine" in unreadable(emulator) and live.stats.cycles > 4

    serve(emulator, done)
    assert bound(emulator) == {"mine": "n0"}  # next waits: the 8 GPUs are held
    waiting = pods(emulator)["next"]["status"]["conditions"][0]["message"]
    assert "Insufficient nvidia.com/gpu" in waiting


@pytest.mark.parametrize(
    ("scheduler", "limit", "notes"),
    [
        # The device plugin gave each a whole GPU: a share annotation frees none of it.
        pytest.param("default-scheduler", 1, {"gpufleet.io/gpu-fraction": "0.1"}, id="other"),
        pytest.param("gpufleet", 1, {"gpufleet.io/gpu-fraction": "0.1"}, id="restarted"),
        # A share gpufleet cannot read, beside a request of 0 GPUs, holds a whole GPU.
        pytest.param("gpufleet", 0, {"gpufleet.io/gpu-fraction": "oops"}, id="zero-request"),
    ],
)
def test_bound_pods_hold_at_least_what_their_requests_name(
    emulator: Emulator, scheduler: str, limit: int, notes: JSON
) -> None:
    add_node(emulator, "n0", gpus=8)
    for i in range(8):
        running(emulator, f"held-{i}", limit, scheduler=scheduler, notes=notes)
    add_pod(emulator, "next", 1)
    serve(emulator, lambda live: live.stats.cycles > 4)
    assert "next" not in bound(emulator)  # the 8 GPUs are held


def test_an_annotation_changed_after_the_bind_is_reported_and_not_trusted(
    emulator: Emulator,
) -> None:
    add_node(emulator, "n0", gpus=8)
    running(emulator, "mine", 8, notes={})
    resource = emulator.store.resource("", "v1", "pods")
    seen: dict[str, int] = {}

    def done(live: LiveScheduler) -> bool:
        if "changed" not in seen and live.stats.cycles > 2:  # read bound with 8 GPUs: now
            mine = pods(emulator)["mine"]  # kubectl annotate pod mine gpu-fraction=oops
            mine["metadata"]["annotations"] = {"gpufleet.io/gpu-fraction": "oops"}
            emulator.store.update(resource, "default", "mine", mine)
            add_pod(emulator, "next", 1)
            seen["changed"] = live.stats.cycles
        return "changed" in seen and live.stats.cycles > seen["changed"] + 4

    serve(emulator, done)
    assert bound(emulator) == {"mine": "n0"}
    assert "mine" in unreadable(emulator)


def test_no_event_ends_a_watch(emulator: Emulator) -> None:
    """Events shaped wrongly — an object whose spec is a string, a line that is a JSON list,
    an object that is a list, a line that is no JSON — are each reported and skipped: the
    pods watch goes on, and a pod created after them is bound."""
    add_node(emulator, "n0", gpus=2)
    emulator.faults.watch_lines(
        [
            '{"type": "ADDED", "object": {"metadata": {"name": "x", "namespace": "default",'
            ' "resourceVersion": "1"}, "spec": "nope"}}',
            "[1, 2]",
            '{"type": "ADDED", "object": [1]}',
            '{"type": "ADDED", "obj',
        ],
        path="/api/v1/pods",
    )
    seen: dict[str, int] = {}

    def done(live: LiveScheduler) -> bool:
        pods_watch = next(r for r in live.reflectors if r.kind.kind == "Pod")
        if "added" not in seen and pods_watch.stats.bad_objects >= 3:
            add_pod(emulator, "after", 1)
            seen["added"] = 1
        return "after" in bound(emulator)

    live = serve(emulator, done)
    pods_watch = next(r for r in live.reflectors if r.kind.kind == "Pod")
    assert pods_watch.stats.bad_objects >= 3
    assert emulator.faults.taken["watch_lines"] == 1
    assert live.ready


def queue(emulator: Emulator, name: str, parent: str | None = None) -> None:
    spec = {"parentQueue": parent} if parent else {}
    resource = emulator.store.resource("gpufleet.io", "v1alpha1", "queues")
    emulator.store.create(resource, "", {"metadata": {"name": name}, "spec": spec})


def test_one_bad_queue_stops_no_other(emulator: Emulator) -> None:
    """A Queue whose parent does not exist yet, two that are each other's parent, and the
    bottom of a chain of 1,000: each is reported on the Queue and its pod waits naming it;
    every other queue's pod is bound, no cycle fails, and once the missing parent is created
    the child's pod is bound too."""
    add_node(emulator, "n0", gpus=8)
    queue(emulator, "child", "team")  # as `kubectl apply -f queues/` makes it, child first
    queue(emulator, "qa", "qb")
    queue(emulator, "qb", "qa")
    queue(emulator, "c0")
    for i in range(1, 1000):
        queue(emulator, f"c{i}", f"c{i - 1}")
    queue(emulator, "fine")
    for name, in_queue in (("p-child", "child"), ("p-qa", "qa"), ("p-deep", "c999")):
        add_pod(emulator, name, 1, labels={"gpufleet.io/queue": in_queue})
    add_pod(emulator, "p-fine", 1, labels={"gpufleet.io/queue": "fine"})
    seen: dict[str, int] = {}

    def done(live: LiveScheduler) -> bool:
        told = unreadable(emulator)
        if "team" not in seen and {"child", "qa", "qb", "c999"} <= told and live.stats.cycles > 3:
            queue(emulator, "team")
            seen["team"] = live.stats.cycles
        return "team" in seen and "p-child" in bound(emulator)

    live = serve(emulator, done, timeout=30.0)
    assert live.stats.cycle_errors == 0
    assert set(bound(emulator)) == {"p-fine", "p-child"}
    notes = {
        e["regarding"]["name"]: e["note"] for e in events(emulator) if e["reason"] == "FailedToRead"
    }
    assert "names parent queue 'team', which does not exist" in notes["child"]
    assert "is in a cycle of parent queues" in notes["qa"]
    assert "more than 64 levels of parent queues" in notes["c999"]
    waiting = {n: p["status"]["conditions"][0]["message"] for n, p in pods(emulator).items()
               if n in {"p-qa", "p-deep"}}  # fmt: skip
    assert "queue qa is not valid: it is in a cycle of parent queues" in waiting["p-qa"]
    assert "queue c999 is not valid" in waiting["p-deep"]
    conditions: dict[str, list[JSON]] = {
        name: status(emulator, name).get("conditions") or [] for name in ("qa", "fine")
    }
    [qa] = conditions["qa"]
    assert (qa["type"], qa["status"], qa["reason"]) == ("Valid", "False", "ParentCycle")
    assert conditions["fine"][0]["status"] == "True"


def test_a_valid_tree_listed_children_first_raises_no_alarm(emulator: Emulator) -> None:
    """The API lists queues by name: children before their parent. The tree is judged
    once every kind is listed, before a cycle, never per event: no false report."""
    add_node(emulator, "n0", gpus=8)
    for i in range(30):
        queue(emulator, f"a-team-{i:02d}", "zeta-org")
    queue(emulator, "zeta-org")
    add_pod(emulator, "p", 1, labels={"gpufleet.io/queue": "a-team-00"})
    live = serve(emulator, lambda live: "p" in bound(emulator) and live.stats.cycles > 2)
    assert unreadable(emulator) == set()
    assert live.stats.problems == 0


def test_shares_gpufleet_bound_are_held_as_shares_once_read_back(emulator: Emulator) -> None:
    """Pods asking ``nvidia.com/gpu: 1`` with a fraction, bound by gpufleet as shares of one
    GPU: read back bound (with the ``gpu-index`` gpufleet wrote), they hold their shares, not
    a whole GPU each — no conflict, and the GPU left free stays free."""
    add_node(emulator, "n0", gpus=2)
    store = emulator.store
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    for i in range(2):
        store.create(store.resource("", "v1", "pods"), "default", {
            "metadata": {"name": f"half-{i}", "annotations": {"gpufleet.io/gpu-fraction": "0.5"}},
            "spec": {"schedulerName": "gpufleet", "containers": [container]},
        })  # fmt: skip

    def done(live: LiveScheduler) -> bool:
        if {"half-0", "half-1"} <= set(bound(emulator)) and "whole" not in pods(emulator):
            add_pod(emulator, "whole", 1)
        return "whole" in bound(emulator) and live.stats.cycles > 4

    serve(emulator, done)
    assert [e for e in events(emulator) if e["reason"] == "Conflict"] == []
    indices = {
        name: (pods(emulator)[name]["metadata"].get("annotations") or {})["gpufleet.io/gpu-index"]
        for name in ("half-0", "half-1", "whole")
    }
    assert indices["half-0"] == indices["half-1"] != indices["whole"]
