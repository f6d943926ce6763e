"""Reading cluster snapshots: Kubernetes semantics, and one clear error per bad field."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpufleet.compose import run_cycle
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.progress import Progress
from gpufleet.model.selectors import Requirement, Taint
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot
from gpufleet.report.cycle import cycle_json

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {nvidia.com/gpu.product: H100, nvidia.com/gpu.memory: "81920"}}
spec: {taints: [{key: dedicated, value: ml, effect: NoSchedule}]}
status: {allocatable: {cpu: 63500m, memory: 503Gi, nvidia.com/gpu: "8"}}
"""


def write(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / "snapshot.yaml"
    path.write_text("\n---\n".join(docs))
    return path


def test_node_quantities_labels_and_taints(tmp_path: Path) -> None:
    snap = load_snapshot(write(tmp_path, NODE))
    (n1,) = snap.nodes
    assert (n1.cpu_milli, n1.memory_mib, n1.gpus, n1.gpu_model) == (63500, 503 * 1024, 8, "H100")
    assert n1.gpu_memory_mib == 81920
    assert n1.taints == (Taint("dedicated", "ml", "NoSchedule"),)
    assert snap.queues == ()


def test_kind_list_and_pod_requests(tmp_path: Path) -> None:
    pods = """
apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Pod
  metadata: {name: p, namespace: ml, labels: {gpufleet.io/queue: team-a}}
  spec:
    schedulerName: gpufleet
    nodeSelector: {nvidia.com/gpu.product: H100}
    initContainers: [{name: init, resources: {requests: {cpu: "8", memory: 1Gi}}}]
    containers:
    - {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}, limits: {nvidia.com/gpu: "2"}}}
    - {name: b, resources: {requests: {cpu: "1", memory: 512Mi}}}
- apiVersion: v1
  kind: Pod
  metadata: {name: half, namespace: ml, annotations: {gpufleet.io/gpu-fraction: "0.5"}}
  spec: {schedulerName: gpufleet, containers: [{name: c}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: mem, namespace: ml, annotations: {gpufleet.io/gpu-memory: 20Gi}}
  spec: {schedulerName: gpufleet, containers: [{name: c}]}
- apiVersion: v1
  kind: Pod
  metadata: {name: done, namespace: ml}
  spec: {nodeName: n1, containers: [{name: c}]}
  status: {phase: Succeeded}
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: ignored}
"""
    snap = load_snapshot(write(tmp_path, NODE, pods))
    by_key = {p.key: p for p in snap.pods}
    assert sorted(by_key) == ["ml/half", "ml/mem", "ml/p"]
    p = by_key["ml/p"]
    # containers sum to 1.5 CPU; the init container's 8 CPUs is larger and wins
    assert (p.spec.cpu_milli, p.spec.memory_mib, p.spec.num_gpu) == (8000, 1536, 2)
    assert p.queue == "team-a"
    assert p.managed
    assert p.spec.constraint is not None
    assert p.spec.constraint.terms == ((Requirement("nvidia.com/gpu.product", "In", ("H100",)),),)
    assert (by_key["ml/half"].spec.num_gpu, by_key["ml/half"].spec.gpu_milli) == (1, 500)
    mem = by_key["ml/mem"].spec  # kept as written; sized where it is judged against a node
    assert (mem.num_gpu, mem.gpu_milli, mem.gpu_memory_mib) == (1, 0, 20 * 1024)
    sized = mem.sized_for(snap.nodes[0].gpu_memory_mib or 0)
    assert sized is not None
    assert sized.gpu_milli == 250  # 20 GiB of an 80 GiB GPU


def test_priority_classes_and_groups(tmp_path: Path) -> None:
    docs = [
        NODE,
        "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: hi}\n"
        "value: 500\npreemptionPolicy: Never",
        "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
        "metadata: {name: g, namespace: ml, labels: {gpufleet.io/queue: team-b}}\n"
        "spec: {minMember: 2}",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml, labels: "
        "{scheduling.x-k8s.io/pod-group: g}}\nspec: {schedulerName: gpufleet, "
        "priorityClassName: hi, containers: [{name: c}]}",
    ]
    snap = load_snapshot(write(tmp_path, *docs))
    (p,) = snap.pods
    assert (p.priority, p.can_preempt, p.group, p.queue) == (500, False, "ml/g", "team-b")
    assert snap.groups[0].min_member == 2


def test_queues(tmp_path: Path) -> None:
    queue = (
        "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: team-a}\n"
        "spec: {preemptMinRuntime: 1h30m, resources: {gpu: {quota: 4, limit: -1, "
        "overQuotaWeight: 2}, cpu: {quota: '16', limit: '32'}, memory: {quota: 64Gi}}}"
    )
    snap = load_snapshot(write(tmp_path, NODE, queue))
    team = next(q for q in snap.queues if q.name == "team-a")
    assert list(team.quota) == [4, 16000, 65536]
    assert team.limit[0] == float("inf")
    assert team.limit[1] == 32000
    assert team.weight[0] == 2
    assert team.quota_set == (True, True, True)
    assert team.preempt_min_runtime_s == 5400
    assert (team.serving, team.forecast_gpus) == (False, 0.0)


def test_a_forecast_query_is_read_and_the_what_if_says_it_is_not_asked(tmp_path: Path) -> None:
    queue = (
        "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: inference}\n"
        "spec: {serving: {forecastGPUs: 8, forecastQuery: 'max(my_desired_gpus)'}}"
    )
    warned: list[str] = []
    snap = load_snapshot(write(tmp_path, NODE, queue), warn=warned.append)
    q = next(q for q in snap.queues if q.name == "inference")
    assert q.forecast_query == "max(my_desired_gpus)"
    assert any(
        "Queue inference: spec.serving.forecastQuery is asked only by gpufleet serve "
        "--forecast-prometheus; here it keeps its forecastGPUs (8)" in w
        for w in warned
    )


@pytest.mark.parametrize(
    ("serving", "expected"),
    [
        ("{}", (True, 0.0)),
        ("{forecastGPUs: 24}", (True, 24.0)),
        ("{forecastGPUs: '8'}", (True, 8.0)),
    ],
)
def test_a_serving_queue_reads_its_forecast(
    tmp_path: Path, serving: str, expected: tuple[bool, float]
) -> None:
    queue = (
        "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: inference}\n"
        f"spec: {{resources: {{gpu: {{quota: 32}}}}, serving: {serving}}}"
    )
    snap = load_snapshot(write(tmp_path, NODE, queue))
    q = next(q for q in snap.queues if q.name == "inference")
    assert (q.serving, q.forecast_gpus) == expected


def test_mig_nodes_and_pods(tmp_path: Path) -> None:
    static = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: s, labels: {nvidia.com/gpu.product: "
        "NVIDIA-H100-80GB-HBM3, nvidia.com/mig.capable: 'true'}}\nstatus: {allocatable: "
        "{cpu: '8', memory: 8Gi, nvidia.com/mig-1g.10gb: '7', nvidia.com/mig-3g.40gb: '2'}}"
    )
    dynamic = (
        "apiVersion: v1\nkind: Node\nmetadata: {name: d, labels: {nvidia.com/gpu.product: "
        "NVIDIA-H100-80GB-HBM3, gpufleet.io/mig-dynamic: 'true'}}\nstatus: {allocatable: "
        "{cpu: '8', memory: 8Gi, nvidia.com/gpu: '8'}}"
    )
    pod = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {schedulerName: gpufleet, "
        "containers: [{name: c, resources: {limits: {nvidia.com/mig-3g.40gb: '1'}}}]}"
    )
    snap = load_snapshot(write(tmp_path, static, dynamic, pod))
    s, d = snap.nodes
    assert (s.mig_slices, s.mig_dynamic) == ({"1g.10gb": 7, "3g.40gb": 2}, False)
    assert (d.mig_slices, d.mig_dynamic) == ({}, True)
    assert snap.pods[0].spec.mig_profile == "3g.40gb"
    assert snap.pods[0].spec.gpu_equivalent == pytest.approx(3 / 7)


def test_topology_levels(tmp_path: Path) -> None:
    topology = (
        "apiVersion: gpufleet.io/v1alpha1\nkind: Topology\nmetadata: {name: default}\n"
        "spec: {levels: [{nodeLabel: block}, {nodeLabel: rack}, "
        "{nodeLabel: kubernetes.io/hostname}]}"
    )
    snap = load_snapshot(write(tmp_path, NODE, topology))
    assert snap.topology == ("block", "rack", "kubernetes.io/hostname")


POD = "apiVersion: v1\nkind: Pod\nmetadata: {{name: p, namespace: ml{meta}}}\nspec: {{{spec}}}"


@pytest.mark.parametrize(
    ("docs", "message"),
    [
        pytest.param(
            [
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
                "status: {allocatable: {cpu: x, memory: 1Gi}}"
            ],
            "Node n: field 'status.allocatable.cpu': expected a non-negative quantity",
            id="bad-quantity",
        ),
        pytest.param(
            ["apiVersion: v1\nkind: Node\nmetadata: {name: n}\nstatus: {}"],
            "Node n: field 'status.allocatable': expected cpu, memory",
            id="no-allocatable",
        ),
        pytest.param(
            ["apiVersion: v1\nkind: Node\nmetadata: {}\n"],
            "field 'metadata.name': expected a non-empty string",
            id="no-name",
        ),
        pytest.param(
            [NODE, NODE],
            "Node n1: appears twice in the snapshot",
            id="duplicate",
        ),
        pytest.param(
            [NODE, POD.format(meta="", spec="containers: []")],
            "Pod p: field 'spec.containers': expected at least one container",
            id="no-containers",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta=", annotations: {gpufleet.io/gpu-fraction: '1.5'}",
                    spec="containers: [{name: c}]",
                ),
            ],
            "field 'metadata.annotations.gpufleet.io/gpu-fraction': expected a fraction",
            id="bad-fraction",
        ),
        pytest.param(
            [NODE, POD.format(meta="", spec="nodeName: nowhere, containers: [{name: c}]")],
            "field 'spec.nodeName': expected a Node of the snapshot, got 'nowhere'",
            id="unknown-node",
        ),
        pytest.param(
            [NODE, POD.format(meta="", spec="priorityClassName: gold, containers: [{name: c}]")],
            "field 'spec.priorityClassName': expected a PriorityClass of the snapshot",
            id="unknown-priority-class",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: c, resources: {limits: {nvidia.com/gpu: '1.5'}}}]",
                ),
            ],
            "expected a whole number",
            id="fractional-gpu-limit",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {parentQueue: ghost}"
            ],
            "Queue a: field 'spec.parentQueue': names parent queue 'ghost'",
            id="unknown-parent",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {parentQueue: b}",
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: b}\n"
                "spec: {parentQueue: a}",
            ],
            "is in a cycle of parent queues: a → b → a",
            id="queue-cycle",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {resources: {gpu: {quota: 8, limit: 4}}}"
            ],
            "field 'spec.resources.gpu.limit': expected -1 or at least the quota (8)",
            id="limit-below-quota",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {reclaimMinRuntime: soon}"
            ],
            "field 'spec.reclaimMinRuntime': expected a duration",
            id="bad-duration",
        ),
        pytest.param(
            [
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
                "metadata: {name: g}\nspec: {minMember: 0}"
            ],
            "PodGroup g: field 'spec.minMember': expected an integer >= 1, got 0",
            id="bad-min-member",
        ),
        pytest.param(
            [
                NODE,
                POD.format(meta=", creationTimestamp: yesterday", spec="containers: [{name: c}]"),
            ],
            "field 'metadata.creationTimestamp': expected an RFC 3339 time",
            id="bad-time",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:"
                    " {nodeSelectorTerms: [{matchExpressions: [{key: k, operator: Near}]}]}}},"
                    " containers: [{name: c}]",
                ),
            ],
            "matchExpressions[0].operator': expected In | NotIn",
            id="bad-operator",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Topology\nmetadata: {name: t}\n"
                "spec: {levels: [{nodeLabel: rack}, {}]}"
            ],
            "Topology t: field 'spec.levels[1].nodeLabel': expected a node-label key",
            id="bad-topology",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Topology\nmetadata: {name: t}\n"
                "spec: {levels: [{nodeLabel: rack}, {name: x}]}"
            ],
            "Topology t: field 'spec.levels[1].name': unknown field (gpufleet's Topology has",
            id="topology-unknown-field",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\n"
                "spec: {resources: {gpu: {qouta: 4}}}"
            ],
            "Queue q: field 'spec.resources.gpu.qouta': unknown field",
            id="queue-misspelt-quota",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: NodePool\nmetadata: {name: p}\n"
                "spec: {count: 2, replicas: 3, template: {status: {allocatable: {cpu: '1', "
                "memory: 1Gi}}}}"
            ],
            "NodePool p: field 'spec.replicas': unknown field",
            id="nodepool-unknown-field",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Topology\nmetadata: {name: t}\n"
                "spec: {levels: [{nodeLabel: rack}]}",
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, "
                "annotations: {gpufleet.io/topology-required: zone}}\nspec: {minMember: 2}",
            ],
            "PodGroup default/g: field 'metadata.annotations.gpufleet.io/topology-required': "
            "expected one of the Topology's levels (rack), got 'zone'",
            id="unknown-topology-level",
        ),
        pytest.param(
            [NODE, POD.format(meta="", spec="nodeName: [n1], containers: [{name: c}]")],
            "Pod p: field 'spec.nodeName': expected a string, got ['n1']",
            id="node-name-not-string",
        ),
        pytest.param(
            [NODE, POD.format(meta="", spec="containers: [{name: c, resources: [1]}]")],
            "field 'spec.containers[0].resources': expected a mapping, got [1]",
            id="resources-not-mapping",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {resources: {gpu: {overQuotaWeight: .inf}}}"
            ],
            "field 'spec.resources.gpu.overQuotaWeight': expected a non-negative number",
            id="infinite-weight",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {serving: {forecastGPUs: -8}}"
            ],
            "Queue a: field 'spec.serving.forecastGPUs': expected a non-negative quantity",
            id="negative-forecast",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {serving: {forecastGPUs: 8, horizon: 1h}}"
            ],
            "spec.serving.horizon",
            id="unknown-serving-field",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {serving: [8]}"
            ],
            "Queue a: field 'spec.serving': expected a mapping",
            id="serving-not-mapping",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {serving: {forecastQuery: ''}}"
            ],
            "Queue a: field 'spec.serving.forecastQuery': expected a PromQL query",
            id="empty-forecast-query",
        ),
        pytest.param(
            [
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: a}\n"
                "spec: {preemptMinRuntime: -5}"
            ],
            "field 'spec.preemptMinRuntime': expected a non-negative duration",
            id="negative-duration",
        ),
        pytest.param(
            [
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
                "status: {allocatable: {cpu: '4', memory: 1Gi, nvidia.com/gpu: 1e20}}"
            ],
            "field 'status.allocatable.nvidia.com/gpu': 1e20 is too large (expected a quantity "
            "below 2^52",
            id="absurd-quantity",
        ),
        pytest.param(
            [
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
                "status: {allocatable: {cpu: '4', memory: 1Gi, nvidia.com/gpu: '100000000'}}"
            ],
            "field 'status.allocatable.nvidia.com/gpu': expected at most 128 GPUs on one node, "
            "got '100000000'",
            id="too-many-gpus",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: a}, {name: b, resources: "
                    "{limits: {nvidia.com/gpu: '2.500'}}}]",
                ),
            ],
            "field 'spec.containers[1].resources.limits.nvidia.com/gpu': expected a whole number "
            "of GPUs, got 2.5",
            id="fractional-gpus-named-by-container",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: a}, {name: b, resources: "
                    "{limits: {nvidia.com/mig-1g.10gb: 1500m}}}]",
                ),
            ],
            "field 'spec.containers[1].resources.limits.nvidia.com/mig-1g.10gb': expected a "
            "whole number of slices, got 1.5",
            id="fractional-mig-slices-named-by-container",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution:"
                    " {nodeSelectorTerms: [{matchFields: [{key: spec.unschedulable, operator: In,"
                    " values: ['true']}]}]}}}, containers: [{name: c}]",
                ),
            ],
            "expected metadata.name with In or NotIn (the only node field)",
            id="unsupported-match-field",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: c, resources: {limits: "
                    "{nvidia.com/mig-2g.20gb: '2', nvidia.com/mig-1g.10gb: '1'}}}]",
                ),
            ],
            "field 'spec.containers[0].resources.limits.nvidia.com/mig-1g.10gb': expected MIG "
            "slices of one profile per pod (gpufleet places one profile per pod), got "
            "{nvidia.com/mig-1g.10gb: 1, nvidia.com/mig-2g.20gb: 2}",
            id="two-mig-profiles",
        ),
        pytest.param(
            [
                "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n"
                "status: {allocatable: {cpu: '4', memory: 1Gi, nvidia.com/mig-big: '1'}}"
            ],
            "expected a MIG profile such as nvidia.com/mig-3g.40gb",
            id="bad-mig-profile",
        ),
        pytest.param(
            [
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
                "spec: {devices: {requests: [{name: gpu, exactly: {count: 1}}]}}"
            ],
            "ResourceClaim c: field 'spec.devices.requests[0].exactly.deviceClassName': "
            "expected a DeviceClass name",
            id="claim-without-class",
        ),
        pytest.param(
            [
                "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
                "spec: {devices: {requests: [{name: gpu, exactly: {deviceClassName: g, "
                "allocationMode: Some}}]}}"
            ],
            "field 'spec.devices.requests[0].exactly.allocationMode': expected ExactCount or All",
            id="bad-allocation-mode",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="resourceClaims: [{name: gpu, resourceClaimName: nowhere}], "
                    "containers: [{name: c}]",
                ),
            ],
            "field 'spec.resourceClaims[0].resourceClaimName': expected a ResourceClaim of "
            "the snapshot, got 'nowhere'",
            id="unknown-claim",
        ),
        pytest.param(
            [
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
                "spec: {driver: d, nodeName: n1, allNodes: true, pool: {name: p}, devices: []}"
            ],
            "ResourceSlice s: field 'spec': expected exactly one of nodeName, allNodes",
            id="slice-two-placements",
        ),
        pytest.param(
            [
                "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
                "spec: {driver: d, nodeName: n1, pool: {name: p}, devices: [{name: g, "
                "attributes: {numa: {float: 1.5}}}]}"
            ],
            "field 'spec.devices[0].attributes.numa.float': expected an int, bool, string or "
            "version value",
            id="bad-attribute",
        ),
        pytest.param(
            [NODE, POD.format(meta=", uid: 12", spec="containers: [{name: c}]")],
            "Pod p: field 'metadata.uid': expected a string, got 12",
            id="pod-uid-not-string",
        ),
        pytest.param(
            [NODE, POD.format(meta=", resourceVersion: 101", spec="containers: [{name: c}]")],
            "Pod p: field 'metadata.resourceVersion': expected a string, got 101",
            id="pod-resource-version-not-string",
        ),
        pytest.param(
            [NODE.replace("metadata: {name: n1,", "metadata: {name: n1, resourceVersion: 7,")],
            "Node n1: field 'metadata.resourceVersion': expected a string, got 7",
            id="node-resource-version-not-string",
        ),
        pytest.param(
            [
                NODE,
                "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
                "metadata: {name: g, uid: [a]}\nspec: {minMember: 1}",
            ],
            "PodGroup g: field 'metadata.uid': expected a string, got ['a']",
            id="group-uid-not-string",
        ),
        pytest.param(
            [
                NODE,
                "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\n"
                "metadata: {name: q, resourceVersion: {v: 1}}",
            ],
            "Queue q: field 'metadata.resourceVersion': expected a string, got {v: 1}",
            id="queue-resource-version-not-string",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: c}], affinity: {podAntiAffinity: "
                    "{requiredDuringSchedulingIgnoredDuringExecution: [{topologyKey: zone, "
                    "labelSelector: {matchLabels: {app: null}}}]}}",
                ),
            ],
            "labelSelector.matchLabels.app': expected a label value",
            id="label-value-null",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: c}], topologySpreadConstraints: "
                    "[{maxSkew: 0, topologyKey: zone, whenUnsatisfiable: DoNotSchedule}]",
                ),
            ],
            "field 'spec.topologySpreadConstraints[0].maxSkew': expected an integer >= 1",
            id="spread-max-skew",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta="",
                    spec="containers: [{name: c, ports: [{containerPort: 80, hostPort: 70000}]}]",
                ),
            ],
            "field 'spec.containers[0].ports[0].hostPort': expected a port number",
            id="host-port",
        ),
        pytest.param(
            [
                NODE,
                "apiVersion: storage.k8s.io/v1\nkind: CSINode\nmetadata: {name: n1}\n"
                "spec: {drivers: [{name: ebs.csi.aws.com, allocatable: [1]}]}",
            ],
            "CSINode n1: field 'spec.drivers[0].allocatable': expected a mapping",
            id="csinode-allocatable",
        ),
        pytest.param(
            [
                NODE,
                "apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {name: x}\n"
                "provisioner: p\nvolumeBindingMode: Later",
            ],
            "StorageClass x: field 'volumeBindingMode': expected Immediate | WaitForFirstConsumer",
            id="storage-class-mode",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta=", annotations: {gpufleet.io/checkpoint-interval: often}",
                    spec="containers: [{name: c}]",
                ),
            ],
            "Pod p: field 'metadata.annotations.gpufleet.io/checkpoint-interval': expected a "
            "duration such as '30m' or '2h', got 'often'",
            id="checkpoint-interval",
        ),
        pytest.param(
            [
                NODE,
                POD.format(
                    meta=", annotations: {gpufleet.io/last-checkpoint: yesterday}",
                    spec="containers: [{name: c}]",
                ),
            ],
            "Pod p: field 'metadata.annotations.gpufleet.io/last-checkpoint': expected an RFC "
            "3339 time",
            id="last-checkpoint",
        ),
        pytest.param(["key: [unclosed"], "is not valid YAML", id="bad-yaml"),
        pytest.param(["- just\n- a list"], "expected Kubernetes objects", id="not-objects"),
    ],
)
def test_bad_snapshots_name_object_and_field(tmp_path: Path, docs: list[str], message: str) -> None:
    path = write(tmp_path, *docs)
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert message in str(caught.value)
    assert str(caught.value).startswith(str(path))


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        load_snapshot(tmp_path / "nope.yaml")


