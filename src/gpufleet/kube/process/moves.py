"""Consolidation's moves, remembered across the pods a controller creates.

In a cluster a pod that consolidation moves is evicted, and its controller (a Job, a
ReplicaSet, a JobSet's Job) creates a replacement under a new name. Read as it is, the
replacement knows nothing of the move: it is the youngest pod of the cluster, the cheapest
to move, and would be moved again and again — the churn that the cooldown and the cap on
moves (``scheduler/room/consolidate.py``: ``MOVE_COOLDOWN_S``, ``MAX_MOVES``) exist to stop.

So the live scheduler remembers each move by the uid of the moved pod's controller
(:attr:`~gpufleet.model.workload.PodInfo.owner`), and gives it to the first pod that the
same controller creates after the move and that is not yet bound: from then on every event
of that pod carries the moves (``Progress.moves``, ``moved_at``), as the replay's pods do.
A move that no new pod claims within the cooldown is forgotten (the job was deleted, or its
controller made no replacement). A pod without a controller is not recreated by anyone; its
move is not remembered. The memory is the leader's: a new leader starts without it, so a
job may be moved once more than the cap after a change of leader.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from gpufleet.model.workload import PodInfo
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.room.consolidate import MOVE_COOLDOWN_S
from gpufleet.scheduler.state.changes import Event

CLOCK_SKEW_S = 60.0
"""How much earlier than the move (by the scheduler's clock) the API server may stamp the
replacement's ``creationTimestamp``."""


@dataclass(frozen=True, slots=True)
class Move:
    at: float
    moves: int
    """The job's moves in all, this one included."""


class MoveMemory:
    """The moves made, per controller, until a new pod of it takes them (see the module
    docstring)."""

    def __init__(self) -> None:
        self.waiting: dict[str, deque[Move]] = {}
        """Per controller uid, moves no new pod has claimed yet, oldest first."""
        self.given: dict[str, Move] = {}
        """Per pod key, the moves of the job it runs."""

    def record(
        self,
        result: CycleResult,
        pods: Mapping[str, PodInfo],
        now: float,
        accepted: Collection[str],
    ) -> None:
        """Remember the moves of ``result`` whose evictions the API server accepted
        (``accepted``; ``pods``: the cache's, the moved ones still in it). Forget the pods
        the cache no longer has (a deletion missed in a relist)."""
        for key in [k for k in self.given if k not in pods]:
            del self.given[key]
        for eviction in result.evictions:
            pod = pods.get(eviction.pod)
            if not eviction.moved or pod is None or not pod.owner or pod.key not in accepted:
                continue
            move = Move(now, pod.progress.moves + 1)
            self.waiting.setdefault(pod.owner, deque()).append(move)

    def mark(self, events: Sequence[Event], now: float) -> list[Event]:
        """``events`` with the moves of each pod that runs a moved job on its pod."""
        self._forget(now)
        out = []
        for event in events:
            pod = event.obj
            if event.kind != "Pod" or not isinstance(pod, PodInfo):
                out.append(event)
                continue
            if event.type == "DELETED":
                self.given.pop(pod.key, None)
                out.append(event)
                continue
            move = self.given.get(pod.key) or self._claim(pod)
            if move is None:
                out.append(event)
                continue
            progress = replace(pod.progress, moves=move.moves, moved_at=move.at)
            out.append(replace(event, obj=replace(pod, progress=progress)))
        return out

    def _claim(self, pod: PodInfo) -> Move | None:
        """The oldest waiting move of ``pod``'s controller, if ``pod`` is a new pending
        one created after it."""
        waiting = self.waiting.get(pod.owner) if pod.owner else None
        if not waiting or pod.node is not None or pod.created < waiting[0].at - CLOCK_SKEW_S:
            return None
        move = waiting.popleft()
        if not waiting:
            del self.waiting[pod.owner]
        self.given[pod.key] = move
        return move

    def _forget(self, now: float) -> None:
        for owner in list(self.waiting):
            waiting = self.waiting[owner]
            while waiting and now - waiting[0].at > MOVE_COOLDOWN_S:
                waiting.popleft()
            if not waiting:
                del self.waiting[owner]
