"""Preempt: evict lower-priority pods of the job's own queue.

Victims are the preemptible pods of the job's queue with a lower priority than the job's,
past the queue's ``preemptMinRuntime``. Every unit of victims may be taken; the search
(:class:`~gpufleet.scheduler.room.victims.VictimSearch`) chooses the cheapest: lowest
priority, then least work lost.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufleet.scheduler.api.outcome import NoteCode, note
from gpufleet.scheduler.room.protocols import always

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.room.protocols import Candidates, Means, SearchView

NAME = "preempt"


@dataclass(frozen=True, slots=True)
class Preempt:
    name: str = NAME
    relocate: bool = False
    victims: str = "eligible pods"
    needs_preemption: bool = True
    fair_share_bound: bool = False

    def candidates(self, search: SearchView, request: FloatArray) -> Candidates:
        job, pool = search.job, search.pool
        min_runtime = search.means.ledger.tree.queues[job.queue].preempt_min_runtime_s
        mask = (
            pool.alive
            & pool.in_queues([job.queue])
            & (pool.priority < job.priority)
            & pool.preempt_ok
        )
        if not mask.any():
            why = note(NoteCode.NO_LOWER_PRIORITY, queue=job.queue, min_runtime_s=min_runtime)
            return None, why, always
        return mask, None, always

    def freed(self, search: SearchView, mask: BoolArray) -> ClusterState:
        return search.pool.freed(search.state, mask)

    def scope(self, job: Job) -> Hashable:
        return (job.queue, job.priority, job.can_preempt)

    def epoch(self, means: Means) -> Hashable:
        """Min runtimes and priorities are judged at the cycle's time: a failure lasts the
        cycle, until capacity is freed."""
        return (means.round.cycles, means.ledger.released, 0)
