"""GPU-operator nodes, live, over real HTTP against the API emulator: a node whose GPUs the
device plugin advertises as MIG slices (the single strategy) and one whose GPUs it
advertises as time-sliced replicas, labelled as GPU feature discovery labels them. Every
bind goes where Kubernetes allows and gpufleet prefers (whole GPUs first), each pod's queue
holds what its slices and replicas are worth (its status written by the live scheduler),
and the Scheduled event says what a pod got."""

from __future__ import annotations

from typing import Any

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import bound, events, pods, serve
from tests.kube.process.test_serve_queues import status

JSON = dict[str, Any]

MIG_PRODUCT = "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
SHARED_PRODUCT = "Tesla-T4-SHARED"
NODES: dict[str, tuple[dict[str, str], int]] = {
    "a100": (  # one whole A100, MIG off
        {
            "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
            "nvidia.com/gpu.count": "1",
            "nvidia.com/gpu.memory": "40960",
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/mig.config": "all-disabled",
        },
        1,
    ),
    "a100-mig": (  # two A100s cut all-1g.5gb, the single strategy: 14 nvidia.com/gpu
        {
            "nvidia.com/gpu.product": MIG_PRODUCT,
            "nvidia.com/gpu.count": "14",
            "nvidia.com/gpu.memory": "4864",
            "nvidia.com/gpu.slices.ci": "1",
            "nvidia.com/gpu.slices.gi": "1",
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/mig.capable": "true",
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/mig.config": "all-1g.5gb",
            "nvidia.com/mig.config.state": "success",
        },
        14,
    ),
    "t4-ts": (  # two T4s time-sliced 4 ways: 8 nvidia.com/gpu
        {
            "nvidia.com/gpu.product": SHARED_PRODUCT,
            "nvidia.com/gpu.count": "2",
            "nvidia.com/gpu.memory": "15360",
            "nvidia.com/gpu.replicas": "4",
            "nvidia.com/gpu.sharing-strategy": "time-slicing",
        },
        8,
    ),
}


def create(emulator: Emulator, resource: tuple[str, str, str], ns: str, obj: JSON) -> None:
    emulator.store.create(emulator.store.resource(*resource), ns, obj)


def cluster(emulator: Emulator) -> None:
    for name, (labels, gpus) in NODES.items():
        allocatable = {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus), "pods": "110"}
        node = {
            "metadata": {"name": name, "labels": labels},
            "status": {"allocatable": allocatable},
        }
        create(emulator, ("", "v1", "nodes"), "", node)
    for queue, limit in (("train", None), ("serve", 1), ("web", 0.5)):
        spec = {"resources": {"gpu": {"limit": limit}}} if limit is not None else {}
        queues = ("gpufleet.io", "v1alpha1", "queues")
        create(emulator, queues, "", {"metadata": {"name": queue}, "spec": spec})


def pod(emulator: Emulator, name: str, queue: str, product: str | None = None) -> None:
    limits = {"nvidia.com/gpu": "1"}
    spec: JSON = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }
    if product is not None:
        spec["nodeSelector"] = {"nvidia.com/gpu.product": product}
    meta = {"name": name, "labels": {"gpufleet.io/queue": queue}}
    create(emulator, ("", "v1", "pods"), "default", {"metadata": meta, "spec": spec})


def test_slices_and_replicas_are_bound_and_counted_as_what_they_are(emulator: Emulator) -> None:
    cluster(emulator)
    pod(emulator, "train-0", "train")  # asks a GPU anywhere: gets the whole A100
    for i in range(8):
        pod(emulator, f"serve-{i}", "serve", MIG_PRODUCT)
    for i in range(3):
        pod(emulator, f"web-{i}", "web", SHARED_PRODUCT)

    def done(live: LiveScheduler) -> bool:
        scheduled = [e for e in events(emulator) if e["reason"] == "Scheduled"]
        return (
            len(bound(emulator)) == 10
            and len(scheduled) == 10
            and status(emulator, "serve").get("pendingPods") == 1
            and status(emulator, "web").get("pendingPods") == 1
        )

    serve(emulator, done)
    where = bound(emulator)
    assert where["train-0"] == "a100"
    assert sorted(p for p, n in where.items() if n == "a100-mig") == [
        f"serve-{i}" for i in range(7)
    ]
    assert sorted(p for p, n in where.items() if n == "t4-ts") == ["web-0", "web-1"]
    assert "serve-7" not in where  # each waits at its queue's limit
    assert "web-2" not in where
    assert status(emulator, "serve")["allocated"]["gpu"] == 1  # 7 slices of 1/7
    assert status(emulator, "web")["allocated"]["gpu"] == 0.5  # 2 replicas of 1/4
    assert status(emulator, "train")["allocated"]["gpu"] == 1
    said = {
        e["regarding"]["name"]: e["note"] for e in events(emulator) if e["reason"] == "Scheduled"
    }
    assert said["serve-0"].endswith(
        "to a100-mig (each GPU a MIG 1g.5gb slice (1/7 of an NVIDIA-A100-SXM4-40GB))"
    )
    assert said["web-0"].endswith("(each GPU a time-sliced replica (1/4 of a Tesla-T4))")
    assert said["train-0"] == "Successfully assigned default/train-0 to a100"
    waiting = pods(emulator)["serve-7"]["status"]["conditions"][0]["message"]
    assert "queue serve is at its limit of 1 GPU" in waiting
