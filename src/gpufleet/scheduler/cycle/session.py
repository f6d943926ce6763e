"""Sessions: scheduling cycles over the cluster cache.

The cache (:mod:`gpufleet.scheduler.state.cache`) holds what the cluster is — objects, the
ledger of what runs, the victim pool, assumed bindings; a session holds what a scheduler
knows beyond it — the pending jobs in their order, the holds, the failure memos, the
result — in its :class:`~gpufleet.scheduler.cycle.cycle.Cycle`.

* :class:`Session` is one cycle. With ``assume`` the cycle works on the cache's own
  ledger, so each binding it decides holds its capacity from the decision on, and its
  result is assumed in the cache when it ends; without it the cycle works on a copy and
  leaves the cache as it was (a what-if over a live cache). The snapshot edge, ``gpufleet
  schedule``, is: read the YAML, apply every object to an empty cache, run one session
  (``schedule_snapshot`` in ``gpufleet/compose.py``).
* :class:`Scheduler` runs cycle after cycle over one cache (the replay; the live
  scheduler), always assuming. It keeps one ``Cycle`` and its backlog across
  cycles, so that what a cycle learnt lasts: which classes of jobs failed under which
  token (:mod:`gpufleet.scheduler.queues.backlog`), failed searches for room, the holds of
  starving jobs (a reservation also outlives a rebuild of the cycle), the per-spec caches.
  Its pending jobs follow the cache's pods: before a cycle it reads the gangs whose
  pending pods changed (:meth:`ClusterCache.pending_changes`) and builds those jobs anew,
  in the order of the changes; a job the cycle binds leaves the backlog in the cycle.
  What runs is only ever the cache's ledger. It also keeps since when each gang has run
  below its ``minMember`` (:attr:`Scheduler.stale`), which a ledger rebuilt from the
  objects would not know, for stale-gang release.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.scheduler.api.job import Job, build_jobs, order_key
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.cycle.stale_gang import stale_gang
from gpufleet.scheduler.queues.backlog import Backlog, job_shape
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import snapshot_events
from gpufleet.scheduler.state.ledger import Ledger, with_claim_gpus
from gpufleet.scheduler.state.pool import VictimPool
from gpufleet.scheduler.state.shapes import make_framework

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence

    from gpufleet.framework.runtime import Framework
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo, Snapshot
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.queues.holds import Holds


class Session:
    """One cycle over a cache: the cycle's per-run state lives here, not in the cache."""

    def __init__(
        self,
        cache: ClusterCache[Components],
        config: CycleConfig,
        now: float,
        *,
        assume: bool = True,
    ) -> None:
        self.cache, self.config, self.now, self.assume = cache, config, now, assume
        ledger, pool = cache.ledger(), cache.pool()
        if not assume:
            ledger, pool = _copies(cache)
        pending = cache.pending()
        jobs = build_jobs(
            pending, ledger.groups, ledger.gang_running, ledger.state, ledger.subgroup_of
        )
        rng = np.random.default_rng(0)
        self.cycle: Cycle = Cycle(
            config,
            now,
            components=cache.components,
            ledger=ledger,
            pool=pool,
            backlog=Backlog.of(with_claim_gpus(jobs, ledger)),
            framework=_framework(
                cache.framework(config.policy, ledger.state, rng),
                cache.components,
                config.policy,
                ledger,
                pending,
                rng=rng,
            ),
            pending=pending,
            topology=_levels(cache),
        )
        self.cycle.stale.leaving = cache.leaving

    def run(self) -> CycleResult:
        result = self.cycle.run()
        if self.assume:
            self.cache.assume(result, self.now)
        return result


def snapshot_session(
    snapshot: Snapshot,
    config: CycleConfig,
    now: float,
    *,
    components: Components,
    workload: Sequence[PodSpec] | None = None,
) -> Session:
    """A session at ``now`` over a cache holding every object of ``snapshot`` (the what-if's
    way in; tests and benchmarks build their cycles so too). FGD's fragmentation is measured
    against ``workload`` (default: the snapshot's pods)."""
    cache = ClusterCache(config.non_preemptible_priority, components=components, workload=workload)
    cache.apply_all(snapshot_events(snapshot))
    return Session(cache, config, now)


