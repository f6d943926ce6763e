"""Shares of a GPU sized by GPU memory (``gpufleet.io/gpu-memory``): read per object, judged
against each node's own GPU memory."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import numpy as np
import pytest

from gpufleet.compose import run_cycle
from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.framework.status import Code
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import PodInfo, with_demand
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.report.reasons import status_text
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.placement.place import Placement, commit, place
from gpufleet.scheduler.state.ledger import SnapshotError
from tests.builders import cluster, node, pod

GIB = 1024
A100 = "NVIDIA-A100-SXM4-40GB"
H100 = "NVIDIA-H100-80GB-HBM3"
T4 = "Tesla-T4"
NOW = 1767225660.0
"""2026-01-01T00:01:00Z, a minute after the pods were created."""


def framework(policy: str = "gpufleet") -> Framework:
    workload = [pod().share(250).obj(), pod().gpus(1).obj()]
    return Framework(
        POLICIES[policy],
        PLUGINS,
        Handle(np.random.default_rng(0), FragmentIndex(typical_pods(workload))),
    )


def milli(spec: PodSpec, gpu_memory: int) -> int:
    sized = spec.sized_for(gpu_memory)
    assert sized is not None
    return sized.gpu_milli


def two_models() -> ClusterState:
    return cluster(
        node("a100", gpus=4, model=A100, gpu_mem=40 * GIB),
        node("h100", gpus=4, model=H100, gpu_mem=80 * GIB),
    )


def test_a_share_sized_by_memory_is_sized_for_each_gpu() -> None:
    spec = pod().gpu_memory(20 * GIB).obj()
    assert spec.is_gpu_share
    assert spec.sized_by_memory
    a100, h100 = spec.sized_for(40 * GIB), spec.sized_for(80 * GIB)
    assert a100 is not None
    assert h100 is not None
    assert (a100.gpu_milli, h100.gpu_milli) == (500, 250)
    assert not a100.sized_by_memory
    assert milli(spec, 30 * GIB) == 667  # rounded up
    assert spec.sized_for(16 * GIB) is None  # too small
    assert spec.sized_for(0) is None  # unknown
    whole = spec.as_whole_gpus()  # device-plugin semantics: a whole GPU of enough memory
    assert milli(whole, 80 * GIB) == 1000
    assert whole.sized_for(16 * GIB) is None
    plain = pod().share(300).obj()
    assert plain.sized_for(0) is plain


def test_an_unsized_share_has_no_milli_and_cannot_be_reserved() -> None:
    spec = pod().gpu_memory(20 * GIB).obj()
    with pytest.raises(ValueError, match="until it is sized"):
        _ = spec.gpu_equivalent
    state = two_models()
    with pytest.raises(ValueError, match="not sized for the node"):
        state.reserve(0, spec, (0,))


@pytest.mark.parametrize(
    ("num_gpu", "gpu_milli", "gpu_memory_mib", "message"),
    [
        (2, 1000, 20 * GIB, "one GPU"),
        (1, 500, 20 * GIB, "one GPU"),
        (1, 0, -1, "negative GPU memory"),
    ],
)
def test_invalid_memory_shares_are_refused(
    num_gpu: int, gpu_milli: int, gpu_memory_mib: int, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        PodSpec("p", 1000, 1024, num_gpu, gpu_milli, gpu_memory_mib=gpu_memory_mib)


@pytest.mark.parametrize(("model", "name", "share"), [(A100, "a100", 500), (H100, "h100", 250)])
def test_placement_takes_the_share_of_the_chosen_node(model: str, name: str, share: int) -> None:
    state = two_models()
    spec = pod().gpu_memory(20 * GIB).models(model).obj()
    outcome = place(framework(), state, spec)
    assert isinstance(outcome, Placement)
    assert state.names[outcome.node] == name
    assert (outcome.pod.gpu_milli, outcome.pod.sized_by_memory) == (share, False)
    commit(state, outcome)
    assert int(state.gpu_idle[outcome.node]) == 4000 - share


def test_each_gpu_size_is_judged_with_its_own_share() -> None:
    # 400m free on every A100 GPU, 300m on every H100 GPU: 20Gi (500m / 250m) fits the H100
    # only, 16Gi (400m / 200m) both.
    state = two_models()
    for n, free in ((0, 400), (1, 300)):
        state.gpu_free[n, :4] = free
        state.refresh_gpu_totals(n)
    fw = framework()
    assert fw.run_filters(state, pod().gpu_memory(20 * GIB).obj()).nodes.tolist() == [1]
    assert fw.run_filters(state, pod().gpu_memory(16 * GIB).obj()).nodes.tolist() == [0, 1]
    reasons = fw.node_reasons(state, pod().gpu_memory(20 * GIB).obj())
    assert reasons == [("Insufficient GPU share (500m free on one GPU)",), ()]


def test_a_share_larger_than_every_gpu_pends_with_the_reason_of_each_node() -> None:
    state = cluster(
        node("a100", gpus=4, model=A100, gpu_mem=40 * GIB),
        node("h100", gpus=4, model=H100, gpu_mem=80 * GIB),
        node("old", gpus=4, model="V100"),
        node("cpu", gpus=0),
    )
    status = framework().run_filters(state, pod().gpu_memory(96 * GIB).obj()).status
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE  # no eviction makes GPUs larger
    assert status_text(status) == (
        "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't have label "
        "nvidia.com/gpu.memory to size the Pod's share of GPU memory, 2 node(s) had GPUs with "
        "less than the Pod's 96Gi of GPU memory."
    )


def test_whole_gpu_semantics_take_a_whole_gpu_of_enough_memory() -> None:
    state = two_models()
    outcome = place(framework("kube-default"), state, pod().gpu_memory(60 * GIB).obj())
    assert isinstance(outcome, Placement)
    assert (state.names[outcome.node], outcome.pod.gpu_milli) == ("h100", 1000)


def test_pending_demand_is_the_share_on_the_largest_gpu_the_pod_may_use() -> None:
    spec = pod().gpu_memory(20 * GIB).obj()
    info = PodInfo("ml/p", spec)
    base = [
        node("a100", gpus=4, model=A100, gpu_mem=40 * GIB),
        node("h100", gpus=4, model=H100, gpu_mem=80 * GIB),
    ]

    def demand(nodes: list[NodeSpec], pod_spec: PodSpec = spec) -> int:
        pending = dataclasses.replace(info, spec=pod_spec)
        return with_demand(pending, ClusterState(nodes)).demand.gpu_milli

    assert demand(base) == 250
    # Nodes with smaller GPUs, and nodes the pod may not run on, change nothing.
    assert demand([*base, node("t4", gpus=4, model=T4, gpu_mem=16 * GIB)]) == 250
    assert demand([*base, node("a10", gpus=4, model="A10", gpu_mem=24 * GIB)]) == 250
    only_a100 = dataclasses.replace(spec, gpu_models=frozenset({A100}))
    assert demand(base, only_a100) == 500
    bigger = node("h200", gpus=4, model="H200", gpu_mem=141 * GIB)
    assert demand([*base, bigger], only_a100) == 500
    # A node it may run on with larger GPUs is one it can take less of.
    assert demand([*base, bigger]) == 142
    # Where no GPU it may use is large enough, it counts as the one GPU it asks for.
    assert demand(base, pod().gpu_memory(96 * GIB).obj()) == 1000
    with pytest.raises(ValueError, match="gpu_milli must be in"):
        _ = info.demand  # the cycle did not size it


NODES = {
    "a100": (A100, "40960"),
    "h100": (H100, "81920"),
    "t4": (T4, "15360"),
    "a10": ("NVIDIA-A10", "24576"),
}


def node_doc(name: str) -> str:
    product, memory = NODES[name]
    return (
        f"apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels: "
        f"{{nvidia.com/gpu.product: {product}, nvidia.com/gpu.memory: '{memory}'}}\n"
        "status:\n  allocatable: {cpu: '32', memory: 256Gi, nvidia.com/gpu: '1'}\n"
    )


POD = """apiVersion: v1
kind: Pod
metadata:
  name: mem
  namespace: inf
  creationTimestamp: '2026-01-01T00:00:00Z'
  annotations: {gpufleet.io/gpu-memory: 20Gi}
