"""Reservations: nodes kept for the jobs that have waited too long.

Backfill alone starves big gangs: small jobs keep taking the GPUs that free up one by one,
and a gang that needs whole nodes never finds them. As Slurm's backfill does, each job that
has waited past the starvation threshold (``starvation_after_s``) and still does not fit
reserves nodes for its pods, the oldest first, and other jobs may use them only if they
are expected to end before it needs them:

* **Which nodes**: among the nodes no older starving job has reserved, for each pod of its
  core, the allowed node expected to be free soonest
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

An older starving job's reservation comes first: one it makes takes its nodes from younger
reservations, which are made again at their jobs' next tries. A reservation ends when its
job binds or leaves. ``version`` changes when reserved nodes do, so that the failures
remembered under the old ones are judged again.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
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
    return float(_left(expected_s(pod, default_s), ran))


def _left(expected: Any, ran: Any) -> Any:
    """How much longer runs that were expected to take ``expected`` and have run ``ran``
    are expected to run (scalars or arrays alike)."""
    return np.maximum(expected - ran, ran)


def job_expected_s(job: Job, default_s: float) -> float:
    """How long ``job`` is expected to run once started: its longest pod's estimate."""
    return max((expected_s(p, default_s) for p in job.pods), default=default_s)


@dataclass(frozen=True, slots=True)
class Reservation:
    """Nodes reserved for ``job`` (its key) from ``start`` on."""

    job: str
    created: float
    """When the job was created (an older starving job's reservation comes first)."""
    priority: int
    mask: BoolArray
    nodes: tuple[str, ...]
    start: float
    """When the reserved nodes are expected to be free; no backfill after it."""
    gpus: float


