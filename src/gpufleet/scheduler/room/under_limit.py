"""Preemption under a queue's limit: a job whose queue is at its limit takes the place of
lower-priority work of that same queue.

KAI Scheduler and Volcano both do this (KAI's docs/priority example: a ``build`` pod of a
queue at its GPU limit preempts the queue's running ``train`` pod; Volcano's preempt action
evicts within a queue whatever its capability). Without it a queue at its limit would run its
low-priority work to the end while its urgent work waits.

The victims are what the preempt action may take (``room/preempt.py``): preemptible pods of
the job's own queue, of lower priority than the job, past the queue's ``preemptMinRuntime``,
never a pod bound in this cycle; a gang with no pod to spare goes whole. They are chosen
cheapest first (the victim search's order: lowest priority, whole GPUs before shares, least
work lost, newest, fewest pods) until what they hold brings every queue on the job's path
back under its limit with the job counted, and then the costliest of them that are not
needed for that are reprieved. The job must then be admitted (a non-preemptible job still
within its quota) and fit the cluster with those victims gone; otherwise nothing is evicted
and the job waits at its limit.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.workload import request_vector, vector
from gpufleet.scheduler.api.transaction import Transaction
from gpufleet.scheduler.room.protocols import Plan
from gpufleet.scheduler.room.victims import VictimSearch
from gpufleet.scheduler.state.fairshare import EPS

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping, Sequence

    from gpufleet.framework.runtime import Exclusion
    from gpufleet.model.arrays import FloatArray
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.placement.domains import Failure
    from gpufleet.scheduler.queues.rules import AdmissionRule
    from gpufleet.scheduler.room.protocols import Means, Unit
    from gpufleet.scheduler.state.fairshare import QueueTree

NAME = "preempt"
"""Evictions under the limit are preemptions, as KAI and Volcano report them."""


def over_limit(
    job: Job, request: FloatArray, alloc: Mapping[str, FloatArray], tree: QueueTree
) -> FloatArray:
    """What the job's queues hold beyond their limits with ``request`` counted (per resource,
    the most over any queue on its path; 0 where none is over)."""
    over = vector()
    for q in tree.paths[job.queue]:
        np.maximum(over, alloc[q] + request - tree.queues[q].limit, out=over)
    return over


def preempt_under_limit(
    search: VictimSearch,
    request: FloatArray,
    *,
    admission: AdmissionRule,
    alloc: Mapping[str, FloatArray],
    place_core: Callable[[Job, Transaction, Exclusion | None], Failure | None],
) -> Plan | None:
    """A plan that evicts lower-priority work of the job's queue so that the job fits under
    its queues' limits and in the cluster (the module's rule), or None. The job is one its
    queue's limit holds back (the caller's to know)."""
    means, job = search.means, search.job
    if not job.can_preempt:
        return None
    need = over_limit(job, request, alloc, means.ledger.tree)
    pool = means.pool
    mask = (
        pool.alive & pool.in_queues([job.queue]) & (pool.priority < job.priority) & pool.preempt_ok
    )
    candidates = [
        pool.items[i]
        for i in np.flatnonzero(mask)
        if pool.items[i].pod.key not in means.round.bound_now
    ]
    allowed = {r.pod.key for r in candidates}
    chosen = _cover(search, candidates, allowed, need)
    if chosen is None:
        return None
    taken = [r for unit in chosen for r in unit]
    freed = sum((request_vector(r.spec) for r in taken), vector())
    freed = freed + means.ledger.claims_freed([r.pod for r in taken])
    if admission.blocked(job, request, freed) is not None:
        return None
    txn = Transaction(means.ledger.state)
    for r in taken:
        search.evict(txn, r)
    if place_core(job, txn, search.held) is not None:
        txn.rollback()
        return None
    return Plan(NAME, tuple(taken), tuple(txn.reserved()))


def _cover(
    search: VictimSearch, candidates: Sequence[Running], allowed: set[str], need: FloatArray
) -> list[Unit] | None:
    """The cheapest units of victims whose requests add up to ``need``, or None."""

    def covered(units: list[Unit]) -> bool:
        held = sum((request_vector(r.spec) for u in units for r in u), vector())
        return bool(np.all(held + EPS >= need))

    chosen: list[Unit] = []
    taken: list[Running] = []
    for r in sorted(candidates, key=lambda r: search.cost(search.unit(r, []))):
        if any(t.pod.key == r.pod.key for t in taken):
            continue
        unit = search.unit(r, taken)
        if not all(m.pod.key in allowed for m in unit):
            continue
        chosen.append(unit)
        taken.extend(unit)
        if covered(chosen):
            break
    else:
        return None
    for unit in sorted(chosen[:-1], key=search.cost, reverse=True):
        gang = unit[0].pod.gang
        if any(u is not unit and u[0].pod.gang == gang for u in chosen):
            continue  # the units of one gang were judged together: keep them together
        rest = [u for u in chosen if u is not unit]
        if covered(rest):
            chosen = rest
    return chosen


class UnderLimit:
    """Preemption under a queue's limit for the cycle's jobs, with ``means``, admitted by
    ``admission``. A search that failed fails again for a job of the same queue, priority
    and request until capacity is freed or the next cycle: bindings of the cycle only take
    room and are never victims."""

    def __init__(self, means: Means, admission: AdmissionRule) -> None:
        self.means, self.admission = means, admission
        self._failures: dict[Hashable, tuple[int, int]] = {}
        """Searches that found nothing, by job shape, with their epoch."""

    def plan(self, job: Job, request: FloatArray, held: Exclusion | None) -> Plan | None:
        """Room for ``job`` under its queue's limit off ``held`` nodes, or None."""
        means = self.means
        shape = (job.queue, job.priority, job.can_preempt, tuple(request.tolist()))
        epoch = (means.round.cycles, means.ledger.released)
        if self._failures.get(shape) == epoch:
            return None
        plan = preempt_under_limit(
            VictimSearch(means, job, held),
            request,
            admission=self.admission,
            alloc=means.ledger.alloc,
            place_core=means.placer.job,
        )
        if plan is None:
            self._failures[shape] = epoch
        return plan
