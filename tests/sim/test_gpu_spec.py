"""Model-constrained variants of a workload: which pods, which models, how often."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gpufleet.model.pod import PodSpec
from gpufleet.sim.gpu_spec import constrain_gpu_models, model_gpus
from tests.builders import node, pod

# 60 GPUs of model A (6 to a node), 30 of B (2 to a node), 10 of C (1 to a node).
NODES = (
    [node(f"a{i}", gpus=6, model="A") for i in range(10)]
    + [node(f"b{i}", gpus=2, model="B") for i in range(15)]
    + [node(f"c{i}", gpus=1, model="C") for i in range(10)]
    + [node("cpu", gpus=0)]
)
WORKLOAD = [pod(f"g{i}").gpus(1).obj() for i in range(12_000)] + [
    pod(f"cpu{i}").obj() for i in range(3_000)
]


def constrained(pods: list[PodSpec]) -> list[PodSpec]:
    return [p for p in pods if p.gpu_models is not None]


def test_the_same_seed_gives_the_same_variant_and_another_seed_another() -> None:
    first = constrain_gpu_models(WORKLOAD, NODES, 0.2, np.random.default_rng(7), set_share=0.3)
    again = constrain_gpu_models(WORKLOAD, NODES, 0.2, np.random.default_rng(7), set_share=0.3)
    other = constrain_gpu_models(WORKLOAD, NODES, 0.2, np.random.default_rng(8), set_share=0.3)
    assert first == again
    assert first != other
    assert [p.name for p in first] == [p.name for p in WORKLOAD]  # order and pods kept


@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.35])
def test_the_fraction_of_gpu_pods_and_the_models_proportions_hold(fraction: float) -> None:
    variant = constrain_gpu_models(WORKLOAD, NODES, fraction, np.random.default_rng(1))
    named = constrained(list(variant))
    assert len(named) == round(fraction * 12_000)
    assert all(p.num_gpu > 0 for p in named)  # CPU-only pods never name a GPU model
    assert model_gpus(NODES) == {"A": 60, "B": 30, "C": 10}
    counts = Counter(next(iter(p.gpu_models or ())) for p in named)
    for model, share in (("A", 0.6), ("B", 0.3), ("C", 0.1)):
        # binomial sd is at most 0.5 / sqrt(1200): 0.015; allow about 3 sd
        assert counts[model] / len(named) == pytest.approx(share, abs=0.045)


def test_a_pod_names_only_models_with_a_node_that_holds_it() -> None:
    pods = [pod(f"four{i}").gpus(4).obj() for i in range(200)] + [
        pod(f"big-cpu{i}").cpu(100).gpus(1).obj() for i in range(200)
    ]
    nodes = [node("a", gpus=8, model="A", cpu=96), node("b", gpus=2, model="B", cpu=128)]
    variant = constrain_gpu_models(pods, nodes, 1.0, np.random.default_rng(3))
    assert {p.gpu_models for p in variant if p.num_gpu == 4} == {frozenset({"A"})}
    assert {p.gpu_models for p in variant if p.cpu_milli == 100_000} == {frozenset({"B"})}


def test_some_constrained_pods_name_a_set_of_two_models() -> None:
    variant = constrain_gpu_models(WORKLOAD, NODES, 0.35, np.random.default_rng(2), set_share=0.2)
    sizes = Counter(len(p.gpu_models or ()) for p in constrained(list(variant)))
    assert set(sizes) == {1, 2}
    assert sizes[2] / (sizes[1] + sizes[2]) == pytest.approx(0.2, abs=0.04)


def test_a_fraction_outside_zero_to_one_is_refused() -> None:
    with pytest.raises(ValueError, match="fraction"):
        constrain_gpu_models(WORKLOAD, NODES, 1.5, np.random.default_rng(0))
    with pytest.raises(ValueError, match="no node has GPUs"):
        constrain_gpu_models(WORKLOAD, [node("cpu", gpus=0)], 0.1, np.random.default_rng(0))
