"""Writes a cycle makes by a few workers (``kube/write/workers.py``): every
item in its order, never more in flight than asked, and one that fails is logged while the
others are written."""

from __future__ import annotations

import asyncio

import pytest

from gpufleet.kube.write.workers import at_most


def test_at_most_writes_each_item_in_order_with_a_bounded_number_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started: list[int] = []
    done: list[int] = []
    flying = 0
    most = 0

    async def write(item: int) -> None:
        nonlocal flying, most
        started.append(item)
        flying += 1
        most = max(most, flying)
        await asyncio.sleep(0.001 * (item % 3))
        flying -= 1
        if item == 4:
            raise RuntimeError("the API server said no")
        done.append(item)

    asyncio.run(at_most(3, write, list(range(12)), what="write"))
    assert started == list(range(12))  # taken in order
    assert most == 3
    assert sorted(done) == [i for i in range(12) if i != 4]  # the failure stopped nothing
    assert "write failed" in caplog.text
    assert "the API server said no" in caplog.text


def test_at_most_of_nothing_starts_nothing() -> None:
    asyncio.run(at_most(4, lambda _: asyncio.sleep(0), [], what="write"))