IDENTIFIED = [
    "apiVersion: v1\nkind: Node\nmetadata: {name: n1, uid: 7d1e-node, resourceVersion: '101'}\n"
    "status: {allocatable: {cpu: '8', memory: 64Gi, nvidia.com/gpu: '2'}}",
    "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\n"
    "metadata: {name: team-a, uid: 7d1e-queue, resourceVersion: '102'}",
    "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\nmetadata: {name: g, namespace: ml, "
    "uid: 7d1e-group, resourceVersion: '103', labels: {gpufleet.io/queue: team-a}}\n"
    "spec: {minMember: 2}",
    *(
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, uid: 7d1e-{name}, "
        f"resourceVersion: '{version}', labels: {{scheduling.x-k8s.io/pod-group: g}}}}\n"
        "spec: {schedulerName: gpufleet, containers: [{name: c, resources: "
        "{limits: {nvidia.com/gpu: '1'}}}]}"
        for name, version in (("p0", 104), ("p1", 105))
    ),
]
"""A Node, Queue, PodGroup and its two pods, each with its uid and resourceVersion."""


def identities(snap: Snapshot) -> list[tuple[str, str]]:
    values: list[NodeSpec | QueueSpec | GroupSpec | PodInfo] = [
        *snap.nodes, *snap.queues, *snap.groups, *snap.pods
    ]  # fmt: skip
    return [(v.uid, v.resource_version) for v in values]


