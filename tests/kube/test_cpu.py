"""The phase clock (``kube/cpu.py``): a collection of the garbage collector is charged to
``gc``, and left out of the phase it interrupted, in the event loop's thread and in a
worker's."""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Iterator

import pytest

from gpufleet.kube.cpu import CLOCK, phase


def _garbage() -> None:
    """Cyclic garbage, enough for a collection to take milliseconds."""
    for _ in range(200_000):
        a: list[object] = []
        a.append(a)


def _collect() -> float:
    """The thread CPU seconds of one full collection."""
    begun = time.thread_time()
    gc.collect()
    return time.thread_time() - begun


@pytest.fixture
def clock() -> Iterator[object]:
    enabled = gc.isenabled()
    gc.disable()  # only the collections the test asks for
    yield CLOCK
    CLOCK.on = False
    CLOCK._loop_thread = 0  # no thread is the loop's once the test ends
    gc.callbacks.remove(CLOCK._collected)
    if enabled:
        gc.enable()


def test_a_collection_is_gc_and_not_the_phase_it_interrupted(clock: object) -> None:
    async def main() -> tuple[float, float, float, float]:
        CLOCK.start()
        with phase("bind"):
            await asyncio.sleep(0)  # a callback of its own from here
            bind, collections = CLOCK.seconds["bind"], CLOCK.seconds["gc"]
            begun = time.thread_time()
            _garbage()
            collected = _collect()
            block = time.thread_time() - begun
        bind, collections = CLOCK.seconds["bind"] - bind, CLOCK.seconds["gc"] - collections

        def work() -> tuple[float, float]:
            begun = time.thread_time()
            _garbage()
            collected = _collect()
            return time.thread_time() - begun, collected

        before = CLOCK.snapshot()
        spent, in_worker = await asyncio.to_thread(CLOCK.timed, "cycle", work)
        after = CLOCK.snapshot()
        assert after["gc"] - before["gc"] == pytest.approx(in_worker, rel=0.2, abs=0.002)
        cycle = after["cycle"] - before["cycle"]
        assert cycle == pytest.approx(spent - in_worker, rel=0.2, abs=0.002)
        return bind, collections, block, collected

    bind, collections, block, collected = asyncio.run(main())
    assert collected > 0.002
    assert collections == pytest.approx(collected, rel=0.2, abs=0.002)
    assert bind == pytest.approx(block - collected, rel=0.2, abs=0.002)
