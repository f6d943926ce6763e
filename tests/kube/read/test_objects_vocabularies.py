"""Other schedulers' objects read live (``gpufleet serve --vocabulary``): each is translated
as the what-if reads it; two objects defining one queue or gang are settled by precedence,
gpufleet's own first, and the one not read is reported; a kind whose vocabulary is off is
not read at all."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from gpufleet.kube.read.kinds import kinds
from gpufleet.kube.read.objects import ObjectStore
from gpufleet.load.foreign import ELASTIC_QUOTA, KAI_POD_GROUP, KAI_QUEUE, VOLCANO_QUEUE
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec
from tests.kube.read.test_objects import node, pod

Obj = dict[str, Any]
ALL = frozenset({"kai", "volcano", "capacityscheduling"})


def kai_queue(name: str = "team-a", gpus: int = 4) -> Obj:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    return {
        "apiVersion": "scheduling.run.ai/v2",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"kai-{name}"},
        "spec": {
            "resources": {
                "gpu": {"quota": gpus, "limit": gpus, "overQuotaWeight": 1},
                "cpu": unlimited,
                "memory": unlimited,
            }
        },
    }


def own_queue(name: str = "team-a", gpus: int = 8) -> Obj:
    return {
        "apiVersion": "gpufleet.io/v1alpha1",
        "kind": "Queue",
        "metadata": {"name": name, "uid": f"own-{name}"},
        "spec": {"resources": {"gpu": {"quota": gpus}}},
    }


def volcano_queue(name: str, parent: str | None = None) -> Obj:
    spec: Obj = {"capability": {"nvidia.com/gpu": 2}}
    if parent:
        spec["parent"] = parent
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": spec,
    }


def kai_group(name: str = "g", queue: str = "team-a") -> Obj:
    return {
        "apiVersion": "scheduling.run.ai/v2alpha2",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"minMember": 2, "queue": queue},
    }


def test_kinds_follow_the_vocabularies_each_after_what_it_is_read_as() -> None:
    assert kinds(frozenset()) == kinds(frozenset({"kueue"}))  # nothing live to read there
    read = kinds(ALL)
    assert read.index("Queue") < read.index(KAI_QUEUE.key) < read.index("PodGroup")
    assert read.index(ELASTIC_QUOTA.key) < read.index(KAI_POD_GROUP.key) < read.index("Pod")
    with pytest.raises(ValueError, match="not translated live"):
        ObjectStore().apply("ADDED", KAI_QUEUE.key, kai_queue())


def test_a_kai_queue_and_its_pods_read_as_in_a_what_if() -> None:
    store = ObjectStore(vocabularies=ALL)
    [event] = store.apply("ADDED", KAI_QUEUE.key, kai_queue(gpus=4)).events
    assert (event.type, event.kind) == ("ADDED", "Queue")
    assert isinstance(event.obj, QueueSpec)
    assert event.obj.limit[0] == 4
    kai_pod = pod()
    kai_pod["metadata"]["labels"] = {"kai.scheduler/queue": "team-a"}
    kai_pod["metadata"]["annotations"] = {"gpu-fraction": "0.5", "pod-group-name": "g"}
    del kai_pod["spec"]["containers"][0]["resources"]
    [read] = store.apply("ADDED", "Pod", kai_pod).events
    assert isinstance(read.obj, PodInfo)
    assert (read.obj.queue, read.obj.spec.gpu_milli) == ("team-a", 500)
    assert "does not exist" in read.obj.blocked  # its KAI PodGroup, named by annotation
    events = store.apply("ADDED", KAI_POD_GROUP.key, kai_group()).events
    assert [(e.type, e.kind) for e in events] == [("ADDED", "PodGroup"), ("MODIFIED", "Pod")]
    assert isinstance(events[0].obj, GroupSpec)
    assert events[1].obj.blocked == ""  # type: ignore[union-attr]


def test_kai_s_priority_classes_stand_until_the_cluster_has_its_own() -> None:
    store = ObjectStore(vocabularies=frozenset({"kai"}))
    store.apply("ADDED", "Node", node())
    trained = pod(priority_class="inference")
    [event] = store.apply("ADDED", "Pod", trained).events
    assert event.obj.priority == 125  # type: ignore[union-attr]
    own = {"metadata": {"name": "inference"}, "value": 7, "kind": "PriorityClass"}
    [event] = store.apply("ADDED", "PriorityClass", own).events
    assert event.obj.priority == 7  # type: ignore[union-attr]
    [event] = store.apply("DELETED", "PriorityClass", own).events
    assert event.obj.priority == 125  # type: ignore[union-attr]
    assert ObjectStore().apply("ADDED", "Pod", trained).problems  # without kai: unknown class


def test_two_objects_of_one_queue_name_gpufleet_s_own_is_read_and_the_other_reported() -> None:
    store = ObjectStore(vocabularies=ALL)
    first = store.apply("ADDED", KAI_QUEUE.key, kai_queue(gpus=4))
    assert first.problems == ()
    changes = store.apply("ADDED", "Queue", own_queue(gpus=8))
    [(kind, problem)] = [(p.kind, p.message) for p in changes.problems]
    assert kind == KAI_QUEUE.key
    assert problem == (
        "Queue team-a defined twice: by Queue gpufleet.io/v1alpha1 team-a and by Queue "
        "scheduling.run.ai/v2 team-a; the second is not read: keep one, or leave one "
        "vocabulary out"
    )
    [event] = changes.events
    assert event.type == "MODIFIED"
    assert store.made["Queue"]["team-a"].quota[0] == 8  # type: ignore[union-attr]
    assert store.defined_by("Queue", "team-a") == "Queue"
    # Said once: the KAI queue's next version (its status, say) is not reported again.
    again = kai_queue(gpus=4)
    again["metadata"]["resourceVersion"] = "2"
    assert store.apply("MODIFIED", KAI_QUEUE.key, again).problems == ()
    # gpufleet's gone, the KAI queue is read; a new collision is reported anew.
    [event] = store.apply("DELETED", "Queue", own_queue()).events
    assert store.made["Queue"]["team-a"].limit[0] == 4  # type: ignore[union-attr]
    assert store.defined_by("Queue", "team-a") == KAI_QUEUE.key
    assert store.apply("ADDED", "Queue", own_queue()).problems != ()


def test_a_volcano_queue_under_root_is_top_level_and_root_itself_is_no_queue() -> None:
    store = ObjectStore(vocabularies=ALL)
    assert store.apply("ADDED", VOLCANO_QUEUE.key, volcano_queue("root")).events == ()
    [event] = store.apply("ADDED", VOLCANO_QUEUE.key, volcano_queue("a", "root")).events
    assert isinstance(event.obj, QueueSpec)
    assert event.obj.parent is None


def test_an_elastic_quota_is_the_queue_of_its_namespace_s_pods() -> None:
    store = ObjectStore(vocabularies=ALL)
    store.apply("ADDED", "Node", node())
    [before] = store.apply("ADDED", "Pod", pod()).events
    assert before.obj.queue == "default"  # type: ignore[union-attr]
    quota = {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": "quota", "namespace": "ml"},
        "spec": {"max": {"nvidia.com/gpu": 2}},
    }
    events = store.apply("ADDED", ELASTIC_QUOTA.key, quota).events
    assert [(e.type, e.kind) for e in events] == [("ADDED", "Queue"), ("MODIFIED", "Pod")]
    assert events[1].obj.queue == "ml"  # type: ignore[union-attr]
    events = store.apply("DELETED", ELASTIC_QUOTA.key, quota).events
    assert events[-1].obj.queue == "default"  # type: ignore[union-attr]


def test_a_kai_gang_counts_its_pods_that_succeeded() -> None:
    """A pod named into a KAI PodGroup by annotation succeeds: the KAI PodGroup is read
    again, counting it (a gang one of whose pods succeeded is never stale)."""
    store = ObjectStore(vocabularies=ALL)
    store.apply("ADDED", "Node", node())
    store.apply("ADDED", KAI_POD_GROUP.key, kai_group())
    member = pod("w", node_name="n0")
    member["metadata"]["annotations"] = {"pod-group-name": "g", "gpufleet.io/gpu-index": "0"}
    member["status"] = {"phase": "Running"}
    store.apply("ADDED", "Pod", member)
    done = copy.deepcopy(member)  # a watch brings a new object, never the one it brought
    done["metadata"]["resourceVersion"] = "2"
    done["status"] = {"phase": "Succeeded"}
    events = store.apply("MODIFIED", "Pod", done).events
    assert [(e.type, e.kind) for e in events] == [("DELETED", "Pod"), ("MODIFIED", "PodGroup")]
    assert isinstance(events[1].obj, GroupSpec)
    assert (events[1].obj.key, events[1].obj.succeeded) == ("ml/g", 1)
