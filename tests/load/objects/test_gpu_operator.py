"""GPU-operator nodes read from the labels GPU feature discovery writes
(load/objects/gpu_operator.py): what one advertised GPU is worth, the node's physical GPUs,
and what bad labels say; and the rules that follow (MPS gives a pod one replica; a replica of
no known count is a whole GPU).
"""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.compose import schedule_snapshot
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import parse_snapshot
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.workload import Snapshot
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.cycle.config import CycleConfig

A100 = "NVIDIA-A100-SXM4-40GB"


def node(labels: dict[str, str], gpus: int = 0, **allocatable: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n1", "labels": labels},
        "status": {
            "allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": str(gpus)}
            | allocatable
        },
    }


def pod(name: str, limits: dict[str, str], queue: str | None = None) -> dict[str, Any]:
    container = {"name": "c", "resources": {"limits": limits}}
    labels = {"gpufleet.io/queue": queue} if queue else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "labels": labels},
        "spec": {"schedulerName": "gpufleet", "containers": [container]},
    }


def read(*objects: dict[str, Any]) -> Snapshot:
    return parse_snapshot(list(objects), "snapshot.yaml", warn=lambda _: None)


def one_node(labels: dict[str, str], gpus: int = 0, **allocatable: str) -> NodeSpec:
    (spec,) = read(node(labels, gpus, **allocatable)).nodes
    return spec


MIG_SINGLE = {"nvidia.com/mig.strategy": "single"}
CASES = [
    ("mig-single", MIG_SINGLE | {"nvidia.com/gpu.product": f"{A100}-MIG-1g.5gb"}, 56,
     (1 / 7, 8, A100, "MIG 1g.5gb slice (1/7 of an NVIDIA-A100-SXM4-40GB)")),
    ("mig-single-3g", MIG_SINGLE | {"nvidia.com/gpu.product": f"{A100}-MIG-3g.20gb"}, 16,
     (3 / 7, 8, A100, "MIG 3g.20gb slice (3/7 of an NVIDIA-A100-SXM4-40GB)")),
    ("mig-single-time-sliced", MIG_SINGLE | {
        "nvidia.com/gpu.product": f"{A100}-MIG-1g.5gb-SHARED",
        "nvidia.com/gpu.replicas": "2",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }, 112, (1 / 14, 8, A100, "MIG 1g.5gb slice, time-sliced 2 ways (1/14 of")),
    ("mig-media-extensions", MIG_SINGLE | {"nvidia.com/gpu.product": f"{A100}-MIG-1g.5gb.me"},
     8, (1 / 7, 8, A100, "MIG 1g.5gb.me slice")),
    ("mig-compute-instance", MIG_SINGLE | {"nvidia.com/gpu.product": f"{A100}-MIG-1c.3g.20gb"},
     48, (1 / 7, 8, A100, "MIG 1c.3g.20gb slice")),
    ("time-slicing", {
        "nvidia.com/gpu.product": "Tesla-T4-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
    }, 16, (1 / 4, 4, "Tesla-T4", "time-sliced replica (1/4 of a Tesla-T4)")),
    ("more-replicas-than-whole-gpus-may-be", {
        "nvidia.com/gpu.product": "NVIDIA-A10G-SHARED",
        "nvidia.com/gpu.replicas": "32",
        "nvidia.com/gpu.count": "8",
    }, 256, (1 / 32, 8, "NVIDIA-A10G", "time-sliced replica (1/32 of an NVIDIA-A10G)")),
    ("replicas-0-is-not-shared", {"nvidia.com/gpu.product": A100, "nvidia.com/gpu.replicas": "0"},
     8, (1.0, None, A100, "")),
    ("mig-mixed-leaves-whole-gpus-whole",
     {"nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.product": A100}, 1,
     (1.0, None, A100, "")),
]  # fmt: skip


