"""Consolidate: move preemptible pods to defragment, so that a job fits.

Candidates are preemptible pods outside gangs and without ResourceClaims (a gang member is
not moved: that would break the gang) that fit somewhere else on their own. A moved pod
must be bound again elsewhere in the same cycle. Tried only when the job fits the cluster's
total free capacity: moving pods creates no capacity, it only gathers it.

``consolidate-serving`` (:data:`SERVING`) moves pods only for a serving queue's replicas
within its quota, and those moves need no gain: the lender is never left short of whole
nodes by the pods it lent GPUs to (``protocols.takes_back``). Any other move must earn the
work it throws away: the pods moved for a job (their GPUs times the
time they have run, as the victim search counts it) may lose at most 1/:data:`GAIN_RATIO` of
what the job has waited (its GPUs times its wait so far). A job refused for too little gain
is tried again once its wait has grown: the consolidation epoch turns every
:data:`RECHECK_S`.

A pod that would lose more than :data:`MAX_MOVE_LOSS_S` of work (since its start or last
checkpoint, plus the restart time) is never moved, whatever the gain: on a busy cluster a
restarted run's rework queues everyone else. A moved job is not moved again for
:data:`MOVE_COOLDOWN_S`, nor ever more than
:data:`MAX_MOVES` times (its pod's ``progress.moves``, ``model/progress.py``): a pod just
moved has lost nothing yet and would otherwise be the cheapest victim of the next search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.arrays import MILLI
from gpufleet.model.progress import work_at_risk
from gpufleet.scheduler.api.outcome import NoteCode, note
from gpufleet.scheduler.room.protocols import Movable, always, moving, takes_back

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable

    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.room.protocols import Candidates, Means, SearchView, Unit

NAME = "consolidate"
GAIN_RATIO = 2.0
"""A move is made when the job's GPU-time waited is at least this many times the GPU-time
the moved pods lose."""
RECHECK_S = 3600.0
"""How often a consolidation refused for too little gain is tried again."""
MAX_MOVE_LOSS_S = 1800.0
"""The most work one moved pod may throw away: the time since its start or last checkpoint,
plus the restart time. Older unsaved work is never moved: a move restarts it, and on a busy
cluster the rework queues everyone else."""
MOVE_COOLDOWN_S = 6 * 3600.0
"""How long a moved job is protected from being moved again."""
MAX_MOVES = 2
"""How many times consolidation may move one job, at most."""


SERVING = "consolidate-serving"
"""Consolidation for serving queues only: it gathers whole nodes for their replicas within
their quotas and moves nothing for other jobs."""


@dataclass(frozen=True, slots=True)
class Consolidate:
    name: str = NAME
    relocate: bool = True
    victims: str = "preemptible pods"
    needs_preemption: bool = False
    fair_share_bound: bool = False
    serving_only: bool = False
    """Only for a serving queue's jobs within its quota (:data:`SERVING`)."""

    def candidates(self, search: SearchView, request: FloatArray) -> Candidates:
        if self.serving_only and not takes_back(search.means.ledger, search.job, request):
            return None, note(NoteCode.NOT_SERVING), always
        state = search.state
        demands = [p.demand for p in search.job.core]
        whole = sum(d.num_gpu for d in demands if not d.is_gpu_share)
        free_whole = int(np.count_nonzero(state.gpu_free == MILLI))
        if (
            free_whole < whole
            or state.gpu_free.sum() < sum(d.gpu_equivalent for d in demands) * MILLI
            or state.cpu_free.sum() < request[1]
            or state.memory_free.sum() < request[2]
        ):
            return None, note(NoteCode.BEYOND_FREE), always
        return movable(search)[0], None, earned(search, lender=self.serving_only)

    def freed(self, search: SearchView, mask: BoolArray) -> ClusterState:
        return movable(search)[1]

    def scope(self, job: Job) -> Hashable:
        # it moves any queue's pods, for a job of any queue; for serving queues, per queue
        return job.queue if self.serving_only else None

    def epoch(self, means: Means) -> Hashable:
        """What runs where, and the hour: within a cycle (``Room.start_cycle``) a failure
        lasts until capacity is freed or new pods may be moved, and at most until the hour
        turns (a job's wait, which a move must earn, grows). It is remembered per shape of
        job, not per job: a younger job's refusal holds for an older one of its shape."""
        return means.consolidation_epoch(), int(means.round.now // RECHECK_S)


def earned(search: SearchView, *, lender: bool = False) -> Callable[[Unit, list[Running]], bool]:
    """Whether moving a unit, beside the pods already taken, still earns its loss: none of
    its pods cools down or would lose too much, and the job's wait earns what they lose
    (a ``lender``'s job, a serving queue's within its quota, needs no gain)."""
    job, now, restart = search.job, search.means.round.now, search.means.restart_s
    gain = sum(p.demand.gpu_equivalent for p in job.core) * max(0.0, now - job.created)
    if lender:
        gain = math.inf  # the lender is never left short: its quota is its guarantee

    def accept(unit: Unit, taken: list[Running]) -> bool:
        if any(cooling(r, now) for r in unit):
            return False
        if any(
            work_at_risk(r.pod.progress, r.pod.started, now, restart) > MAX_MOVE_LOSS_S
            for r in unit
        ):
            return False
        return GAIN_RATIO * search.lost_work([*taken, *unit]) <= gain

    return accept


def cooling(running: Running, now: float) -> bool:
    """Whether ``running`` was moved too recently (or too often) to be moved again."""
    progress = running.pod.progress
    if progress.moves >= MAX_MOVES:
        return True
    return progress.moved_at is not None and now - progress.moved_at < MOVE_COOLDOWN_S


def movable(search: SearchView) -> tuple[BoolArray, ClusterState]:
    """The pods consolidation may move (each fits somewhere on its own and would lose at
    most :data:`MAX_MOVE_LOSS_S`), and the state with all of them gone. Kept for the
    consolidation epoch and the held nodes: within an epoch capacity is only taken and pods
    only grow older, so the pods that may move can only have become fewer and the freed
    state stays an upper bound (the search checks each move itself). A pod whose checkpoint
    makes it young again is seen at the next consolidation epoch (capacity freed or the pool
    changed), which the hour does not turn."""
    means, pool = search.means, search.pool
    held = search.held
    epoch, where = means.consolidation_epoch(), None if held is None else held.mask.tobytes()
    cache = means.movable
    if cache is None or cache.epoch != epoch:
        young = pool.alive & pool.single & ~pool.claims
        state = search.state
        if state.divided_gpus:  # a pod on MIG slices or replicas stays: its charge would change
            young &= state.gpu_unit[pool.node] == 1.0
        now, restart = means.round.now, means.restart_s
        for i in np.flatnonzero(young):  # old unsaved work never moves (MAX_MOVE_LOSS_S)
            pod = pool.items[i].pod
            if work_at_risk(pod.progress, pod.started, now, restart) > MAX_MOVE_LOSS_S:
                young[i] = False
        cache = means.movable = Movable(epoch, young)
    known = cache.by_mask.get(where)
    if known is None:  # per held mask: jobs kept off reservations and jobs not alternate
        mask = _relocatable_alone(search, cache)
        moved = mask.tobytes()  # most masks leave the same pods movable: one freed state
        freed = cache.freed.get(moved)
        if freed is None:
            freed = cache.freed[moved] = pool.freed(search.state, mask)
        known = cache.by_mask[where] = (mask, freed)
    return known


def _relocatable_alone(search: SearchView, cache: Movable) -> BoolArray:
    """The young pods that fit somewhere now off the held nodes, each on its own (a pod
    that does not can never be moved; the search need not consider it). Its own node
    counts: a shared-GPU pod may move to another GPU of it. The young pods are grouped by
    request once per epoch, and the nodes that pass a request's filters found once per
    epoch, so that each held mask costs one check per request."""
    pool, state, framework, held = search.pool, search.state, search.framework, search.held
    if cache.groups is None:
        grouped: dict[Hashable, tuple[PodSpec, list[int]]] = {}
        for i in np.flatnonzero(cache.young):
            if pool.items[i].pod.progress.moves >= MAX_MOVES:
                continue  # never again
            spec = moving(pool.items[i])
            grouped.setdefault(spec.request_key, (spec, []))[1].append(int(i))
        cache.groups = [(k, spec, np.asarray(ix)) for k, (spec, ix) in grouped.items()]
    keep = np.zeros_like(cache.young)
    for key, spec, indices in cache.groups:
        nodes = cache.nodes.get(key)
        if nodes is None:
            nodes = cache.nodes[key] = framework.run_filters(state, spec).nodes
        keep[indices] = bool(nodes.size) and (held is None or not held.mask[nodes].all())
    return keep
