"""Slot counting (``scheduler/placement/fit.py``): how many pods of one plain spec the cluster can
take — exact, since each such pod takes exactly one slot of one node — and no bound
(infinite) for pods whose placement a count cannot predict."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.framework.runtime import Exclusion
from gpufleet.framework.status import Status
from gpufleet.model.arrays import IntArray
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import NodeConstraint, Requirement
from gpufleet.model.workload import PodInfo
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.placement import fit
from gpufleet.scheduler.placement.fit import Fit
from gpufleet.scheduler.placement.place import place
from tests.builders import InfoBuilder, cluster, cycle_of, info, node, pod, with_gpu_free

EFA = "vpc.amazonaws.com/efa"

NODES = (
    node("n0", cpu=96, gpus=8),
    node("n1", cpu=6, gpus=4),
    node("n2", cpu=32, gpus=0),
    replace(node("n3", cpu=96, gpus=8), max_pods=3, extended={EFA: 2}),
)


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        pytest.param(pod().gpus(2).obj(), [4, 2, 0, 3], id="whole-gpus"),
        pytest.param(pod().cpu(4).gpus(2).obj(), [4, 1, 0, 3], id="cpu-bound"),
        pytest.param(pod().cpu(8).obj(), [12, 0, 4, 3], id="cpu-only"),
        pytest.param(pod().cpu(1).mem(150_000).obj(), [2, 2, 2, 2], id="memory-bound"),
        pytest.param(
            replace(pod().gpus(1).obj(), extended=((EFA, 1),)), [0, 0, 0, 2], id="extended"
        ),
    ],
)
def test_per_node_slots(spec: PodSpec, expected: list[int]) -> None:
    state = cluster(*NODES)
    assert slots(state, spec).tolist() == expected


def test_gpus_partly_taken_by_shares_are_no_slots() -> None:
    state = with_gpu_free(cluster(node("n0", gpus=4)), 0, [500, 500, 1000, 1000])
    assert slots(state, pod().gpus(1).obj()).tolist() == [2]


def slots(state: ClusterState, spec: PodSpec) -> IntArray:
    """The profile's count of ``spec`` on every node (``Framework.count``)."""
    return cycle_of(list(NODES)).framework.count(state, spec, np.arange(state.size))


def pods(count: int, builder: InfoBuilder | None = None) -> tuple[PodInfo, ...]:
    base = (builder or info("x").gpus(2)).obj()
    return tuple(replace(base, key=f"ns/p{i}") for i in range(count))


def fresh_cycle() -> Cycle:
    return cycle_of(NODES[:3])


@pytest.mark.parametrize(
    ("group", "expected"),
    [
        # n0 takes 4 pods of 2 GPUs, n1 2: per node at most as many as the job has
        pytest.param(pods(1), 2.0, id="one-pod"),
        pytest.param(pods(3), 5.0, id="gang-of-three"),
        pytest.param(pods(8), 6.0, id="more-than-fit"),
        pytest.param(pods(3, info("x").gpus(2).models("H100")), 0.0, id="no-node-allowed"),
        pytest.param(pods(3, info("x").share(500)), np.inf, id="share"),
        pytest.param(pods(3, info("x").gpu_memory(10_240)), np.inf, id="share-by-memory"),
        pytest.param(pods(3, info("x").gpus(1).claims("ns/c")), np.inf, id="claims"),
        pytest.param(
            (*pods(1), replace(pods(1, info("x").gpus(1))[0], key="ns/other")),
            np.inf,
            id="two-specs",
        ),
    ],
)
def test_slots_are_exact_for_plain_pods_and_infinite_for_others(
    group: tuple[PodInfo, ...], expected: float
) -> None:
    assert fresh_cycle().fit.slots(group, None, None) == expected


def test_held_nodes_have_no_slots() -> None:
    cycle = fresh_cycle()
    held = Exclusion(np.array([True, False, False]), "held")
    assert cycle.fit.slots(pods(8), None, held) == 2.0


def test_slots_follow_the_state_and_may_be_counted_on_another() -> None:
    cycle = fresh_cycle()
    assert cycle.fit.slots(pods(8), None, None) == 6.0
    freed = cycle.ledger.state.copy()
    cycle.ledger.state.reserve(0, pod().gpus(4).obj(), (0, 1, 2, 3))
    assert cycle.fit.slots(pods(8), None, None) == 4.0
    assert cycle.fit.slots(pods(8), freed, None) == 6.0
    cycle.ledger.state.release(0, pod().gpus(4).obj(), (0, 1, 2, 3))
    assert cycle.fit.slots(pods(8), None, None) == 6.0


# -- exact: the count is what placing pods one by one achieves -----------------------------


