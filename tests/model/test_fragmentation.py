"""FGD's fragmentation measure: typical pods, per-node fragment, and its incremental delta."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.pod import PodSpec
from tests.builders import cluster, node, pod, with_gpu_free


def test_typical_pods_keep_the_most_frequent_shapes_until_coverage() -> None:
    pods = (
        [pod(f"a{i}").share(500).obj() for i in range(5)]
        + [pod(f"b{i}").gpus(1).obj() for i in range(3)]
        + [pod("c").cpu(2).obj(), pod("d").cpu(4).obj()]
    )
    typical = typical_pods(pods, coverage=0.8)
    assert typical.gpu_milli.tolist() == [500, 1000]
    assert typical.prob.tolist() == pytest.approx([5 / 8, 3 / 8])
    everything = typical_pods(pods, coverage=0.95)
    # equal counts: the larger shape ranks first
    assert everything.cpu_milli.tolist() == [1000, 1000, 4000, 2000]
    assert everything.prob.sum() == pytest.approx(1.0)


def hand_made_index() -> tuple[ClusterState, FragmentIndex]:
    workload = [pod(f"s{i}").cpu(1).share(400).obj() for i in range(2)] + [
        pod("w").cpu(2).gpus(1).obj(),
        pod("c").cpu(3).obj(),
    ]
    state = with_gpu_free(cluster(node("n", cpu=10, gpus=4)), 0, [1000, 500, 200, 0])
    index = FragmentIndex(typical_pods(workload))
    index.sync(state)
    return state, index


def test_node_fragment_by_hand() -> None:
    # idle 1700. share 400 (p=.5): fits, fragment = GPUs under 400 = 200.
    # whole GPU (p=.25): fits on GPU 0, fragment = 500 + 200. CPU pod (p=.25): all 1700.
    _, index = hand_made_index()
    assert index.idle.tolist() == [1700]
    assert index.fragment[0] == pytest.approx(0.5 * 200 + 0.25 * 700 + 0.25 * 1700)


def test_a_node_out_of_cpu_is_all_fragment() -> None:
    state, index = hand_made_index()
    state.cpu_free[0] = 500
    state.generation[0] += 1
    index.sync(state)
    assert index.fragment[0] == pytest.approx(1700)


def test_gpu_model_the_typical_pod_cannot_use_is_fragment() -> None:
    workload = [pod("x").share(300).models("A100").obj()]
    state = cluster(node("n", gpus=2, model="T4"))
    index = FragmentIndex(typical_pods(workload))
    index.sync(state)
    assert index.fragment[0] == pytest.approx(2000)


def brute_fragment(state: ClusterState, index: FragmentIndex, n: int) -> float:
    t = index.typical
    free = state.node_gpu_free(n)
    total = 0.0
    for k in range(t.size):
        allowed = state.model_mask(t.gpu_models[k])[n]
        fits = (
            t.gpu_milli[k] > 0
            and allowed
            and (free >= t.gpu_milli[k]).sum() >= t.num_gpu[k]
            and state.cpu_free[n] >= t.cpu_milli[k]
        )
        total += t.prob[k] * (free[free < t.gpu_milli[k]].sum() if fits else free.sum())
    return total


pods_st = st.one_of(
    st.builds(lambda c: PodSpec("cpu", c, 0), st.integers(0, 16_000)),
    st.builds(
        lambda c, m: PodSpec("share", c, 0, 1, m), st.integers(0, 16_000), st.integers(1, 999)
    ),
    st.builds(
        lambda c, n: PodSpec("whole", c, 0, n, 1000), st.integers(0, 16_000), st.integers(1, 4)
    ),
)


@settings(max_examples=150, deadline=None)
@given(
    workload=st.lists(pods_st, min_size=1, max_size=12),
    gpu_rows=st.lists(
        st.lists(st.sampled_from([0, 100, 250, 400, 500, 750, 1000]), min_size=4, max_size=4),
        min_size=1,
        max_size=4,
    ),
    cpus=st.lists(st.integers(0, 32_000), min_size=4, max_size=4),
    incoming=pods_st,
)
def test_fragment_delta_matches_recomputing_after_the_placement(
    workload: list[PodSpec], gpu_rows: list[list[int]], cpus: list[int], incoming: PodSpec
) -> None:
    state = ClusterState([NodeSpec(f"n{i}", 32_000, 10**6, 4, "G") for i in range(len(gpu_rows))])
    for i, row in enumerate(gpu_rows):
        state.gpu_free[i, :4] = row
        state.refresh_gpu_totals(i)
        state.cpu_free[i] = cpus[i]
    index = FragmentIndex(typical_pods(workload))
    index.sync(state)
    for n in range(state.size):
        assert index.fragment[n] == pytest.approx(brute_fragment(state, index, n))
        free = state.node_gpu_free(n)
        if state.cpu_free[n] < incoming.cpu_milli:
            continue
        if incoming.is_gpu_share:
            options = [int(g) for g in np.flatnonzero(free >= incoming.gpu_milli)]
        elif incoming.num_gpu:
            whole = [int(g) for g in np.flatnonzero(free == 1000)]
            options = [whole[0]] if len(whole) >= incoming.num_gpu else []
        else:
            options = [-1]
        for g in options:
            used = np.array([free[g] if g >= 0 else 0])
            delta = index.fragment_delta(state, np.array([n]), incoming, used)[0]
            after = state.copy()
            gpus = (
                (g,)
                if incoming.is_gpu_share
                else tuple(int(x) for x in np.flatnonzero(free == 1000)[: incoming.num_gpu])
            )
            after.reserve(n, incoming, gpus)
            # Fragments are milli-GPU sums in the thousands: recomputing one in another order
            # differs by round-off (1e-12), which a zero delta cannot match relatively.
            assert delta == pytest.approx(
                index.fragment[n] - brute_fragment(after, index, n), abs=1e-9
            )
