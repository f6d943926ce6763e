"""The share plan and the gpufleet policy on clusters whose right answer is known by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.packing import best_fit_decreasing
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.plugins.share_plan import Args, new, new_gpu_choice, share_plan
from gpufleet.scheduler.placement.place import Placement, place
from tests.builders import cluster, node, pod, with_gpu_free

# Shares of 600, 400 and 500 milli-GPU, the 500s twice as frequent: packed offline they go
# 600 + 400 and 500 + 500 on a GPU; a 400 next to a 500 leaves 100 nobody uses.
WORKLOAD = [pod("a").share(600).obj(), pod("b").share(400).obj()] + [
    pod(f"c{i}").share(500).obj() for i in range(2)
]


def framework(workload: list[PodSpec], policy: str = "gpufleet") -> Framework:
    handle = Handle(np.random.default_rng(0), FragmentIndex(typical_pods(workload)))
    return Framework(POLICIES[policy], PLUGINS, handle)


def test_best_fit_decreasing_packs_largest_first_into_the_fullest_gpu() -> None:
    assert best_fit_decreasing([300, 700, 500, 500, 200]) == [
        ((500, 500), 1), ((700, 300), 1), ((200,), 1),
    ]  # fmt: skip
    # 6 x 300 and 3 x 100: three to a GPU (300 + 300 + 300), the 100s into the 100 gaps.
    assert best_fit_decreasing([300] * 6 + [100] * 3) == [((300, 300, 300, 100), 2), ((100,), 1)]
    # Packed in groups, and as one share at a time would be: 450s two to a GPU, a 100 in
    # each 100 gap, the last 450 alone.
    assert best_fit_decreasing([450] * 5 + [100] * 3) == [
        ((450, 450, 100), 2), ((450, 100), 1),
    ]  # fmt: skip
    with pytest.raises(ValueError, match="1200 milli-GPU"):
        best_fit_decreasing([1200])


def test_the_plan_puts_together_what_the_offline_packing_does() -> None:
    # 4 GPUs, 500 milli-GPU per pod on average: 8 pods, 2 + 2 + 4, packed as
    # (600, 400) twice and (500, 500) twice.
    planned = share_plan(typical_pods(WORKLOAD), gpus=4)
    assert {(u, s) for u, s in zip(*np.nonzero(planned), strict=True)} == {
        (0, 600), (0, 400), (0, 500), (600, 400), (400, 600), (500, 500),
    }  # fmt: skip
    # Whole-GPU pods are never planned; neither is anything on a cluster without GPUs.
    assert not share_plan(typical_pods([pod().gpus(1).obj()]), gpus=4).any()
    assert not share_plan(typical_pods(WORKLOAD), gpus=0).any()


def test_a_share_keeps_the_gap_its_complement_needs() -> None:
    # Node "half" has a GPU with 500 free; "fresh" a free GPU. A 400 fits both; best fit
    # (and FGD) would take the 500 gap and leave 100. gpufleet opens the free GPU (the
    # packing has 400s: planned[0, 400]) and keeps the gap for a 500, which it then puts there.
    state = cluster(node("half", gpus=1), node("fresh", gpus=1))
    with_gpu_free(state, 0, [500])
    fw = framework(WORKLOAD)
    chosen = place(fw, state, pod().share(400).obj())
    assert isinstance(chosen, Placement)
    assert state.names[chosen.node] == "fresh"
    for policy in ("fgd", "best-fit"):
        other = place(framework(WORKLOAD, policy), state, pod().share(400).obj())
        assert isinstance(other, Placement)
        assert state.names[other.node] == "half"
    with_gpu_free(state, 1, [600])  # the 400 is there now
    chosen = place(fw, state, pod().share(500).obj())
    assert isinstance(chosen, Placement)
    assert state.names[chosen.node] == "half"


def test_inside_a_node_a_share_takes_its_planned_partner_else_opens_a_gpu() -> None:
    state = cluster(node("n", gpus=3))
    with_gpu_free(state, 0, [500, 1000, 400])  # 500 used, free, 600 used
    chooser = new_gpu_choice(Args(), Handle(np.random.default_rng(0), FragmentIndex(
        typical_pods(WORKLOAD)
    )))  # fmt: skip
    assert chooser.choose_gpus(state, pod().share(500).obj(), 0) == (0,)  # 500 + 500
    assert chooser.choose_gpus(state, pod().share(400).obj(), 0) == (2,)  # 600 + 400
    assert chooser.choose_gpus(state, pod().share(600).obj(), 0) == (1,)  # opens a GPU
    # A size the workload never asks for is not planned: the tightest GPU that holds it.
    assert chooser.choose_gpus(state, pod().share(300).obj(), 0) == (2,)
    assert chooser.choose_gpus(state, pod().gpus(1).obj(), 0) == (1,)


def test_the_score_tiers_planned_partner_then_opening_then_nothing() -> None:
    state = cluster(node("partner", gpus=1), node("free", gpus=1), node("other", gpus=1))
    with_gpu_free(state, 0, [500])
    with_gpu_free(state, 2, [550])  # 450 used: no planned partner for anything
    scorer = new(Args(), Handle(np.random.default_rng(0), FragmentIndex(typical_pods(WORKLOAD))))
    nodes = np.arange(3)
    assert scorer.score(state, pod().share(500).obj(), nodes).tolist() == [2, 1, 0]
    assert scorer.score(state, pod().share(300).obj(), nodes).tolist() == [0, 0, 0]
    assert scorer.score(state, pod().gpus(1).obj(), nodes).tolist() == [0, 0, 0]
    # A share that pins whole CPUs is left to the other scores and the tightest GPU.
    pinned = replace(pod().share(500).obj(), exclusive_cpu=True)
    assert scorer.score(state, pinned, nodes).tolist() == [0, 0, 0]
    state = cluster(node("n", gpus=2))
    with_gpu_free(state, 0, [500, 1000])
    chooser = new_gpu_choice(Args(), Handle(np.random.default_rng(0), FragmentIndex(
        typical_pods(WORKLOAD)
    )))  # fmt: skip
    assert chooser.choose_gpus(state, replace(pod().share(400).obj(), exclusive_cpu=True), 0) == (
        0,
    )
    assert chooser.choose_gpus(state, pod().share(400).obj(), 0) == (1,)


def _one_at_a_time(shares: list[int]) -> list[int]:
    """Best-fit decreasing the plain way: the loads of the GPUs it fills."""
    gaps: list[int] = []
    loads: list[int] = []
    for share in sorted(shares, reverse=True):
        fitting = [i for i, gap in enumerate(gaps) if gap >= share]
        if fitting:
            i = min(fitting, key=lambda j: gaps[j])
        else:
            gaps.append(1000)
            loads.append(0)
            i = len(gaps) - 1
        gaps[i] -= share
        loads[i] += share
    return sorted(loads)


@pytest.mark.parametrize("seed", range(20))
def test_grouped_packing_fills_the_gpus_one_share_at_a_time_would(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sizes = rng.choice([50, 110, 160, 230, 320, 470, 500, 650, 810, 1000], size=4)
    shares = rng.choice(sizes, size=int(rng.integers(1, 120))).tolist()
    packed = best_fit_decreasing(shares)
    assert sorted(s for p, n in packed for s in p * n) == sorted(shares)
    assert sorted(sum(p) for p, n in packed for _ in range(n)) == _one_at_a_time(shares)
