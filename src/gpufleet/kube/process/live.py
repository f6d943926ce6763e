"""The live scheduler: watches in, cycles over the cluster cache, bindings and evictions out.

One event loop holds the API side: a :class:`~gpufleet.kube.read.watch.Reflector` per kind feeds
:class:`~gpufleet.kube.read.objects.ObjectStore`, whose events wait in a buffer. A cycle starts
when events came (after a short batching wait) or when the period passes (time-based rules:
min-runtime, starvation, stale gangs, assumed bindings past their deadline); the buffer is
applied to the cache, and the cycle (:class:`~gpufleet.scheduler.cycle.session.Scheduler`, pure
and synchronous) runs in a worker thread, so the loop keeps reading watches meanwhile.
Nothing touches the cache while a cycle runs: events arriving then wait for the next.

What a cycle decided is written back by its :class:`~gpufleet.kube.process.writes.ResultWriter`,
which tells pods why they wait through its :class:`~gpufleet.kube.process.tell.Teller`.

``dry_run`` writes nothing: what would be bound and evicted is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from gpufleet.compose import new_cache
from gpufleet.kube.cpu import CLOCK, phase
from gpufleet.kube.process.forecast import Forecasts
from gpufleet.kube.process.leader import LeaderElector, LeaseConfig
from gpufleet.kube.process.logs import PendingLog
from gpufleet.kube.process.metrics import Metrics, PodLatency
from gpufleet.kube.process.moves import MoveMemory
from gpufleet.kube.process.options import ServeOptions, ServeStats
from gpufleet.kube.process.provision import LiveAutoscaler
from gpufleet.kube.process.tell import Teller
from gpufleet.kube.process.writes import ResultWriter
from gpufleet.kube.read.kinds import PATHS, REQUIRED, WORKLOADS, kinds
from gpufleet.kube.read.objects import ObjectStore
from gpufleet.kube.read.translated import Changes
from gpufleet.kube.read.watch import Kind, Reflector
from gpufleet.kube.write.podgroups import PodGroupStatus
from gpufleet.kube.write.queues import QueueStatus
from gpufleet.kube.write.recorder import EventRecorder
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.model.workload import PodInfo, QueueSpec
from gpufleet.scheduler.cycle.session import Scheduler

if TYPE_CHECKING:
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.state.changes import Event

log = logging.getLogger("gpufleet.serve")


STALL_S = 120.0
STALL_PERIODS = 30
"""The loop is stalled (``/healthz`` fails) when no cycle started for this long: far beyond
any cycle's run and writes, so that only a hang trips it."""


