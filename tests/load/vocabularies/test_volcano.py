"""Volcano's objects, read as gpufleet's queues and gangs.

Volcano's resource lists (Kubernetes quantities), ``capability`` as the limit,
``deserved`` (else ``guarantee``) as the quota, one ``weight`` for every resource, ``root``
as no parent; the pod annotations that name a PodGroup and a queue; and what bad input says.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import ALL, KAI
from gpufleet.load.snapshot import parse_snapshot
from gpufleet.model.workload import Snapshot

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
}
VOLCANO = "scheduling.volcano.sh/v1beta1"


def volcano_queue(name: str = "team-a", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": VOLCANO, "kind": "Queue", "metadata": {"name": name}, "spec": spec}


def volcano_group(name: str = "job", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": VOLCANO,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": spec,
    }


def volcano_pod(name: str = "p", **annotations: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "ml", "annotations": annotations},
        "spec": {
            "schedulerName": "volcano",
            "containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
        },
    }


def read(*objects: dict[str, Any], vocabularies: frozenset[str] = ALL) -> Snapshot:
    """The snapshot of ``objects`` and a node (every vocabulary read unless told); with
    every vocabulary read, nothing is skipped."""
    warned: list[str] = []
    snap = parse_snapshot(
        [NODE, *objects],
        "s.yaml",
        warn=warned.append,
        schedulers=("gpufleet", "volcano"),
        vocabularies=vocabularies,
    )
    assert warned == [] or vocabularies != ALL
    return snap


def test_queue_capability_deserved_weight_and_parent() -> None:
    org, team = read(
        volcano_queue(
            weight=3,
            priority=5,
            parent="org",
            capability={"nvidia.com/gpu": 4, "cpu": "16", "memory": "64Gi", "pods": 100},
            deserved={"nvidia.com/gpu": 2, "cpu": "8"},
            guarantee={"resource": {"nvidia.com/gpu": 1, "memory": "32Gi"}},
            reclaimable=False,
        ),
        volcano_queue("org", parent="root"),
    ).queues
    assert (team.parent, team.priority, org.parent, org.priority) == ("org", 5, None, 0)
    assert list(team.limit) == [4, 16000, 64 * 1024]
    assert list(team.quota) == [2, 8000, 32 * 1024]  # deserved, else guarantee
    assert team.quota_set == (True, True, True)
    assert list(team.weight) == [3, 3, 3]
    assert list(org.limit) == [math.inf] * 3  # no capability: no limit
    assert (list(org.quota), org.quota_set) == ([0, 0, 0], (False, False, False))
    assert list(org.weight) == [1, 1, 1]  # Volcano's default weight


def test_pod_group_gang_and_the_pods_annotations() -> None:
    snap = read(
        volcano_queue(),
        volcano_queue("other"),
        volcano_group(minMember=2, queue="team-a", minResources={"nvidia.com/gpu": 2}),
        volcano_group("lone"),
        volcano_pod("a", **{"scheduling.k8s.io/group-name": "job"}),
        volcano_pod("b", **{"scheduling.volcano.sh/group-name": "job"}),
        volcano_pod("c", **{"volcano.sh/queue-name": "other"}),
        volcano_pod("d", **{"scheduling.volcano.sh/queue-name": "team-a"}),
        volcano_pod("e", **{"scheduling.k8s.io/group-name": "lone"}),
    )
    job, lone = snap.groups
    assert (job.key, job.min_member, job.queue) == ("ml/job", 2, "team-a")
    assert (lone.min_member, lone.queue) == (1, "default")  # Volcano's defaults
    a, b, c, d, e = snap.pods
    assert (a.group, a.queue, b.group, b.queue) == ("ml/job", "team-a", "ml/job", "team-a")
    assert (c.queue, d.queue, e.queue) == ("other", "team-a", "default")


def test_with_volcano_off_its_objects_and_pod_names_are_not_read() -> None:
    snap = read(
        volcano_queue(),
        volcano_pod(**{"volcano.sh/queue-name": "team-a"}),
        vocabularies=frozenset({KAI}),
    )
    assert snap.queues == ()
    (pod,) = snap.pods
    assert pod.queue == "default"


def test_a_volcano_queue_and_a_kai_queue_of_one_name_collide() -> None:
    kai = {"apiVersion": "scheduling.run.ai/v2", "kind": "Queue", "metadata": {"name": "team-a"}}
    with pytest.raises(InputError) as caught:
        read(kai, volcano_queue())
    assert str(caught.value) == (
        "s.yaml: Queue team-a: defined twice: by Queue scheduling.run.ai/v2 team-a and by "
        f"Queue {VOLCANO} team-a; keep one, or leave one vocabulary out"
    )


@pytest.mark.parametrize(
    "other",
    ["scheduling.x-k8s.io/v1alpha1", "scheduling.run.ai/v2alpha2"],
    ids=["coscheduling", "kai"],
)
def test_a_volcano_gang_and_another_of_one_name_collide(other: str) -> None:
    theirs = {
        "apiVersion": other,
        "kind": "PodGroup",
        "metadata": {"name": "job", "namespace": "ml"},
    }
    with pytest.raises(InputError, match=f"PodGroup {other} ml/job and by PodGroup {VOLCANO}"):
        read(theirs, volcano_group())


@pytest.mark.parametrize(
    ("obj", "field", "expected"),
    [
        pytest.param(
            volcano_queue(weight=-1),
            "spec.weight",
            "expected an integer >= 1, got -1",
            id="negative-weight",
        ),
        pytest.param(
            volcano_queue(weight=70000),
            "spec.weight",
            "expected an integer from 1 to 65535, got 70000",
            id="weight-above-volcanos-maximum",
        ),
        pytest.param(
            volcano_queue(capability={"nvidia.com/gpu": "four"}),
            "spec.capability.nvidia.com/gpu",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got 'four'",
            id="capability-not-a-quantity",
        ),
        pytest.param(
            volcano_queue(capability=["cpu"]),
            "spec.capability",
            "expected a mapping, got ['cpu']",
            id="capability-not-a-resource-list",
        ),
        pytest.param(
            volcano_queue(capability={"cpu": 4}, deserved={"cpu": 8}),
            "spec.deserved.cpu",
            "expected at most spec.capability.cpu (4000), got 8000",
            id="deserved-above-capability",
        ),
        pytest.param(
            volcano_queue(
                guarantee={"resource": {"nvidia.com/gpu": 2}}, deserved={"nvidia.com/gpu": 1}
            ),
            "spec.deserved.nvidia.com/gpu",
            "expected at least spec.guarantee.resource.nvidia.com/gpu (2), got 1",
            id="deserved-below-guarantee",
        ),
        pytest.param(
            volcano_queue(guarantee=4),
            "spec.guarantee",
            "expected a mapping, got 4",
            id="guarantee-not-a-mapping",
        ),
        pytest.param(
            volcano_queue(parent=["org"]),
            "spec.parent",
            "expected a string, got ['org']",
            id="parent-not-a-name",
        ),
        pytest.param(
            volcano_group(minMember=-1),
            "spec.minMember",
            "expected an integer >= 0, got -1",
            id="negative-min-member",
        ),
        pytest.param(
            volcano_group(queue=7),
            "spec.queue",
            "expected a string, got 7",
            id="queue-not-a-name",
        ),
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
    assert "\n" not in str(caught.value)


def test_the_root_queue_of_a_hierarchical_volcano_is_the_cluster_not_a_queue() -> None:
    """``kubectl get queues.scheduling.volcano.sh`` on a hierarchical Volcano lists ``root``:
    it stands for the whole cluster, so it is no sibling of its children in gpufleet."""
    root = volcano_queue("root", weight=1, deserved={"nvidia.com/gpu": 8})
    child = volcano_queue("team-a", weight=1, parent="root")
    queues = {q.name for q in read(root, child).queues}
    assert "root" not in queues
    assert "team-a" in queues


def test_a_parent_cycle_names_volcanos_own_field() -> None:
    a = volcano_queue("a", weight=1, parent="b")
    b = volcano_queue("b", weight=1, parent="a")
    with pytest.raises(InputError) as caught:
        read(a, b)
    assert "field 'spec.parent':" in str(caught.value)
    assert "cycle" in str(caught.value)
