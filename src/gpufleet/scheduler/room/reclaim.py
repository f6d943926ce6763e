"""Reclaim: take capacity back from queues above their fair share.

The rule of Volcano's proportion plugin: victims are judged one by one, and a pod (or a
gang taken whole) is reclaimable while its queue's allocation — before removing it, after
the victims already taken — is above the queue's fair share, for the queue and every
ancestor the job's queue does not share. The victim may be larger than the queue's excess
and take the queue below its share (one 8-GPU job of a queue whose share is 4 is
reclaimable). The job's own queue (and each of its ancestors the victim's queue does not
share) must be within its fair share with the job allocated. A queue at or below its fair
share is never a victim, so a queue that reclaim took below its share cannot take back from
one within its share: nothing oscillates. Victims are past ``reclaimMinRuntime``.

A serving queue (``spec.serving``) that stays within its GPU quota with the job takes back
what it lent by KAI's rule instead: victims are pods of the queues that use more GPUs than
their quota (they borrowed), whatever their fair share. Its replicas need whole nodes, and
borrowed pods spread over the nodes leave free GPUs that no replica can use; by the fair-share
rule the borrowers would not be above their share and the lender would stay short. The
borrowers cannot take back from it in turn: within its quota, it is within its fair share.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.workload import request_vector
from gpufleet.scheduler.api.outcome import NoteCode, note
from gpufleet.scheduler.room.protocols import always, takes_back
from gpufleet.scheduler.state.fairshare import EPS

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.room.protocols import Candidates, Means, SearchView, Unit

NAME = "reclaim"


@dataclass(frozen=True, slots=True)
class Reclaim:
    name: str = NAME
    relocate: bool = False
    victims: str = "reclaimable pods (of queues above their fair share)"
    needs_preemption: bool = True
    fair_share_bound: bool = True

    def candidates(self, search: SearchView, request: FloatArray) -> Candidates:
        job, pool = search.job, search.pool
        tree, order = search.means.ledger.tree, search.means.order
        own_path = tree.paths[job.queue]

        def others(queue: str) -> list[str]:
            """The victim's queues that the job's queue does not share (never empty)."""
            return [q for q in tree.paths.get(queue, ()) if q not in own_path]

        def mine(queue: str) -> list[str]:
            """The job's queues that a victim of ``queue`` does not share."""
            return [q for q in own_path if q not in tree.paths.get(queue, ())]

        if takes_back(search.means.ledger, search.job, request):
            return self._take_back(search, others)

        # Below the queues both share, the job's side must stay within its fair share with
        # the job and the victim's side must be above its fair share.
        over = {q: order.ratio(q, request) for q in own_path}
        victims_of = [q for q in pool.queue_names if q in tree.queues and q not in own_path]
        allowed = [q for q in victims_of if all(over[m] <= 1 + EPS for m in mine(q))]
        if victims_of and not allowed:
            q = max(own_path, key=lambda q: over[q])
            fair_gpus = float(order.fair[q][0])
            return (
                None,
                note(NoteCode.OVER_FAIR_SHARE, queue=q, ratio=over[q], fair_gpus=fair_gpus),
                always,
            )

        def accept(unit: Unit, taken: list[Running]) -> bool:
            """Volcano's Reclaimable: the unit's queues are above their fair share with
            the victims taken so far gone (the unit itself still counted)."""
            for q in others(unit[0].pod.queue):
                gone = [r for r in taken if q in tree.paths[r.pod.queue]]
                removed = sum(
                    (request_vector(r.spec) for r in gone),
                    search.means.ledger.claims_freed([r.pod for r in gone]),
                )
                if order.ratio(q, -removed) <= 1 + EPS:
                    return False  # at or below its fair share: never a victim
            return True

        above = [q for q in allowed if all(order.ratio(p) > 1 + EPS for p in others(q))]
        in_other = pool.alive & pool.in_queues(victims_of)
        mask = in_other & pool.in_queues(above) & pool.reclaim_ok
        if not mask.any():
            protected = int(np.count_nonzero(in_other & ~pool.reclaim_ok))
            why = note(NoteCode.NONE_RECLAIMABLE, above=len(above), protected=protected)
            return None, why, accept
        return mask, None, accept

    def _take_back(self, search: SearchView, others: Callable[[str], list[str]]) -> Candidates:
        """A serving queue within its GPU quota takes back what it lent: victims are pods of
        queues (and every ancestor it does not share) using more GPUs than their quota, each
        taken while its queues are still over it with the victims so far gone."""
        ledger, pool = search.means.ledger, search.pool
        tree, own = ledger.tree, ledger.tree.paths[search.job.queue]

        def over(queue: str, removed: float = 0.0) -> bool:
            return (
                float(ledger.alloc[queue][0]) - removed > float(tree.queues[queue].quota[0]) + EPS
            )

        def accept(unit: Unit, taken: list[Running]) -> bool:
            for q in others(unit[0].pod.queue):
                gone = sum(r.spec.gpu_equivalent for r in taken if q in tree.paths[r.pod.queue])
                if not over(q, gone):
                    return False  # within its quota: it borrowed nothing
            return True

        victims_of = [q for q in pool.queue_names if q in tree.queues and q not in own]
        borrowers = [q for q in victims_of if all(over(p) for p in others(q))]
        in_other = pool.alive & pool.in_queues(victims_of)
        mask = in_other & pool.in_queues(borrowers) & pool.reclaim_ok
        if not mask.any():
            protected = int(np.count_nonzero(in_other & ~pool.reclaim_ok))
            return (
                None,
                note(NoteCode.NOTHING_LENT, above=len(borrowers), protected=protected),
                accept,
            )
        return mask, None, accept

    def freed(self, search: SearchView, mask: BoolArray) -> ClusterState:
        return search.pool.freed(search.state, mask)

    def scope(self, job: Job) -> Hashable:
        return (job.queue, job.priority, job.can_preempt)

    def epoch(self, means: Means) -> Hashable:
        """As preemption's, and also until a binding takes a queue above its fair share
        (its pods may have become reclaimable)."""
        return (means.round.cycles, means.ledger.released, means.round.over_share)