class Holds:
    """The reservations of starving jobs (see the module docstring)."""

    def __init__(self, default_expected_s: float = DEFAULT_EXPECTED_S) -> None:
        self.default_expected_s = default_expected_s
        self.reservations: dict[str, Reservation] = {}
        """Per job key, its reservation."""
        self.version = 0
        self._now, self._version = -1.0, -1
        """When what :meth:`against` remembers was found, and under which version."""
        self._against: dict[str, tuple[Job, Exclusion | None]] = {}
        self._expected: dict[str, tuple[Job, float]] = {}
        self._prefixes: tuple[list[float], list[Exclusion | None]] | None = None
        self._lowest = 0
        """The lowest priority of a reserved job."""
        self._just_after = 0.0

    def of(self, key: str) -> Reservation | None:
        """The reservation of job ``key``, if it holds one."""
        return self.reservations.get(key)

    def against(self, job: Job, now: float) -> Exclusion | None:
        """The reserved nodes ``job`` may not use: those of every reservation but its own,
        except reservations of jobs of lower priority and those whose start comes after
        ``job`` is expected to end. Remembered per job until the time or the reservations
        change."""
        if not self.reservations:
            return None
        if now != self._now or self.version != self._version:
            self._start_cycle(now)
        known = self._against.get(job.key)
        if known is not None and known[0] is job:
            return known[1]
        expected = self._expected.get(job.key)
        if expected is None or expected[0] is not job:
            expected = self._expected[job.key] = (job, job_expected_s(job, self.default_expected_s))
        ends = now + expected[1]
        if job.key in self.reservations or job.priority > self._lowest:
            mask: BoolArray | None = None
            for r in self.reservations.values():
                if r.job == job.key or job.priority > r.priority:
                    continue
                if now < r.start and ends <= r.start:
                    continue
                mask = r.mask if mask is None else (mask | r.mask)
            found = None if mask is None else Exclusion(mask, REASON)
        else:  # the common case: every reservation that starts before it would end
            starts, prefixes = self._by_start()
            found = prefixes[bisect_left(starts, ends if ends > now else self._just_after)]
        self._against[job.key] = (job, found)
        return found

    def _start_cycle(self, now: float) -> None:
        """Forget what :meth:`against` found at another time or under other reservations
        (each job's expected run time is kept while the reservations are the same)."""
        if self.version != self._version:
            self._expected = {}
            self._lowest = min(r.priority for r in self.reservations.values())
        self._now, self._version, self._against, self._prefixes = now, self.version, {}, None
        self._just_after = math.nextafter(now, math.inf)

    def _by_start(self) -> tuple[list[float], list[Exclusion | None]]:
        """The reservations' starts in order, and per count k the exclusion of the first
        k: a job is kept off those that start before it would end, a prefix of them."""
        if self._prefixes is None:
            ordered = sorted(self.reservations.values(), key=lambda r: (r.start, r.job))
            prefixes: list[Exclusion | None] = [None]
            mask: BoolArray | None = None
            for r in ordered:
                mask = r.mask if mask is None else (mask | r.mask)
                prefixes.append(Exclusion(mask, REASON))
            self._prefixes = ([r.start for r in ordered], prefixes)
        return self._prefixes

    def carry(self, old: Holds, state: ClusterState, now: float) -> None:
        """Keep ``old``'s reservations over ``state``, a ledger rebuilt from the objects (a
        node added or gone renumbers the nodes): what a scheduler promised starving jobs
        outlives the rebuild. A reservation whose node is gone is due now: its nodes are
        chosen again at its job's next try, and no backfill reopens."""
        self.version = old.version + 1
        where = {name: i for i, name in enumerate(state.names)}
        for r in old.reservations.values():
            kept = [where[name] for name in r.nodes if name in where]
            mask = np.zeros(state.size, dtype=np.bool_)
            mask[kept] = True
            nodes = tuple(state.names[i] for i in np.flatnonzero(mask))
            start = r.start if len(kept) == len(r.nodes) else min(r.start, now)
            self.reservations[r.job] = replace(r, mask=mask, nodes=nodes, start=start)

    def release(self, key: str) -> None:
        """``key`` bound or left (or no node can run it any more): its reservation ends."""
        if self.reservations.pop(key, None) is not None:
            self.version += 1

    def hold(
        self,
        job: Job,
        state: ClusterState,
        static_nodes: Callable[[PodSpec], IntArray],
        free_at: FloatArray,
        *,
        now: float,
        domains: IntArray | None = None,
    ) -> Reservation | None:
        """The reservation of starving ``job``, made or, once its start has passed, made
        again (None: no node could ever run its pods, outside older reservations).
        ``domains``: per node, the id of its domain at the level the job's gang requires
        (-1: the node lacks the label); the reserved nodes then lie in one domain, the one
        whose nodes are expected free soonest. ``free_at``: per node, when it is expected
        to be free (:func:`drained_by` of the pods running now)."""
        r = self.reservations.get(job.key)
        if r is not None and now < r.start:
            return r
        age = (job.created, job.key)
        younger = [o for o in self.reservations.values() if (o.created, o.job) > age]
        taken = np.zeros(state.size, dtype=np.bool_)
        for o in self.reservations.values():
            if (o.created, o.job) < age:
                taken |= o.mask
        others = provisioned_nodes(state, job.key)
        if others is not None:  # bought for another job: never this one's to reserve
            taken |= others.mask
        best: tuple[float, BoolArray] | None = None
        for within in _confinements(domains):
            allowed = ~taken if within is None else (within & ~taken)
            mine = _choose(job, state, static_nodes, free_at, allowed)
            if mine is None or not mine.any():
                continue
            start = max(now, float(free_at[mine].max()))
            if best is None or start < best[0]:
                best = (start, mine)
        if best is None:  # no node (or domain) can run these pods: nothing to reserve
            self.release(job.key)
            return None
        start, mine = best
        if r is not None:
            start = r.start  # overdue: other nodes, but still no backfill
        nodes = tuple(state.names[i] for i in np.flatnonzero(mine))
        made = Reservation(job.key, job.created, job.priority, mine, nodes, start, job_gpus(job))
        self.reservations[job.key] = made
        dropped = [o.job for o in younger if (o.mask & mine).any()]
        for key in dropped:  # the older job's reservation comes first
            del self.reservations[key]
        if (
            r is None
            or dropped
            or (r.priority, r.created) != (made.priority, made.created)
            or not np.array_equal(r.mask, mine)
        ):
            self.version += 1
        return made


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
    within: BoolArray,
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
    rows = [  # a DaemonSet or CPU pod that runs for months holds no GPU back
        (r.node, now if r.pod.started is None else r.pod.started, expected_s(r.pod, default_s))
        for r in running
        if r.spec.num_gpu
    ]
    if rows:
        table = np.array(rows, dtype=np.float64)
        ran = np.maximum(0.0, now - table[:, 1])
        ends = now + _left(table[:, 2], ran)
        np.maximum.at(free_at, table[:, 0].astype(np.intp), ends)
    return free_at


PROVISIONED = "node(s) were provisioned for another job"


def provisioned_nodes(state: ClusterState, key: str) -> Exclusion | None:
    """The nodes bought for jobs other than ``key`` (label ``gpufleet.io/provisioned-for``,
    ``model/supply.py``), which no other job may use until the label goes: a gang's nodes
    come up one by one, and it starts whole only if none is taken meanwhile. None: no node
    is kept so."""
    ids, values = state.node_labels.label_ids(PROVISIONED_FOR_LABEL)
    if not values:
        return None
    own = provisioned_for(key)
    mine = values.index(own) if own in values else -2
    mask = (ids >= 0) & (ids != mine)
    return Exclusion(mask, PROVISIONED, "Provisioning") if mask.any() else None


def freed_within(
    running: Iterable[Running], size: int, now: float, within_s: float, default_s: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Per node (``size`` rows), the GPUs, milli-CPU and MiB that ``running`` pods are
    expected (:func:`remaining_s`) to free within ``within_s`` of ``now``."""
    gpus, cpu, memory = np.zeros(size), np.zeros(size), np.zeros(size)
    for r in running:
        if remaining_s(r.pod, now, default_s) <= within_s:
            gpus[r.node] += len(r.gpus) or r.spec.gpu_equivalent
            cpu[r.node] += r.spec.cpu_milli
            memory[r.node] += r.spec.memory_mib
    return gpus, cpu, memory
