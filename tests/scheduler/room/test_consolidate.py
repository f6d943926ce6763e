"""Consolidate (``scheduler/room/consolidate.py``): move preemptible pods outside gangs
and without claims, each of which fits somewhere else on its own, so that a job fits — tried
only when the job fits the cluster's total free capacity, since moving creates none."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.framework.runtime import Exclusion
from gpufleet.model.workload import GroupSpec, PodInfo, pods_request
from gpufleet.report.reasons import note_text, note_words
from gpufleet.scheduler.api.outcome import NoteCode, note
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.room.consolidate import (
    GAIN_RATIO,
    MAX_MOVES,
    MOVE_COOLDOWN_S,
    Consolidate,
    movable,
)
from gpufleet.scheduler.room.room import as_action
from gpufleet.scheduler.room.victims import VictimSearch
from tests.builders import cycle_of, info, job_of, node

CONSOLIDATE = Consolidate()

RUNNING = (
    info("a/solo").gpus(1).on("n0", 0).obj(),
    info("a/g-0").gpus(1).gang("a/g").on("n1", 0).obj(),
    info("a/claim").gpus(1).claims("a/c").on("n1", 1).obj(),
    info("a/stuck").gpus(2).on("n2").obj(),
    info("a/np").gpus(1).priority(100).on("n3", 0).obj(),
)
"""Four 2-GPU nodes; GPU 1 of n0 and of n3 are free."""


def search_for(*pending: PodInfo, running: tuple[PodInfo, ...] = RUNNING) -> VictimSearch:
    """A search for the job of ``pending`` (a gang ``a/gang`` of three, or one pod)."""
    return search_in(*pending, running=running)[1]


def search_in(
    *pending: PodInfo, running: tuple[PodInfo, ...] = RUNNING
) -> tuple[Cycle, VictimSearch]:
    """The cycle of :func:`search_for`, and its search."""
    cycle = cycle_of(
        [node(f"n{i}", gpus=2) for i in range(4)],
        [*running, *pending],
        groups=(GroupSpec("a/g", 1), GroupSpec("a/gang", 3)),
    )
    return cycle, VictimSearch(cycle.means, job_of(cycle, pending[0].gang), None)


WANTS_2 = info("a/job").gpus(2).obj()


@pytest.mark.parametrize(
    ("key", "moves"),
    [
        pytest.param("a/solo", True, id="outside-a-gang-and-fits-elsewhere"),
        pytest.param("a/g-0", False, id="gang-member"),
        pytest.param("a/claim", False, id="with-claims"),
        pytest.param("a/stuck", False, id="fits-nowhere-else"),
    ],
)
def test_which_pods_may_move(key: str, moves: bool) -> None:
    search = search_for(WANTS_2)
    mask, _ = movable(search)
    pool = search.pool
    assert bool(mask[pool.index[key]]) is moves


def test_non_preemptible_pods_are_no_candidates_at_all() -> None:
    assert "a/np" not in search_for(WANTS_2).pool.index


NO_ROOM = "the job does not fit in the cluster's total free capacity"


@pytest.mark.parametrize(
    ("job", "note"),
    [
        pytest.param(WANTS_2, "", id="fits-the-free-capacity"),
        pytest.param(info("a/job").gpus(3).obj(), NO_ROOM, id="more-whole-gpus-than-free"),
        pytest.param(info("a/job").cpu(400).gpus(2).obj(), NO_ROOM, id="more-cpu-than-free"),
        pytest.param(info("a/job").mem(2_000_000).gpus(2).obj(), NO_ROOM, id="more-memory"),
    ],
)
def test_candidates_only_when_the_job_fits_the_total_free_capacity(job: PodInfo, note: str) -> None:
    search = search_for(job)
    mask, got, _ = CONSOLIDATE.candidates(search, pods_request(search.job.core))
    assert ("" if got is None else note_words(got)) == note
    assert (mask is None) is bool(note)


def test_shares_are_counted_by_their_milli_gpu() -> None:
    # three shares of 0.7 GPU: no whole GPU, but 2.1 GPUs, and 2 are free
    search = search_for(*(info(f"a/s-{i}").share(700).gang("a/gang").obj() for i in range(3)))
    mask, note, _ = CONSOLIDATE.candidates(search, pods_request(search.job.core))
    assert mask is None
    assert note is not None
    assert note_words(as_action(CONSOLIDATE, note)) == NO_ROOM


def test_a_plan_moves_a_pod_and_places_the_job_where_it_was() -> None:
    search = search_for(WANTS_2)
    plan, note = search.run(CONSOLIDATE, pods_request(search.job.core))
    assert note_text(as_action(CONSOLIDATE, note)) == "consolidate: moves found"
    assert plan is not None
    assert plan.action == "consolidate"
    assert [v.pod.key for v in plan.victims] == ["a/solo"]
    assert [(n, gpus) for n, _, gpus in plan.placements] == [(0, (0, 1))]
    assert [(r.pod.key, r.node, slot[0], slot[2]) for r, slot in plan.moved] == [
        ("a/solo", 0, 3, (1,))
    ]


# at 100 s, a/solo (1 GPU) has run 100 s: moving it loses 100 GPU-s, and the 2-GPU job must
# have waited GAIN_RATIO * 100 / 2 seconds for the move to earn it
EARNS = 100.0 - GAIN_RATIO * 50.0


@pytest.mark.parametrize(
    ("created", "moves"),
    [
        pytest.param(EARNS, True, id="waited-enough-earns-the-margin"),
        pytest.param(EARNS + 1.0, False, id="waited-a-second-less-does-not"),
    ],
)
def test_a_move_must_earn_the_work_it_throws_away_by_the_margin(
    created: float, moves: bool
) -> None:
    search = search_for(info("a/job").gpus(2).created(created).obj())
    plan, _ = search.run(CONSOLIDATE, pods_request(search.job.core))
    assert (plan is not None) is moves


@pytest.mark.parametrize(
    ("progress", "moves"),
    [
        pytest.param({}, False, id="100s-run-without-checkpoint-loses-too-much"),
        pytest.param({"checkpoint_interval_s": 90.0}, True, id="checkpointed-at-90s"),
        pytest.param({"last_checkpoint": 95.0}, True, id="reported-checkpoint-at-95s"),
        pytest.param({"last_checkpoint": 200.0}, False, id="a-checkpoint-in-the-future-counts-not"),
    ],
)
def test_old_work_is_protected_unless_it_was_saved(progress: dict[str, float], moves: bool) -> None:
    solo = info("a/solo").gpus(1).on("n0", 0).progress(**progress).obj()
    job = info("a/job").gpus(2).created(EARNS + 50.0).obj()  # earns a 50 GPU-s loss, not 100
    search = search_for(job, running=(solo, *RUNNING[1:]))
    plan, _ = search.run(CONSOLIDATE, pods_request(search.job.core))
    assert (plan is not None) is moves


@pytest.mark.parametrize(
    ("progress", "moves"),
    [
        pytest.param({"moves": 1, "moved_at": 90.0}, False, id="moved-10s-ago-cools-down"),
        pytest.param({"moves": 1, "moved_at": 100.0 - MOVE_COOLDOWN_S}, True, id="cooled-down"),
        pytest.param({"moves": MAX_MOVES, "moved_at": -1e9}, False, id="moved-the-most-times"),
    ],
)
def test_a_moved_job_is_not_moved_again_until_it_cooled_down_nor_too_often(
    progress: dict[str, float], moves: bool
) -> None:
    solo = info("a/solo").gpus(1).on("n0", 0).progress(**progress).obj()
    search = search_for(info("a/job").gpus(2).created(EARNS).obj(), running=(solo, *RUNNING[1:]))
    plan, _ = search.run(CONSOLIDATE, pods_request(search.job.core))
    assert (plan is not None) is moves


def test_a_move_refused_for_its_gain_is_tried_again_each_hour() -> None:
    def epoch(now: float) -> object:
        cycle = cycle_of([node("n0", gpus=2)], [WANTS_2], now=now)
        return CONSOLIDATE.epoch(cycle.means)

    assert epoch(100.0) == epoch(3500.0)
    assert epoch(100.0) != epoch(3700.0)


def test_no_room_when_moving_every_movable_pod_would_not_help() -> None:
    gang = (
        info("a/g-0").gpus(1).gang("a/g").on("n0", 0).obj(),
        info("a/g-1").gpus(1).gang("a/g").on("n1", 0).obj(),
        info("a/x").gpus(2).on("n2").obj(),
        info("a/y").gpus(2).on("n3").obj(),
    )
    search = search_for(WANTS_2, running=gang)
    request = pods_request(search.job.core)
    assert search.hopeless(CONSOLIDATE, request) == note(NoteCode.NO_ROOM)
    assert search.run(CONSOLIDATE, request) == (None, note(NoteCode.NO_ROOM))


def test_the_movable_pods_are_kept_for_the_epoch_and_the_held_nodes() -> None:
    cycle, search = search_in(WANTS_2)
    first, _ = movable(search)
    assert movable(search)[0] is first
    cycle.finish("a/stuck")  # capacity freed: a new epoch
    again = movable(search)[0]
    assert again is not first
    assert again.tolist() == first.tolist()
    n3_held = Exclusion(np.array([False, False, False, True]), "held")
    assert movable(VictimSearch(cycle.means, search.job, n3_held))[0] is not again
    others = Exclusion(np.array([True, False, True, True]), "held")
    # a/solo fits only on the free GPUs of n2 (now), n3 and n0, its own node
    assert not movable(VictimSearch(cycle.means, search.job, others))[0].any()
    assert CONSOLIDATE.epoch(cycle.means) == (cycle.means.consolidation_epoch(), 0)


def test_a_job_that_never_preempts_may_still_have_pods_moved() -> None:
    search = search_for(info("a/job").gpus(2).never_preempts().obj())
    mask, why, _ = search.candidates(CONSOLIDATE, pods_request(search.job.core))
    assert why is None
    assert mask is not None
    assert CONSOLIDATE.scope(search.job) is None
