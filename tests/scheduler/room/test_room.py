"""Making room (``scheduler/room/room.py``): the actions in their order, the first plan found
wins, and a memo of failures: a search that failed for a job of the same shape is not
repeated until its action's epoch changes (capacity freed, a new cycle)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np
import pytest

from gpufleet.framework.runtime import Exclusion
from gpufleet.model.arrays import BoolArray, FloatArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, pods_request
from gpufleet.report.reasons import note_text
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.api.outcome import Note, NoteCode, note
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.placement.topology import DomainTopology
from gpufleet.scheduler.room.builtin import builtin_actions
from gpufleet.scheduler.room.preempt import Preempt
from gpufleet.scheduler.room.protocols import Means, Plan, SearchView
from gpufleet.scheduler.room.room import Room, as_action
from tests.builders import InfoBuilder, cycle_of, info, job_of, node

if TYPE_CHECKING:
    from gpufleet.scheduler.room.protocols import Candidates

ACTIONS = builtin_actions()


@dataclass
class Counted:
    """Preempt's rule, counting the searches that ask for its candidates (a search and the
    bound it is checked against ask once each)."""

    inner: Preempt = field(default_factory=Preempt)
    asked: int = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def relocate(self) -> bool:
        return self.inner.relocate

    @property
    def victims(self) -> str:
        return self.inner.victims

    @property
    def needs_preemption(self) -> bool:
        return self.inner.needs_preemption

    @property
    def fair_share_bound(self) -> bool:
        return self.inner.fair_share_bound

    def candidates(self, search: SearchView, request: FloatArray) -> Candidates:
        self.asked += 1
        return self.inner.candidates(search, request)

    def freed(self, search: SearchView, mask: BoolArray) -> ClusterState:
        return self.inner.freed(search, mask)

    def scope(self, job: Job) -> Hashable:
        return self.inner.scope(job)

    def epoch(self, means: Means) -> Hashable:
        return self.inner.epoch(means)


def of_a(key: str, priority: int = 1) -> InfoBuilder:
    return info(key).queue("a").priority(priority)


def saturated() -> Cycle:
    """Two 2-GPU nodes, each full with a low-priority pod that was bound in this cycle (so
    never a victim: the bound lets the search run, the search finds nothing); a CPU pod;
    three jobs of 2 GPUs (two alike) and one of 1 GPU waiting."""
    cycle = cycle_of(
        [node("n0", gpus=2), node("n1", gpus=2)],
        [
            of_a("a/low-0").gpus(2).on("n0").obj(),
            of_a("a/low-1").gpus(2).on("n1").obj(),
            of_a("a/cpu").cpu(2).on("n1").obj(),
            of_a("a/job", 10).gpus(2).obj(),
            of_a("a/twin", 10).gpus(2).obj(),
            of_a("a/higher", 20).gpus(2).obj(),
            of_a("a/small", 10).gpus(1).obj(),
        ],
        queues=(QueueSpec("a"),),
    )
    cycle.commit.bound_now.update({"a/low-0", "a/low-1"})
    return cycle


def make(
    room: Room, cycle: Cycle, key: str, held: Exclusion | None = None
) -> tuple[Plan | None, list[str]]:
    job = job_of(cycle, key)
    notes: list[Note] = []
    plan = room.make(cycle.means, job, pods_request(job.core), notes, held)
    return plan, [note_text(n) for n in notes]


NOT_FOUND = "preempt: evicting eligible pods frees no fitting node"


def test_a_failed_search_is_not_repeated_within_its_epoch() -> None:
    cycle, action = saturated(), Counted()
    room = Room([action], DomainTopology(()))
    assert make(room, cycle, "a/job") == (
        None,
        ["preempt: evicting eligible pods frees no fitting node"],
    )
    assert action.asked == 2  # the bound, then the search
    assert make(room, cycle, "a/twin") == (
        None,
        ["preempt: evicting eligible pods frees no fitting node"],
    )
    assert action.asked == 2


def test_a_failed_search_is_repeated_after_capacity_is_freed() -> None:
    cycle, action = saturated(), Counted()
    room = Room([action], DomainTopology(()))
    make(room, cycle, "a/job")
    cycle.finish("a/cpu")
    assert make(room, cycle, "a/twin")[0] is None
    assert action.asked == 4


def test_a_new_cycle_forgets_the_failures_of_the_last() -> None:
    cycle, action = saturated(), Counted()
    cycle.room = room = Room([action], DomainTopology(()))
    make(room, cycle, "a/job")
    cycle.begin(200.0)  # the pods bound in the last cycle are possible victims now
    plan, notes = make(room, cycle, "a/twin")
    assert plan is not None
    assert notes == ["preempt: found victims"]
    assert action.asked == 4


@pytest.mark.parametrize(
    ("other", "held"),
    [
        pytest.param("a/small", None, id="another-request"),
        pytest.param("a/higher", None, id="another-priority"),
        pytest.param("a/twin", Exclusion(np.array([False, True]), "held"), id="other-held-nodes"),
    ],
)
def test_a_job_of_another_shape_is_searched_for(other: str, held: Exclusion | None) -> None:
    cycle, action = saturated(), Counted()
    room = Room([action], DomainTopology(()))
    make(room, cycle, "a/job")
    make(room, cycle, other, held)
    assert action.asked == 4


def test_a_hopeless_action_is_remembered_without_a_search() -> None:
    cycle, action = saturated(), Counted()
    room = Room([action], DomainTopology(()))
    lowest = of_a("a/lowest", 0).gpus(2).obj()
    job = Job("a/lowest", "a", 0, 0.0, 1, (lowest,), 0, True)
    notes: list[Note] = []
    assert room.make(cycle.means, job, pods_request(job.core), notes, None) is None
    assert [note_text(n) for n in notes] == [
        "preempt: no lower-priority preemptible pods in queue a"
    ]
    assert room.possible(cycle.means, job, pods_request(job.core), [], None) == []
    assert action.asked == 1


def test_failures_are_remembered_within_a_cycle_only() -> None:
    cycle, action = saturated(), Counted()
    room = Room([action], DomainTopology(()))
    make(room, cycle, "a/job")
    make(room, cycle, "a/twin")  # the same shape: its failure is remembered
    assert action.asked == 2  # one search and its bound, for both jobs
    room.start_cycle()
    assert room.failures == {}
    make(room, cycle, "a/job")
    assert action.asked == 4


def fragmented() -> Cycle:
    """One GPU used on each of two 2-GPU nodes; a 2-GPU job: moving or evicting one pod
    makes room."""
    return cycle_of(
        [node("n0", gpus=2), node("n1", gpus=2)],
        [
            of_a("a/p0").gpus(1).on("n0", 0).obj(),
            of_a("a/p1").gpus(1).on("n1", 0).obj(),
            of_a("a/job", 10).gpus(2).obj(),
        ],
        queues=(QueueSpec("a"), QueueSpec("b")),
    )


RECLAIM_NOTE = (
    "reclaim: no pod of a queue above its fair share can be reclaimed (0 queue(s) above "
    "it; 0 preemptible pod(s) of other queues within reclaimMinRuntime)"
)


@pytest.mark.parametrize(
    ("names", "action", "notes"),
    [
        pytest.param(
            ("consolidate", "reclaim", "preempt"),
            "consolidate",
            [RECLAIM_NOTE, "consolidate: moves found"],
            id="default-order",
        ),
        pytest.param(
            ("preempt", "consolidate"), "preempt", ["preempt: found victims"], id="preempt-first"
        ),
        pytest.param(
            ("reclaim", "preempt"),
            "preempt",
            [RECLAIM_NOTE, "preempt: found victims"],
            id="after-a-hopeless-one",
        ),
    ],
)
def test_the_first_action_that_makes_room_wins(
    names: tuple[str, ...], action: str, notes: list[str]
) -> None:
    cycle = fragmented()
    plan, got = make(Room([ACTIONS[n] for n in names], DomainTopology(())), cycle, "a/job")
    assert plan is not None
    assert (plan.action, [v.pod.key for v in plan.victims]) == (action, ["a/p0"])
    assert got == notes


@pytest.mark.parametrize(
    ("names", "watches"),
    [
        pytest.param(("preempt",), False, id="preempt"),
        pytest.param(("consolidate", "preempt"), False, id="consolidate-preempt"),
        pytest.param(("reclaim",), True, id="reclaim"),
        pytest.param(("consolidate", "reclaim", "preempt"), True, id="default"),
    ],
)
def test_failures_end_with_fair_shares_only_for_reclaim(
    names: tuple[str, ...], watches: bool
) -> None:
    assert Room([ACTIONS[n] for n in names], DomainTopology(())).watches_fair_share is watches


def racks(kind: str) -> tuple[Cycle, Room]:
    """Two racks of two 2-GPU nodes, each node full; only one node per rack runs a pod of
    lower priority than the gang of two 2-GPU pods."""
    nodes = [replace(node(f"n{i}", gpus=2), labels={"rack": f"r{i // 2}"}) for i in range(4)]
    running: list[PodInfo] = [
        of_a(f"a/x{i}", 1 if i % 2 == 0 else 50).gpus(2).on(f"n{i}").obj() for i in range(4)
    ]
    gang = [of_a(f"a/g-{k}", 10).gpus(2).gang("a/g").obj() for k in range(2)]
    group = GroupSpec("a/g", 2, "a", **{f"topology_{kind}": "rack"})  # type: ignore[arg-type]
    cycle = cycle_of(nodes, [*running, *gang], queues=(QueueSpec("a"),), groups=(group,))
    return cycle, Room([ACTIONS["preempt"]], DomainTopology(("rack",)))


NOT_IN_RACKS = [
    "in rack r0: preempt: evicting eligible pods frees no fitting node",
    "in rack r1: preempt: evicting eligible pods frees no fitting node",
]


def test_a_gang_that_requires_a_rack_finds_room_only_inside_one() -> None:
    cycle, room = racks("required")
    assert make(room, cycle, "a/g") == (None, NOT_IN_RACKS)


def test_a_gang_that_prefers_a_rack_finds_room_anywhere_after() -> None:
    cycle, room = racks("preferred")
    plan, notes = make(room, cycle, "a/g")
    assert plan is not None
    assert sorted(v.pod.key for v in plan.victims) == ["a/x0", "a/x2"]
    assert notes == [*NOT_IN_RACKS, "anywhere: preempt: found victims"]


DRAIN = replace(Preempt(), name="drain", victims="pods of the batch tier")
"""An action added later: its own name and words for its victims, nothing of its own in
``report/reasons.py``."""


@pytest.mark.parametrize(
    ("code", "moves", "text"),
    [
        pytest.param(NoteCode.FOUND, False, "drain: found victims", id="found"),
        pytest.param(NoteCode.FOUND, True, "drain: moves found", id="found-moves"),
        pytest.param(
            NoteCode.NOT_FOUND,
            False,
            "drain: evicting pods of the batch tier frees no fitting node",
            id="not-found",
        ),
        pytest.param(
            NoteCode.NOT_FOUND,
            True,
            "drain: no pods of the batch tier can be moved to make room",
            id="not-found-moves",
        ),
        pytest.param(
            NoteCode.NO_ROOM,
            False,
            "drain: evicting all pods of the batch tier would still leave no room for the job",
            id="no-room",
        ),
        pytest.param(
            NoteCode.NO_ROOM,
            True,
            "drain: moving all pods of the batch tier would still leave no room for the job",
            id="no-room-moves",
        ),
    ],
)
def test_an_action_added_later_reads_right_in_its_own_words(
    code: NoteCode, moves: bool, text: str
) -> None:
    found = note(code)  # as the victim search says it, knowing no action
    assert note_text(as_action(replace(DRAIN, relocate=moves), found)) == text


def test_an_action_added_later_keeps_the_words_of_notes_not_its_own() -> None:
    said = as_action(DRAIN, note(NoteCode.BEYOND_FREE))
    assert note_text(said) == "drain: the job does not fit in the cluster's total free capacity"
