"""Lending live: a serving Deployment scaled up takes its lent GPUs back from elastic
training, elastic pods first, and training grows again when it scales down — over real HTTP
against the emulator, whose Deployment and ReplicaSet controllers make and remove the pods
(``tests/apiserver/controllers.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.controllers import Controllers
from tests.kube.process.test_serve import add_node, double_booked, events, pods, serve

if TYPE_CHECKING:
    from tests.apiserver.server import Emulator

JSON = dict[str, Any]
GPUS = 4
"""Per node, and per pod: each pod of this test takes a whole node."""


def _template(queue: str, group: str | None = None) -> JSON:
    labels = {"gpufleet.io/queue": queue, "app": group or queue}
    if group:
        labels["scheduling.x-k8s.io/pod-group"] = group
    limits = {"nvidia.com/gpu": str(GPUS)}
    return {
        "metadata": {"labels": labels},
        "spec": {
            "schedulerName": "gpufleet",
            "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
        },
    }


def _cluster(emulator: Emulator) -> None:
    """8 nodes of 4 GPUs; queue inference (serving, 6 nodes' quota) runs a Deployment of 2
    replicas; queue train (2 nodes' quota) runs two elastic gangs of 3 pods (minMember 1),
    each a ReplicaSet, on the other 6 nodes: 4 of them lent."""
    store = emulator.store
    for k in range(8):
        add_node(emulator, f"n{k}", gpus=GPUS)
    queues = store.resource("gpufleet.io", "v1alpha1", "queues")
    spec = {"resources": {"gpu": {"quota": 6 * GPUS}}, "serving": {}}
    store.create(queues, "", {"metadata": {"name": "inference"}, "spec": spec})
    train = {"resources": {"gpu": {"quota": 2 * GPUS}}}
    store.create(queues, "", {"metadata": {"name": "train"}, "spec": train})
    groups = store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    replicasets = store.resource("apps", "v1", "replicasets")
    for name in ("a", "b"):
        meta = {"name": name, "labels": {"gpufleet.io/queue": "train"}}
        store.create(groups, "default", {"metadata": meta, "spec": {"minMember": 1}})
        selector = {"matchLabels": {"app": name}}
        body = {"replicas": 3, "selector": selector, "template": _template("train", name)}
        store.create(replicasets, "default", {"metadata": {"name": f"train-{name}"}, "spec": body})
    deployments = store.resource("apps", "v1", "deployments")
    template = _template("inference")
    template["metadata"]["labels"]["app"] = "web"
    body = {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    store.create(deployments, "default", {"metadata": {"name": "web"}, "spec": body})


def _scale(emulator: Emulator, replicas: int) -> None:
    deployments = emulator.store.resource("apps", "v1", "deployments")
    emulator.store.mutate(
        deployments,
        "default",
        "web",
        lambda d: {**d, "spec": {**d["spec"], "replicas": replicas}},
    )


def _running(emulator: Emulator, prefix: str) -> int:
    return sum(
        1
        for name, pod in pods(emulator).items()
        if name.startswith(prefix) and pod["spec"].get("nodeName")
    )


def _queue_status(emulator: Emulator, name: str) -> JSON:
    queues = emulator.store.resource("gpufleet.io", "v1alpha1", "queues")
    status: JSON = emulator.store.get(queues, "", name).get("status") or {}
    return status


def test_a_scaled_up_deployment_takes_its_gpus_back_from_elastic_training_first(
    emulator: Emulator,
) -> None:
    _cluster(emulator)
    controllers = Controllers(emulator.store).start()
    phases: list[JSON] = []

    def step(live: LiveScheduler) -> bool:
        web, a, b = (_running(emulator, p) for p in ("web-", "train-a-", "train-b-"))
        assert double_booked(emulator) == []
        if not phases and (web, a, b) == (2, 3, 3):
            if _queue_status(emulator, "inference").get("lent") != 4 * GPUS:
                return False  # its status comes after the cycle that bound them
            phases.append({"lent": _queue_status(emulator, "inference").get("lent")})
            _scale(emulator, 6)
        elif len(phases) == 1 and web == 6:
            phases.append({"a": a, "b": b, "evicted": live.stats.evicted})
            _scale(emulator, 2)
        elif len(phases) == 2 and (web, a, b) == (2, 3, 3):
            if _queue_status(emulator, "train").get("borrowed") != 4 * GPUS:
                return False
            phases.append({"evicted": live.stats.evicted})
            return True
        return False

    try:
        serve(emulator, step, timeout=30.0)
    finally:
        controllers.stop()
    before, scaled, after = phases
    assert before["lent"] == 4 * GPUS  # the 4 nodes training borrowed of inference's 6
    # scaled to 6: the four replicas' nodes came from the gangs' elastic pods, two each,
    # and neither gang was stopped (each keeps its minMember, one pod)
    assert scaled == {"a": 1, "b": 1, "evicted": 4}
    assert after == {"evicted": 4}  # scaled back, training grew into the freed nodes
    reclaimed = [e for e in events(emulator) if e["reason"] == "Preempted"]
    assert len(reclaimed) == 4
    assert all(e["regarding"]["name"].startswith("train-") for e in reclaimed)
    assert all("(reclaim by queue inference)" in e["note"] for e in reclaimed)