class Scheduler:
    """Cycles over ``cache`` one after another (see the module doc); ``rng`` is the
    policy's random source (default: seed 0).

    Events go to the cache; the scheduler reads it when asked how many jobs wait
    (``len``), whether a cycle would do anything (:meth:`settled`), or to run one
    (:meth:`run`). When the cache rebuilt its ledger (a node's capacity, a queue, the
    topology, DRA objects changed) or FGD's workload changed, the cycle and its backlog
    are built anew from the cache.

    Pending pods blocked by scheduling gates are not reported as pending in its results,
    and pending pods are not counted with their claims' GPUs (a session does both).
    """

    def __init__(
        self,
        cache: ClusterCache[Components],
        config: CycleConfig,
        now: float = 0.0,
        *,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.cache, self.config, self.now = cache, config, now
        self.rng = rng if rng is not None else np.random.default_rng(0)
        self.cycles = 0
        """Cycles run."""
        self.backlog: Backlog
        self._left: dict[str, None] = {}
        """Gangs with pods the last cycle left pending, whose job it may have taken out of
        the backlog all the same (elastic pods beyond minMember that found no room)."""
        self.stale: dict[str, float] = {}
        """Per stale gang: since when (:meth:`_mark_stale`)."""
        self._known: set[str] = set()
        """The gangs (PodGroups) the last cycle knew."""
        self.ledger: Ledger
        self.framework: Framework | None
        self._framework_version = -1
        """The cache's framework version when the framework was last read."""
        self.cycle = self._new_cycle()

    def _new_cycle(self, held: Holds | None = None) -> Cycle:
        """A cycle over the cache as it is now, with every pending job in a new backlog and
        the reservation of ``held``, the cycle it replaces."""
        cache = self.cache
        self.ledger = ledger = cache.ledger()
        self.framework = cache.framework(self.config.policy, ledger.state, self.rng)
        self._framework_version = cache.framework_version
        cache.pending_changes()  # every pending pod is read below
        self._left.clear()
        self.backlog = backlog = Backlog(skip_failed=True)
        jobs = build_jobs(
            cache.pending(), ledger.groups, ledger.gang_running, ledger.state, ledger.subgroup_of
        )
        for job in sorted(jobs, key=order_key):
            backlog.add(job, self._shape(job))
        cycle = Cycle(
            self.config,
            self.now,
            components=cache.components,
            ledger=ledger,
            pool=cache.pool(),
            backlog=backlog,
            framework=_framework(
                self.framework, cache.components, self.config.policy, ledger, (), rng=self.rng
            ),
            topology=_levels(cache),
        )
        if held is not None:  # a reservation outlives the rebuild (``queues/holds.py``)
            cycle.holds.carry(held, ledger.state, self.now)
        return cycle

    def _shape(self, job: Job) -> Hashable:
        """A job's class: its PodGroup (topology, minMember) is part of it, and so are
        nodes provisioned for it alone (``gpufleet.io/provisioned-for``): a job that may
        use them is not interchangeable with the others of its shape."""
        group = self.ledger.groups.get(job.key)
        _, held = self.ledger.state.node_labels.label_ids(PROVISIONED_FOR_LABEL)
        if held:
            own = provisioned_for(job.key)
            if own in held:
                return job_shape(job, (group, own))
        return job_shape(job, group)

    def _sync(self) -> None:
        """Bring the backlog up to the cache's pending pods."""
        cache = self.cache
        if not self._left and cache.unchanged(self.ledger, self._framework_version):
            return  # the common case between events: nothing to read
        ledger = cache.ledger()
        framework = cache.framework(self.config.policy, ledger.state, self.rng)
        self._framework_version = cache.framework_version
        if ledger is not self.ledger or framework is not self.framework:
            self.cycle = self._new_cycle(self.cycle.holds)
            return
        for gang in cache.pending_changes():
            self._read(gang)
        if self._left:
            for gang in self._left:
                if gang not in self.backlog:
                    self._read(gang)
            self._left.clear()

    def _read(self, gang: str) -> None:
        """The pending job of ``gang`` as the cache's pods make it, in the backlog."""
        ledger, backlog = self.ledger, self.backlog
        pods = self.cache.pending_of(gang)
        if not pods and gang not in backlog:
            return  # the common case: its pods were bound or deleted
        found = build_jobs(
            pods, ledger.groups, ledger.gang_running, ledger.state, ledger.subgroup_of
        )
        entry = (found[0], self._shape(found[0])) if found else None
        known = backlog.entry(gang)
        if known == entry:
            return
        if known is not None:
            backlog.remove(known[0])
        if entry is not None:
            backlog.add(*entry)

    def __len__(self) -> int:
        """Jobs waiting."""
        self._sync()
        return len(self.backlog)

    def jobs(self) -> list[Job]:
        """The jobs waiting, queue by queue, in order."""
        self._sync()
        return self.backlog.jobs()

    def settled(self) -> bool:
        """Whether a cycle now, without evicting, would do nothing (:meth:`Cycle.settled`)."""
        self._sync()
        return self.cycle.settled()

    def run(self, now: float, *, act: bool = True) -> CycleResult:
        """One cycle at ``now`` (without ``act`` it only places jobs); its result is
        assumed in the cache."""
        self.now = now
        self._sync()
        self.cache.pool()  # the pods bound since the last cycle become possible victims
        self._mark_stale(now)
        self.cycle.begin(now, act=act)
        self.cycles += 1
        result = self.cycle.run()
        self.cache.assume(result, now)
        pods = self.cache.pods
        for pending in result.pending:
            pod = pods.get(pending.pod)
            if pod is not None:
                self._left[pod.gang] = None
        return result

    def _mark_stale(self, now: float) -> None:
        """Keep since when each gang has been stale (``cycle/stale_gang.py``): from the
        first cycle that found it so — or, for a gang already so when this scheduler first
        knew it (a restarted or new leader), from its PodGroup's ``gpufleet.io/stale-since``.
        A gang no longer stale (whole again, a pod of it succeeded) or gone is forgotten;
        should it become stale again, its time starts anew, whatever mark its PodGroup still
        carries. The cycle's release reads these times, and only these."""
        ledger, cache = self.ledger, self.cache
        stale = {g for g in ledger.partial if stale_gang(ledger, ledger.groups[g])}
        for gang in [g for g in self.stale if g not in stale]:
            del self.stale[gang]
        for gang in sorted(stale - self.stale.keys()):
            marked = ledger.groups[gang].stale_since
            first_known = gang not in self._known
            self.stale[gang] = min(marked, now) if first_known and marked is not None else now
        self._known = set(ledger.groups)
        self.cycle.stale.since, self.cycle.stale.leaving = self.stale, cache.leaving


def _levels(cache: ClusterCache[Components]) -> tuple[str, ...]:
    """The topology levels of the cache's Topology object (none: no levels)."""
    topology = cache.objects["Topology"]
    return next(iter(topology.values())).levels if topology else ()  # type: ignore[union-attr]


def _copies(cache: ClusterCache[Components]) -> tuple[Ledger, VictimPool]:
    """An independent ledger and pool with the cache's content (for a session that does
    not assume)."""
    source = cache.ledger()
    snap = cache.snapshot()
    # Claims that assumed bindings allocated are in the book, not yet in the objects.
    snap = replace(snap, allocations={**snap.allocations, **source.book.allocations})
    ledger = Ledger.of(snap, cache.non_preemptible_priority)
    names = source.state.names
    ledger.bind_all(
        [replace(r.pod, node=names[r.node], gpus=r.gpus) for r in source.running.values()]
    )
    return ledger, VictimPool.of(ledger, 0.0)


def _framework(
    framework: Framework | None,
    components: Components,
    policy: str,
    ledger: Ledger,
    pending: Sequence[PodInfo],
    *,
    rng: np.random.Generator,
) -> Callable[[], Framework]:
    """``framework``, the policy's plugins as the cache keeps them for its workload; a cache
    without pods has none, and a cycle that has pods to place measures against ``pending``."""
    if framework is not None:
        return lambda: framework
    specs = [ledger.state.demand(p.spec) for p in pending]
    return lambda: make_framework(components, policy, specs, rng)
