"""The event heap: time, then priority (completions first), then scheduling order."""

from __future__ import annotations

import pytest

from gpufleet.sim.clock import ARRIVAL, COMPLETION, EventQueue


def test_batches_by_time_then_priority_then_order() -> None:
    queue: EventQueue[str] = EventQueue()
    queue.push(5.0, ARRIVAL, "a1")
    queue.push(5.0, COMPLETION, "c1")
    queue.push(1.0, ARRIVAL, "early")
    queue.push(5.0, ARRIVAL, "a2")
    assert [e.payload for e in queue.pop_batch()] == ["early"]
    assert queue.now == 1.0
    assert [e.payload for e in queue.pop_batch()] == ["c1", "a1", "a2"]
    assert len(queue) == 0


def test_no_events_in_the_past() -> None:
    queue: EventQueue[str] = EventQueue()
    queue.push(3.0, ARRIVAL, "x")
    queue.pop_batch()
    with pytest.raises(ValueError, match="in the past"):
        queue.push(2.0, ARRIVAL, "y")
