"""Stale gangs, live: a gang that runs below its ``minMember`` and cannot be completed is
marked on its PodGroup (``gpufleet.io/stale-since``) and released once the grace has run
out, by this leader or by one that starts later (``kube/write/podgroups.py``,
``scheduler/cycle/session.py``), against the API emulator over real HTTP."""

from __future__ import annotations

import time
from typing import Any

from gpufleet.kube.process.options import ServeOptions
from gpufleet.kube.write.recorder import rfc3339
from gpufleet.load.objects.vocabulary import STALE_ANNOTATION
from gpufleet.scheduler.cycle.config import CycleConfig
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_group, add_node, add_pod, pods, serve
from tests.kube.process.test_serve_status import podgroup

JSON = dict[str, Any]


def add_bound(
    emulator: Emulator,
    name: str,
    group: str,
    gpu: int,
    *,
    scheduler: str = "gpufleet",
    node: str = "n0",
) -> None:
    """A running pod of gang ``group`` on ``node``, holding GPU ``gpu``."""
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        "default",
        {
            "metadata": {
                "name": name,
                "labels": {"scheduling.x-k8s.io/pod-group": group},
                "annotations": {"gpufleet.io/gpu-index": str(gpu)},
            },
            "spec": {
                "schedulerName": scheduler,
                "nodeName": node,
                "containers": [
                    {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
                ],
            },
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        },
        keep_status=True,
    )


def half_gang(emulator: Emulator) -> None:
    """Gang g (minMember 3) runs 2 pods on n0; its third asks for 8 GPUs, more than any
    node has, so the gang cannot be completed."""
    add_node(emulator, "n0", gpus=4)
    add_group(emulator, "g", 3)
    add_bound(emulator, "g-0", "g", 0)
    add_bound(emulator, "g-1", "g", 1)
    add_pod(emulator, "g-2", 8, group="g")


def stale_since(emulator: Emulator, group: str = "g") -> str | None:
    annotations = podgroup(emulator, group)["metadata"].get("annotations") or {}
    value = annotations.get(STALE_ANNOTATION)
    return None if value is None else str(value)


def annotation_patches(emulator: Emulator) -> int:
    return sum(
        1
        for w in emulator.store.writes
        if w.resource == "podgroups.scheduling.x-k8s.io" and w.verb == "patch"
    )


def options(grace_s: float) -> ServeOptions:
    return ServeOptions(period_s=0.1, batch_s=0.01, config=CycleConfig(stale_grace_s=grace_s))


def test_a_stale_gang_is_marked_then_released_after_its_grace(emulator: Emulator) -> None:
    half_gang(emulator)
    marked: list[tuple[str, float, set[str]]] = []

    def released(_live: object) -> bool:
        value = stale_since(emulator)
        if value is not None and not marked:
            marked.append((value, time.time(), set(pods(emulator))))
        return bool(marked) and not {"g-0", "g-1"} & set(pods(emulator))

    started = time.time()
    live = serve(emulator, released, options(1.5), timeout=15.0)
    [(value, seen, then)] = marked
    assert {"g-0", "g-1"} <= then  # marked while the gang still ran
    assert rfc3339(started - 1) <= value <= rfc3339(seen)
    assert live.stats.evicted == 2
    # Released: no pod of it runs, so it is no longer stale, and the mark is taken away.
    serve(emulator, lambda _live: stale_since(emulator) is None, options(1.5))
    assert annotation_patches(emulator) == 2  # once to mark, once to take away


def test_a_new_leader_releases_at_the_end_of_the_same_grace(emulator: Emulator) -> None:
    """The gang was marked stale an hour ago by an earlier leader: a scheduler that starts
    now releases it in its first cycles, and does not mark it anew."""
    half_gang(emulator)
    groups = emulator.store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    group = podgroup(emulator, "g")
    then = rfc3339(time.time() - 3600)
    group["metadata"]["annotations"] = {STALE_ANNOTATION: then}
    emulator.store.update(groups, "default", "g", group)
    live = serve(emulator, lambda _live: not {"g-0", "g-1"} & set(pods(emulator)), options(600.0))
    assert live.stats.evicted == 2
    assert live.stats.cycles <= 3


def test_a_gang_of_another_scheduler_is_not_marked(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=4)
    add_group(emulator, "g", 3)
    for name, gpu in (("g-0", 0), ("g-1", 1)):
        add_bound(emulator, name, "g", gpu, scheduler="default-scheduler")
    serve(emulator, lambda live: live.stats.cycles >= 5, options(0.0))
    assert stale_since(emulator) is None
    assert annotation_patches(emulator) == 0
    assert {"g-0", "g-1"} <= set(pods(emulator))


def test_a_gang_whose_member_succeeded_runs_on(emulator: Emulator) -> None:
    """g-0 of gang g (minMember 2) completes, as a Job's pod does; g-1 runs on, unmarked,
    past the grace."""
    add_node(emulator, "n0", gpus=4)
    add_group(emulator, "g", 2)
    add_bound(emulator, "g-0", "g", 0)
    add_bound(emulator, "g-1", "g", 1)
    resource = emulator.store.resource("", "v1", "pods")
    done = emulator.store.get(resource, "default", "g-0")
    done["status"]["phase"] = "Succeeded"
    emulator.store.update(resource, "default", "g-0", done, subresource="status")
    started = time.monotonic()
    live = serve(emulator, lambda _live: time.monotonic() - started > 2.0, options(0.5))
    assert "g-1" in pods(emulator)
    assert live.stats.evicted == 0
    assert stale_since(emulator) is None
