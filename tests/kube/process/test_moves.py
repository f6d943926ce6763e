"""Consolidation's moves in the live scheduler (``kube/process/moves.py``): a move is
remembered by the moved pod's controller and given to the next pod that controller creates
after it, so the replacement is cooled down and counted; other pods are left as they are."""

from __future__ import annotations

from gpufleet.kube.process.moves import CLOCK_SKEW_S, MoveMemory
from gpufleet.model.workload import PodInfo
from gpufleet.scheduler.api.outcome import CycleResult, Eviction
from gpufleet.scheduler.room.consolidate import MOVE_COOLDOWN_S
from gpufleet.scheduler.state.changes import Event
from tests.builders import info

NOW = 100_000.0


def moved(*pods: PodInfo, action: str = "consolidate", is_move: bool = True) -> CycleResult:
    evictions = tuple(Eviction(p.key, action, "ns/waiting", moved=is_move) for p in pods)
    return CycleResult((), evictions, ())


def added(pod: PodInfo, kind: str = "ADDED") -> Event:
    return Event(kind, "Pod", pod)  # type: ignore[arg-type]


def marks(memory: MoveMemory, *pods: PodInfo, now: float = NOW) -> list[tuple[int, float | None]]:
    out = []
    for event in memory.mark([added(p) for p in pods], now):
        assert isinstance(event.obj, PodInfo)
        out.append((event.obj.progress.moves, event.obj.progress.moved_at))
    return out


def running(key: str, owner: str = "rs-1", moves: int = 0) -> PodInfo:
    return info(key).gpus(1).owner(owner).on("n0", started=NOW - 60).progress(moves=moves).obj()


def test_the_next_pod_of_the_controller_takes_the_move() -> None:
    memory, old = MoveMemory(), running("ns/a-1", moves=1)
    memory.record(moved(old), {old.key: old}, NOW, {old.key})
    sibling = info("ns/a-0").owner("rs-1").created(NOW - 3600).obj()  # there before the move
    stranger = info("ns/b-1").owner("rs-2").created(NOW + 1).obj()
    new = info("ns/a-2").owner("rs-1").created(NOW + 1).obj()
    later = info("ns/a-3").owner("rs-1").created(NOW + 2).obj()
    assert marks(memory, sibling, stranger, new, later, now=NOW + 5) == [
        (0, None),
        (0, None),
        (2, NOW),  # its second move in all
        (0, None),  # one move, one replacement
    ]
    bound = info("ns/a-2").owner("rs-1").created(NOW + 1).on("n1", started=NOW + 9).obj()
    assert marks(memory, bound, now=NOW + 10) == [(2, NOW)]  # every later event of it
    memory.mark([added(bound, "DELETED")], NOW + 20)
    assert memory.given == {}


def test_a_replacement_stamped_a_little_before_the_move_by_the_servers_clock_counts() -> None:
    memory, old = MoveMemory(), running("ns/a-1")
    memory.record(moved(old), {old.key: old}, NOW, {old.key})
    new = info("ns/a-2").owner("rs-1").created(NOW - CLOCK_SKEW_S / 2).obj()
    assert marks(memory, new) == [(1, NOW)]


def test_only_moves_of_pods_with_a_controller_are_remembered() -> None:
    memory = MoveMemory()
    bare = running("ns/bare", owner="")
    preempted = running("ns/p", owner="rs-9")
    memory.record(moved(bare), {bare.key: bare}, NOW, {bare.key})
    preempting = moved(preempted, action="preempt", is_move=False)
    memory.record(preempting, {"ns/p": preempted}, NOW, {"ns/p"})
    memory.record(moved(running("ns/gone")), {}, NOW, {"ns/gone"})  # no longer in the cache
    assert memory.waiting == {}


def test_a_move_no_pod_claims_within_the_cooldown_is_forgotten() -> None:
    memory, old = MoveMemory(), running("ns/a-1")
    memory.record(moved(old), {old.key: old}, NOW, {old.key})
    late = info("ns/a-2").owner("rs-1").created(NOW + MOVE_COOLDOWN_S + 10).obj()
    assert marks(memory, late, now=NOW + MOVE_COOLDOWN_S + 10) == [(0, None)]
    assert memory.waiting == {}


def test_a_move_whose_eviction_was_refused_is_not_remembered() -> None:
    memory, old = MoveMemory(), running("ns/a-1")
    memory.record(moved(old), {old.key: old}, NOW, set())  # a disruption budget said no
    assert memory.waiting == {}


def test_pods_the_cache_no_longer_has_are_forgotten() -> None:
    memory, old = MoveMemory(), running("ns/a-1")
    memory.record(moved(old), {old.key: old}, NOW, {old.key})
    new = info("ns/a-2").owner("rs-1").created(NOW + 1).obj()
    memory.mark([added(new)], NOW + 1)
    assert list(memory.given) == ["ns/a-2"]
    memory.record(moved(), {}, NOW + 2, set())  # its DELETED event was missed in a relist
    assert memory.given == {}
