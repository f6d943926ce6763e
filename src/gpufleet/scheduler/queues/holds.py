"""The reservation: nodes kept for the oldest job that has waited too long.

Backfill alone starves big gangs: small jobs keep taking the GPUs that free up one by one,
and a gang that needs whole nodes never finds them. As Slurm's backfill does, the oldest
job that has waited past the starvation threshold (``starvation_after_s``) and still does
not fit reserves nodes for its pods, and other jobs may use them only if they are expected
to end before it needs them:

* **Which nodes**: for each pod of its core, the allowed node expected to be free soonest
  (:func:`drained_by`: the latest expected end of the pods running there), until the pods
  fit the reserved nodes' GPUs; for a gang that requires a topology domain, inside one
  domain of that level, the one whose chosen nodes are expected free soonest. Its
  **start** is when the last of them is expected to be free. Start and nodes are fixed
  when the reservation is made, so that it does not recede as running jobs outlast their
  estimates. Once the start has passed and the job still
  waits, the nodes are chosen again at each try by the same rule (the ones already free
  are chosen first, so what has drained stays reserved): a job that outruns its estimate
  on one reserved node does not hold the reservation up.
* **Backfill**: a job may use reserved nodes if it is expected to end by the start (``now``
  plus its expected duration), or if its priority is above the reserved job's. After the
  start, no job may: the nodes only empty, and the reserved job starts once the pods that
  ran there before end — its wait is bounded by the run times of the jobs on its nodes, not
  by the stream of smaller jobs behind it.
* **Expected run times** come from what a scheduler knows: the pod annotation
  ``gpufleet.io/expected-duration`` (``model/progress.py``), else the cycle's default. A
  running pod is expected to run for its expected duration, or, once it has run past half
  of it, as long again as it has run (run times are heavy-tailed: a job that has gone on
  long is likely to go on).

One job holds a reservation at a time: an older starving job that fails takes it over.
The reservation ends when its job binds or leaves. ``version`` changes when the reserved
nodes do, so that the failures remembered under the old ones are judged again.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.scheduler.api.job import job_gpus

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Running

REASON = "node(s) were reserved for a starving job"

DEFAULT_EXPECTED_S = 3600.0
"""How long a run is expected to take when its pod does not say (``CycleConfig``)."""


def expected_s(pod: PodInfo, default_s: float) -> float:
    """How long a run of ``pod`` is expected to take."""
    return pod.progress.expected_duration_s or default_s


def remaining_s(pod: PodInfo, now: float, default_s: float) -> float:
    """How much longer running ``pod`` is expected to run (see the module docstring)."""
    ran = max(0.0, now - (pod.started if pod.started is not None else now))
    return max(expected_s(pod, default_s) - ran, ran)


def job_expected_s(job: Job, default_s: float) -> float:
    """How long ``job`` is expected to run once started: its longest pod's estimate."""
    return max((expected_s(p, default_s) for p in job.pods), default=default_s)


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes reserved for ``job`` (its key) from ``start`` on."""

    job: str
    created: float
    """When the job was created (an older starving job takes the reservation over)."""
    priority: int
    mask: BoolArray
    nodes: tuple[str, ...]
    start: float
    """When the reserved nodes are expected to be free; no backfill after it."""
    gpus: float


class Holds:
    """The reservation of the oldest starving job, if any (see the module docstring)."""

    def __init__(self, default_expected_s: float = DEFAULT_EXPECTED_S) -> None:
        self.default_expected_s = default_expected_s
        self.reservation: Reservation | None = None
        self.version = 0

    @property
    def held(self) -> dict[str, tuple[BoolArray, float]]:
        """The reserved nodes per job holding them (none or one)."""
        r = self.reservation
        return {} if r is None else {r.job: (r.mask, r.gpus)}

    def against(self, job: Job, now: float) -> Exclusion | None:
        """The reserved nodes ``job`` may not use: none for the reserved job itself, a job
        of higher priority, or one expected to end by the reservation's start."""
        r = self.reservation
        if r is None or r.job == job.key or job.priority > r.priority:
            return None
        if now < r.start and now + job_expected_s(job, self.default_expected_s) <= r.start:
            return None
        return Exclusion(r.mask, REASON)

    def carry(self, old: Holds, state: ClusterState, now: float) -> None:
        """Keep ``old``'s reservation over ``state``, a ledger rebuilt from the objects (a
        node added or gone renumbers the nodes): what a scheduler promised a starving job
        outlives the rebuild. If a reserved node is gone, the reservation is due now: its
        nodes are chosen again at the job's next try, and no backfill reopens."""
        self.version = old.version + 1
        r = old.reservation
        if r is None:
            return
        where = {name: i for i, name in enumerate(state.names)}
        kept = [where[name] for name in r.nodes if name in where]
        mask = np.zeros(state.size, dtype=np.bool_)
        mask[kept] = True
        nodes = tuple(state.names[i] for i in np.flatnonzero(mask))
        start = r.start if len(kept) == len(r.nodes) else min(r.start, now)
        self.reservation = replace(r, mask=mask, nodes=nodes, start=start)

    def release(self, key: str) -> None:
        """``key`` bound or left: its reservation ends."""
        if self.reservation is not None and self.reservation.job == key:
            self.reservation = None
            self.version += 1

    def hold(
        self,
        job: Job,
        state: ClusterState,
        static_nodes: Callable[[PodSpec], IntArray],
        running: Iterable[Running],
        *,
        now: float,
        domains: IntArray | None = None,
    ) -> Reservation | None:
        """The reservation of starving ``job``, made if no older job holds one (None: one
        does, or no node could ever run its pods). ``domains``: per node, the id of its
        domain at the level the job's gang requires (-1: the node lacks the label); the
        reserved nodes then lie in one domain, the one whose nodes are expected free
        soonest."""
        r = self.reservation
        if r is not None and r.job != job.key and r.created <= job.created:
            return None
        if r is not None and r.job == job.key and now < r.start:
            return r
        free_at = drained_by(state, running, now, self.default_expected_s)
        best: tuple[float, BoolArray] | None = None
        for within in _confinements(domains):
            mine = _choose(job, state, static_nodes, free_at, within)
            if mine is None or not mine.any():
                continue
            start = max(now, float(free_at[mine].max()))
            if best is None or start < best[0]:
                best = (start, mine)
        if best is None:  # no node (or domain) can ever run these pods: nothing to reserve
            self.release(job.key)
            return None
        start, mine = best
        nodes = tuple(state.names[i] for i in np.flatnonzero(mine))
        if r is not None and r.job == job.key:
            start = r.start  # overdue: other nodes, but still no backfill
        self.reservation = Reservation(
            job.key, job.created, job.priority, mine, nodes, start, job_gpus(job)
        )
        if r is None or not np.array_equal(r.mask, mine):
            self.version += 1
        return self.reservation


