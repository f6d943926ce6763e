"""The live scheduler places by the pods already running, as kube-scheduler does, over real
HTTP against the API emulator: the replicas of a Deployment with required anti-affinity on
``kubernetes.io/hostname`` land on distinct nodes, a zone spread of skew 1 is kept, and a
replica for which no node is left waits with kube-scheduler's message."""

from __future__ import annotations

from typing import Any

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import bound, pods, serve

JSON = dict[str, Any]


def node(emulator: Emulator, name: str, zone: str, gpus: int = 8) -> None:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    allocatable = {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
    emulator.store.create(
        emulator.store.resource("", "v1", "nodes"),
        "",
        {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}},
    )


def replica(emulator: Emulator, name: str, app: str, spec: JSON) -> None:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        "default",
        {
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"schedulerName": "gpufleet", "containers": [container], **spec},
        },
    )


def apart(app: str) -> JSON:
    term = {
        "labelSelector": {"matchLabels": {"app": app}},
        "topologyKey": "kubernetes.io/hostname",
    }
    return {
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    }


def spread(app: str) -> JSON:
    constraint = {
        "maxSkew": 1,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": app}},
    }
    return {"topologySpreadConstraints": [constraint]}


def unschedulable(emulator: Emulator, name: str) -> str | None:
    for c in pods(emulator)[name].get("status", {}).get("conditions") or []:
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c["message"])
    return None


def test_anti_affinity_replicas_land_apart_and_a_spread_stays_even(emulator: Emulator) -> None:
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        node(emulator, name, zone)
    for i in range(4):
        replica(emulator, f"infer-{i}", "infer", apart("infer"))
    for i in range(4):
        replica(emulator, f"web-{i}", "web", spread("web"))

    def settled(_live: LiveScheduler) -> bool:
        return len(bound(emulator)) == 7 and unschedulable(emulator, "infer-3") is not None

    serve(emulator, settled)
    placed = bound(emulator)
    infer = [placed[f"infer-{i}"] for i in range(3)]
    assert sorted(infer) == ["a1", "a2", "b1"]
    assert "infer-3" not in placed
    assert unschedulable(emulator, "infer-3") == (
        "0/3 nodes are available: 3 node(s) didn't match pod anti-affinity rules."
    )
    zones = [placed[f"web-{i}"][0] for i in range(4)]
    assert sorted(zones) == ["a", "a", "b", "b"]
