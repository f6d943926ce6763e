"""KAI Scheduler's objects, read as gpufleet's queues, gangs and GPU shares.

KAI's units (millicores, megabytes of 10^6 bytes), its defaults (a field not written is 0)
and its ``-1`` (unlimited); the pod's queue label, its ``pod-group-name`` annotation, its
``gpu-fraction``/``gpu-memory`` annotations and KAI's predefined priority classes; and what
bad input says.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import NONE
from gpufleet.load.snapshot import parse_snapshot
from gpufleet.model.workload import Snapshot

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1", "labels": {"nvidia.com/gpu.memory": "81920"}},
    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
}


def kai_queue(name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def kai_pod(
    name: str = "p",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "labels": labels or {},
            "annotations": annotations or {},
        },
        "spec": {
            "schedulerName": "kai-scheduler",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def kai_group(subgroups: list[Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {"subGroups": subgroups, **spec},
    }


def test_subgroups_and_topology_constraints_are_read_as_kai_reads_them() -> None:
    group = kai_group(
        [
            {"name": "c", "minMember": 3, "topologyConstraint": {"requiredTopologyLevel": "rack"}},
            {"name": "a", "parent": "ab"},
            {"name": "ab", "topologyConstraint": {"preferredTopologyLevel": "spine"}},
            {"name": "b", "minMember": 2, "parent": "ab"},
        ],
        topologyConstraint={"topology": "t", "requiredTopologyLevel": "zone"},
    )
    snap = read(
        group,
        kai_pod(
            "p", annotations={"pod-group-name": "job"}, labels={"kai.scheduler/subgroup-name": "b"}
        ),
    )
    (gang,) = snap.groups
    assert gang.min_member == 6  # no minMember of its own: the leaves' 3 + 1 + 2
    assert gang.topology_required == "zone"
    assert [s.name for s in gang.subgroups] == ["c", "ab", "a", "b"]  # parents first
    assert [s.name for s in gang.leaves] == ["c", "b", "a"]  # confined first, then larger
    ab = next(s for s in gang.subgroups if s.name == "ab")
    assert (ab.required, ab.preferred, ab.min_member) == (None, "spine", 1)
    assert snap.pods[0].subgroup == "b"


def read(*objects: dict[str, Any]) -> Snapshot:
    """The snapshot of ``objects`` and a node, every vocabulary read (the default)."""
    warned: list[str] = []
    snap = parse_snapshot(
        [NODE, *objects], "s.yaml", warn=warned.append, schedulers=("gpufleet", "kai-scheduler")
    )
    assert warned == []
    return snap


def test_queue_units_are_kais() -> None:
    (queue,) = read(
        kai_queue(
            parentQueue="org",
            priority=200,
            preemptMinRuntime="5m",
            resources={
                "gpu": {"quota": 2, "limit": 4, "overQuotaWeight": 3},
                "cpu": {"quota": 2000, "limit": -1, "overQuotaWeight": 1},
                "memory": {"quota": 4096, "limit": 8192, "overQuotaWeight": 1},
            },
        ),
        kai_queue("org", resources={}),
    ).queues[1:]
    assert (queue.parent, queue.priority) == ("org", 200)
    assert queue.preempt_min_runtime_s == 300
    assert list(queue.quota) == [2, 2000, math.floor(4096e6 / 2**20)]  # MB -> MiB
    assert list(queue.limit) == [4, math.inf, math.floor(8192e6 / 2**20)]
    assert list(queue.weight) == [3, 1, 1]
    assert queue.quota_set == (True, True, True)


@pytest.mark.parametrize(
    ("resource", "quota", "limit", "weight", "set_"),
    [
        pytest.param({}, 0, 0, 0, False, id="unwritten-is-zero-as-in-kai"),
        pytest.param({"quota": -1, "limit": -1}, 0, math.inf, 0, False, id="minus-one-unlimited"),
        pytest.param({"quota": 3, "limit": 2}, 2, 2, 0, True, id="quota-cut-to-limit"),
        pytest.param({"quota": 0.5, "limit": 1.5}, 0.5, 1.5, 0, True, id="fractions-of-gpus"),
    ],
)
def test_gpu_quota_limit_and_weight(
    resource: dict[str, float], quota: float, limit: float, weight: float, set_: bool
) -> None:
    (queue,) = read(kai_queue(resources={"gpu": resource})).queues
    assert (queue.quota[0], queue.limit[0], queue.weight[0]) == (quota, limit, weight)
    assert queue.quota_set[0] is set_


def test_pod_group_queue_gang_and_share() -> None:
    group = {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ml"},
        "spec": {"minMember": 2, "queue": "team-a", "priorityClassName": "train"},
    }
    snap = read(
        kai_queue(resources={"gpu": {"limit": -1}}),
        group,
        kai_pod("a", annotations={"pod-group-name": "job", "gpu-fraction": "0.5"}),
        kai_pod("b", labels={"runai/queue": "team-a"}, annotations={"gpu-memory": "2000"}),
        kai_pod("c", labels={"kai.scheduler/queue": "team-a", "priorityClassName": "build"}),
    )
    (gang,) = snap.groups
    assert (gang.key, gang.min_member, gang.queue) == ("ml/job", 2, "team-a")
    a, b, c = snap.pods
    assert (a.group, a.queue, a.spec.num_gpu, a.spec.gpu_milli) == ("ml/job", "team-a", 1, 500)
    assert (b.queue, b.spec.gpu_memory_mib) == ("team-a", 2000)
    assert (c.queue, c.priority) == ("team-a", 100)  # KAI's predefined class "build"


def test_a_snapshots_own_priority_class_wins_over_kais() -> None:
    own = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "train"},
        "value": 7,
    }
    (pod,) = read(own, kai_pod(labels={"priorityClassName": "train"})).pods
    assert pod.priority == 7


def test_with_kai_off_its_pod_names_are_not_read() -> None:
    snap = parse_snapshot(
        [
            NODE,
            kai_pod(labels={"kai.scheduler/queue": "team-a"}, annotations={"gpu-fraction": "0.5"}),
        ],
        "s.yaml",
        warn=lambda _: None,
        schedulers=("kai-scheduler",),
        vocabularies=NONE,
    )
    (pod,) = snap.pods
    assert (pod.queue, pod.spec.num_gpu) == ("default", 0)


def test_two_vocabularies_defining_one_queue_name_both() -> None:
    own = {"apiVersion": "gpufleet.io/v1alpha1", "kind": "Queue", "metadata": {"name": "team-a"}}
    with pytest.raises(InputError) as caught:
        read(own, kai_queue())
    assert str(caught.value) == (
        "s.yaml: Queue team-a: defined twice: by Queue gpufleet.io/v1alpha1 team-a and by "
        "Queue scheduling.run.ai/v2 team-a; keep one, or leave one vocabulary out"
    )


def test_a_kai_gang_and_a_coscheduling_gang_of_one_name_collide() -> None:
    meta = {"name": "job", "namespace": "ml"}
    ours = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup", "metadata": meta}
    theirs = {"apiVersion": "scheduling.run.ai/v2alpha2", "kind": "PodGroup", "metadata": meta}
    with pytest.raises(InputError, match=r"PodGroup scheduling.run.ai/v2alpha2 ml/job"):
        read(ours, theirs)


@pytest.mark.parametrize(
    ("obj", "field", "expected"),
    [
        (
            kai_queue(resources={"gpu": {"limit": "four"}}),
            "spec.resources.gpu.limit",
            "expected a number (-1: unlimited), got 'four'",
        ),
        (
            kai_queue(resources={"cpu": {"quota": -2}}),
            "spec.resources.cpu.quota",
            "expected 0 or more, or -1 for unlimited, got -2",
        ),
        (
            kai_queue(resources={"memory": {"overQuotaWeight": -1}}),
            "spec.resources.memory.overQuotaWeight",
            "expected a weight of 0 or more, got -1",
        ),
        (
            kai_queue(resources={"gpu": 2}),
            "spec.resources.gpu",
            "expected a mapping, got 2",
        ),
        (
            kai_queue(parentQueue=["org"]),
            "spec.parentQueue",
            "expected a string, got ['org']",
        ),
        (
            kai_pod(annotations={"gpu-memory": "2Gi"}),
            "metadata.annotations.gpu-memory",
            "expected MiB of GPU memory of one GPU, such as '2000', got '2Gi'",
        ),
        (
            kai_pod(annotations={"gpu-fraction": "1.5"}),
            "metadata.annotations.gpu-fraction",
            "expected a fraction of one GPU in (0, 1], such as '0.5', got '1.5'",
        ),
        (
            kai_pod(labels={"priorityClassName": "urgent"}),
            "metadata.labels.priorityClassName",
            "expected a PriorityClass of the snapshot (or spec.priority), got 'urgent'",
        ),
        (
            {
                "apiVersion": "scheduling.run.ai/v2alpha2",
                "kind": "PodGroup",
                "metadata": {"name": "g", "namespace": "ml"},
                "spec": {"minMember": "two"},
            },
            "spec.minMember",
            "expected an integer, got 'two'",
        ),
        (kai_group([{"minMember": 2}]), "spec.subGroups[0].name", "expected a subgroup name"),
        (
            kai_group([{"name": "w"}, {"name": "w"}]),
            "spec.subGroups[1].name",
            "expected a name no other subgroup has, got 'w'",
        ),
        (
            kai_group([{"name": "w", "parent": "ps"}]),
            "spec.subGroups[0].parent",
            "expected the name of another subgroup, got 'ps'",
        ),
        (
            kai_group([{"name": "a", "parent": "b"}, {"name": "b", "parent": "a"}]),
            "spec.subGroups[0].parent",
            "expected parents without a cycle",
        ),
        (
            kai_group([{"name": "w", "minMember": -1}]),
            "spec.subGroups[0].minMember",
            "expected an integer >= 0, got -1",
        ),
        (
            kai_group([{"name": "w", "topologyConstraint": {"requiredTopologyLevel": 3}}]),
            "spec.subGroups[0].topologyConstraint.requiredTopologyLevel",
            "expected a node label key, got 3",
        ),
    ],
    ids=[
        "limit-not-a-number",
        "quota-below-minus-one",
        "weight-unlimited",
        "resource-not-a-mapping",
        "parent-not-a-name",
        "gpu-memory-with-a-unit",
        "fraction-above-one",
        "unknown-priority-class-label",
        "min-member-not-an-integer",
        "subgroup-without-a-name",
        "subgroup-name-twice",
        "subgroup-parent-missing",
        "subgroup-parents-in-a-cycle",
        "subgroup-min-member-negative",
        "topology-level-not-a-key",
    ],
)
def test_bad_input_names_object_field_and_expectation(
    obj: dict[str, Any], field: str, expected: str
) -> None:
    with pytest.raises(InputError) as caught:
        read(obj)
    assert caught.value.field == field
    assert expected in str(caught.value)
    assert f"{obj['kind']} " in caught.value.source
