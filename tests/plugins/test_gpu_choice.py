"""GPU choice inside the chosen node."""

from __future__ import annotations

import numpy as np

from gpufleet.plugins.gpu_choice import GpuBestFit, GpuRandom
from gpufleet.plugins.random_score import RandomScore
from tests.builders import cluster, node, pod, with_gpu_free


def test_best_fit_takes_the_tightest_gpu_and_the_lowest_index_on_ties() -> None:
    state = with_gpu_free(cluster(node("n", gpus=4)), 0, [1000, 400, 300, 300])
    chooser = GpuBestFit()
    assert chooser.choose_gpus(state, pod().share(250).obj(), 0) == (2,)
    assert chooser.choose_gpus(state, pod().share(350).obj(), 0) == (1,)
    assert chooser.choose_gpus(state, pod().share(500).obj(), 0) == (0,)


def test_whole_gpus_are_the_first_fully_free_ones() -> None:
    state = with_gpu_free(cluster(node("n", gpus=4)), 0, [500, 1000, 0, 1000])
    assert GpuBestFit().choose_gpus(state, pod().gpus(2).obj(), 0) == (1, 3)


def test_random_choices_only_use_gpus_that_fit_and_follow_the_seed() -> None:
    state = with_gpu_free(cluster(node("n", gpus=4)), 0, [100, 600, 1000, 600])
    picks = {
        GpuRandom(np.random.default_rng(s)).choose_gpus(state, pod().share(500).obj(), 0)[0]
        for s in range(40)
    }
    assert picks == {1, 2, 3}
    first = RandomScore(np.random.default_rng(7)).score(state, pod().obj(), np.arange(5))
    again = RandomScore(np.random.default_rng(7)).score(state, pod().obj(), np.arange(5))
    assert first.tolist() == again.tolist()
    assert sorted(first.tolist()) == [0, 0, 0, 0, 100]
