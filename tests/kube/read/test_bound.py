"""What a bound pod holds (``kube/read/bound.py``): a job's own annotations of its run, and
its owner references, never hide the GPUs it holds."""

from __future__ import annotations

import copy
import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.kube.read import bound, objects
from gpufleet.kube.read.bound import requests_only
from gpufleet.kube.read.kinds import API, LIVE_VOCABULARIES
from gpufleet.kube.read.objects import ObjectStore
from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.pods import PROGRESS_ANNOTATIONS, read_bound
from gpufleet.load.objects.vocabulary import GPU_INDEX_ANNOTATION
from gpufleet.model.workload import PodInfo


def test_read_by_its_requests_a_bound_pod_drops_what_it_says_of_its_run() -> None:
    notes = dict.fromkeys(PROGRESS_ANNOTATIONS, "not a value") | {"team": "a"}
    meta = {"name": "p", "namespace": "ml", "annotations": notes, "ownerReferences": "oops"}
    raw = {"metadata": meta, "spec": {}}
    kept = requests_only(raw, PodNames())
    assert kept["metadata"]["annotations"] == {"team": "a"}
    assert "ownerReferences" not in kept["metadata"]
    assert raw["metadata"]["annotations"] == notes  # the object read is left as it was


SCENARIOS = Path(__file__).parents[2] / "scenarios"
STORE_KIND = {(version, kind.split()[0]): kind for kind, (version, _) in API.items()}
"""Each kind the live store translates, by the apiVersion and kind of its objects."""


def _docs(path: Path) -> tuple[dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    """A scenario's expectation, and its objects the live store translates (with uids)."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
    expected = next((d for d in docs if d.get("kind") == "Expectation"), {})
    objects = []
    for i, doc in enumerate(docs):
        kind = STORE_KIND.get((str(doc.get("apiVersion")), str(doc.get("kind"))))
        if kind is not None:
            doc.setdefault("metadata", {}).setdefault("uid", f"uid-{i}")
            objects.append((kind, doc))
    return expected, objects


def _bound(pending: dict[str, Any], node: str, gpus: list[int] | None, version: str) -> Any:
    """``pending`` as the API server has it once a Binding to ``node`` with gpufleet's GPU
    indexes is applied (``tests/apiserver/subresources.py``)."""
    bound = copy.deepcopy(pending)
    bound["spec"]["nodeName"] = node
    if gpus:
        notes = bound["metadata"].setdefault("annotations", {})
        notes[GPU_INDEX_ANNOTATION] = ",".join(str(g) for g in gpus)
    status = bound.setdefault("status", {})
    status.setdefault("conditions", []).append({"type": "PodScheduled", "status": "True"})
    bound["metadata"]["resourceVersion"] = version
    return bound


def _node_of(said: Any, docs: list[tuple[str, dict[str, Any]]]) -> str | None:
    """A node an expectation binds to: its own, the first of a list, the first Node for
    any ("*"); None: none said."""
    if isinstance(said, list):
        said = said[0] if said else None
    if said == "*":
        said = next((o["metadata"]["name"] for k, o in docs if k == "Node"), None)
    return said if isinstance(said, str) else None


def _store(objects: list[tuple[str, dict[str, Any]]]) -> ObjectStore:
    store = ObjectStore(vocabularies=LIVE_VOCABULARIES)
    for kind, obj in objects:
        store.apply("ADDED", kind, copy.deepcopy(obj))
    return store


def test_a_pending_pod_bound_and_nothing_else_reads_as_if_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod each scenario binds, bound as a Binding writes it: translated from what was
    read of it pending (its spec not read again), it is what reading it whole gives — every
    field, uid and resourceVersion included — with the same events and problems; and a pod
    whose labels changed with its binding is read whole."""
    fast: list[str] = []

    def counted(pending: PodInfo, *rest: Any) -> PodInfo:
        fast.append(pending.key)
        return read_bound(pending, *rest)

    monkeypatch.setattr(objects, "read_bound", counted)
    compared = 0
    for path in sorted(SCENARIOS.glob("*.yaml")):
        expected, docs = _docs(path)
        for key, said in sorted((expected.get("bindings") or {}).items()):
            where = said if isinstance(said, dict) else {"node": said}
            where["node"] = _node_of(where.get("node"), docs)
            if where["node"] is None:
                continue
            namespace, name = key.split("/")
            found = [
                (i, o)
                for i, (k, o) in enumerate(docs)
                if k == "Pod"
                and o["metadata"].get("name") == name
                and o["metadata"].get("namespace", "default") == namespace
            ]
            if not found or "nodeName" in found[0][1].get("spec", {}):
                continue
            i, pending = found[0]
            bound = _bound(pending, where["node"], where.get("gpus"), "7")
            others = docs[:i] + docs[i + 1 :]
            once = _store([*others, ("Pod", pending)])
            before = len(fast)
            changes = once.apply("MODIFIED", "Pod", copy.deepcopy(bound))
            assert len(fast) == before + 1, f"{path.name} {key}: read whole"
            whole = _store(others)
            read = whole.apply("ADDED", "Pod", copy.deepcopy(bound))
            got, want = once.made["Pod"].get(key), whole.made["Pod"].get(key)
            assert isinstance(got, PodInfo)
            assert isinstance(want, PodInfo)
            assert dataclasses.asdict(got) == dataclasses.asdict(want), f"{path.name} {key}"
            assert (got.uid, got.resource_version) == (want.uid, want.resource_version)
            assert [(e.type, e.obj) for e in changes.events] == [
                ("MODIFIED" if e.type == "ADDED" else e.type, e.obj) for e in read.events
            ], f"{path.name} {key}"
            assert changes.problems == read.problems, f"{path.name} {key}"
            relabelled = _bound(pending, where["node"], where.get("gpus"), "8")
            relabelled["metadata"].setdefault("labels", {})["changed"] = "yes"
            again = _store([*others, ("Pod", pending)])
            again.apply("MODIFIED", "Pod", relabelled)
            assert len(fast) == before + 1, f"{path.name} {key}: a label change read as bound"
            assert again.made["Pod"][key] == _store([*others, ("Pod", relabelled)]).made["Pod"][key]
            compared += 1
    assert compared >= 100, compared


NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n0", "uid": "uid-n0"},
    "status": {"allocatable": {"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8"}},
}


