"""Serving workloads' replica counts as a serving queue's demand (``load/objects/workloads.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.workloads import read_workload

QUEUE = {"gpufleet.io/queue": "inference"}


def pod(gpus: object, labels: dict[str, str] | None = None, part: str = "limits") -> Any:
    resources = {part: {"nvidia.com/gpu": gpus, "cpu": "4"}}
    return {
        "metadata": {"labels": QUEUE if labels is None else labels},
        "spec": {"containers": [{"name": "c", "resources": resources}, {"name": "sidecar"}]},
    }


def workload(kind: str, spec: dict[str, Any]) -> Reader:
    return Reader(
        "test.yaml", {"kind": kind, "metadata": {"name": "web", "namespace": "ml"}, "spec": spec}
    )


@pytest.mark.parametrize(
    ("kind", "spec", "gpus"),
    [
        pytest.param("Deployment", {"replicas": 3, "template": pod(2)}, 6.0, id="deployment"),
        pytest.param("StatefulSet", {"template": pod("1")}, 1.0, id="one-replica-by-default"),
        pytest.param(
            "Deployment", {"replicas": 2, "template": pod(4, part="requests")}, 8.0, id="requests"
        ),
        pytest.param("Deployment", {"replicas": 0, "template": pod(8)}, 0.0, id="scaled-to-zero"),
        pytest.param(
            "LeaderWorkerSet",
            {
                "replicas": 2,
                "leaderWorkerTemplate": {
                    "size": 4,
                    "leaderTemplate": pod(1),
                    "workerTemplate": pod(8),
                },
            },
            2 * (1 + 3 * 8),
            id="leader-and-workers",
        ),
        pytest.param(
            "LeaderWorkerSet",
            {"leaderWorkerTemplate": {"size": 2, "workerTemplate": pod(8)}},
            16.0,
            id="workers-lead-too",
        ),
    ],
)
def test_a_workload_asks_its_queue_for_its_replicas_gpus(
    kind: str, spec: dict[str, Any], gpus: float
) -> None:
    made = read_workload(workload(kind, spec), kind)
    assert made is not None
    assert (made.key, made.queue, made.gpus) == ("ml/web", "inference", gpus)


def test_a_workload_of_no_queue_asks_nothing() -> None:
    assert (
        read_workload(workload("Deployment", {"template": pod(8, labels={})}), "Deployment") is None
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"template": pod("lots")}, "spec.template.spec.containers[0].resources.limits"),
        ({"replicas": -1, "template": pod(1)}, "spec.replicas"),
        ({"replicas": 10**7, "template": pod(1)}, "spec.replicas"),
        ({"template": {"metadata": {"labels": QUEUE}, "spec": {"containers": 4}}}, "containers"),
    ],
)
def test_a_bad_workload_is_an_error_naming_its_field(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError, match=field.replace("[", r"\[").replace("]", r"\]")):
        read_workload(workload("Deployment", spec), "Deployment")


def test_a_leader_worker_set_s_own_stateful_sets_are_not_counted_again() -> None:
    owned = workload("StatefulSet", {"replicas": 3, "template": pod(8)})
    owned.obj["metadata"]["ownerReferences"] = [
        {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": "l",
         "uid": "u", "controller": True}
    ]  # fmt: skip
    assert read_workload(owned, "StatefulSet") is None


def test_a_workload_of_no_queue_is_not_read_further() -> None:
    """A Deployment gpufleet has no stake in is never an error, whatever its template."""
    spec = {"template": {"metadata": {"labels": {}}, "spec": {"containers": 4}}}
    assert read_workload(workload("Deployment", spec), "Deployment") is None
