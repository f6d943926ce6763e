"""Serving the backlog: the queues' jobs one at a time, the queue furthest below its fair
share first, each judged before it is tried.

A job's class that failed is skipped until what it waits on changes — its *failure token*:
freed capacity or other held nodes (later bindings only take capacity); in a cycle that
may evict, also the cycle itself. A class worth trying is one that fits now, or that an
action might make room for (:func:`worth`); without evicting, one the cluster has the
slots for (:func:`viable`). :func:`settled` tells a replay that a cycle now would do
nothing.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Protocol

from gpufleet.model.workload import pods_request
from gpufleet.scheduler.api.outcome import WhyCode, why

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Eviction
    from gpufleet.scheduler.cycle.journal import Journal
    from gpufleet.scheduler.placement.fit import Fit
    from gpufleet.scheduler.queues.backlog import Backlog
    from gpufleet.scheduler.queues.holds import Holds
    from gpufleet.scheduler.queues.rules import QueueRule
    from gpufleet.scheduler.room.room import Room
from gpufleet.scheduler.room.protocols import CycleView


class ServeConfig(Protocol):
    @property
    def strict_fifo(self) -> bool: ...
    @property
    def records(self) -> bool: ...


class ServeContext(CycleView, Protocol):
    """What serving reads of the cycle, besides what the actions read."""

    @property
    def config(self) -> ServeConfig: ...
    @property
    def backlog(self) -> Backlog: ...
    @property
    def order(self) -> QueueRule: ...
    @property
    def holds(self) -> Holds: ...
    @property
    def fit(self) -> Fit: ...
    @property
    def room(self) -> Room: ...
    @property
    def journal(self) -> Journal: ...
    @property
    def evictions(self) -> list[Eviction]: ...
    @property
    def partial(self) -> set[str]: ...
    @property
    def act(self) -> bool: ...

    def schedule(self, job: Job) -> bool: ...


def serve(cycle: ServeContext, backlog: Backlog) -> None:
    """Serve the queues' jobs, one at a time, the queue furthest below its share first."""
    strict = cycle.config.strict_fifo
    judge = partial(worth, cycle) if cycle.act else partial(viable, cycle)
    heads: dict[str, Job] = {}
    for queue in backlog.queues():
        if queue in cycle.tree.queues:
            head = backlog.head(queue, 0, failure_token(cycle), strict=strict, viable=judge)
            if head is not None:
                heads[queue] = head
    bound: list[Job] = []
    while heads:
        queue = (
            min(heads, key=lambda q: cycle.order.key(q, heads[q]))
            if len(heads) > 1
            else next(iter(heads))
        )
        job = heads[queue]
        backlog.passed(job)
        # A replay's backlog skips known failures without a trace: a head judged at the
        # walk's start may have lost its room to the jobs bound since. With records (a
        # live scheduler tells each pod why it waits) the head is tried, and the jobs of
        # its class that its failure skips wait for its reason.
        records = cycle.config.records
        if (not backlog.skip_failed or records or judge(job)) and cycle.schedule(job):
            bound.append(job)
            backlog.bound(job)
        else:
            _failed(cycle, backlog, job, queue)
        head = backlog.head(
            queue, len(cycle.evictions), failure_token(cycle), strict=strict, viable=judge
        )
        if head is None:
            del heads[queue]
        else:
            heads[queue] = head
    for job in bound:
        backlog.remove(job)


def _failed(cycle: ServeContext, backlog: Backlog, job: Job, queue: str) -> None:
    """``job`` stays pending: its class is skipped for the rest of the walk (its jobs wait
    for its reason, with records), and in strict FIFO its queue waits behind it."""
    if backlog.skip_failed and cycle.config.records:
        cycle.journal.alike(job, backlog.rest_of_class(job))
    backlog.failed(job, len(cycle.evictions), failure_token(cycle))
    if cycle.config.strict_fifo:
        backlog.block(queue)
        if not backlog.skip_failed:
            for behind in backlog.behind(queue):
                cycle.journal.pend(behind, behind.pods, why(WhyCode.STRICT_FIFO, behind=job.key))


def failure_token(cycle: ServeContext) -> Hashable:
    """What a failed job's class waits on: freed capacity or a change of holds (later
    bindings only take capacity) — and, while jobs with pod affinity or spread constraints
    wait, bindings too (a pod bound may be the one such a job needs beside it, or even out
    its spread). A cycle that may evict has tokens of its own: there every failed class is
    judged again (:meth:`worth`), with its fair shares and min runtimes."""
    token: tuple[object, ...] = (cycle.released, cycle.holds.version)
    if cycle.backlog.helped_by_bindings:
        token = (*token, cycle.started)
    return (*token, "act", cycle.cycles) if cycle.act else token


def settled(cycle: ServeContext) -> bool:
    """Whether a cycle now, without evicting, would do nothing: every pending class
    failed since capacity was last freed, and no gang runs below its minMember (whose
    grace period could run out)."""
    if cycle.partial:
        return False
    return cycle.backlog.settled(
        failure_token(cycle), strict=cycle.config.strict_fifo, viable=partial(viable, cycle)
    )


def worth(cycle: ServeContext, job: Job) -> bool:
    """In a cycle that may evict: whether trying ``job`` could bind it — it fits now,
    or some action might make room for it (``VictimSearch.hopeless``)."""
    if viable(cycle, job):
        return True
    request = pods_request(job.core)
    return bool(cycle.room.possible(cycle, job, request, [], cycle.holds.against(job)))


def viable(cycle: ServeContext, job: Job) -> bool:
    """Whether ``job`` may fit now without evicting anything: False only when its core
    is of one plain spec and the cluster has fewer slots for it than it needs (an exact
    bound, see :meth:`~gpufleet.scheduler.placement.fit.Fit.slots`)."""
    core = job.core
    return not core or cycle.fit.slots(core, None, cycle.holds.against(job)) >= len(core)
