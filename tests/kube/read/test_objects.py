"""Objects as watches deliver them, translated one at a time (``kube/read/objects.py``): each
change is an event of the cache only when the translation changed; a pod is translated
again when the PodGroup, node or PriorityClass it reads changes, whatever order the watches
deliver them in; an object that cannot be read is a problem, and absent from the cache."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.kube.read.devices import read_pool
from gpufleet.kube.read.objects import ObjectStore
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.workload import GroupSpec, PodInfo

Obj = dict[str, Any]


def node(
    name: str = "n0", gpus: int = 8, *, labels: dict[str, str] | None = None, version: str = "1"
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "labels": labels or {},
        },
        "status": {"allocatable": {"cpu": "96", "memory": "512Gi", "nvidia.com/gpu": str(gpus)}},
    }


def pod(
    name: str = "p",
    *,
    gpus: int = 1,
    group: str | None = None,
    node_name: str | None = None,
    priority_class: str | None = None,
    version: str = "1",
) -> Obj:
    labels = {"scheduling.x-k8s.io/pod-group": group} if group else {}
    spec: Obj = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
    }
    if node_name:
        spec["nodeName"] = node_name
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "uid": f"uid-{name}",
            "resourceVersion": version,
            "labels": labels,
        },
        "spec": spec,
    }


def group(name: str = "g", queue: str = "team-a") -> Obj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "ml", "labels": {"gpufleet.io/queue": queue}},
        "spec": {"minMember": 2},
    }


def priority_class(name: str = "batch", value: int = 10) -> Obj:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def test_an_object_becomes_an_event_and_a_new_version_read_alike_is_none() -> None:
    store = ObjectStore()
    [added] = store.apply("ADDED", "Node", node()).events
    assert (added.type, added.kind) == ("ADDED", "Node")
    assert isinstance(added.obj, NodeSpec)
    assert added.obj.gpus == 8
    again = node()
    again["metadata"]["resourceVersion"] = "2"
    assert store.apply("MODIFIED", "Node", again).events == ()
    [modified] = store.apply("MODIFIED", "Node", node(gpus=4)).events
    assert modified.type == "MODIFIED"
    [deleted] = store.apply("DELETED", "Node", node(gpus=4)).events
    assert deleted.type == "DELETED"
    assert store.made["Node"] == {}


def test_a_pod_seen_before_its_node_is_read_when_the_node_arrives() -> None:
    store = ObjectStore()
    changes = store.apply("ADDED", "Pod", pod(node_name="n0"))
    assert changes.events == ()
    [problem] = changes.problems
    assert (problem.kind, problem.namespace, problem.name) == ("Pod", "ml", "p")
    assert "spec.nodeName" in problem.message
    events = store.apply("ADDED", "Node", node()).events
    assert [(e.type, e.kind) for e in events] == [("ADDED", "Node"), ("ADDED", "Pod")]
    assert isinstance(events[1].obj, PodInfo)
    assert events[1].obj.node == "n0"


def test_a_pod_of_a_missing_pod_group_waits_and_takes_its_queue_when_it_comes() -> None:
    store = ObjectStore()
    [first] = store.apply("ADDED", "Pod", pod(group="g")).events
    assert isinstance(first.obj, PodInfo)
    assert "does not exist" in first.obj.blocked
    events = store.apply("ADDED", "PodGroup", group()).events
    assert [(e.type, e.kind) for e in events] == [("ADDED", "PodGroup"), ("MODIFIED", "Pod")]
    again = events[1].obj
    assert isinstance(again, PodInfo)
    assert (again.blocked, again.queue, again.gang) == ("", "team-a", "ml/g")
    events = store.apply("DELETED", "PodGroup", group()).events
    assert [(e.type, e.kind) for e in events] == [("DELETED", "PodGroup"), ("MODIFIED", "Pod")]


def test_a_pod_group_status_write_reads_none_of_its_pods_again() -> None:
    """Pods read of their PodGroup whether it defines their gang and in which queue: the
    status gpufleet writes on it (once per gang and change) translates no pod again; a new
    queue, or the group gone, does."""
    store = ObjectStore()
    store.apply("ADDED", "Pod", pod(group="g"))
    store.apply("ADDED", "PodGroup", group())
    read, reads = store.lookups.read, []

    def counted(kind: str, r: Any) -> Any:
        reads.append(kind)
        return read(kind, r)

    store.lookups.read = counted  # type: ignore[method-assign]
    written = {**group(), "status": {"phase": "Scheduled", "scheduled": 2}}
    assert not store.apply("MODIFIED", "PodGroup", written).events
    assert reads == ["PodGroup"]
    events = store.apply("MODIFIED", "PodGroup", {**group(queue="team-b"), "status": {}}).events
    assert [(e.type, e.kind) for e in events] == [("MODIFIED", "PodGroup"), ("MODIFIED", "Pod")]
    assert isinstance(events[1].obj, PodInfo)
    assert events[1].obj.queue == "team-b"
    events = store.apply("DELETED", "PodGroup", group(queue="team-b")).events
    assert [(e.type, e.kind) for e in events] == [("DELETED", "PodGroup"), ("MODIFIED", "Pod")]
    assert isinstance(events[1].obj, PodInfo)
    assert "does not exist" in events[1].obj.blocked


def test_a_priority_class_sets_the_priority_of_the_pods_that_name_it() -> None:
    store = ObjectStore()
    assert store.apply("ADDED", "Pod", pod(priority_class="batch")).problems
    assert store.apply("ADDED", "PriorityClass", priority_class()).events[0].obj.priority == 10  # type: ignore[union-attr]
    [changed] = store.apply("MODIFIED", "PriorityClass", priority_class(value=50)).events
    assert changed.obj.priority == 50  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        pytest.param({"nvidia.com/gpu": "lots"}, "nvidia.com/gpu", id="quantity"),
        pytest.param({"nvidia.com/gpu": "1.5"}, "nvidia.com/gpu", id="fraction-of-a-device"),
    ],
)
def test_a_bad_object_is_a_problem_and_leaves_the_cache(bad: Obj, field: str) -> None:
    store = ObjectStore()
    store.apply("ADDED", "Node", node())
    assert store.apply("ADDED", "Pod", pod()).events
    broken = pod(version="2")
    broken["spec"]["containers"][0]["resources"]["limits"] = bad
    changes = store.apply("MODIFIED", "Pod", broken)
    assert [(e.type, e.kind) for e in changes.events] == [("DELETED", "Pod")]
    [problem] = changes.problems
    assert field in problem.message
    assert problem.uid == "uid-p"
    # everything else goes on: another pod is read
    assert store.apply("ADDED", "Pod", pod("q")).events


def test_a_structure_no_check_foresaw_is_a_problem_not_a_crash() -> None:
    store = ObjectStore()
    weird = node()
    weird["status"] = ["not", "a", "mapping"]
    [problem] = store.apply("ADDED", "Node", weird).problems
    assert problem.name == "n0"


def test_finished_pods_hold_nothing() -> None:
    store = ObjectStore()
    store.apply("ADDED", "Node", node())
    store.apply("ADDED", "Pod", pod(node_name="n0"))
    done = pod(node_name="n0", version="2")
    done["status"] = {"phase": "Succeeded"}
    [gone] = store.apply("MODIFIED", "Pod", done).events
    assert gone.type == "DELETED"


def rack_slice(rack: str = "r1") -> Obj:
    """A ResourceSlice whose devices serve the nodes labelled ``rack``."""
    term = {"matchExpressions": [{"key": "rack", "operator": "In", "values": [rack]}]}
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"fabric-{rack}"},
        "spec": {
            "driver": "fabric.example.com",
            "pool": {"name": rack, "generation": 0, "resourceSliceCount": 1},
            "nodeSelector": {"nodeSelectorTerms": [term]},
            "devices": [{"name": "link-0"}],
        },
    }


def test_only_a_change_of_a_nodes_labels_reads_the_pools_that_select_nodes_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store = ObjectStore()
    store.apply("ADDED", "ResourceSlice", rack_slice())
    reads = 0

    def counted(*args: Any) -> Any:
        nonlocal reads
        reads += 1
        return read_pool(*args)

    monkeypatch.setattr("gpufleet.kube.read.objects.read_pool", counted)
    added = store.apply("ADDED", "Node", node(labels={"rack": "r1"})).events
    assert [(e.type, e.kind) for e in added] == [("ADDED", "Node"), ("MODIFIED", "ResourcePool")]
    assert reads == 1
    # a heartbeat: a new version and status, the same labels
    beat = node(labels={"rack": "r1"}, version="2")
    beat["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    assert store.apply("MODIFIED", "Node", beat).events == ()
    assert reads == 1  # no pool read again
    moved = store.apply("MODIFIED", "Node", node(labels={"rack": "r2"}, version="3")).events
    assert [(e.type, e.kind) for e in moved] == [
        ("MODIFIED", "Node"),
        ("MODIFIED", "ResourcePool"),
    ]
    assert reads == 2
    gone = store.apply("DELETED", "Node", node(labels={"rack": "r2"}, version="3")).events
    assert [(e.type, e.kind) for e in gone] == [("DELETED", "Node")]
    assert reads == 3  # it left: the pool is read again, and serves no node either way


def test_a_nodes_status_update_reads_none_of_its_pods_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A bound pod reads only whether its node can be read and how many GPUs it has: a
    node update that keeps both (kubelet's status, a label) translates none of its pods;
    one that changes the GPUs, or takes the node away, translates them all."""
    store = ObjectStore()
    store.apply("ADDED", "Node", node())
    for i in range(3):
        bound = pod(f"p{i}", node_name="n0")
        bound["metadata"]["annotations"] = {"gpufleet.io/gpu-index": str(i)}
        store.apply("ADDED", "Pod", bound)
    read: list[str] = []
    translate = ObjectStore._translate

    def counted(self: ObjectStore, kind: str, key: str, *args: Any, **named: Any) -> None:
        read.append(f"{kind} {key}")
        translate(self, kind, key, *args, **named)

    monkeypatch.setattr(ObjectStore, "_translate", counted)
    assert store.apply("MODIFIED", "Node", node(version="2")).events == ()
    relabelled = store.apply("MODIFIED", "Node", node(labels={"zone": "a"}, version="3"))
    assert [e.kind for e in relabelled.events] == ["Node"]
    assert read == ["Node n0", "Node n0"]
    read.clear()
    shrunk = store.apply("MODIFIED", "Node", node(gpus=2, labels={"zone": "a"}, version="4"))
    assert read == ["Node n0", "Pod ml/p0", "Pod ml/p1", "Pod ml/p2"]
    [problem] = shrunk.problems  # GPU index 2 is not on a node of 2 GPUs any more
    assert problem.name == "p2"
    read.clear()
    store.apply("DELETED", "Node", node(gpus=2, labels={"zone": "a"}, version="5"))
    assert read == ["Node n0", "Pod ml/p0", "Pod ml/p1", "Pod ml/p2"]