def _pending(scheduler: str = "gpufleet") -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "2"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ml",
            "uid": "uid-p",
            "resourceVersion": "1",
            "annotations": {"team": "a"},
        },
        "spec": {
            "schedulerName": scheduler,
            "containers": [{"name": "c", "resources": {"limits": limits}}],
        },
        "status": {"phase": "Pending"},
    }


def _also(change: str) -> Any:
    def changed(bound: dict[str, Any]) -> None:
        if change == "started":
            bound["status"]["startTime"] = "2026-01-01T00:00:00Z"
        elif change == "annotated":
            bound["metadata"]["annotations"]["team"] = "b"
        elif change == "running":
            bound["status"]["phase"] = "Running"

    return changed


@pytest.mark.parametrize(
    ("case", "gpus", "fast"),
    [
        ("held by a bind backoff", [0, 1], True),
        ("another scheduler's", None, True),
        ("a gpu-index of GPUs the node lacks", [8, 9], True),
        ("started", [0, 1], False),
        ("annotated", [0, 1], False),
        ("running", [0, 1], False),
    ],
)
def test_a_binding_read_without_its_spec_is_the_whole_read(
    monkeypatch: pytest.MonkeyPatch, case: str, gpus: list[int] | None, fast: bool
) -> None:
    """Bound after a bind backoff held it, bound by another scheduler, or bound with GPU
    indexes its node lacks: read from its pending translation, the pod is what a whole read
    gives, with the same problem; a binding that comes with any other change (a start time,
    an annotation, a phase) is read whole."""
    used: list[str] = []

    def counted(pending: PodInfo, *rest: Any) -> PodInfo:
        used.append(pending.key)
        return read_bound(pending, *rest)

    monkeypatch.setattr(objects, "read_bound", counted)
    pending = _pending("default-scheduler" if case == "another scheduler's" else "gpufleet")
    bound = _bound(pending, "n0", gpus, "2")
    _also(case)(bound)
    once = _store([("Node", NODE), ("Pod", pending)])
    if case == "held by a bind backoff":
        once.hold("ml/p", "BackOff: binding to n0 failed")
    changes = once.apply("MODIFIED", "Pod", copy.deepcopy(bound))
    assert used == (["ml/p"] if fast else [])
    whole = _store([("Node", NODE)])
    read = whole.apply("ADDED", "Pod", copy.deepcopy(bound))
    got, want = once.made["Pod"].get("ml/p"), whole.made["Pod"].get("ml/p")
    assert got == want
    if isinstance(got, PodInfo) and isinstance(want, PodInfo):
        assert dataclasses.asdict(got) == dataclasses.asdict(want)
    assert [p.message for p in changes.problems] == [p.message for p in read.problems]


