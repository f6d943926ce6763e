"""A cycle's writes by a few workers over a queue: every item in its order, at most so many
in flight, and one whose write fails is logged while the others are written — a bound on
writes in flight without a task and a semaphore wait per item."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

log = logging.getLogger("gpufleet.serve")

T = TypeVar("T")


async def at_most(
    workers: int, work: Callable[[T], Awaitable[object]], items: Sequence[T], *, what: str
) -> None:
    """``work`` on each of ``items``, in their order, by at most ``workers`` tasks at once;
    one that fails is logged as a failed ``what`` and the others are still worked."""
    left = deque(items)

    async def worker() -> None:
        while left:
            item = left.popleft()
            try:
                await work(item)
            except Exception:
                log.exception("%s failed; the cycle's other writes go on", what)

    await asyncio.gather(*(worker() for _ in range(min(workers, len(left)))))