def _confinements(domains: IntArray | None) -> Iterator[BoolArray | None]:
    """Where the reserved nodes may lie: anywhere, or inside each domain in turn."""
    if domains is None:
        yield None
        return
    for domain in np.unique(domains[domains >= 0]):
        yield np.asarray(domains == domain)


def _choose(
    job: Job,
    state: ClusterState,
    static_nodes: Callable[[PodSpec], IntArray],
    free_at: FloatArray,
    within: BoolArray | None,
) -> BoolArray | None:
    """Per pod of ``job``'s core, the allowed node (inside ``within``) expected free
    soonest, until its GPUs hold the pods (None: a pod no node can ever hold)."""
    mine = np.zeros(state.size, dtype=np.bool_)
    room = state.gpu_count.astype(np.float64)
    for pod in job.core:
        gpus = pod.demand.gpu_equivalent
        if not gpus:
            continue
        possible = static_nodes(pod.spec)
        if within is not None:
            possible = possible[within[possible]]
        possible = possible[room[possible] >= gpus]
        if possible.size == 0:
            return None
        node = int(possible[np.lexsort((possible, ~mine[possible], free_at[possible]))[0]])
        mine[node] = True
        room[node] -= gpus
    return mine


def drained_by(
    state: ClusterState, running: Iterable[Running], now: float, default_s: float
) -> FloatArray:
    """Per node, when the GPU pods running on it are all expected to have ended (``now``
    for a node without any)."""
    free_at = np.full(state.size, now, dtype=np.float64)
    for r in running:
        if not r.spec.num_gpu:
            continue  # a DaemonSet or CPU pod that runs for months holds no GPU back
        end = now + remaining_s(r.pod, now, default_s)
        free_at[r.node] = max(free_at[r.node], end)
    return free_at
