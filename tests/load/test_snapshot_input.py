"""What a snapshot reader must refuse or warn about: nothing accepted silently.

Objects of other projects (Volcano's and KAI's Queues, a ``kubectl get all`` dump), empty
files and YAML that repeats a key: each is an error naming the file and field, or a warning
naming what was skipped — never a traceback, never a silent loss.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import ALL, NONE
from gpufleet.load.snapshot import load_snapshot
from tests.cli.test_app import gpufleet

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "2"}}
"""

VOLCANO_QUEUE = """apiVersion: scheduling.volcano.sh/v1beta1
kind: Queue
metadata: {name: research}
spec: {weight: 1, capability: {nvidia.com/gpu: 4}}
"""

KAI_QUEUE = """apiVersion: scheduling.run.ai/v2
kind: Queue
metadata: {name: team-a}
spec:
  resources:
    gpu: {quota: -1, limit: -1, overQuotaWeight: 1}
"""


def write(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text("\n---\n".join(docs))
    return path


def load(path: Path, vocabularies: frozenset[str] = ALL) -> tuple[object, list[str]]:
    warned: list[str] = []
    return load_snapshot(path, warn=warned.append, vocabularies=vocabularies), warned


@pytest.mark.parametrize(
    "text",
    ["", "# only a comment\n", "---\n---\n", NODE.replace("kind: Node", "kind: ConfigMap")],
    ids=["empty", "comments", "empty-documents", "no-node"],
)
def test_a_snapshot_without_nodes_is_one_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(text)
    with pytest.raises(InputError, match="holds no Node"):
        load_snapshot(path, warn=lambda _: None)


def test_the_cli_says_it_in_one_line_and_exits_2(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing here\n")
    result = gpufleet("schedule", "-f", "empty.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "gpufleet: error: empty.yaml: holds no Node (nor NodePool): a snapshot needs the "
        "cluster's nodes, as `kubectl get nodes -o yaml` prints them"
    ]


def test_other_projects_queues_are_skipped_with_one_warning_per_group(tmp_path: Path) -> None:
    second = VOLCANO_QUEUE.replace("research", "prod")
    snap, warned = load(write(tmp_path, NODE, VOLCANO_QUEUE, second, KAI_QUEUE), NONE)
    assert snap.queues == ()  # type: ignore[attr-defined]
    assert len(warned) == 2
    volcano, kai = sorted(warned, key=lambda w: "volcano" not in w)
    assert "skipped 2 Queue objects of API group scheduling.volcano.sh" in volcano
    assert "the volcano vocabulary is not read" in volcano
    assert "skipped 1 Queue object of API group scheduling.run.ai" in kai
    assert "the kai vocabulary is not read" in kai


def test_a_queue_of_a_vocabulary_read_is_a_queue(tmp_path: Path) -> None:
    snap, warned = load(write(tmp_path, NODE, KAI_QUEUE))
    assert [q.name for q in snap.queues] == ["team-a"]  # type: ignore[attr-defined]
    assert warned == []


def test_another_version_of_another_schedulers_kind_is_skipped(tmp_path: Path) -> None:
    older = KAI_QUEUE.replace("scheduling.run.ai/v2", "scheduling.run.ai/v1")
    snap, warned = load(write(tmp_path, NODE, older))
    assert snap.queues == ()  # type: ignore[attr-defined]
    assert ["scheduling.run.ai/v1): gpufleet reads Queue of" in w for w in warned] == [True]


def test_volcano_podgroup_is_not_a_gang_with_volcano_off(tmp_path: Path) -> None:
    group = """apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata: {name: g, namespace: ml}
spec: {minMember: 4}
"""
    snap, warned = load(write(tmp_path, NODE, group), NONE)
    assert snap.groups == ()  # type: ignore[attr-defined]
    assert ["the volcano vocabulary is not read" in w for w in warned] == [True]


def test_another_version_of_a_supported_group_is_an_error(tmp_path: Path) -> None:
    claim = """apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: c, namespace: ml}
spec: {devices: {requests: [{name: gpu, deviceClassName: gpu.nvidia.com}]}}
"""
    with pytest.raises(InputError) as caught:
        load(write(tmp_path, NODE, claim))
    assert caught.value.field == "apiVersion"
    assert "ResourceClaim ml/c" in str(caught.value)
    assert "resource.k8s.io/v1beta1 is not supported" in str(caught.value)
    assert "resource.k8s.io/v1 only" in str(caught.value)


def test_a_known_kind_without_api_version_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="expected v1, got None") as caught:
        load(write(tmp_path, NODE.replace("apiVersion: v1\n", "")))
    assert caught.value.field == "apiVersion"


def test_a_kubectl_get_all_dump_is_read_and_the_rest_counted(tmp_path: Path) -> None:
    dump = """apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: s1}}
- {apiVersion: v1, kind: Service, metadata: {name: s2}}
- {apiVersion: apps/v1, kind: Deployment, metadata: {name: d}}
- {apiVersion: v1, metadata: {name: nokind}}
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: ml}
  spec: {schedulerName: gpufleet, containers: [{name: c}]}
"""
    snap, warned = load(write(tmp_path, NODE, dump))
    assert [p.key for p in snap.pods] == ["ml/p"]  # type: ignore[attr-defined]
    assert warned == [
        f"{tmp_path / 'snapshot.yaml'}: skipped 4 objects gpufleet does not read: "
        "1 (no kind), 1 Deployment, 2 Service"
    ]


def test_a_pod_as_kubectl_prints_it_keeps_its_uid_and_resource_version(tmp_path: Path) -> None:
    pod = """apiVersion: v1
kind: Pod
metadata:
  creationTimestamp: "2026-01-01T00:00:00Z"
  generation: 1
  name: p
  namespace: ml
  resourceVersion: "48213"
  uid: 5f0c2a7e-9b8d-4f3e-a1c6-2d7b9e8f0a31
spec: {schedulerName: gpufleet, containers: [{name: c}]}
status: {phase: Pending}
"""
    snap, warned = load(write(tmp_path, NODE, pod))
    assert warned == []
    assert [(p.uid, p.resource_version) for p in snap.pods] == [  # type: ignore[attr-defined]
        ("5f0c2a7e-9b8d-4f3e-a1c6-2d7b9e8f0a31", "48213")
    ]
    with pytest.raises(InputError) as caught:
        load(write(tmp_path, NODE, pod.replace('"48213"', "48213")))  # a YAML integer
    assert "Pod p: field 'metadata.resourceVersion': expected a string, got 48213" in str(
        caught.value
    )


def test_a_repeated_mapping_key_is_an_error_with_its_line(tmp_path: Path) -> None:
    pods = """apiVersion: v1
kind: Pod
metadata: {name: a, namespace: ml}
spec: {containers: [{name: c}]}
metadata: {name: b, namespace: ml}
"""
    with pytest.raises(InputError) as caught:
        load(write(tmp_path, NODE, pods))
    assert caught.value.line == 11  # the second metadata
    assert "mapping key 'metadata' appears twice" in str(caught.value)


def test_the_cli_prints_warnings_on_stderr(tmp_path: Path) -> None:
    write(tmp_path, NODE, VOLCANO_QUEUE)
    result = gpufleet(
        *("schedule", "-f", "snapshot.yaml", "-o", "json", "--vocabulary", "gpufleet"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("Warning: snapshot.yaml: skipped 1 Queue object")


def _pending_pod(name: str, scheduler: str | None) -> str:
    line = f"  schedulerName: {scheduler}\n" if scheduler else ""
    return (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml}}\nspec:\n{line}"
        "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: '1'}}}]\n"
    )


OTHERS = (
    NODE,
    _pending_pod("a", None),
    _pending_pod("b", "default-scheduler"),
    _pending_pod("v", "volcano"),
    _pending_pod("g", "gpufleet"),
)


def test_pending_pods_of_other_schedulers_are_counted_per_scheduler(tmp_path: Path) -> None:
    snap, warned = load(write(tmp_path, *OTHERS))
    assert [p.key for p in snap.pods if p.managed] == ["ml/g"]  # type: ignore[attr-defined]
    assert len(warned) == 1
    assert (
        "3 pending pods belong to other schedulers (default-scheduler: 2, volcano: 1)"
        in (warned[0])
    )


def test_scheduler_name_schedules_another_schedulers_pods(tmp_path: Path) -> None:
    write(tmp_path, NODE.replace('nvidia.com/gpu: "2"', 'nvidia.com/gpu: "4"'), *OTHERS[1:])
    result = gpufleet(
        "schedule", "-f", "snapshot.yaml", "-o", "json", "--scheduler-name", "default-scheduler",
        "--now", "2026-01-01T00:00:00Z",
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    bound = sorted(b["pod"] for b in json.loads(result.stdout)["bindings"])
    assert bound == ["ml/a", "ml/b", "ml/g"]  # gpufleet's own pods too
    assert "1 pending pod belongs to other schedulers (volcano: 1)" in result.stderr


def test_a_misspelt_field_of_a_pod_is_a_warning_naming_it(tmp_path: Path) -> None:
    pod = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  schedulerName: gpufleet
  nodeSelecter: {nvidia.com/gpu.product: H100}
  containers:
  - name: c
    resources: {requets: {cpu: '1'}}
"""
    snap, warned = load(write(tmp_path, NODE, pod))
    assert [p.key for p in snap.pods] == ["ml/p"]  # type: ignore[attr-defined]
    assert [w.split(": ", 1)[1] for w in warned] == [
        'Pod p: unknown field "spec.nodeSelecter" (gpufleet does not read it: misspelt?)',
        'Pod p: unknown field "spec.containers[0].resources.requets" (gpufleet does not read '
        "it: misspelt?)",
    ]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        (
            "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: Team_A}\n",
            "Queue Team_A: field 'metadata.name': expected a DNS-1123 subdomain",
        ),
        (
            f"apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {{name: {'q' * 64}}}\n",
            "field 'metadata.name': expected a DNS-1123 subdomain of at most 63 characters, got 64",
        ),
        (
            "apiVersion: gpufleet.io/v1alpha1\nkind: NodePool\nmetadata: {name: GPU.pool}\n"
            "spec: {count: 1, template: {status: {allocatable: {cpu: '1', memory: 1Gi}}}}\n",
            "NodePool GPU.pool: field 'metadata.name': expected a DNS-1123 subdomain",
        ),
    ],
    ids=["queue-underscore", "queue-too-long", "nodepool-upper-case"],
)
def test_invalid_names_of_gpufleets_own_objects_are_errors(
    tmp_path: Path, doc: str, message: str
) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(")):
        load(write(tmp_path, NODE, doc))


def test_invalid_names_of_kubernetes_objects_are_warnings(tmp_path: Path) -> None:
    pod = _pending_pod("My_Pod", "gpufleet").replace("namespace: ml", "namespace: ML")
    snap, warned = load(write(tmp_path, NODE, pod))
    assert [p.key for p in snap.pods] == ["ML/My_Pod"]  # type: ignore[attr-defined]
    assert len(warned) == 2
    assert "Pod My_Pod: field 'metadata.name': expected a DNS-1123 subdomain" in warned[0]
    assert "field 'metadata.namespace': expected a DNS-1123 label" in warned[1]
    assert all(w.endswith("(Kubernetes would refuse it)") for w in warned)


def test_an_unknown_field_of_many_objects_is_one_warning(tmp_path: Path) -> None:
    pods = [
        _pending_pod(f"p{i}", "gpufleet").replace("spec:\n", "spec:\n  futureField: 1\n")
        for i in range(3)
    ]
    _, warned = load(write(tmp_path, NODE, *pods))
    assert len(warned) == 1
    assert 'Pod p0 (and 2 more Pods): unknown field "spec.futureField"' in warned[0]


def test_yaml_merge_keys_still_work(tmp_path: Path) -> None:
    nodes = """apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Node
  metadata: {name: n1}
  status:
    allocatable: &alloc {cpu: "8", memory: 64Gi}
- apiVersion: v1
  kind: Node
  metadata: {name: n2}
  status:
    allocatable:
      <<: *alloc
      nvidia.com/gpu: "2"
"""
    snap, _ = load(write(tmp_path, nodes))
    assert [(n.name, n.gpus, n.cpu_milli) for n in snap.nodes] == [  # type: ignore[attr-defined]
        ("n1", 0, 8000),
        ("n2", 2, 8000),
    ]
