"""The fill protocol: order, tuning, curves, determinism, and no over-commitment ever."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.registry import POLICIES
from gpufleet.sim.curves import discretise
from gpufleet.sim.fill import run_fill, tune
from tests.builders import node, pod


def test_tune_up_appends_renamed_copies_until_the_next_would_overshoot() -> None:
    pods = [pod(f"p{i}").gpus(1).obj() for i in range(4)]
    order = tune(pods, inflate=2.0, capacity_milli=4 * MILLI, rng=np.random.default_rng(1))
    assert sorted(p.name for p in order[:4]) == ["p0", "p1", "p2", "p3"]
    assert len(order) == 8
    assert all("-tuned-" in p.name for p in order[4:])
    assert sum(p.total_gpu_milli for p in order) == 8 * MILLI


def test_tune_down_removes_pods_until_at_most_the_target() -> None:
    pods = [pod(f"p{i}").gpus(2).obj() for i in range(10)]
    order = tune(pods, inflate=0.5, capacity_milli=10 * MILLI, rng=np.random.default_rng(1))
    assert sum(p.total_gpu_milli for p in order) <= 5 * MILLI
    assert len(order) == 2


def test_a_workload_without_gpus_is_not_tuned() -> None:
    pods = [pod(f"p{i}").obj() for i in range(3)]
    assert len(tune(pods, 1.3, 8 * MILLI, np.random.default_rng(0))) == 3


def test_discretise_means_per_integer_percent_and_widens_to_neighbours() -> None:
    arrived = np.array([0.0, 0.4, 1.6, 4.0])
    values = np.array([0.0, 10.0, 20.0, 40.0])
    curve = discretise(arrived, values, max_pct=7)
    assert curve == (5.0, 10.0, 20.0, 30.0, 40.0, 40.0, None, None)


def small_cluster() -> list[NodeSpec]:
    return [node("a", cpu=32, gpus=4), node("b", cpu=16, gpus=2, model="T4"), node("c", gpus=8)]


def small_workload() -> list[PodSpec]:
    return [pod(f"p{i:02d}").cpu(1 + i % 5).share(200 + 100 * (i % 7)).obj() for i in range(12)] + [
        pod(f"w{i}").cpu(4).gpus(1 + i % 2).obj() for i in range(4)
    ]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_same_seed_gives_identical_results(policy: str) -> None:
    def result(seed: int) -> str:
        run = run_fill(small_cluster(), small_workload(), POLICIES[policy], workload="w", seed=seed)
        data = run.to_json()
        del data["elapsed_s"]  # wall time is the one field that is not a function of the seed
        return json.dumps(data)

    assert result(3) == result(3)


def test_curves_start_empty_and_end_at_the_inflation_target() -> None:
    run = run_fill(small_cluster(), small_workload(), POLICIES["fgd"], workload="w", seed=1)
    assert run.allocation_curve[0] == 0.0
    assert len(run.allocation_curve) == len(run.frag_ratio_curve) == 131
    assert run.allocation_curve[130] is not None
    assert 0 < run.allocation_curve[130] <= 100


node_st = st.builds(
    lambda i, cpu, gpus, model: NodeSpec(f"n{i}", cpu * 1000, 64 * 1024, gpus, model),
    st.integers(0, 10**6),
    st.integers(1, 64),
    st.integers(0, 8),
    st.sampled_from(["A", "B"]),
)
pod_st = st.builds(
    lambda cpu, mem, kind, milli, count, models: PodSpec(
        "p",
        cpu * 500,
        mem * 512,
        0 if kind == 0 else (1 if kind == 1 else count),
        0 if kind == 0 else (milli if kind == 1 else MILLI),
        models,
    ),
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 2),
    st.integers(1, 1000),
    st.integers(1, 8),
    st.sampled_from([None, frozenset({"A"}), frozenset({"B", "C"})]),
)


@settings(max_examples=40, deadline=None)
@given(
    nodes=st.lists(node_st, min_size=1, max_size=5, unique_by=lambda n: n.name),
    pods=st.lists(pod_st, min_size=1, max_size=25),
    policy=st.sampled_from(list(POLICIES)),
    seed=st.integers(0, 1000),
)
def test_no_gpu_beyond_1000_milli_and_no_node_beyond_its_capacity(
    nodes: list[NodeSpec], pods: list[PodSpec], policy: str, seed: int
) -> None:
    from gpufleet.framework.protocols import Handle
    from gpufleet.framework.runtime import Framework
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.fragmentation import FragmentIndex, typical_pods
    from gpufleet.plugins.registry import PLUGINS
    from gpufleet.scheduler.placement.place import Placement, commit, place

    named = [
        PodSpec(f"p{i}", p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, p.gpu_models)
        for i, p in enumerate(pods)
    ]
    state = ClusterState(nodes)
    framework = Framework(
        POLICIES[policy],
        PLUGINS,
        Handle(np.random.default_rng(seed), FragmentIndex(typical_pods(named))),
    )
    placed = []
    for p in named:
        outcome = place(framework, state, p)
        if isinstance(outcome, Placement):
            if outcome.pod.num_gpu and outcome.pod.gpu_models is not None:
                assert state.models[state.model_id[outcome.node]] in outcome.pod.gpu_models
            commit(state, outcome)
            placed.append(outcome)
        assert (state.gpu_free >= 0).all()
        assert (state.gpu_free <= MILLI).all()
        assert (state.cpu_free >= 0).all()
        assert (state.memory_free >= 0).all()
        assert (state.gpu_free[~state.gpu_present] == 0).all()
    used = np.zeros_like(state.gpu_free)
    for placement in placed:
        for g in placement.gpus:
            used[placement.node, g] += placement.pod.gpu_milli
    assert (used + state.gpu_free == np.where(state.gpu_present, MILLI, 0)).all()