@pytest.mark.parametrize(
    ("labels", "gpus", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_what_one_advertised_gpu_is(
    labels: dict[str, str], gpus: int, expected: tuple[float, int | None, str, str]
) -> None:
    unit, physical, product, kind = expected
    spec = one_node(labels, gpus)
    assert spec.gpu_unit == pytest.approx(unit)
    assert spec.physical_gpus == physical
    assert spec.gpu_model == product
    assert kind in spec.gpu_sharing
    assert bool(spec.gpu_sharing) == bool(kind)


def test_renamed_replicas_are_worth_their_share_and_count_their_gpus() -> None:
    labels = {
        "nvidia.com/gpu.product": "Tesla-T4",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.count": "4",
        "nvidia.com/gpu.sharing-strategy": "mps",
    }
    spec = one_node(labels, 0, **{"nvidia.com/gpu.shared": "16"})
    assert (spec.gpus, spec.gpu_unit, spec.physical_gpus) == (0, 0.25, 4)
    assert spec.gpu_one_per_pod
    assert spec.gpu_worth == 4.0


@pytest.mark.parametrize(
    ("labels", "gpus", "field", "expected"),
    [
        (
            {"nvidia.com/gpu.replicas": "abc"},
            8,
            "nvidia.com/gpu.replicas",
            "expected an integer from 0 to 1024",
        ),
        ({"nvidia.com/gpu.replicas": "-1"}, 8, "nvidia.com/gpu.replicas", "from 0 to 1024"),
        (
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "1000"},
            16,
            "nvidia.com/gpu.count",
            "expected an integer from 1 to 128",
        ),
        (
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.count": "2"},
            16,
            "nvidia.com/gpu.count",
            "expected the node's GPUs: at least 4 for 16 advertised at 4 replicas each",
        ),
        (
            {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "bogus"},
            16,
            "nvidia.com/gpu.sharing-strategy",
            "expected none, time-slicing or mps, got 'bogus'",
        ),
        ({}, 129, "nvidia.com/gpu", "expected at most 128 GPUs on one node"),
        (
            {"nvidia.com/gpu.replicas": "8"},
            1032,
            "nvidia.com/gpu",
            "expected at most 1024 MIG slices or replicas on one node",
        ),
    ],
)
def test_bad_labels_name_the_node_and_the_label(
    labels: dict[str, str], gpus: int, field: str, expected: str
) -> None:
    with pytest.raises(InputError) as caught:
        read(node({"nvidia.com/gpu.product": "Tesla-T4", **labels}, gpus))
    assert field in str(caught.value.field)
    assert expected in str(caught.value)
    assert "Node n1" in caught.value.source


def test_a_node_whose_mig_configuration_is_invalid_is_read_as_gpu_feature_discovery_writes_it() -> (
    None
):
    labels = {
        "nvidia.com/gpu.product": f"{A100}-MIG-INVALID",
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.memory": "0",
        "nvidia.com/gpu.count": "0",
        "nvidia.com/gpu.replicas": "0",
    }
    spec = one_node(labels, 0)
    assert (spec.gpus, spec.gpu_memory_mib, spec.gpu_sharing) == (0, None, "")


def outcome(*objects: dict[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    result = schedule_snapshot(read(*objects), 0.0, CycleConfig())
    return (
        {b.pod: b.node for b in result.bindings},
        {p.pod: why_text(p.why) for p in result.pending},
    )


def test_mps_gives_a_pod_one_replica() -> None:
    mps = {
        "nvidia.com/gpu.product": "Tesla-T4-SHARED",
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.count": "2",
        "nvidia.com/gpu.sharing-strategy": "mps",
    }
    bound, pending = outcome(
        node(mps, 8), pod("one", {"nvidia.com/gpu": "1"}), pod("two", {"nvidia.com/gpu": "2"})
    )
    assert bound == {"ml/one": "n1"}
    assert "give a Pod at most one MPS replica of nvidia.com/gpu" in pending["ml/two"]


def test_replicas_of_no_known_count_are_whole_gpus_to_their_queue() -> None:
    queue = {
        "apiVersion": "gpufleet.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": "q"},
        "spec": {"resources": {"gpu": {"limit": 1}}},
    }
    shared = {"nvidia.com/gpu.shared": "1"}
    bound, pending = outcome(
        node({}, 0, **{"nvidia.com/gpu.shared": "8"}),
        queue,
        pod("s0", shared, "q"),
        pod("s1", shared, "q"),
    )
    assert len(bound) == 1  # each counts a whole GPU: the limit holds one
    assert "queue q is at its limit of 1 GPU" in next(iter(pending.values()))