@st.composite
def clusters(draw: st.DrawFn) -> tuple[list[NodeSpec], list[PodInfo], PodSpec]:
    nodes, bound = [], []
    for i in range(draw(st.integers(1, 3))):
        gpus = draw(st.sampled_from([0, 2, 4, 8]))
        cpu = draw(st.sampled_from([4, 8, 16]))
        nodes.append(node(f"n{i}", cpu=cpu, gpus=gpus, mem=65_536))
        used = draw(st.integers(0, gpus))
        if used or draw(st.booleans()):
            taken = info(f"run/w{i}").cpu(draw(st.integers(0, cpu // 2))).gpus(used)
            bound.append(taken.on(f"n{i}", *range(used)).obj())
        shared = range(used, used + draw(st.integers(0, min(2, gpus - used))))
        bound.extend(info(f"run/s{i}-{g}").cpu(0).share(300).on(f"n{i}", g).obj() for g in shared)
    spec = pod("ns/p").cpu(draw(st.integers(1, 4))).gpus(draw(st.integers(0, 3))).obj()
    return nodes, bound, spec


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_slots_count_exactly_the_pods_that_placement_fits(
    drawn: tuple[list[NodeSpec], list[PodInfo], PodSpec],
) -> None:
    nodes, bound, spec = drawn
    cycle = cycle_of(nodes, bound)
    many = tuple(PodInfo(f"ns/p{i}", spec) for i in range(64))
    counted = cycle.fit.slots(many, None, None)
    placed = 0
    while not isinstance(outcome := place(cycle.framework, cycle.ledger.state, spec), Status):
        cycle.ledger.state.reserve(outcome.node, outcome.pod, outcome.gpus)
        placed += 1
    assert counted == placed


# -- kept: a count brought up to date by the nodes that changed is a fresh count -----------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(st.sampled_from(["reserve", "release", "label"]), st.integers(0, 5)),
        max_size=30,
    ),
    st.sampled_from([1, 64]),
)
def test_slots_kept_between_changes_equal_slots_counted_afresh(
    changes: list[tuple[str, int]], few: int
) -> None:
    """Reserves and releases on a node move its count alone; a label change may move the
    nodes a spec may run on: each is counted again and must equal a new count, whether few
    nodes changed (counted alone) or more than the bound (counted all)."""
    nodes = [node(f"n{i}", cpu=16, gpus=(8, 4, 2)[i % 3]) for i in range(6)]
    cycle = cycle_of(nodes)
    state, empty = cycle.ledger.state, cycle.ledger.empty
    taken: list[tuple[int, PodSpec, tuple[int, ...]]] = []
    in_pool = NodeConstraint(terms=((Requirement("pool", "In", ("a",)),),))
    groups = (
        pods(1, info("one").cpu(2).gpus(1)),
        pods(2, info("two").cpu(1).gpus(2)),
        tuple(
            replace(p, key=f"in-pool/{p.key}", spec=replace(p.spec, constraint=in_pool))
            for p in pods(1)
        ),
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fit, "FEW_CHANGED", few)
        for change, n in changes:
            if change == "reserve":
                free = np.flatnonzero(state.gpu_free[n] == 1000)[:2].tolist()
                if free and state.cpu_free[n] >= 3000:
                    spec = pod().cpu(3).gpus(len(free)).obj()
                    state.reserve(n, spec, free)
                    taken.append((n, spec, tuple(free)))
            elif change == "release" and taken:
                state.release(*taken.pop(n % len(taken)))
            elif change == "label":
                labels = {"pool": "a"} if n % 2 else {}
                for s in (state, empty):
                    s.node_labels.set_node(n, labels, ())
                    s.generation[n] += 1
                    s.changes += 1
            fresh = Fit(cycle.framework, state, empty, cycle.placer._resource_filters)
            for group in groups:
                assert cycle.fit.slots(group, None, None) == fresh.slots(group, None, None)


def test_a_node_over_committed_by_running_pods_has_no_slots_and_takes_none_from_others() -> None:
    """Pods the kubelet runs past a resource the node lost (here its pod count): the node
    has no slot, not fewer than none — a gang's count would lose another node's to it."""
    nodes = [replace(node("n0", cpu=96, gpus=8), max_pods=1), node("n1", cpu=96, gpus=8)]
    cycle = cycle_of(nodes)
    for k in range(3):
        cycle.ledger.state.reserve(0, pod(f"run/r{k}").cpu(1).obj(), (), running=True)
    assert cycle.ledger.state.pods_free[0] < 0
    assert cycle.fit.slots(pods(2, info("gang").cpu(1).gpus(1)), None, None) == 2.0
    assert cycle.fit.slots(pods(1, info("one").cpu(1).gpus(1)), None, None) == 1.0
    cycle.ledger.state.reserve(1, pod("run/r3").cpu(1).obj(), (), running=True)
    assert cycle.fit.slots(pods(2, info("gang").cpu(1).gpus(1)), None, None) == 2.0
