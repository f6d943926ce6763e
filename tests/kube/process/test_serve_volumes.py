"""Volumes bound as kube-scheduler's VolumeBinding binds them, live, over real HTTP against the
API emulator: a pod whose claim is of a ``WaitForFirstConsumer`` class with a provisioner is
bound after its claim is annotated ``volume.kubernetes.io/selected-node``; a pod whose claim
matches a free local volume is bound to that volume's node after the volume's
``claimRef`` names the claim; a pod whose claim does not exist waits with
kube-scheduler's message; and a failed volume write fails the bind."""

from __future__ import annotations

from typing import Any

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import bound, pods, serve
from tests.kube.process.test_serve_placement import apart, node, replica, spread, unschedulable

JSON = dict[str, Any]


def create(emulator: Emulator, group: str, plural: str, namespace: str, obj: JSON) -> JSON:
    version = "v1"
    return emulator.store.create(emulator.store.resource(group, version, plural), namespace, obj)


def storage(emulator: Emulator) -> None:
    create(
        emulator,
        "storage.k8s.io",
        "storageclasses",
        "",
        {
            "metadata": {"name": "fast"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowedTopologies": [
                {"matchLabelExpressions": [{"key": "topology.kubernetes.io/zone", "values": ["b"]}]}
            ],
        },
    )
    create(
        emulator,
        "storage.k8s.io",
        "storageclasses",
        "",
        {
            "metadata": {"name": "local"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
    )
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["a2"]}]
    }
    create(
        emulator,
        "",
        "persistentvolumes",
        "",
        {
            "metadata": {"name": "local-a2"},
            "spec": {
                "capacity": {"storage": "100Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "local",
                "local": {"path": "/mnt/ssd"},
                "nodeAffinity": {"required": {"nodeSelectorTerms": [term]}},
            },
        },
    )
    for name, cls in (("fast-data", "fast"), ("local-data", "local")):
        create(
            emulator,
            "",
            "persistentvolumeclaims",
            "default",
            {
                "metadata": {"name": name},
                "spec": {
                    "storageClassName": cls,
                    "accessModes": ["ReadWriteOnce"],
                    "resources": {"requests": {"storage": "50Gi"}},
                },
            },
        )


def mounting(emulator: Emulator, name: str, claim: str, gpus: int = 1) -> None:
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {"cpu": "1"}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    create(
        emulator,
        "",
        "pods",
        "default",
        {
            "metadata": {"name": name},
            "spec": {
                "schedulerName": "gpufleet",
                "containers": [container],
                "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
            },
        },
    )


def claims(emulator: Emulator) -> dict[str, JSON]:
    listed, _ = emulator.store.list(
        emulator.store.resource("", "v1", "persistentvolumeclaims"), "default"
    )
    return {c["metadata"]["name"]: c for c in listed}


def volume(emulator: Emulator, name: str) -> JSON:
    listed, _ = emulator.store.list(emulator.store.resource("", "v1", "persistentvolumes"), "")
    return next(v for v in listed if v["metadata"]["name"] == name)


def test_claims_are_written_before_their_pods_are_bound(emulator: Emulator) -> None:
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        node(emulator, name, zone)
    storage(emulator)
    mounting(emulator, "provisioned", "fast-data")
    mounting(emulator, "local", "local-data")
    mounting(emulator, "orphan", "missing")

    def settled(_live: LiveScheduler) -> bool:
        return len(bound(emulator)) == 2 and unschedulable(emulator, "orphan") is not None

    serve(emulator, settled)
    placed = bound(emulator)
    assert placed == {"provisioned": "b1", "local": "a2"}
    annotations = claims(emulator)["fast-data"]["metadata"].get("annotations") or {}
    assert annotations.get("volume.kubernetes.io/selected-node") == "b1"
    ref = volume(emulator, "local-a2")["spec"]["claimRef"]
    uid = claims(emulator)["local-data"]["metadata"]["uid"]
    assert (ref["namespace"], ref["name"], ref["uid"]) == ("default", "local-data", uid)
    assert unschedulable(emulator, "orphan") == (
        '0/3 nodes are available: persistentvolumeclaim "missing" not found.'
    )
    # each pod's volume is written before the pod is bound
    writes = [(w.verb, w.resource, w.name) for w in emulator.store.writes]
    for pod, written in (
        ("provisioned", ("patch", "persistentvolumeclaims", "fast-data")),
        ("local", ("patch", "persistentvolumes", "local-a2")),
    ):
        bind = next(i for i, w in enumerate(writes) if w[0] == "bind" and w[2] == pod)
        assert written in writes[:bind], writes


def test_anti_affinity_spread_and_a_waiting_claim_in_one_cluster(emulator: Emulator) -> None:
    """The three together, as a new user's cluster has them: an inference Deployment kept
    apart by anti-affinity, a zone spread, and a training pod whose claim is provisioned
    where it lands."""
    for name, zone in (("a1", "a"), ("a2", "a"), ("b1", "b")):
        node(emulator, name, zone)
    storage(emulator)
    for i in range(3):
        replica(emulator, f"infer-{i}", "infer", apart("infer"))
    for i in range(2):
        replica(emulator, f"web-{i}", "web", spread("web"))
    mounting(emulator, "train", "fast-data")

    def settled(_live: LiveScheduler) -> bool:
        return len(bound(emulator)) == 6

    serve(emulator, settled)
    placed = bound(emulator)
    assert sorted(placed[f"infer-{i}"] for i in range(3)) == ["a1", "a2", "b1"]
    assert sorted(placed[f"web-{i}"][0] for i in range(2)) == ["a", "b"]
    assert placed["train"] == "b1"  # the class provisions in zone b only
    annotations = claims(emulator)["fast-data"]["metadata"].get("annotations") or {}
    assert annotations["volume.kubernetes.io/selected-node"] == "b1"


def test_a_refused_volume_write_fails_the_bind(emulator: Emulator) -> None:
    node(emulator, "b1", "b")
    storage(emulator)
    mounting(emulator, "provisioned", "fast-data")
    emulator.faults.fail(None, code=403, method="PATCH", path="/persistentvolumeclaims/fast-data$")

    def tried(live: LiveScheduler) -> bool:
        return live.stats.bind_failures >= 1

    live = serve(emulator, tried)
    assert "provisioned" not in bound(emulator)
    assert live.stats.bind_failures >= 1
    assert pods(emulator)["provisioned"]["spec"].get("nodeName") is None
