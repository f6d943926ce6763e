"""Preempt (``scheduler/room/preempt.py``): the victims are the preemptible pods of the
job's own queue with a lower priority than the job's, past the queue's
``preemptMinRuntime``."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.model.workload import PodInfo, QueueSpec, pods_request
from gpufleet.report.reasons import note_words
from gpufleet.scheduler.api.outcome import NoteCode
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.room.preempt import Preempt
from gpufleet.scheduler.room.victims import VictimSearch
from tests.builders import cycle_of, info, job_of, node

QUEUES = (QueueSpec("a", preempt_min_runtime_s=60), QueueSpec("b"))
RUNNING = (
    info("a/low").gpus(1).queue("a").priority(1).on("n0", 0, started=0.0).obj(),
    info("a/young").gpus(1).queue("a").priority(1).on("n0", 1, started=80.0).obj(),
    info("a/same").gpus(1).queue("a").priority(10).on("n0", 2, started=0.0).obj(),
    info("a/np").gpus(1).queue("a").priority(100).on("n0", 3, started=0.0).obj(),
    info("b/low").gpus(1).queue("b").priority(1).on("n0", 4, started=0.0).obj(),
)
"""In queue a (preemptMinRuntime 60s): a pod of priority 1 past the min runtime, one within
it (at 100s), one of priority 10, a non-preemptible one; in queue b a pod of priority 1."""


def cycle_with(job: PodInfo, now: float = 100.0) -> Cycle:
    return cycle_of([node("n0", gpus=8)], [*RUNNING, job], queues=QUEUES, now=now)


def candidates(job: PodInfo, now: float = 100.0) -> tuple[list[str], str]:
    cycle = cycle_with(job, now)
    search = VictimSearch(cycle.means, job_of(cycle, job.key), None)
    mask, note, _ = Preempt().candidates(search, pods_request(search.job.core))
    words = "" if note is None else note_words(note)
    if mask is None:
        return [], words
    return [cycle.pool.items[i].pod.key for i in np.flatnonzero(mask)], words


def asking(queue: str, priority: int) -> PodInfo:
    return info(f"{queue}/job").gpus(4).queue(queue).priority(priority).obj()


@pytest.mark.parametrize(
    ("job", "now", "expected", "note"),
    [
        pytest.param(asking("a", 10), 100.0, ["a/low"], "", id="lower-priority-past-min-runtime"),
        pytest.param(asking("a", 10), 140.0, ["a/low", "a/young"], "", id="min-runtime-over"),
        pytest.param(
            asking("a", 200), 100.0, ["a/low", "a/same"], "", id="never-non-preemptible-pods"
        ),
        pytest.param(
            asking("a", 1),
            100.0,
            [],
            "no lower-priority preemptible pods in queue a past its preemptMinRuntime of 60s",
            id="none-lower",
        ),
        pytest.param(asking("b", 10), 100.0, ["b/low"], "", id="only-its-own-queue"),
        pytest.param(
            asking("b", 1),
            100.0,
            [],
            "no lower-priority preemptible pods in queue b",
            id="none-in-b",
        ),
    ],
)
def test_candidates(job: PodInfo, now: float, expected: list[str], note: str) -> None:
    assert candidates(job, now) == (expected, note)


def test_freed_is_the_cluster_without_the_candidates() -> None:
    job = asking("a", 200)
    cycle = cycle_with(job)
    search = VictimSearch(cycle.means, job_of(cycle, job.key), None)
    mask, _, _ = Preempt().candidates(search, pods_request(search.job.core))
    assert mask is not None
    freed = Preempt().freed(search, mask)
    assert freed.gpu_free[0].tolist() == [1000, 0, 1000, 0, 0, 1000, 1000, 1000]
    assert cycle.ledger.state.gpu_whole_free.tolist() == [3]


def test_the_search_evicts_a_candidate_of_the_queue() -> None:
    job = asking("a", 10)
    cycle = cycle_with(job)
    search = VictimSearch(cycle.means, job_of(cycle, job.key), None)
    plan, note = search.run(Preempt(), pods_request(search.job.core))
    assert note.code is NoteCode.FOUND
    assert plan is not None
    assert [v.pod.key for v in plan.victims] == ["a/low"]


def test_a_failure_lasts_the_cycle_until_capacity_is_freed() -> None:
    cycle = cycle_with(asking("a", 10))
    epoch = Preempt().epoch(cycle.means)
    assert Preempt().epoch(cycle.means) == epoch
    cycle.finish("b/low")
    assert Preempt().epoch(cycle.means) != epoch
    freed = Preempt().epoch(cycle.means)
    cycle.begin(200.0)
    assert Preempt().epoch(cycle.means) != freed


def test_the_scope_is_the_queue_priority_and_preemption_policy() -> None:
    preempt = Preempt()
    cycle = cycle_with(asking("a", 10))
    job = job_of(cycle, "a/job")
    assert preempt.scope(job) == ("a", 10, True)
    assert preempt.needs_preemption
    assert not preempt.relocate
    assert not preempt.fair_share_bound
