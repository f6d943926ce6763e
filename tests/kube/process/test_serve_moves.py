"""A pod that consolidation moves in a live cluster is evicted and recreated by its
controller under a new name: the job waiting for its node is bound there once it is gone,
and the live scheduler gives the replacement the move (``kube/process/moves.py``), so it is
cooled down instead of being the first pod moved again."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, bound, pods, serve

OWNER = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "a", "uid": "rs-a"}


def add(emulator: Emulator, name: str, gpus: int, *, on: str = "", index: str = "") -> None:
    resource = emulator.store.resource("", "v1", "pods")
    limits = {"nvidia.com/gpu": str(gpus)}
    meta: dict[str, object] = {"name": name}
    spec: dict[str, object] = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }
    if name.startswith("a-"):
        meta["ownerReferences"] = [{**OWNER, "controller": True}]
    body: dict[str, object] = {"metadata": meta, "spec": spec}
    if on:
        meta["annotations"] = {"gpufleet.io/gpu-index": index}
        spec["nodeName"] = on
        started = datetime.now(UTC) - timedelta(minutes=1 if name.startswith("a-") else 600)
        body["status"] = {"phase": "Running", "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}
    emulator.store.create(resource, "default", body, keep_status=bool(on))


def test_a_moved_pods_replacement_is_cooled_down(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=4)
    add_node(emulator, "n1", gpus=4)
    add(emulator, "a-1", 1, on="n0", index="0")  # young: cheap to move
    add(emulator, "old", 1, on="n1", index="0")  # ten hours of unsaved work: never moved
    emulator.store.clock = lambda: datetime.now(UTC) - timedelta(hours=2)
    add(emulator, "big", 4)  # has waited two hours for a whole node
    emulator.store.clock = lambda: datetime.now(UTC)
    options = ServeOptions(period_s=0.2, batch_s=0.01)

    def replaced(live: LiveScheduler) -> bool:
        if "a-1" in pods(emulator) or bound(emulator).get("big") != "n0":
            return False
        if "a-2" not in pods(emulator):
            add(emulator, "a-2", 1)  # its ReplicaSet makes a new pod
        return "a-2" in bound(emulator)

    live = serve(emulator, replaced, options)
    assert live.stats.cycle_errors == 0  # the move's own binding is taken back cleanly
    assert live.stats.evicted == 1
    progress = live.cache.pods["default/a-2"].progress
    assert progress.moves == 1
    assert progress.moved_at is not None