spec:
  schedulerName: gpufleet
  containers: [{name: main}]
"""


def snapshot_of(tmp_path: Path, *docs: str) -> Path:
    path = tmp_path / f"snapshot-{len(docs)}.yaml"
    path.write_text("---\n".join(docs))
    return path


def test_a_node_joining_changes_neither_the_spec_nor_the_pending_demand(tmp_path: Path) -> None:
    two = load_snapshot(snapshot_of(tmp_path, node_doc("a100"), node_doc("h100"), POD))
    three = load_snapshot(
        snapshot_of(tmp_path, node_doc("a100"), node_doc("h100"), node_doc("a10"), POD)
    )
    assert two.pods[0].spec == three.pods[0].spec
    assert two.pods[0].spec.gpu_memory_mib == 20 * GIB
    # The A10's 24 GiB would hold the share (834m of it), yet the queue's demand, and so its
    # fair share, stays 0.25 GPU: the share on the H100, the largest GPU the pod may use.
    for snap in (two, three):
        result = run_cycle(snap, NOW, CycleConfig())
        assert result.fair_shares["default"][0] == pytest.approx(0.25)
        assert len(result.bindings) == 1


def test_the_cycle_is_deterministic_in_any_node_order(tmp_path: Path) -> None:
    docs = [node_doc(n) for n in ("a100", "h100", "t4")]
    pods = [
        POD.replace("name: mem", f"name: mem{i}").replace("20Gi", f"{size}Gi")
        for i, size in enumerate((8, 20, 12, 30, 5, 16))
    ]
    outcomes = set()
    for seed in range(4):
        shuffled = docs[:]
        random.Random(seed).shuffle(shuffled)
        snap = load_snapshot(snapshot_of(tmp_path, *shuffled, *pods))
        for _ in range(2):
            result = run_cycle(snap, NOW, CycleConfig())
            outcomes.add((result.bindings, result.pending))
    assert len(outcomes) == 1
    ((bindings, pending),) = outcomes
    assert len(bindings) + len(pending) == len(pods)


def test_a_bound_share_its_node_cannot_size_is_a_snapshot_error(tmp_path: Path) -> None:
    bound = POD.replace("schedulerName: gpufleet", "schedulerName: gpufleet\n  nodeName: t4")
    bound = bound.replace("20Gi", "20Gi, gpufleet.io/gpu-index: '0'")
    snap = load_snapshot(snapshot_of(tmp_path, node_doc("t4"), bound))
    with pytest.raises(SnapshotError, match="asks for 20480 MiB of one GPU"):
        run_cycle(snap, NOW, CycleConfig())


@pytest.mark.parametrize(
    ("annotations", "limits", "expected"),
    [
        ("{gpufleet.io/gpu-memory: '0'}", "{}", "GPU memory of one GPU"),
        ("{gpufleet.io/gpu-memory: 20Gi}", "{nvidia.com/gpu: '2'}", "no share of one GPU"),
    ],
)
def test_bad_memory_requests_name_the_annotation(
    tmp_path: Path, annotations: str, limits: str, expected: str
) -> None:
    bad = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ml, annotations: "
        f"{annotations}}}\nspec: {{schedulerName: gpufleet, containers: [{{name: c, "
        f"resources: {{limits: {limits}}}}}]}}"
    )
    with pytest.raises(InputError, match=expected) as caught:
        load_snapshot(snapshot_of(tmp_path, bad))
    assert caught.value.field == "metadata.annotations.gpufleet.io/gpu-memory"