def test_a_gang_counts_its_pods_that_succeeded() -> None:
    """A pod of a gang whose phase turns Succeeded leaves the cache, and its PodGroup is
    read again counting it; deleted afterwards (a Job's pods cleaned up), the count drops."""
    store = ObjectStore()
    store.apply("ADDED", "Node", node())
    store.apply("ADDED", "PodGroup", group())
    for name in ("a", "b"):
        running = pod(name, group="g", node_name="n0")
        running["metadata"]["annotations"] = {"gpufleet.io/gpu-index": "0" if name == "a" else "1"}
        running["status"] = {"phase": "Running"}
        store.apply("ADDED", "Pod", running)
    done = pod("b", group="g", node_name="n0", version="2")
    done["metadata"]["annotations"] = {"gpufleet.io/gpu-index": "1"}
    done["status"] = {"phase": "Succeeded"}
    events = store.apply("MODIFIED", "Pod", done).events
    assert [(e.type, e.kind) for e in events] == [("DELETED", "Pod"), ("MODIFIED", "PodGroup")]
    assert isinstance(events[1].obj, GroupSpec)
    assert events[1].obj.succeeded == 1
    again = pod("b", group="g", node_name="n0", version="3")  # a status update: no change
    again["metadata"]["annotations"] = {"gpufleet.io/gpu-index": "1"}
    again["status"] = {"phase": "Succeeded", "conditions": []}
    assert store.apply("MODIFIED", "Pod", again).events == ()
    [gone] = store.apply("DELETED", "Pod", again).events
    assert isinstance(gone.obj, GroupSpec)
    assert gone.obj.succeeded == 0


