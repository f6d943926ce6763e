"""The cluster state: reserving, releasing, refusing to over-commit, copies."""

from __future__ import annotations

import numpy as np
import pytest

from tests.builders import cluster, node, pod


def test_new_cluster_is_free_and_pads_absent_gpu_slots() -> None:
    state = cluster(node("a", gpus=2, model="T4"), node("b", gpus=8), node("c", gpus=0))
    assert state.gpu_slots == 8
    assert state.total_gpus == 10
    assert state.gpu_free[0].tolist() == [1000, 1000, 0, 0, 0, 0, 0, 0]
    assert state.gpu_present[0].sum() == 2
    assert state.models == ("G2", "T4")
    assert state.model_id.tolist() == [1, 0, -1]


def test_reserve_then_release_restores_the_node() -> None:
    state = cluster(node("a", cpu=8, gpus=2))
    p = pod().cpu(2).mem(100).share(300).obj()
    state.reserve(0, p, (1,))
    assert state.cpu_free[0] == 6000
    assert state.gpu_free[0, :2].tolist() == [1000, 700]
    assert state.gpu_pod_kinds[0, 0] == 1
    assert state.generation[0] == 1
    state.release(0, p, (1,))
    assert state.gpu_free[0, :2].tolist() == [1000, 1000]
    assert state.cpu_free[0] == 8000
    assert state.gpu_pod_kinds[0].sum() == 0


@pytest.mark.parametrize(
    ("spec", "gpus", "why"),
    [
        (pod().cpu(9).obj(), (), "CPU/memory"),
        (pod().gpus(2).obj(), (0,), "distinct GPU"),
        (pod().gpus(2).obj(), (0, 0), "distinct GPU"),
        (pod().gpus(1).obj(), (5,), "no GPU"),
        (pod().share(600).obj(), (0,), "does not fit GPUs"),
    ],
    ids=["cpu", "too-few-gpus", "same-gpu-twice", "absent-gpu", "share-overcommit"],
)
def test_reserve_refuses_to_overcommit(spec, gpus, why) -> None:  # type: ignore[no-untyped-def]
    state = cluster(node("a", cpu=8, gpus=2))
    state.gpu_free[0, 0] = 500
    with pytest.raises(ValueError, match=why):
        state.reserve(0, spec, gpus)


def test_model_mask_unconstrained_means_any_gpu_node() -> None:
    state = cluster(node("a", model="T4"), node("b", model="V100"), node("c", gpus=0))
    assert state.model_mask(None).tolist() == [True, True, False]
    assert state.model_mask(frozenset({"V100", "A100"})).tolist() == [False, True, False]


def test_copy_is_independent_and_has_a_new_identity() -> None:
    state = cluster(node("a"))
    other = state.copy()
    other.reserve(0, pod().gpus(1).obj(), (0,))
    assert state.gpu_free[0, 0] == 1000
    assert other.uid != state.uid
    assert np.array_equal(state.gpu_present, other.gpu_present)