def _conditions_written(pod: dict[str, Any], version: str) -> Any:
    """``pod`` once a status write set its conditions: PodScheduled false, as gpufleet
    writes it for a pod that waits; Ready, as the kubelet writes it for a running one."""
    written = copy.deepcopy(pod)
    if "nodeName" in pod.get("spec", {}):
        condition = {"type": "Ready", "status": "True"}
    else:
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": "0/3 nodes are available: waiting for the gang's members.",
        }
    condition["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    written.setdefault("status", {})["conditions"] = [condition]
    written["metadata"]["resourceVersion"] = version
    written["metadata"]["managedFields"] = [{"manager": "gpufleet", "operation": "Apply"}]
    return written


def test_a_pod_whose_conditions_alone_change_reads_as_if_read_whole(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every pod of every scenario, pending or bound, its conditions written: what was read
    of it stands (its spec not read again) where it read nothing blocked and no problem, and
    it is what reading it whole gives — every field, uid and resourceVersion, events and
    problems; otherwise, or with any other change beside the conditions, it is read
    whole."""
    whole_reads: list[str] = []
    read_pod = objects.ObjectStore._read

    def counted(self: ObjectStore, kind: str, r: Any) -> Any:
        if kind == "Pod":
            whole_reads.append(r.key)
        return read_pod(self, kind, r)

    monkeypatch.setattr(objects.ObjectStore, "_read", counted)
    kept = compared = bound_kept = 0
    for path in sorted(SCENARIOS.glob("*.yaml")):
        _, docs = _docs(path)
        for i, (kind, pending) in enumerate(docs):
            if kind != "Pod":
                continue
            bound_kept += "nodeName" in pending.get("spec", {})
            key = f"{pending['metadata'].get('namespace', 'default')}/{pending['metadata']['name']}"
            others = docs[:i] + docs[i + 1 :]
            once = _store([*others, ("Pod", pending)])
            before = once.made["Pod"].get(key)
            expect_kept = (
                isinstance(before, PodInfo)
                and not before.blocked
                and ("Pod", key) not in once.reported
            )
            written = _conditions_written(pending, "9")
            whole_reads.clear()
            changes = once.apply("MODIFIED", "Pod", copy.deepcopy(written))
            assert (key not in whole_reads) == expect_kept, f"{path.name} {key}"
            whole = _store(others)
            read = whole.apply("ADDED", "Pod", copy.deepcopy(written))
            got, want = once.made["Pod"].get(key), whole.made["Pod"].get(key)
            assert got == want, f"{path.name} {key}"
            if isinstance(got, PodInfo) and isinstance(want, PodInfo):
                assert dataclasses.asdict(got) == dataclasses.asdict(want), f"{path.name} {key}"
                assert (got.uid, got.resource_version) == (want.uid, want.resource_version)
            if expect_kept:
                assert [(e.type, e.obj) for e in changes.events] == [], f"{path.name} {key}"
                assert changes.problems == read.problems == (), f"{path.name} {key}"
                kept += 1
            relabelled = _conditions_written(pending, "10")
            relabelled["metadata"].setdefault("labels", {})["changed"] = "yes"
            again = _store([*others, ("Pod", pending)])
            whole_reads.clear()
            again.apply("MODIFIED", "Pod", relabelled)
            assert key in whole_reads, f"{path.name} {key}: a label change kept"
            assert again.made["Pod"].get(key) == _store([*others, ("Pod", relabelled)]).made[
                "Pod"
            ].get(key)
            compared += 1
    assert kept >= 100, kept
    assert bound_kept >= 100, bound_kept
    assert compared > kept, (compared, kept)  # some pods read whole: blocked, or a problem


def test_a_running_pod_relabelled_is_read_with_its_new_labels_and_what_it_was_bound_with() -> None:
    """Labels of a running pod may change (other pods' affinity and spread read them): no
    problem. Its GPUs asked for may not: it holds what it was bound with, reported, with its
    new labels."""
    running = _bound(_pending(), "n0", [0, 1], "2")
    running["metadata"]["labels"] = {"app": "db"}
    store = _store([("Node", NODE), ("Pod", running)])
    relabelled = copy.deepcopy(running)
    relabelled["metadata"]["labels"] = {"app": "web"}
    relabelled["metadata"]["resourceVersion"] = "3"
    assert store.apply("MODIFIED", "Pod", copy.deepcopy(relabelled)).problems == ()
    read = store.made["Pod"]["ml/p"]
    assert isinstance(read, PodInfo)
    assert read.spec.placement is not None
    assert dict(read.spec.placement.labels) == {"app": "web"}
    assert (read.node, read.gpus, read.spec.num_gpu) == ("n0", (0, 1), 2)
    resized = copy.deepcopy(relabelled)
    resized["metadata"]["labels"] = {"app": "cache"}
    resized["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "1"
    resized["metadata"]["annotations"][GPU_INDEX_ANNOTATION] = "0"
    resized["metadata"]["resourceVersion"] = "4"
    problems = store.apply("MODIFIED", "Pod", resized).problems
    assert [p.message for p in problems] == [bound.CHANGED_AFTER_BIND]
    read = store.made["Pod"]["ml/p"]
    assert isinstance(read, PodInfo)
    assert read.spec.placement is not None
    assert dict(read.spec.placement.labels) == {"app": "cache"}
    assert (read.gpus, read.spec.num_gpu) == ((0, 1), 2)


def test_a_relabelled_running_pod_keeps_the_terms_it_was_created_with() -> None:
    """The API server merged a term's matchLabelKeys into its selector when the pod was
    created, from the labels it had then; a relabel changes the pod's labels alone."""
    running = _bound(_pending(), "n0", [0, 1], "2")
    running["metadata"]["labels"] = {"app": "db"}
    term = {
        "labelSelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]},
        "topologyKey": "kubernetes.io/hostname",
        "matchLabelKeys": ["app"],
    }
    running["spec"]["affinity"] = {
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    }
    store = _store([("Node", NODE), ("Pod", running)])
    before = store.made["Pod"]["ml/p"]
    relabelled = copy.deepcopy(running)
    relabelled["metadata"]["labels"] = {"app": "web"}
    relabelled["metadata"]["resourceVersion"] = "3"
    assert store.apply("MODIFIED", "Pod", relabelled).problems == ()
    after = store.made["Pod"]["ml/p"]
    assert isinstance(before, PodInfo)
    assert isinstance(after, PodInfo)
    assert before.spec.placement is not None
    assert after.spec.placement is not None
    assert dict(after.spec.placement.labels) == {"app": "web"}
    assert after.spec.placement.anti_affinity == before.spec.placement.anti_affinity
    assert "db" in repr(after.spec.placement.anti_affinity)


@pytest.mark.parametrize(
    ("field", "value"),
    [("priority", True), ("priority", 1.0)],
)
def test_a_value_equal_in_python_but_not_in_json_is_read_whole(field: str, value: object) -> None:
    """1, 1.0 and true are equal to Python, not to a read: a pod whose priority turns from
    1 to one of the others with its conditions is read whole, and its problem reported."""
    pending = _pending()
    pending["spec"][field] = 1
    store = _store([("Node", NODE), ("Pod", pending)])
    changed = _conditions_written(pending, "2")
    changed["spec"][field] = value
    problems = store.apply("MODIFIED", "Pod", copy.deepcopy(changed)).problems
    whole = _store([("Node", NODE)]).apply("ADDED", "Pod", copy.deepcopy(changed)).problems
    assert [p.message for p in problems] == [p.message for p in whole]
    assert problems, "a priority that is not an integer is a problem"


def test_the_same_object_changed_in_place_and_applied_again_is_read_whole() -> None:
    pending = _pending()
    store = _store([("Node", NODE)])
    store.apply("ADDED", "Pod", pending)
    pending["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "4"
    store.apply("MODIFIED", "Pod", pending)
    made = store.made["Pod"]["ml/p"]
    assert isinstance(made, PodInfo)
    assert made.spec.num_gpu == 4
