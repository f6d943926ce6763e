"""NodeResourcesFit and GpuFit: which nodes pass, and the reasons for the ones that don't;
and for every filter, that judging one node and counting slots follow the same rule as
judging all nodes."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import NodeConstraint, Requirement, Taint, Toleration
from gpufleet.plugins.gpu_fit import GpuFit
from gpufleet.plugins.node_resources import NodeResourcesFit
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.scheduler.placement.place import Placement, choose_gpus, place
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


# -- one rule: the whole-cluster filters, the one-node check and the slot count agree ------

EFA = "vpc.amazonaws.com/efa"
ZONE = "topology.kubernetes.io/zone"
DEDICATED = Taint("dedicated", "ml")


@st.composite
def clusters(draw: st.DrawFn) -> ClusterState:
    nodes = []
    for i in range(draw(st.integers(1, 5))):
        gpus = draw(st.sampled_from([0, 2, 4, 8]))
        single_numa = gpus > 0 and draw(st.booleans())
        nodes.append(
            NodeSpec(
                f"n{i}",
                draw(st.sampled_from([4000, 16000, 96000])),
                draw(st.sampled_from([8192, 65536])),
                gpus,
                draw(st.sampled_from(["T4", "G2"])) if gpus else None,
                labels={ZONE: draw(st.sampled_from(["a", "b"]))},
                taints=(DEDICATED,) if draw(st.booleans()) else (),
                mig_slices={"1g.10gb": draw(st.integers(0, 3))} if draw(st.booleans()) else {},
                gpu_zones=tuple(g * 2 // gpus for g in range(gpus)) if single_numa else (),
                zone_cpu_milli=(8000, 8000) if single_numa else (),
                single_numa=single_numa,
                extended={EFA: draw(st.integers(0, 2))} if draw(st.booleans()) else {},
                max_pods=draw(st.sampled_from([None, 2, 4])),
                gpu_memory_mib=draw(st.sampled_from([None, 16 * 1024, 80 * 1024])),
            )
        )
    return ClusterState(nodes)


@st.composite
def pod_specs(draw: st.DrawFn, *, plain: bool = False) -> PodSpec:
    kinds = ["cpu", "whole"] if plain else ["cpu", "whole", "share", "memory", "mig", "pinned"]
    kind = draw(st.sampled_from(kinds))
    spec = PodSpec(
        "p",
        draw(st.sampled_from([0, 1000, 4000, 12000])),
        draw(st.sampled_from([0, 1024, 30000])),
        extended=((EFA, draw(st.integers(1, 2))),) if draw(st.booleans()) else (),
        constraint=NodeConstraint(
            terms=((Requirement(ZONE, "In", ("a",)),),) if draw(st.booleans()) else (),
            tolerations=(Toleration("dedicated", "Exists"),) if draw(st.booleans()) else (),
        ),
    )
    if kind == "whole":
        spec = replace(spec, num_gpu=draw(st.integers(1, 4)), gpu_milli=MILLI)
    elif kind == "share":
        spec = replace(spec, num_gpu=1, gpu_milli=draw(st.sampled_from([250, 600])))
    elif kind == "memory":
        spec = replace(spec, num_gpu=1, gpu_memory_mib=draw(st.sampled_from([8192, 40960])))
    elif kind == "mig":
        spec = replace(spec, mig_profile="1g.10gb", mig_count=draw(st.integers(1, 2)))
    elif kind == "pinned":
        spec = replace(spec, num_gpu=draw(st.integers(1, 2)), gpu_milli=MILLI, exclusive_cpu=True)
    if kind in ("whole", "share") and draw(st.booleans()):
        spec = replace(spec, gpu_models=frozenset({"G2"}))
    return spec


def busy(data: st.DataObject, state: ClusterState, framework: Framework) -> None:
    """Place a few random pods, so that rows are partly used."""
    for _ in range(data.draw(st.integers(0, 6))):
        placed = place(framework, state, data.draw(pod_specs()), None)
        if isinstance(placed, Placement):
            state.reserve(placed.node, placed.pod, placed.gpus)


@pytest.mark.parametrize("policy", ["kube-default", "best-fit"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_node_check_is_the_filters_rule(policy: str, data: st.DataObject) -> None:
    framework = Framework(POLICIES[policy], PLUGINS, Handle(np.random.default_rng(0)))
    state = data.draw(clusters())
    busy(data, state, framework)
    spec = framework.prepare(data.draw(pod_specs()))
    feasible = set(framework.run_filters(state, spec).nodes.tolist())
    assert [framework.fits(state, spec, n) for n in range(state.size)] == [
        n in feasible for n in range(state.size)
    ]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_slot_count_is_how_many_the_filters_let_in(data: st.DataObject) -> None:
    """A plain pod's count on a node is exactly how many copies the filters let in one after
    another: the count is the filters' rule, not a restatement of it."""
    framework = Framework(POLICIES["best-fit"], PLUGINS, Handle(np.random.default_rng(0)))
    state = data.draw(clusters())
    busy(data, state, framework)
    spec = data.draw(pod_specs(plain=True))
    allowed = framework.run_filters(state.copy(), spec).nodes
    for node_index, count in zip(
        allowed.tolist(), framework.count(state, spec, allowed).tolist(), strict=True
    ):
        trial = state.copy()
        taken = 0
        while framework.fits(trial, spec, node_index) and taken <= 64:
            trial.reserve(node_index, spec, choose_gpus(framework, trial, spec, node_index))
            taken += 1
        assert taken == min(count, 65)
