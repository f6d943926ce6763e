"""Reclaim (``scheduler/room/reclaim.py``), the rule of Volcano's proportion plugin: a
pod of another queue is reclaimable while that queue (and each ancestor the job's queue
does not share) is above its fair share, before removing it, after the victims already
taken; the job's queue (and each of its ancestors the victim's queue does not share) must
stay within its fair share with the job. Victims are past ``reclaimMinRuntime``.

Two 8-GPU nodes; pods ask for GPUs only, so that share ratios are GPU ratios.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.model.workload import PodInfo, QueueSpec, pods_request, vector
from gpufleet.report.reasons import note_words
from gpufleet.scheduler.api.outcome import NoteCode
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.room.reclaim import Reclaim
from gpufleet.scheduler.room.victims import VictimSearch
from tests.builders import cycle_of, info, job_of, node

RECLAIM = Reclaim()
FLAT = (QueueSpec("a"), QueueSpec("b"))
TREE = (
    QueueSpec("dept", weight=vector(3, 1, 1)),
    QueueSpec("a", "dept"),
    QueueSpec("b", "dept"),
    QueueSpec("c"),
)


def runs(queue: str, pods: int, first: int = 0, gpus: int = 2) -> list[PodInfo]:
    """``pods`` running pods of ``queue`` of ``gpus`` GPUs each, from GPU ``first`` of the
    cluster on (GPUs 0-7 are n0's, 8-15 n1's)."""
    out = []
    for i in range(pods):
        at = first + i * gpus
        pod = info(f"{queue}/r{i}").gpus_only(gpus).queue(queue)
        out.append(pod.on(f"n{at // 8}", *range(at % 8, at % 8 + gpus)).obj())
    return out


def wants(gpus: int, queue: str = "a") -> PodInfo:
    return info(f"{queue}/job").gpus_only(gpus).queue(queue).obj()


def cycle_in(queues: tuple[QueueSpec, ...], running: list[PodInfo], job: PodInfo) -> Cycle:
    return cycle_of([node("n0"), node("n1")], [*running, job], queues=queues)


def search_in(queues: tuple[QueueSpec, ...], running: list[PodInfo], job: PodInfo) -> VictimSearch:
    cycle = cycle_in(queues, running, job)
    return VictimSearch(cycle.means, job_of(cycle, job.key), None)


def candidates(search: VictimSearch) -> tuple[list[str] | None, str]:
    mask, note, _ = RECLAIM.candidates(search, pods_request(search.job.core))
    words = "" if note is None else note_words(note)
    if mask is None:
        return None, words
    return [search.pool.items[i].pod.key for i in np.flatnonzero(mask)], words


B_ABOVE = runs("b", 6) + runs("a", 2, first=12)
"""b runs 12 GPUs, a 4: with a's 2-GPU job the fair shares are a 6, b 10."""


@pytest.mark.parametrize(
    ("queues", "running", "job", "expected", "note"),
    [
        pytest.param(
            FLAT,
            B_ABOVE,
            wants(2),
            [f"b/r{i}" for i in range(6)],
            "",
            id="queue-above-its-share",
        ),
        pytest.param(
            FLAT,
            B_ABOVE,
            wants(8),
            None,
            "queue a would be at 1.50x its fair share (8 GPUs) with this job; reclaim takes "
            "GPUs only for a queue that stays within its fair share",
            id="job-would-pass-its-share",
        ),
        pytest.param(
            FLAT,
            runs("b", 4) + runs("a", 2, first=8),
            wants(2),
            None,
            "no pod of a queue above its fair share can be reclaimed (0 queue(s) above it; "
            "0 preemptible pod(s) of other queues within reclaimMinRuntime)",
            id="no-queue-above",
        ),
        pytest.param(
            (QueueSpec("a"), QueueSpec("b", reclaim_min_runtime_s=3600)),
            B_ABOVE,
            wants(2),
            None,
            "no pod of a queue above its fair share can be reclaimed (1 queue(s) above it; "
            "6 preemptible pod(s) of other queues within reclaimMinRuntime)",
            id="within-reclaim-min-runtime",
        ),
        pytest.param(
            TREE,
            runs("b", 5) + runs("c", 3, first=10),
            wants(4),
            # b (10 of 8) and c (6 of 4) are above their shares; dept would be above its
            # own with the job (14 of 12), so c, a cousin, may not be taken from, but b may
            # (the department both share is not judged)
            [f"b/r{i}" for i in range(5)],
            "",
            id="sibling-not-cousin",
        ),
        pytest.param(
            TREE,
            runs("b", 5) + runs("c", 3, first=10),
            wants(2),
            # now b is within its share (10 of 10) and dept stays within its own
            ["c/r0", "c/r1", "c/r2"],
            "",
            id="cousin-while-the-department-stays-within",
        ),
    ],
)
def test_candidates(
    queues: tuple[QueueSpec, ...],
    running: list[PodInfo],
    job: PodInfo,
    expected: list[str] | None,
    note: str,
) -> None:
    assert candidates(search_in(queues, running, job)) == (expected, note)