def test_uid_and_resource_version_are_read(tmp_path: Path) -> None:
    snap = load_snapshot(write(tmp_path, *IDENTIFIED))
    assert identities(snap) == [
        ("7d1e-node", "101"),
        ("7d1e-queue", "102"),
        ("7d1e-group", "103"),
        ("7d1e-p0", "104"),
        ("7d1e-p1", "105"),
    ]


def test_without_uid_and_resource_version_they_are_empty(tmp_path: Path) -> None:
    bare = [re.sub(r", uid: [\w-]+, resourceVersion: '\d+'", "", doc) for doc in IDENTIFIED]
    assert all("uid" not in doc for doc in bare)
    assert identities(load_snapshot(write(tmp_path, *bare))) == [("", "")] * 5


def test_identity_changes_neither_the_values_nor_the_schedule(tmp_path: Path) -> None:
    read = load_snapshot(write(tmp_path, *IDENTIFIED))
    renamed = [
        doc.replace("uid: 7d1e", "uid: 9a2f").replace("resourceVersion: '1", "resourceVersion: '9")
        for doc in IDENTIFIED
    ]
    again = load_snapshot(write(tmp_path, *renamed))
    assert identities(again) != identities(read)
    assert again == read
    assert hash(again) == hash(read)
    assert [p.spec.request_key for p in again.pods] == [p.spec.request_key for p in read.pods]
    now = 1e9
    assert cycle_json(run_cycle(again, now)) == cycle_json(run_cycle(read, now))
    assert len(run_cycle(read, now).bindings) == 2


