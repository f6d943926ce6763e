"""NodeResourcesFit and GpuFit: which nodes pass, and the reasons for the ones that don't."""

from __future__ import annotations

import pytest

from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.gpu_fit import GpuFit
from gpufleet.plugins.node_resources import NodeResourcesFit
from tests.builders import cluster, node, pod, with_gpu_free


def three_nodes() -> ClusterState:
    state = cluster(
        node("small", cpu=4, gpus=2, model="T4", mem=8192),
        node("big", cpu=96, gpus=8, model="G2"),
        node("cpu-only", cpu=64, gpus=0),
    )
    return with_gpu_free(state, 1, [1000, 1000, 300, 0, 0, 0, 0, 0])


@pytest.mark.parametrize(
    ("spec", "feasible"),
    [
        (pod().cpu(2).mem(4096).obj(), [True, True, True]),
        (pod().cpu(8).obj(), [False, True, True]),
        (pod().cpu(1).mem(10_000).obj(), [False, True, True]),
    ],
    ids=["fits-all", "cpu", "memory"],
)
def test_node_resources_fit(spec: PodSpec, feasible: list[bool]) -> None:
    assert NodeResourcesFit().filter(three_nodes(), spec).feasible.tolist() == feasible


@pytest.mark.parametrize(
    ("spec", "feasible"),
    [
        (pod().obj(), [True, True, True]),
        (pod().gpus(2).obj(), [True, True, False]),
        (pod().gpus(3).obj(), [False, False, False]),
        (pod().share(300).obj(), [True, True, False]),
        (pod().share(300).models("G2").obj(), [False, True, False]),
        (pod().gpus(1).models("A100").obj(), [False, False, False]),
    ],
    ids=["cpu-pod", "two-whole", "three-whole", "share", "share-on-model", "absent-model"],
)
def test_gpu_fit(spec: PodSpec, feasible: list[bool]) -> None:
    assert GpuFit().filter(three_nodes(), spec).feasible.tolist() == feasible


def test_a_model_mismatch_is_unresolvable_but_lacking_capacity_is_not() -> None:
    state = three_nodes()
    mismatch = GpuFit().filter(state, pod().gpus(1).models("A100").obj())
    assert mismatch.unresolvable
    lacking = GpuFit().filter(state, pod().gpus(3).models("G2").obj())
    assert not lacking.unresolvable
    messages = [m for m, _ in lacking.failures]
    assert messages == ["node(s) didn't match Pod's GPU model (G2)", "Insufficient nvidia.com/gpu"]
