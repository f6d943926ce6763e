"""The simulated clock: a heap of events keyed ``(time, priority, seq)`` (SimPy's order).

Events at the same time are taken by priority (completions before arrivals, so that the
capacity a job frees is there for the jobs arriving with it), then in the order they were
scheduled: the same input always replays in the same order.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

COMPLETION = 0
ARRIVAL = 1
PERIODIC = 2


@dataclass(order=True, frozen=True, slots=True)
class Event(Generic[T]):
    time: float
    priority: int
    seq: int
    payload: T = field(compare=False)


class EventQueue(Generic[T]):
    """Events in ``(time, priority, seq)`` order; ``now`` is the time of the last one taken."""

    def __init__(self) -> None:
        self._heap: list[Event[T]] = []
        self._seq = itertools.count()
        self.now = 0.0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, time: float, priority: int, payload: T) -> None:
        if time < self.now:
            raise ValueError(f"event at {time} is in the past (now {self.now})")
        heapq.heappush(self._heap, Event(time, priority, next(self._seq), payload))

    def clear(self) -> None:
        """Forget every event not yet taken (nothing they would do matters any more)."""
        self._heap.clear()

    def peek_time(self) -> float:
        """Time of the next event."""
        return self._heap[0].time

    def pop_batch(self) -> list[Event[T]]:
        """Every event of the next time, in order; the clock moves to that time."""
        first = heapq.heappop(self._heap)
        batch = [first]
        while self._heap and self._heap[0].time == first.time:
            batch.append(heapq.heappop(self._heap))
        self.now = first.time
        return batch