def test_a_node_pool_does_not_give_its_nodes_the_templates_identity(tmp_path: Path) -> None:
    pool = (
        "apiVersion: gpufleet.io/v1alpha1\nkind: NodePool\nmetadata: {name: pool}\n"
        "spec: {count: 2, template: {metadata: {uid: 7d1e-node, resourceVersion: '101'}, "
        "status: {allocatable: {cpu: '1', memory: 1Gi}}}}"
    )
    snap = load_snapshot(write(tmp_path, pool))
    assert [n.name for n in snap.nodes] == ["pool-000", "pool-001"]
    assert identities(snap) == [("", ""), ("", "")]


def test_a_pod_says_what_its_run_is_worth_in_annotations(tmp_path: Path) -> None:
    meta = (
        ", annotations: {gpufleet.io/expected-duration: 2h, gpufleet.io/checkpoint-interval: "
        "30m, gpufleet.io/last-checkpoint: '2026-01-01T00:10:00Z'}"
    )
    path = write(tmp_path, NODE, POD.format(meta=meta, spec="containers: [{name: c}]"))
    (pod,) = load_snapshot(path).pods
    assert pod.progress == Progress(7200.0, 1800.0, 1767226200.0)


@pytest.mark.parametrize(
    ("owners", "expected"),
    [
        ("[{apiVersion: batch/v1, kind: Job, name: j, uid: u-1, controller: true}]", "u-1"),
        ("[{apiVersion: v1, kind: ConfigMap, name: c, uid: u-2}]", ""),  # not its controller
        ("[]", ""),
        ("{kind: Job}", "error: metadata.ownerReferences"),
        ("[x]", "error: metadata.ownerReferences[0]"),
        ("[{kind: Job, name: j, controller: true}]", "error: metadata.ownerReferences[0].uid"),
    ],
)
def test_a_pods_controller_is_read_from_its_owner_references(
    tmp_path: Path, owners: str, expected: str
) -> None:
    """Its uid, or an error naming the field of a bad owner reference."""
    spec = "schedulerName: gpufleet, containers: [{name: c}]"
    path = write(tmp_path, NODE, POD.format(meta=f", ownerReferences: {owners}", spec=spec))
    if expected.startswith("error: "):
        with pytest.raises(InputError) as caught:
            load_snapshot(path)
        assert f"field '{expected.removeprefix('error: ')}'" in str(caught.value)
        return
    (pod,) = load_snapshot(path).pods
    assert pod.owner == expected
