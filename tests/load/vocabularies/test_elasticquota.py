"""scheduler-plugins' ElasticQuota, read as the queue of its namespace.

``min`` as the quota, ``max`` as the limit (Kubernetes quantities), the namespace as the
queue's name; a pod's own queue wins over its namespace's; and what bad input says.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import ALL, VOLCANO
from gpufleet.load.snapshot import parse_snapshot
from gpufleet.model.workload import Snapshot

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
}
EQ = "scheduling.x-k8s.io/v1alpha1"


def quota(namespace: str = "team-a", name: str = "quota", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": EQ,
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def pod(name: str = "p", namespace: str = "team-a", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "schedulerName": "default-scheduler",
            "nodeName": "n1",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def read(*objects: dict[str, Any], vocabularies: frozenset[str] = ALL) -> Snapshot:
    warned: list[str] = []
    snap = parse_snapshot([NODE, *objects], "s.yaml", warn=warned.append, vocabularies=vocabularies)
    if vocabularies == ALL:
        assert warned == []
    return snap


def test_min_is_the_quota_and_max_the_limit() -> None:
    eq = quota(
        min={"nvidia.com/gpu": 1, "cpu": "10", "memory": "20Gi"},
        max={"nvidia.com/gpu": 2, "cpu": 20, "memory": "40Gi"},
    )
    (q,) = read(eq).queues
    assert q.name == "team-a"
    assert q.parent is None
    assert list(q.quota) == [1, 10_000, 20 * 1024]
    assert list(q.limit) == [2, 20_000, 40 * 1024]
    assert q.quota_set == (True, True, True)


def test_a_resource_not_named_has_no_quota_and_no_limit() -> None:
    (q,) = read(quota(min={"cpu": "500m"}, max={"nvidia.com/gpu": 4})).queues
    assert list(q.quota) == [0, 500, 0]
    assert q.limit[0] == 4
    assert math.isinf(q.limit[1])
    assert math.isinf(q.limit[2])
    assert q.quota_set == (False, True, False)


def test_a_pod_of_the_namespace_belongs_to_its_quota_even_of_another_scheduler() -> None:
    snap = read(quota(min={"cpu": 1}), pod("a"), pod("b", namespace="other"))
    queues = {p.key: p.queue for p in snap.pods}
    assert queues == {"team-a/a": "team-a", "other/b": ""}


def test_a_pods_own_queue_label_wins() -> None:
    team_b = {"apiVersion": "gpufleet.io/v1alpha1", "kind": "Queue", "metadata": {"name": "b"}}
    snap = read(quota(), team_b, pod("a", **{"gpufleet.io/queue": "b"}))
    assert [p.queue for p in snap.pods] == ["b"]


def test_max_below_min_is_refused_naming_the_field() -> None:
    with pytest.raises(InputError) as err:
        read(quota(min={"nvidia.com/gpu": 4}, max={"nvidia.com/gpu": 2}))
    assert str(err.value) == (
        "s.yaml: ElasticQuota quota: field 'spec.max.nvidia.com/gpu': expected at least "
        "spec.min.nvidia.com/gpu (4), got 2.0"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"min": {"cpu": "lots"}},
            "field 'spec.min.cpu': expected a non-negative quantity such as '500m', '4' or '80Gi', "
            "got 'lots'",
        ),
        (
            {"max": {"memory": "-1Gi"}},
            "field 'spec.max.memory': expected a non-negative quantity such as '500m', '4' "
            "or '80Gi', got '-1Gi'",
        ),
        ({"min": ["cpu"]}, "field 'spec.min': expected a mapping, got ['cpu']"),
    ],
)
def test_bad_resource_lists(spec: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError) as err:
        read(quota(**spec))
    assert str(err.value) == f"s.yaml: ElasticQuota quota: {message}"


def test_two_quotas_of_one_namespace_collide() -> None:
    with pytest.raises(InputError) as err:
        read(quota(name="q1"), quota(name="q2"))
    assert str(err.value) == (
        "s.yaml: Queue team-a: defined twice: by ElasticQuota scheduling.x-k8s.io/v1alpha1 "
        "team-a/q1 and by ElasticQuota scheduling.x-k8s.io/v1alpha1 team-a/q2; keep one, or "
        "leave one vocabulary out"
    )


def test_a_queue_named_as_the_namespace_collides() -> None:
    own = {"apiVersion": "gpufleet.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"}}
    with pytest.raises(
        InputError,
        match=r"defined twice: by Queue gpufleet\.io/v1alpha1 team-a "
        r"and by ElasticQuota scheduling\.x-k8s\.io/v1alpha1 team-a/quota",
    ):
        read(own, quota())


def test_left_out_it_is_skipped_with_a_warning() -> None:
    warned: list[str] = []
    snap = parse_snapshot(
        [NODE, quota(), pod()], "s.yaml", warn=warned.append, vocabularies=frozenset({VOLCANO})
    )
    assert snap.queues == ()
    assert [p.queue for p in snap.pods] == [""]
    assert warned == [
        "s.yaml: skipped 1 ElasticQuota object of API group scheduling.x-k8s.io "
        "(scheduling.x-k8s.io/v1alpha1): the capacityscheduling vocabulary is not read"
    ]