@pytest.mark.parametrize(
    ("owners", "field"),
    [
        pytest.param("oops", "metadata.ownerReferences", id="not-a-list"),
        pytest.param([5], "metadata.ownerReferences[0]", id="not-a-reference"),
        pytest.param([{"controller": True}], "metadata.ownerReferences[0].uid", id="no-uid"),
    ],
)
def test_a_bad_owner_reference_is_a_problem_and_never_frees_what_a_bound_pod_holds(
    owners: object, field: str
) -> None:
    """Who recreates a pod changes nothing it holds: a bound pod is read without its owners
    and keeps its GPUs; a pending one waits, reported, as for any bad field."""
    store = ObjectStore()
    store.apply("ADDED", "Node", node())
    running = pod(gpus=2, node_name="n0")
    running["metadata"]["ownerReferences"] = owners
    changes = store.apply("ADDED", "Pod", running)
    [held] = changes.events
    assert isinstance(held.obj, PodInfo)
    assert (held.obj.node, held.obj.spec.num_gpu, held.obj.owner) == ("n0", 2, "")
    assert [f"field '{field}'" in p.message for p in changes.problems] == [True]
    waiting = pod("q")
    waiting["metadata"]["ownerReferences"] = owners
    changes = store.apply("ADDED", "Pod", waiting)
    assert changes.events == ()
    assert [f"field '{field}'" in p.message for p in changes.problems] == [True]


def test_an_object_whose_metadata_is_not_a_mapping_is_a_problem_not_a_crash() -> None:
    """The reflector refuses such a watch event first; the store, given one anyway,
    reports it like any unreadable object."""
    store = ObjectStore()
    changes = store.apply("ADDED", "Pod", {"metadata": [1], "spec": {}})
    [problem] = changes.problems
    assert "metadata.name" in problem.message
    assert changes.events == ()