def test_non_preemptible_pods_are_never_reclaimed() -> None:
    running = [
        info(f"b/np{i}").gpus_only(2).queue("b").priority(100).on("n0").obj() for i in range(4)
    ]
    running += runs("b", 2, first=8) + runs("a", 2, first=12)
    search = search_in(FLAT, running, wants(2))
    assert candidates(search) == (["b/r0", "b/r1"], "")


def accepting() -> VictimSearch:
    """b runs an 8-GPU pod and a 2-GPU pod, a 6 GPUs: fair shares 8 and 8."""
    running = [
        info("b/big").gpus_only(8).queue("b").on("n0").obj(),
        info("b/small").gpus_only(2).queue("b").on("n1", 0, 1).obj(),
        *runs("a", 3, first=10),
    ]
    return search_in(FLAT, running, wants(2))


@pytest.mark.parametrize(
    ("unit", "taken", "accepted"),
    [
        # b is at 10 of 8 before either goes: either may be taken first, even the 8-GPU
        # pod that takes it far below its share
        pytest.param("b/big", [], True, id="larger-than-the-excess"),
        pytest.param("b/small", [], True, id="within-the-excess"),
        # with one gone, b is at or below its share: the other is not taken
        pytest.param("b/small", ["b/big"], False, id="after-the-big-one"),
        pytest.param("b/big", ["b/small"], False, id="after-the-small-one"),
    ],
)
def test_each_unit_is_judged_after_the_victims_taken(
    unit: str, taken: list[str], accepted: bool
) -> None:
    search = accepting()
    _, _, accept = RECLAIM.candidates(search, pods_request(search.job.core))
    running = search.means.ledger.running
    assert accept((running[unit],), [running[k] for k in taken]) is accepted


def test_the_search_stops_taking_at_the_fair_share() -> None:
    running = runs("b", 6) + runs("a", 2, first=12)
    search = search_in(FLAT, running, wants(6))  # a at 10 of 6 with it: not within
    assert candidates(search)[0] is None
    search = search_in(FLAT, running, wants(2))
    plan, note = search.run(RECLAIM, pods_request(search.job.core))
    assert note.code is NoteCode.FOUND
    assert plan is not None
    assert len(plan.victims) == 1
    assert plan.victims[0].pod.queue == "b"


def test_a_failure_lasts_until_a_queue_goes_above_its_share() -> None:
    cycle = cycle_in(FLAT, B_ABOVE, wants(2))
    epoch = RECLAIM.epoch(cycle.means)
    cycle.finish("b/r5")
    freed = RECLAIM.epoch(cycle.means)
    assert freed != epoch
    cycle.round.over_share += 1  # a binding took a queue above its fair share
    assert RECLAIM.epoch(cycle.means) != freed
    assert RECLAIM.fair_share_bound
    assert RECLAIM.scope(job_of(cycle, "a/job")) == ("a", 0, True)