class LiveScheduler:
    """Keeps the cache up to date from watches and schedules on it (module docstring)."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: ServeOptions | None = None,
        *,
        clock: Callable[[], float] = time.time,
        may_act: Callable[[], bool] = lambda: True,
        metrics: Metrics | None = None,
    ) -> None:
        self.http, self.options, self.clock = http, options or ServeOptions(), clock
        self.may_act = may_act
        """Whether this replica may write now (it leads; see ``leader.py``): asked before
        every bind, eviction and status write."""
        self.store = ObjectStore(
            schedulers=(self.options.scheduler_name,), vocabularies=self.options.vocabularies
        )
        self.cache = new_cache(self.options.config, strict=False)
        self.scheduler: Scheduler | None = None
        """Made at the first cycle with nodes (a cluster state needs one)."""
        self.reflectors = [
            Reflector(
                http,
                Kind(kind, PATHS[kind], kind not in REQUIRED, advisory=kind in WORKLOADS),
                self._sink(kind),
            )
            for kind in kinds(self.options.vocabularies)
        ]
        self.buffer: list[Event] = []
        self.wake = asyncio.Event()
        self.beat: float | None = None
        """When the loop last started a cycle (monotonic; None: not yet listed)."""
        self.stats = ServeStats()
        self.metrics = metrics or Metrics(self.options.config.policy, self.options.price_sheet)
        self.events = EventRecorder(http, clock=clock, may_write=may_act)
        self.podgroups = PodGroupStatus(http, clock)
        self.queues = QueueStatus(http)
        self.latency = PodLatency()
        self.forecasts = Forecasts(self.options.forecast_prometheus)
        """Serving queues' forecasts: their workloads' replicas, and from Prometheus if asked
        for (``forecast.py``)."""
        self._told: set[str] = set()
        """Queues whose forecast query was said to go unasked."""
        self.moves = MoveMemory()
        """Consolidation's moves, for the pods their controllers create (``moves.py``)."""
        self.pending_log = PendingLog()
        self.teller = Teller(
            http, self.options, self.store, self.cache, self.events, clock=clock, may_act=may_act
        )
        self.writer = ResultWriter(
            http,
            self.options,
            self.store,
            self.cache,
            self.teller,
            clock=clock,
            may_act=may_act,
            take=self._take,
            stats=self.stats,
            metrics=self.metrics,
            events=self.events,
            podgroups=self.podgroups,
            queues=self.queues,
            latency=self.latency,
            pending_log=self.pending_log,
        )
        self.autoscaler: LiveAutoscaler | None = None
        if self.options.offers:
            self.autoscaler = LiveAutoscaler(
                http,
                self.options,
                self.store,
                self.cache,
                teller=self.teller,
                events=self.events,
                metrics=self.metrics,
                sheet=self.options.price_sheet or load_price_sheet(),
                clock=clock,
                may_act=may_act,
            )
        self._lists = {r.kind.kind: 0 for r in self.reflectors}
        self._bad = {r.kind.kind: 0 for r in self.reflectors}

    @property
    def ready(self) -> bool:
        """Every kind has been listed once, and no watch of a kind the cycle needs has been
        down for longer than ``watch_down_grace_s`` (``/readyz``)."""
        now = time.monotonic()
        grace = self.options.watch_down_grace_s
        return all(
            r.synced.is_set()
            and (r.kind.optional or r.stats.down_since is None or now - r.stats.down_since < grace)
            for r in self.reflectors
        )

    def stalled(self) -> float | None:
        """Seconds since the loop last started a cycle, once more than :data:`STALL_S` or
        :data:`STALL_PERIODS` periods (None: it comes round, or has not started)."""
        if self.beat is None:
            return None
        since = time.monotonic() - self.beat
        return since if since > max(STALL_S, STALL_PERIODS * self.options.period_s) else None

    def _sink(self, kind: str) -> Callable[[str, Any], None]:
        def sink(type_: str, obj: Any) -> None:
            self._take(self.store.apply(type_, kind, obj))  # type: ignore[arg-type]

        return sink

    def _take(self, changes: Changes) -> None:
        self.buffer.extend(changes.events)
        for event in changes.events:
            pod = event.obj
            if not isinstance(pod, PodInfo) or event.type == "DELETED":
                continue
            if pod.managed and not pod.bound:
                self.latency.pending(pod.key, self.clock(), pod.uid)  # first seen: queued
        for problem in changes.problems:
            log.warning("cannot read %s %s: %s", problem.kind, problem.name, problem.message)
            self.stats.problems += 1
            self.teller.problem(problem)
        if changes.events:
            self.wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Watch and schedule until ``stop`` is set."""
        watches = [asyncio.create_task(r.run(stop)) for r in self.reflectors]
        try:
            while not stop.is_set() and not self.ready:
                await _wait(stop, 0.05)
            while not stop.is_set():
                self.beat = time.monotonic()
                try:
                    await self.cycle_once()
                except Exception:
                    # A bug or an unforeseen reply must not stop scheduling for good: the
                    # cycle is logged and the next one starts from the watches' state.
                    log.exception("cycle failed")
                    self.stats.cycle_errors += 1
                await self._until_next(stop)
        finally:
            for task in watches:
                task.cancel()
            await asyncio.gather(*watches, return_exceptions=True)
            self.forecasts.close()

    async def _until_next(self, stop: asyncio.Event) -> None:
        waker = asyncio.ensure_future(self.wake.wait())
        stopper = asyncio.ensure_future(stop.wait())
        await asyncio.wait(
            {waker, stopper}, timeout=self.options.period_s, return_when=asyncio.FIRST_COMPLETED
        )
        waker.cancel()
        stopper.cancel()
        if self.wake.is_set():
            await asyncio.sleep(self.options.batch_s)

    async def cycle_once(self) -> CycleResult | None:
        """Apply what the watches brought, run one cycle off the loop, write its result
        (None: no cycle, the cluster has no nodes)."""
        with phase("cycle"):
            return await self._cycle_once()

    async def _cycle_once(self) -> CycleResult | None:
        now = self.clock()
        self._take(self.store.check_queues())
        events, self.buffer = self.buffer, []
        self.cache.apply_all(self.moves.mark(events, now))
        # After the events: a preemptor whose victims' deletions just came is released into
        # this cycle, before a pod created since (a victim's replacement) takes its place.
        self.writer.release_holds(now)
        self.wake.clear()  # what the releases brought is applied here, not by another cycle
        events, self.buffer = self.buffer, []
        self.cache.apply_all(self.moves.mark(events, now))
        if self.autoscaler is not None and not self.options.dry_run and self.may_act():
            await self._autoscale(self.autoscaler.hold())  # no other job on a job's new nodes
        if self.forecasts.prometheus is None:
            self._unasked_queries()
        await self.forecasts.refresh(self.cache, now, self.store.lookups.serving_demand())
        if not self.cache.objects["Node"]:
            return None
        if self.scheduler is None:
            rng = np.random.default_rng(self.options.seed)
            self.scheduler = Scheduler(self.cache, self.options.config, rng=rng)
        self.cache.expire(now)
        started = time.perf_counter()
        result: CycleResult = await asyncio.to_thread(CLOCK.timed, "cycle", self.scheduler.run, now)
        if result.evictions:
            self.metrics.evicted(result, self.cache.pods, now, self.options.config.restart_s)
        self.stats.cycles += 1
        self.latency.tried(result, self.cache)
        await self.writer.write(result, now, self.scheduler)
        if self.autoscaler is not None and not self.options.dry_run and self.may_act():
            await self._autoscale(self.autoscaler.step(result, now))
        if result.evictions:  # the moves whose evictions were accepted
            self.moves.record(result, self.cache.pods, now, self.writer.accepted)
        self._measure(result, time.perf_counter() - started)
        return result

    async def _autoscale(self, work: Coroutine[Any, Any, None]) -> None:
        """Autoscaling's part of a cycle; a failure of it is logged and the cycle goes on
        (its bindings are written, its moves recorded)."""
        try:
            await work
        except Exception:
            log.exception("autoscaling failed")
            self.stats.cycle_errors += 1

    def _unasked_queries(self) -> None:
        """Say once per Queue that its ``spec.serving.forecastQuery`` is not asked: no
        ``--forecast-prometheus`` was given (it keeps its ``forecastGPUs``)."""
        for spec in self.cache.objects["Queue"].values():
            if isinstance(spec, QueueSpec) and spec.forecast_query and spec.name not in self._told:
                self._told.add(spec.name)
                log.warning(
                    "Queue %s: spec.serving.forecastQuery is not asked without "
                    "--forecast-prometheus; it keeps its forecastGPUs (%g)",
                    spec.name,
                    self.forecasts.written.get(spec.name, spec.forecast_gpus),
                )

    def _measure(self, result: CycleResult, seconds: float) -> None:
        self.metrics.cycle(result, seconds, self.cache, held=self.store.held)
        for reflector in self.reflectors:
            kind, lists = reflector.kind.kind, reflector.stats.lists
            if lists > 1 and lists > self._lists[kind]:
                self.metrics.watch_restarts.labels(kind).inc(lists - max(self._lists[kind], 1))
            self._lists[kind] = lists
            bad = reflector.stats.bad_objects
            if bad > self._bad[kind]:
                self.metrics.watch_bad_objects.labels(reflector.kind.path).inc(
                    bad - self._bad[kind]
                )
                self._bad[kind] = bad


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return


class Replica:
    """One replica of the live scheduler: with a Lease, it schedules only while it leads —
    a new :class:`LiveScheduler` (a fresh list of the cluster) each time it becomes
    leader, stopped as soon as it cannot renew — and waits as a standby otherwise."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: ServeOptions,
        lease: LeaseConfig | None,
    ) -> None:
        self.http, self.options, self.lease = http, options, lease
        self.metrics = Metrics(options.config.policy, options.price_sheet)
        self.elector = LeaderElector(http, lease) if lease is not None else None
        self.live: LiveScheduler | None = None
        self.terms = 0
        """Times this replica became leader."""

    @property
    def ready(self) -> bool:
        """A standby is ready; a leader once its cache holds the cluster."""
        live = self.live
        return live.ready if live is not None else self.elector is not None

    def stalled(self) -> float | None:
        """A leader whose loop stalled (``/healthz``); a standby never is."""
        live = self.live
        return live.stalled() if live is not None else None

    async def run(self, stop: asyncio.Event) -> None:
        if self.elector is None:
            self.live = LiveScheduler(self.http, self.options, metrics=self.metrics)
            await self.live.run(stop)
            return
        elector = self.elector
        while not stop.is_set() and await elector.acquire(stop):
            self.terms += 1
            lost, work = asyncio.Event(), asyncio.Event()
            self.live = LiveScheduler(
                self.http, self.options, may_act=elector.may_act, metrics=self.metrics
            )
            holding = asyncio.create_task(elector.hold(stop, lost))
            working = asyncio.create_task(self.live.run(work))
            try:
                await _first(stop, lost)
            except asyncio.CancelledError:  # killed: nothing of this replica goes on
                holding.cancel()
                working.cancel()
                raise
            work.set()
            await working
            holding.cancel()
            self.live = None
            self.metrics.standby()
        # A clean stop gives the Lease up. A killed replica (this task cancelled) does not
        # get here: as after a crash, the next leader waits out the lease, by when every
        # request the killed one had sent has landed.
        await elector.release()


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
