"""Fair-share order: which queue a cycle serves next.

The queues' fair shares (:mod:`gpufleet.scheduler.state.fairshare`) are divided from what each
queue's pods hold and its pending jobs ask when a cycle starts — on first use (a cycle may
need none), and only when those demands changed since the last division. The next queue is
the one first by :meth:`QueueOrder.key`: at each level of its path, higher queue priority,
then the lower dominant share ratio with its head job counted (so a queue with no fair
share waits behind every queue still within its share). Inside a queue the backlog serves
jobs by priority, then age.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.workload import pods_request, vector
from gpufleet.scheduler.state.fairshare import fair_shares, share_ratio

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpufleet.model.arrays import FloatArray
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.state.ledger import Ledger


class QueueOrder:
    """Fair shares and the serving order over one ledger's queues."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.tree = ledger.tree
        self._cache: dict[str, tuple[tuple[int, ...], str, object, tuple[object, ...]]] = {}
        """Per queue: its order key, with the versions, head job and fair shares it was
        computed for."""
        self._key = b""
        self._demand: tuple[dict[str, FloatArray], FloatArray] = ({}, vector())
        self._fair: dict[str, FloatArray] | None = None
        """The fair shares of the demands of ``_key`` (None: not divided yet)."""

    def start(self, pending: Mapping[str, FloatArray], capacity: FloatArray) -> None:
        """A cycle starts: queues' demands are what their pods hold plus ``pending``."""
        own = self.ledger.own
        demand = {q: own[q] + pending[q] if q in pending else own[q] for q in self.tree.queues}
        available = np.maximum(capacity - self.ledger.unqueued, 0.0)
        key = b"".join([available.tobytes(), *(d.tobytes() for d in demand.values())])
        if key != self._key:
            self._key, self._demand, self._fair = key, (demand, available), None

    @property
    def fair(self) -> dict[str, FloatArray]:
        """Every queue's fair share in this cycle (see the module doc)."""
        if self._fair is None:
            self._fair = fair_shares(self.tree, *self._demand)
        return self._fair

    def ratio(self, queue: str, extra: FloatArray | None = None) -> float:
        """``queue``'s dominant share ratio, with ``extra`` added to what it holds."""
        alloc = self.ledger.alloc[queue]
        return share_ratio(
            alloc if extra is None else alloc + extra, self.fair.get(queue, vector())
        )

    def key(self, queue: str, head: Job) -> tuple[object, ...]:
        """Serve first the queue whose share ratio, with its head job added, is lowest."""
        path = self.tree.paths[queue]
        versions = tuple(self.ledger.versions[q] for q in path)
        fair = self.fair
        cached = self._cache.get(queue)
        if cached is not None and cached[2] is fair and cached[:2] == (versions, head.key):
            return cached[3]
        request = pods_request(head.core or head.pods)
        levels = tuple((-self.tree.queues[q].priority, self.ratio(q, request)) for q in path)
        order = (levels, queue)
        self._cache[queue] = (versions, head.key, fair, order)
        return order
