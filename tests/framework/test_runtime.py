"""Registry, profiles, the runtime's filter reasons and tie-breaking."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import FilterPlugin, GpuChooser, Handle, ScorePlugin
from gpufleet.framework.registry import DuplicateNameError, Registry, UnknownNameError
from gpufleet.framework.runtime import Framework, ProfileError
from gpufleet.framework.status import Code
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.interpod import PodPlacement
from gpufleet.plugins import best_fit, fgd, gpu_choice, gpu_fit, node_resources
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.report.reasons import status_text
from gpufleet.scheduler.placement.place import Placement, commit, place
from tests.builders import cluster, node, pod


def handle(seed: int = 0, tie_rank: list[int] | None = None) -> Handle:
    return Handle(
        np.random.default_rng(seed),
        FragmentIndex(typical_pods([pod().gpus(1).obj()])),
        None if tie_rank is None else np.array(tie_rank),
    )


def test_plugins_satisfy_the_protocols_they_are_registered_for() -> None:
    # Statically checked by mypy (the annotations), and at runtime by isinstance.
    filters: list[FilterPlugin] = [node_resources.NodeResourcesFit(), gpu_fit.GpuFit()]
    scorer: ScorePlugin = best_fit.BestFitScore(best_fit.Args())
    chooser: GpuChooser = gpu_choice.GpuBestFit()
    both = fgd.new(fgd.Args(), handle())
    fgd_score: ScorePlugin = both
    fgd_choice: GpuChooser = both
    assert all(isinstance(f, FilterPlugin) for f in filters)
    assert isinstance(scorer, ScorePlugin)
    assert isinstance(chooser, GpuChooser)
    assert isinstance(fgd_score, ScorePlugin)
    assert isinstance(fgd_choice, GpuChooser)


def test_every_policy_builds() -> None:
    for name, profile in POLICIES.items():
        framework = Framework(profile, PLUGINS, handle())
        assert framework.profile.name == name


def test_registry_refuses_duplicates_and_names_what_it_knows() -> None:
    registry: Registry[int] = Registry("widget")
    registry.register("a", 1)
    with pytest.raises(DuplicateNameError):
        registry.register("a", 2)
    with pytest.raises(UnknownNameError, match="unknown widget 'b'; known: a"):
        registry["b"]


def test_a_profile_using_a_plugin_at_the_wrong_point_is_refused() -> None:
    wrong = Profile("wrong", (best_fit.NAME,), (), gpu_choice.BEST_FIT)
    with pytest.raises(ProfileError, match="cannot be used as a filter"):
        Framework(wrong, PLUGINS, handle())


def test_unschedulable_pod_gets_kube_scheduler_counts() -> None:
    state = cluster(node("a", cpu=2), node("b", cpu=64, gpus=1), node("c", cpu=64, gpus=0))
    framework = Framework(POLICIES["best-fit"], PLUGINS, handle())
    outcome = place(framework, state, pod().cpu(4).gpus(2).obj())
    assert not isinstance(outcome, Placement)
    assert outcome.code is Code.UNSCHEDULABLE
    assert outcome.plugin == "GpuFit"
    assert status_text(outcome) == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 Insufficient nvidia.com/gpu."
    )


def test_model_mismatch_everywhere_is_unresolvable() -> None:
    state = cluster(node("a", model="T4"), node("b", model="T4"))
    framework = Framework(POLICIES["fgd"], PLUGINS, handle())
    outcome = place(framework, state, pod().gpus(1).models("A100").obj())
    assert not isinstance(outcome, Placement)
    assert outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert "2 node(s) didn't match Pod's GPU model (A100)" in status_text(outcome)


@pytest.mark.parametrize(("ranks", "expected"), [([2, 0, 1], 1), ([0, 2, 1], 0), (None, 0)])
def test_ties_go_to_the_lowest_tie_rank(ranks: list[int] | None, expected: int) -> None:
    state = cluster(node("a"), node("b"), node("c"))
    framework = Framework(POLICIES["best-fit"], PLUGINS, handle(tie_rank=ranks))
    outcome = place(framework, state, pod().gpus(1).obj())
    assert isinstance(outcome, Placement)
    assert outcome.node == expected


def test_kube_default_hands_a_share_a_whole_gpu() -> None:
    state = cluster(node("a", gpus=2))
    framework = Framework(POLICIES["kube-default"], PLUGINS, handle())
    outcome = place(framework, state, pod().share(300).obj())
    assert isinstance(outcome, Placement)
    assert (outcome.pod.gpu_milli, outcome.gpus) == (1000, (0,))


@pytest.mark.parametrize("policy", ["gpufleet", "fgd"])
def test_scores_reused_within_a_cycle_are_the_scores_given_afresh(policy: str) -> None:
    """Node-local scores are kept per pod shape (whatever the pod's name and labels) and
    given again until a node changes: every placement of a backlog of like and unlike pods
    scores, to the last bit, and chooses as a framework that forgets them before each pod."""
    rng = np.random.default_rng(3)
    models = ("A100", "V100", "T4")
    nodes = [
        node(
            f"n{i}",
            gpus=int(rng.choice([1, 2, 4, 8])),
            model=str(rng.choice(models)),
            cpu=float(rng.choice([16, 32, 96])),
        )
        for i in range(60)
    ]
    shapes = [
        pod().gpus(1).cpu(4).obj(),
        pod().gpus(2).cpu(8).obj(),
        pod().share(500).cpu(2).obj(),
        pod().gpus(1).cpu(4).models("A100").obj(),
        pod().cpu(6).obj(),
    ]
    typical = FragmentIndex(typical_pods(shapes))
    remembering = Framework(POLICIES[policy], PLUGINS, Handle(rng, typical, None))
    fresh_typical = FragmentIndex(typical_pods(shapes))
    fresh = Framework(POLICIES[policy], PLUGINS, Handle(rng, fresh_typical, None))
    state, other = cluster(*nodes), cluster(*nodes)
    remembering.forget_scores()
    placed = 0
    for step in range(150):
        spec = shapes[int(rng.integers(len(shapes)))]
        spec = dataclasses.replace(spec, name=f"p{step}")
        if step % 2:  # a pod of an indexed Job: labels of its own, scored as its shape
            spec = dataclasses.replace(spec, placement=PodPlacement("ml", {"index": str(step)}))
        feasible = remembering.run_filters(state, spec).nodes
        if not feasible.size:
            continue
        fresh.forget_scores()
        given = remembering.run_scores(state, spec, feasible)
        afresh = fresh.run_scores(other, spec, feasible)
        assert np.array_equal(given, afresh), step
        a, b = place(remembering, state, spec), place(fresh, other, spec)
        assert isinstance(a, Placement)
        assert isinstance(b, Placement)
        assert (a.node, a.gpus) == (b.node, b.gpus)
        commit(state, a)
        commit(other, b)
        placed += 1
    assert placed > 50


def test_a_node_key_names_everything_its_score_reads_of_the_node() -> None:
    """Nodes whose keys are equal score the same for a pod (so ``run_scores`` may score a
    key once), and each part of a key is needed: left out, some nodes the shorter key calls
    alike score differently — the cluster below varies every part (models, CPU, memory
    small enough to strand GPUs, GPUs taken)."""
    rng = np.random.default_rng(7)
    models = ("A100", "T4")
    nodes = [
        node(
            f"n{i}",
            gpus=int(rng.choice([4, 8])),
            model=str(rng.choice(models)),
            cpu=float(rng.choice([16, 32])),
            mem=int(rng.choice([32_768, 65_536, 131_072])),
        )
        for i in range(80)
    ]
    shapes = [
        pod().gpus(1).cpu(4).mem(24_000).obj(),
        pod().gpus(2).cpu(8).mem(8_000).obj(),
        pod().cpu(2).mem(16_000).obj(),
        pod().share(500).cpu(1).mem(4_000).obj(),
        pod().gpus(1).cpu(2).mem(4_000).models("A100").obj(),
    ]
    framework = Framework(
        POLICIES["gpufleet"], PLUGINS, Handle(rng, FragmentIndex(typical_pods(shapes)), None)
    )
    state = cluster(*nodes)
    for step in range(120):  # a cluster in use: GPUs, CPU and memory taken unevenly
        spec = dataclasses.replace(shapes[int(rng.integers(len(shapes)))], name=f"p{step}")
        outcome = place(framework, state, spec)
        if isinstance(outcome, Placement):
            commit(state, outcome)
    keyed = [p for p, _ in framework._plugins(shapes[0])[2] if hasattr(p, "node_key")]
    assert {type(p).__name__ for p in keyed} == {"FGD", "StrandedGpuScore"}
    for plugin in keyed:
        keys = [tuple(plugin.node_key(state, n)) for n in range(state.size)]
        parts = {"FGD": [(0,), (1,), tuple(range(2, 10))]}.get(type(plugin).__name__)
        scored = [_scored(framework, plugin, state, spec) for spec in shapes]
        for scores in scored:
            alike: dict[tuple[object, ...], set[float]] = {}
            for n, score in scores.items():
                alike.setdefault(keys[n], set()).add(score)
            assert all(len(seen) == 1 for seen in alike.values()), type(plugin).__name__
        for left_out in parts or [(i,) for i in range(len(keys[0]))]:
            needed = False
            for scores in scored:
                shorter: dict[tuple[object, ...], set[float]] = {}
                for n, score in scores.items():
                    rest = tuple(v for i, v in enumerate(keys[n]) if i not in left_out)
                    shorter.setdefault(rest, set()).add(score)
                needed = needed or any(len(seen) > 1 for seen in shorter.values())
            assert needed, (type(plugin).__name__, left_out)


def _scored(framework: Framework, plugin: Any, state: Any, spec: Any) -> dict[int, float]:
    """``plugin``'s score of each node that ``spec`` may go to."""
    prepared = framework.prepare(spec)
    nodes = framework.run_filters(state, prepared).nodes
    return dict(zip(nodes.tolist(), plugin.score(state, prepared, nodes).tolist(), strict=True))
