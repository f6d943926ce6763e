"""The backlog dispatcher: the queues' jobs one at a time, the queue furthest below its fair
share first, each judged before it is tried.

A job's class that failed is skipped until what it waits on changes — its *failure token*:
freed capacity or other held nodes (later bindings only take capacity); in a cycle that
may evict, also the cycle itself. A class worth trying is one that fits now, or that an
action might make room for (:meth:`Dispatcher.worth`); without evicting, one the cluster
has the slots for (:meth:`Dispatcher.viable`). :meth:`Dispatcher.settled` tells a replay
that a cycle now would do nothing.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from gpufleet.model.workload import pods_request
from gpufleet.scheduler.api.outcome import WhyCode, why

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Eviction
    from gpufleet.scheduler.cycle.journal import Journal
    from gpufleet.scheduler.queues.backlog import Backlog
    from gpufleet.scheduler.queues.holds import Holds
    from gpufleet.scheduler.queues.rules import QueueRule
    from gpufleet.scheduler.room.protocols import Means
    from gpufleet.scheduler.room.room import Room


class Dispatcher:
    """Serves ``backlog`` queue by queue in ``order``, each job judged before it is tried:
    against the held nodes of ``holds`` and, in a cycle that may evict, by whether one of
    ``room``'s actions might make room with ``means``. ``strict_fifo``: a queue's first job
    that fails blocks the jobs behind it; ``records``: jobs skipped with a failed class are
    told its reason."""

    def __init__(
        self,
        backlog: Backlog,
        order: QueueRule,
        holds: Holds,
        room: Room,
        means: Means,
        *,
        strict_fifo: bool,
        records: bool,
        starvation_after_s: float = math.inf,
    ) -> None:
        self.backlog, self.order, self.holds, self.room, self.means = (
            backlog,
            order,
            holds,
            room,
            means,
        )
        self.strict_fifo, self.records = strict_fifo, records
        self.starvation_after_s = starvation_after_s

    def serve(
        self, journal: Journal, evictions: Sequence[Eviction], schedule: Callable[[Job], bool]
    ) -> None:
        """Serve the queues' jobs, one at a time, the queue furthest below its share first:
        ``schedule`` places a job (or makes room for it), False if it stays pending;
        ``evictions`` are the cycle's so far."""
        backlog, strict, tree = self.backlog, self.strict_fifo, self.means.ledger.tree
        plain = self.worth if self.means.round.act else self.viable

        def judge(job: Job) -> bool:
            return self.reserving(job) or plain(job)

        heads: dict[str, Job] = {}
        for queue in backlog.queues():
            if queue in tree.queues:
                token = self.failure_token()
                head = backlog.head(queue, 0, token, strict=strict, viable=judge)
                if head is not None:
                    heads[queue] = head
        bound: list[Job] = []
        while heads:
            queue = (
                min(heads, key=lambda q: self.order.key(q, heads[q]))
                if len(heads) > 1
                else next(iter(heads))
            )
            job = heads[queue]
            backlog.passed(job)
            # A replay's backlog skips known failures without a trace: a head judged at the
            # walk's start may have lost its room to the jobs bound since. With records (a
            # live scheduler tells each pod why it waits) the head is tried, and the jobs of
            # its class that its failure skips wait for its reason.
            if (not backlog.skip_failed or self.records or judge(job)) and schedule(job):
                bound.append(job)
                backlog.bound(job)
            else:
                self._failed(journal, len(evictions), job, queue)
            token = self.failure_token()
            head = backlog.head(queue, len(evictions), token, strict=strict, viable=judge)
            if head is None:
                del heads[queue]
            else:
                heads[queue] = head
        for job in bound:
            backlog.remove(job)

    def _failed(self, journal: Journal, evicted: int, job: Job, queue: str) -> None:
        """``job`` stays pending: its class is skipped for the rest of the walk (its jobs
        wait for its reason, with records), and in strict FIFO its queue waits behind it."""
        backlog = self.backlog
        if backlog.skip_failed and self.records:
            journal.alike(job, backlog.rest_of_class(job))
        backlog.failed(job, evicted, self.failure_token())
        if self.strict_fifo:
            backlog.block(queue)
            if not backlog.skip_failed:
                for behind in backlog.behind(queue):
                    journal.pend(behind, behind.pods, why(WhyCode.STRICT_FIFO, behind=job.key))

    def failure_token(self) -> Hashable:
        """What a failed job's class waits on: freed capacity or a change of holds (later
        bindings only take capacity) — and, while jobs with pod affinity or spread
        constraints wait, bindings too (a pod bound may be the one such a job needs beside
        it, or even out its spread). A cycle that may evict has tokens of its own: there
        every failed class is judged again (:meth:`worth`), with its fair shares and min
        runtimes. Every starvation threshold's length of time, every class is tried again:
        a job that has come to starve meanwhile reserves nodes when it fails
        (``queues/holds.py``)."""
        ledger, turn = self.means.ledger, self.means.round
        token: tuple[object, ...] = (ledger.released, self.holds.version)
        if math.isfinite(self.starvation_after_s) and self.starvation_after_s > 0:
            token = (*token, int(turn.now // self.starvation_after_s))
        if self.backlog.helped_by_bindings:
            token = (*token, ledger.started)
        return (*token, "act", turn.cycles) if turn.act else token

    def settled(self) -> bool:
        """Whether a cycle now, without evicting, would do nothing: every pending class
        failed since capacity was last freed, and no gang runs below its minMember (whose
        grace period could run out)."""
        if self.means.ledger.partial:
            return False
        token = self.failure_token()
        return self.backlog.settled(token, strict=self.strict_fifo, viable=self.viable)

    def worth(self, job: Job) -> bool:
        """In a cycle that may evict: whether trying ``job`` could bind it — it fits now,
        or some action might make room for it (``VictimSearch.hopeless``)."""
        if self.viable(job):
            return True
        request = pods_request(job.core)
        held = self.holds.against(job, self.means.round.now)
        return bool(self.room.possible(self.means, job, request, [], held))

    def reserving(self, job: Job) -> bool:
        """Whether trying ``job`` could make or renew a reservation though it does not fit:
        it starves, and holds no reservation, or holds one whose start has passed (its nodes
        are chosen again, ``queues/holds.py``)."""
        after, now = self.starvation_after_s, self.means.round.now
        if not math.isfinite(after) or now - job.created < after:
            return False
        held = self.holds.of(job.key)
        return held is None or now >= held.start

    def viable(self, job: Job) -> bool:
        """Whether ``job`` may fit now without evicting anything: False only when its core
        is of one plain spec and the cluster has fewer slots for it than it needs (an exact
        bound, see :meth:`~gpufleet.scheduler.placement.fit.Fit.slots`)."""
        core = job.core
        held = self.holds.against(job, self.means.round.now)
        return not core or self.means.placer.fit.slots(core, None, held) >= len(core)
