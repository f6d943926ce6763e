"""Each published score plugin on small clusters whose right answer is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.model.cluster import ClusterState
from gpufleet.plugins.best_fit import Args as BestFitArgs
from gpufleet.plugins.best_fit import BestFitScore
from gpufleet.plugins.dot_product import Args as DotArgs
from gpufleet.plugins.dot_product import DotProductScore
from gpufleet.plugins.gpu_clustering import Args as ClusterArgs
from gpufleet.plugins.gpu_clustering import GpuClusteringScore
from gpufleet.plugins.gpu_packing import GpuPackingScore
from gpufleet.plugins.kube_default import BalancedAllocation, LeastAllocated
from tests.builders import cluster, node, pod, with_gpu_free


def scores(plugin, state: ClusterState, spec) -> list[float]:  # type: ignore[no-untyped-def]
    return plugin.score(state, spec, np.arange(state.size)).tolist()  # type: ignore[no-any-return]


def two_nodes() -> ClusterState:
    """``empty``: 8 free GPUs, 96 CPUs. ``used``: GPUs [1000, 600, 200, 0...], 32 CPUs free."""
    state = cluster(node("empty", cpu=96), node("used", cpu=96))
    state.cpu_free[1] = 32_000
    return with_gpu_free(state, 1, [1000, 600, 200, 0, 0, 0, 0, 0])


def test_best_fit_prefers_the_least_leftover() -> None:
    # empty: 1 - (.5*(96-4)/128 + .5*(8000-500)/8000) = 0.1719 -> 17
    # used:  1 - (.5*(32-4)/128 + .5*(1800-500)/8000) = 0.8094 -> 80
    spec = pod().cpu(4).share(500).obj()
    assert scores(BestFitScore(BestFitArgs()), two_nodes(), spec) == [17, 80]


def test_dot_product_prefers_the_smaller_alignment() -> None:
    # empty: dot = (96/128)(4/128) + (8000/8000)(500/8000) = .0859 -> 1 - .043 -> 95
    # used:  dot = (32/128)(4/128) + (1800/8000)(500/8000) = .0219 -> 1 - .011 -> 98
    spec = pod().cpu(4).share(500).obj()
    assert scores(DotProductScore(DotArgs()), two_nodes(), spec) == [95, 98]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (pod().share(150).obj(), [25, 98]),  # tightest is the 200m GPU: 100 - 20 // 10
        (pod().share(500).obj(), [25, 94]),  # 600m GPU: 100 - 60 // 10 = 94
        (pod().share(700).obj(), [25, 49]),  # only a free GPU on a used node: 50 - 1
        (pod().gpus(1).obj(), [25, 49]),
        (pod().obj(), [0, 0]),
    ],
    ids=["tight-share", "share", "share-needs-free-gpu", "whole", "cpu-pod"],
)
def test_gpu_packing_bands(spec, expected: list[int]) -> None:  # type: ignore[no-untyped-def]
    assert scores(GpuPackingScore(), two_nodes(), spec) == expected


def test_gpu_clustering_groups_pods_of_one_kind() -> None:
    state = cluster(node("only-shares"), node("mixed"), node("empty"), node("only-whole"))
    for i, kinds in enumerate([{0: 2}, {0: 1, 1: 1}, {}, {2: 1}]):
        for kind, count in kinds.items():
            state.gpu_pod_kinds[i, kind] = count
    with_gpu_free(state, 0, [600, 800])  # 7400 free -> fill 25 * 600 // 8000 = 1
    spec = pod().share(200).obj()
    assert scores(GpuClusteringScore(ClusterArgs()), state, spec) == [76, 50, 25, 0]
    assert scores(GpuClusteringScore(ClusterArgs()), state, pod().obj()) == [0, 0, 0, 0]


def test_kube_default_spreads_and_balances() -> None:
    state = cluster(node("a", cpu=10, mem=10_000), node("b", cpu=10, mem=10_000))
    state.cpu_free[1] = 5_000
    state.memory_free[1] = 5_000
    spec = pod().cpu(1).mem(1_000).obj()
    # a: (90 + 90) // 2 = 90; b: (40 + 40) // 2 = 40. Balanced: equal fractions -> 100.
    assert scores(LeastAllocated(), state, spec) == [90, 40]
    assert scores(BalancedAllocation(), state, spec) == [100, 100]
    lopsided = pod().cpu(5).mem(0).obj()  # memory counts as 200 MiB when not requested
    # a: cpu .5, mem .02 -> 1 - .24 -> 76
    assert scores(BalancedAllocation(), state, lopsided)[0] == 76
