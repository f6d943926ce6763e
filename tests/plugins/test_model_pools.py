"""Pools of GPU models, the share plan and stranding ratios per pool, and the reserve that
pods naming a model keep on it: on clusters whose right answer is known by hand."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.framework.protocols import Handle, ScorePlugin
from gpufleet.framework.runtime import Framework
from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.pod import PodSpec
from gpufleet.plugins import model_reserve, share_plan, stranding
from gpufleet.plugins.model_pools import expected_share, model_gpus, model_pools
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.scheduler.placement.place import Placement, commit, place
from tests.builders import cluster, node, pod, with_gpu_free


def handle(workload: list[PodSpec]) -> Handle:
    return Handle(np.random.default_rng(0), FragmentIndex(typical_pods(workload)))


def test_without_constrained_pods_the_cluster_is_one_pool_planned_as_before() -> None:
    workload = [pod("a").share(600).obj(), pod("b").share(400).obj(), pod("c").gpus(1).obj()]
    state = cluster(node("x", gpus=2, model="A"), node("y", gpus=4, model="B"))
    typical = typical_pods(workload)
    pools = model_pools(typical, state.models, model_gpus(state))
    assert pools.of_model.tolist() == [0, 0]
    assert pools.fraction.tolist() == [[1.0, 1.0, 1.0]]
    plans = share_plan.new(share_plan.Args(), handle(workload)).plan(state)[1]
    assert (plans == share_plan.share_plan(typical, 6)[None]).all()


def test_constrained_pods_take_their_models_first_and_the_others_the_rest() -> None:
    # 4 GPUs of A, 4 of B; half the GPU demand may only use A, half may use either. Scaled
    # to fill the cluster, the A-only pods fill A and the others are expected on B.
    workload = [pod("a").models("A").gpus(1).obj(), pod("any").gpus(1).obj()]
    typical = typical_pods(workload)
    only_a = typical.gpu_models.index(frozenset({"A"}))
    share = expected_share(typical, ("A", "B"), np.array([4, 4]))
    assert share[:, only_a].tolist() == [1.0, 0.0]
    assert share[:, 1 - only_a].tolist() == [0.0, 1.0]
    pools = model_pools(typical, ("A", "B"), np.array([4, 4]))
    assert pools.of_model.tolist() == [0, 1]
    # With 8 GPUs of A the A-only pods (half of 12 GPUs' worth) leave 2 of A's free, and
    # the either-way pods spread over those 2 and B's 4.
    share = expected_share(typical, ("A", "B"), np.array([8, 4]))
    assert share[:, 1 - only_a] == pytest.approx([1 / 3, 2 / 3])


def half_used_a_and_free_b() -> ClusterState:
    state = cluster(node("a", gpus=1, model="A"), node("b", gpus=1, model="B"))
    return with_gpu_free(state, 0, [500])


def test_a_model_is_planned_for_the_shares_expected_there() -> None:
    # 600 + 400 may only use A (2 GPUs) and fill it; the 500s go anywhere, so B (2 GPUs)
    # expects them. A 500 does not pair with A's half-used GPU, as one pool would plan.
    workload = [pod("a6").models("A").share(600).obj(), pod("a4").models("A").share(400).obj()]
    workload += [pod(f"c{i}").share(500).obj() for i in range(2)]
    state = cluster(node("a", gpus=2, model="A"), node("b", gpus=2, model="B"))
    with_gpu_free(state, 0, [500, 1000])
    scorer = share_plan.new(share_plan.Args(), handle(workload))
    assert scorer.score(state, pod().share(500).obj(), np.arange(2)).tolist() == [0, 1]
    assert scorer.score(state, pod().models("A").share(400).obj(), np.arange(2)).tolist() == [1, 0]
    one_pool = share_plan.share_plan(typical_pods(workload), 4)
    assert one_pool[500, 500]  # what the single pool would have done


def test_stranding_ratios_are_those_of_the_pods_each_model_expects() -> None:
    # Pods for A ask 20 CPUs per GPU, pods for anywhere 5: A expects only its own.
    workload = [
        pod("a").models("A").cpu(20).mem(0).gpus(1).obj(),
        pod("u").cpu(5).mem(0).gpus(1).obj(),
    ]
    state = cluster(node("a", gpus=4, model="A"), node("b", gpus=4, model="B"))
    scorer = stranding.new(stranding.Args(), handle(workload))
    pools, ratios = scorer.ratios(state)
    assert ratios[pools.of_model, 0].tolist() == [20, 5]


def test_the_reserve_is_the_narrower_pods_demand_scaled_by_the_free_share() -> None:
    # 3 GPUs of BIG, 1 of SMALL; 8 pods of 1 GPU fill the cluster twice over, so each
    # counts 500 milli: SMALL's one named pod 500, BIG's three 1500.
    workload = [pod(f"b{i}").models("BIG").gpus(1).obj() for i in range(3)]
    workload += [pod("s").models("SMALL").gpus(1).obj()]
    workload += [pod(f"u{i}").gpus(1).obj() for i in range(4)]
    state = cluster(
        *(node(f"big{i}", gpus=1, model="BIG") for i in range(3)),
        node("small", gpus=1, model="SMALL"),
    )
    scorer: ScorePlugin = model_reserve.new(model_reserve.Args(), handle(workload))
    assert isinstance(scorer, ScorePlugin)
    nodes = np.arange(4)
    # A free pod on SMALL leaves 0 of its 500 reserve; on BIG 2000 of 1500.
    assert scorer.score(state, pod().gpus(1).obj(), nodes).tolist() == [0, 0, 0, -500]
    # A pod naming SMALL or BIG has nothing narrower than itself to leave room for on the
    # nodes it may use (the model filter keeps it off the others).
    assert scorer.score(state, pod().models("SMALL").gpus(1).obj(), nodes).tolist() == [0] * 4
    assert scorer.score(state, pod().models("BIG").gpus(1).obj(), nodes[:3]).tolist() == [0] * 3
    # Half the cluster used: the reserves are half (250 on SMALL, 750 on BIG), and BIG
    # with one GPU left is short too: 750 - (1000 - 1000) = 750.
    with_gpu_free(state, 0, [0])
    with_gpu_free(state, 1, [0])
    assert scorer.score(state, pod().gpus(1).obj(), nodes).tolist() == [-750, -750, -750, -250]
    # CPU-only pods take no GPU: no reserve.
    assert scorer.score(state, pod().obj(), nodes).tolist() == [0] * 4
    # A workload where no pod names a model reserves nothing.
    plain = model_reserve.new(model_reserve.Args(), handle([pod().gpus(1).obj()]))
    assert plain.score(state, pod().gpus(1).obj(), nodes).tolist() == [0] * 4


def test_a_pod_that_may_go_anywhere_leaves_a_small_model_to_the_pods_that_name_it() -> None:
    # 3 GPUs of BIG, 1 of SMALL, pods naming each in proportion, as many that name none.
    # FGD sends the free pod to SMALL (fewer typical pods can use it, so its fragment falls
    # most) and the SMALL pod that follows fails; gpufleet keeps SMALL's reserve.
    workload = [pod(f"b{i}").models("BIG").gpus(1).obj() for i in range(3)]
    workload += [pod("s").models("SMALL").gpus(1).obj()]
    workload += [pod(f"u{i}").gpus(1).obj() for i in range(4)]
    outcomes = {}
    for policy in ("fgd", "gpufleet"):
        state = cluster(
            *(node(f"big{i}", gpus=1, model="BIG") for i in range(3)),
            node("small", gpus=1, model="SMALL"),
        )
        framework = Framework(POLICIES[policy], PLUGINS, handle(workload))
        free = place(framework, state, pod("u").gpus(1).obj())
        assert isinstance(free, Placement)
        commit(state, free)
        named = place(framework, state, pod("s").models("SMALL").gpus(1).obj())
        outcomes[policy] = (state.names[free.node], isinstance(named, Placement))
    assert outcomes == {"fgd": ("small", False), "gpufleet": ("big0", True)}


def test_a_cluster_without_gpus_is_one_pool_and_nothing_strands() -> None:
    workload = [pod("a").models("A").gpus(1).obj(), pod("c").cpu(2).obj()]
    state = cluster(node("cpu", gpus=0))
    scorer = stranding.new(stranding.Args(), handle(workload))
    assert scorer.score(state, pod().cpu(2).obj(), np.arange(1)).tolist() == [0]
    planner = share_plan.new(share_plan.Args(), handle(workload))
    assert planner.score(state, pod().share(500).obj(), np.arange(1)).tolist() == [0]
