"""Starvation holds (``scheduler/queues/holds.py``): a starving job holds, per pod of its core,
the allowed node with the most idle GPU that no other starving job holds; jobs asking for
fewer GPUs may not use them; ``version`` changes only when the held nodes change."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from gpufleet.model.arrays import IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.queues.holds import REASON, Holds
from tests.builders import cluster, info, job, node, with_gpu_free


def state() -> ClusterState:
    """Four 8-GPU nodes with 2, 6, 4 and 8 GPUs idle."""
    nodes = cluster(*(node(f"n{i}", gpus=8) for i in range(4)))
    for i, idle in enumerate((2, 6, 4, 8)):
        with_gpu_free(nodes, i, [1000] * idle + [0] * (8 - idle))
    return nodes


def anywhere(_spec: PodSpec) -> IntArray:
    return np.arange(4)


def only(*nodes: int) -> Callable[[PodSpec], IntArray]:
    return lambda _spec: np.array(nodes, dtype=np.int64)


def gpu_job(key: str, gpus: int, pods: int = 1) -> Job:
    return job(*(info(f"{key}-{i}").gang(key).gpus(gpus).obj() for i in range(pods)))


def held_names(holds: Holds, asking: Job, states: ClusterState) -> list[str]:
    held = holds.against(asking)
    return [] if held is None else [states.names[i] for i in np.flatnonzero(held.mask)]


@pytest.mark.parametrize(
    ("starving", "static", "expected"),
    [
        pytest.param(gpu_job("ns/big", 8), anywhere, ["n3"], id="most-idle-node"),
        pytest.param(gpu_job("ns/big", 8, pods=2), anywhere, ["n3", "n1"], id="one-node-per-pod"),
        pytest.param(gpu_job("ns/big", 8), only(0, 2), ["n2"], id="only-allowed-nodes"),
        pytest.param(
            gpu_job("ns/big", 8, pods=3), only(0, 2), ["n2", "n0"], id="as-many-as-allowed"
        ),
        pytest.param(gpu_job("ns/big", 8), only(), [], id="nowhere-allowed"),
    ],
)
def test_hold_takes_the_nodes_with_the_most_idle_gpus(
    starving: Job, static: Callable[[PodSpec], IntArray], expected: list[str]
) -> None:
    holds = Holds()
    assert holds.hold(starving, state(), static) == expected
    assert (starving.key in holds.held) == bool(expected)


def test_a_node_held_for_one_job_is_not_held_again_for_another() -> None:
    holds, states = Holds(), state()
    assert holds.hold(gpu_job("ns/first", 8), states, anywhere) == ["n3"]
    assert holds.hold(gpu_job("ns/second", 4), states, anywhere) == ["n1"]


@pytest.mark.parametrize(
    ("asking", "expected"),
    [
        pytest.param(gpu_job("ns/small", 2), ["n3"], id="fewer-gpus-kept-off"),
        pytest.param(gpu_job("ns/same", 8), [], id="as-many-gpus-not-held"),
        pytest.param(gpu_job("ns/gang", 4, pods=3), [], id="more-gpus-in-all-not-held"),
    ],
)
def test_against_holds_nodes_only_from_jobs_asking_for_fewer_gpus(
    asking: Job, expected: list[str]
) -> None:
    holds, states = Holds(), state()
    holds.hold(gpu_job("ns/big", 8), states, anywhere)
    assert held_names(holds, asking, states) == expected


def test_the_held_mask_carries_the_reason() -> None:
    holds, states = Holds(), state()
    assert holds.against(gpu_job("ns/small", 1)) is None
    holds.hold(gpu_job("ns/big", 8), states, anywhere)
    held = holds.against(gpu_job("ns/small", 1))
    assert held is not None
    assert held.message == REASON
    assert held.mask.tolist() == [False, False, False, True]


def test_masks_of_several_starving_jobs_are_joined() -> None:
    holds, states = Holds(), state()
    holds.hold(gpu_job("ns/eight", 8), states, anywhere)
    holds.hold(gpu_job("ns/four", 4), states, anywhere)
    assert held_names(holds, gpu_job("ns/two", 2), states) == ["n1", "n3"]
    assert held_names(holds, gpu_job("ns/six", 6), states) == ["n3"]


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [
        pytest.param(None, None, False, id="never-held"),
        pytest.param(None, anywhere, True, id="starts-holding"),
        pytest.param(anywhere, None, True, id="stops-holding"),
        pytest.param(anywhere, anywhere, False, id="holds-the-same-nodes-again"),
        pytest.param(anywhere, only(0, 2), True, id="holds-other-nodes"),
    ],
)
def test_trying_changes_the_version_only_when_the_held_nodes_change(
    before: Callable[[PodSpec], IntArray] | None,
    after: Callable[[PodSpec], IntArray] | None,
    changed: bool,
) -> None:
    holds, states, starving = Holds(), state(), gpu_job("ns/big", 8)
    if before is not None:
        holds.hold(starving, states, before)
    version = holds.version
    with holds.trying(starving):
        assert starving.key not in holds.held  # its old hold is dropped while it is tried
        if after is not None:
            holds.hold(starving, states, after)
    assert holds.version == version + changed
    assert (starving.key in holds.held) == (after is not None)


def test_trying_another_job_leaves_the_holds_and_version_alone() -> None:
    holds, states = Holds(), state()
    holds.hold(gpu_job("ns/big", 8), states, anywhere)
    version = holds.version
    with holds.trying(gpu_job("ns/small", 1)):
        pass
    assert holds.version == version
    assert list(holds.held) == ["ns/big"]
