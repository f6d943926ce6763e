"""The live scheduler: watches in, cycles over the cluster cache, bindings and evictions out.

One event loop holds the API side: a :class:`~gpufleet.kube.watch.Reflector` per kind feeds
:class:`~gpufleet.kube.objects.ObjectStore`, whose events wait in a buffer. A cycle starts
when events came (after a short batching wait) or when the period passes (time-based rules:
min-runtime, starvation, stale gangs, assumed bindings past their deadline); the buffer is
applied to the cache, and the cycle (:class:`~gpufleet.scheduler.session.Scheduler`, pure
and synchronous) runs in a worker thread, so the loop keeps reading watches meanwhile.
Nothing touches the cache while a cycle runs: events arriving then wait for the next.

What a cycle decided is written back (``bind.py``):

* a binding is assumed in the cache by the cycle itself, then posted; a pod that is bound
  stays assumed until its watch event confirms it. A bind that fails is forgotten (its
  capacity given back) and the pod backs off as kube-scheduler's queue does — 1 s, doubled
  per failure up to 10 s — held out of cycles meanwhile, so a pod that can never be bound
  cannot take capacity every cycle. A bind lost to another scheduler, or of a pod that is
  gone, is forgotten and the watch tells the truth;
* a gang's pods are bound in order; when one fails, the rest of the gang is not bound this
  cycle (forgotten with it) and the gang waits. Pods of it already bound stay bound — the
  API has no unbind — so the gang runs below ``minMember``, and stale-gang release evicts
  them if it cannot be completed within the grace period;
* a binding onto capacity that this cycle's evictions free (*pipelined*) is not posted: the
  pod gets ``status.nominatedNodeName`` and is placed by a later cycle once its victims are
  gone;
* victims go through the Eviction API; one a disruption budget refuses stays, and the plan
  that needed it is dropped (its assumed bindings forgotten);
* a pending pod gets ``PodScheduled=False``, reason ``Unschedulable``, with the message
  ``gpufleet explain`` would print, written through ``pods/status`` when it changes.

``dry_run`` writes nothing: what would be bound and evicted is logged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from gpufleet.compose import new_cache
from gpufleet.kube.bind import Outcome, PodRef, Reply, bind, evict
from gpufleet.kube.events import EventRecorder, Regarding
from gpufleet.kube.leader import LeaderElector, LeaseConfig
from gpufleet.kube.metrics import Metrics
from gpufleet.kube.objects import KINDS, Changes, ObjectStore, Problem
from gpufleet.kube.watch import Kind, Reflector
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.cycle import CycleConfig
from gpufleet.scheduler.session import Scheduler

if TYPE_CHECKING:
    from gpufleet.scheduler.events import Event
    from gpufleet.scheduler.outcome import Binding, CycleResult

log = logging.getLogger("gpufleet.serve")

API = {
    "Node": ("v1", "nodes"),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses"),
    "Queue": ("gpufleet.io/v1alpha1", "queues"),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1", "podgroups"),
    "Topology": ("gpufleet.io/v1alpha1", "topologies"),
    "Pod": ("v1", "pods"),
}
"""Each kind of :data:`~gpufleet.kube.objects.KINDS`: its apiVersion and resource."""

PATHS = {
    kind: f"/api/{version}/{plural}" if "/" not in version else f"/apis/{version}/{plural}"
    for kind, (version, plural) in API.items()
}
"""Where each kind is listed and watched (all namespaces)."""

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0
"""kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds."""


@dataclass(frozen=True, slots=True)
class ServeOptions:
    config: CycleConfig = field(default_factory=CycleConfig)
    scheduler_name: str = "gpufleet"
    period_s: float = 1.0
    """A cycle at least this often, for the rules that depend on time."""
    batch_s: float = 0.05
    """How long a cycle waits after the first event, to take the events with it."""
    binds_at_once: int = 16
    dry_run: bool = False
    seed: int = 0


@dataclass
class ServeStats:
    cycles: int = 0
    bound: int = 0
    bind_failures: int = 0
    lost: int = 0
    evicted: int = 0
    evictions_refused: int = 0
    problems: list[Problem] = field(default_factory=list)
    cycle_errors: int = 0


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
        self.store = ObjectStore(schedulers=(self.options.scheduler_name,))
        self.cache = new_cache(self.options.config, strict=False)
        self._conflicts: set[str] = set()
        """Conflicts of the cache already reported."""
        self.scheduler: Scheduler | None = None
        """Made at the first cycle with nodes (a cluster state needs one)."""
        self.reflectors = [
            Reflector(http, Kind(kind, PATHS[kind]), self._sink(kind)) for kind in KINDS
        ]
        self.buffer: list[Event] = []
        self.wake = asyncio.Event()
        self.waiting: dict[str, set[str]] = {}
        """Nominated pods held until the victims evicted for them are deleted."""
        self.backoff: dict[str, tuple[float, float]] = {}
        """Pods whose bind failed: when they may be tried again, and the next wait."""
        self.conditions: dict[str, str] = {}
        """The PodScheduled=False message last written per pod."""
        self.stats = ServeStats()
        self.metrics = metrics or Metrics(self.options.config.policy)
        self.events = EventRecorder(http, clock=clock)
        self._unreported: list[Problem] = []
        self._lists = {r.kind.kind: 0 for r in self.reflectors}

    @property
    def ready(self) -> bool:
        """Every kind has been listed once (``/readyz``)."""
        return all(r.synced.is_set() for r in self.reflectors)

    def _sink(self, kind: str) -> Callable[[str, Any], None]:
        def sink(type_: str, obj: Any) -> None:
            self._take(self.store.apply(type_, kind, obj))  # type: ignore[arg-type]

        return sink

    def _take(self, changes: Changes) -> None:
        self.buffer.extend(changes.events)
        for problem in changes.problems:
            log.warning("cannot read %s %s: %s", problem.kind, problem.name, problem.message)
            self.stats.problems.append(problem)
            self._unreported.append(problem)
        if changes.events:
            self.wake.set()

    async def run(self, stop: asyncio.Event) -> None:
        """Watch and schedule until ``stop`` is set."""
        watches = [asyncio.create_task(r.run(stop)) for r in self.reflectors]
        try:
            while not stop.is_set() and not self.ready:
                await _wait(stop, 0.05)
            while not stop.is_set():
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
        now = self.clock()
        self._release_holds(now)
        self.wake.clear()
        events, self.buffer = self.buffer, []
        self.cache.apply_all(events)
        if not self.cache.objects["Node"]:
            return None
        if self.scheduler is None:
            rng = np.random.default_rng(self.options.seed)
            self.scheduler = Scheduler(self.cache, self.options.config, rng=rng)
        self.cache.expire(now)
        started = time.perf_counter()
        result = await asyncio.to_thread(self.scheduler.run, now)
        self.stats.cycles += 1
        await self._write(result, now)
        self._measure(result, time.perf_counter() - started)
        return result

    def _measure(self, result: CycleResult, seconds: float) -> None:
        self.metrics.cycle(result, seconds, self.cache)
        self.metrics.pending.labels("backoff").set(len(self.store.held))
        for reflector in self.reflectors:
            kind, lists = reflector.kind.kind, reflector.stats.lists
            if lists > 1 and lists > self._lists[kind]:
                self.metrics.watch_restarts.labels(kind).inc(lists - max(self._lists[kind], 1))
            self._lists[kind] = lists

    # -- writing a cycle's result -------------------------------------------------------

    async def _write(self, result: CycleResult, now: float) -> None:
        if self.options.dry_run or not self.may_act():
            for b in result.bindings:
                log.info("would bind %s to %s (gpus %s)", b.pod, b.node, b.gpus)
            for e in result.evictions:
                log.info("would evict %s (%s for %s)", e.pod, e.action, e.for_)
            for b in result.bindings:
                self.cache.forget(b.pod)
            for e in result.evictions:
                self.cache.keep(e.pod)
            return
        accepted = await self._evict(result)
        await self._bind(result, now)
        for key in accepted:  # after the bindings that wait for them were taken back
            self.cache.terminating(key)  # a victim holds its GPUs until it is gone
        await self._conditions(result)
        await self._report_problems()
        await self._report_conflicts()

    async def _report_conflicts(self) -> None:
        """Bound pods that contradict their node (the cache fenced it): one event each."""
        for key, message in self.cache.conflicts.items():
            if key not in self._conflicts:
                log.warning("conflict: %s", message)
                await self.events.record(
                    self._regarding(key), "Warning", "Conflict", "Accounting", message
                )
        self._conflicts = set(self.cache.conflicts)

    async def _report_problems(self) -> None:
        problems, self._unreported = self._unreported, []
        for p in problems:
            regarding = Regarding(p.kind, p.namespace or "", p.name, p.uid, API[p.kind][0])
            await self.events.record(regarding, "Warning", "FailedToRead", "Reading", p.message)

    async def _evict(self, result: CycleResult) -> list[str]:
        """Post the cycle's evictions; the victims the API server accepted to evict."""
        accepted: list[str] = []
        for eviction in result.evictions:
            if not self.may_act():
                self.cache.keep(eviction.pod)
                continue
            reply = await evict(self.http, self._ref(eviction.pod))
            if reply.outcome in (Outcome.EVICTED, Outcome.GONE):
                if reply.outcome is Outcome.EVICTED:
                    accepted.append(eviction.pod)
                self.stats.evicted += 1
                log.info("evicted %s (%s for %s)", eviction.pod, eviction.action, eviction.for_)
                note = f"Preempted by {eviction.for_} ({eviction.action})"
                await self.events.record(
                    self._regarding(eviction.pod), "Normal", "Preempted", "Preempting", note
                )
                continue
            self.stats.evictions_refused += 1
            log.info("eviction of %s refused: %s", eviction.pod, reply.detail)
            self.cache.keep(eviction.pod)
        return accepted

    async def _bind(self, result: CycleResult, now: float) -> None:
        gate = asyncio.Semaphore(self.options.binds_at_once)
        by_gang: dict[str, list[Binding]] = {}
        evicted = {e.pod for e in result.evictions}
        for binding in result.bindings:
            if binding.pod not in self.cache.assumed:
                continue  # its plan was dropped (an eviction refused): nothing to bind
            if binding.pod in evicted:
                # A pod consolidation moves: live, it is evicted and its controller makes it
                # anew; the pod itself is never bound again.
                self.cache.forget(binding.pod)
                continue
            pod = self.cache.pods.get(binding.pod)
            by_gang.setdefault(pod.gang if pod is not None else binding.pod, []).append(binding)
        victims: dict[str, set[str]] = {}
        for eviction in result.evictions:
            victims.setdefault(eviction.for_, set()).add(eviction.pod)
        freeing = {
            self.cache.pods[v].node for vs in victims.values() for v in vs if v in self.cache.pods
        }
        for gang, bindings in list(by_gang.items()):
            if any(b.pipelined or b.node in freeing for b in bindings):
                # The whole gang waits for its victims to be gone, on its nominated nodes.
                del by_gang[gang]
                for binding in bindings:
                    await self._wait_for_victims(binding, victims.get(gang, set()))

        async def in_order(bindings: list[Binding]) -> None:
            for i, binding in enumerate(bindings):
                async with gate:
                    if not self.may_act():  # no longer leader: bind nothing more
                        for rest in bindings[i:]:
                            self.cache.forget(rest.pod)
                        return
                    reply = await bind(
                        self.http, self._ref(binding.pod), binding.node, binding.gpus
                    )
                if not self._bound(binding, reply, now):
                    for rest in bindings[i + 1 :]:
                        self.cache.forget(rest.pod)
                    return
                note = f"Successfully assigned {binding.pod} to {binding.node}"
                told.append(
                    self.events.record(
                        self._regarding(binding.pod), "Normal", "Scheduled", "Binding", note
                    )
                )

        told: list[Coroutine[Any, Any, None]] = []
        await asyncio.gather(*(in_order(b) for b in by_gang.values()))
        await asyncio.gather(*told)  # the Scheduled events, once every bind is out

    def _bound(self, binding: Binding, reply: Reply, now: float) -> bool:
        """Take in the reply to one bind; whether the gang's next pods may be bound."""
        if reply.outcome is Outcome.BOUND:
            self.stats.bound += 1
            self.backoff.pop(binding.pod, None)
            self.conditions.pop(self._ref(binding.pod).uid or binding.pod, None)
            log.info("bound %s to %s", binding.pod, binding.node)
            return True
        self.cache.forget(binding.pod)
        if reply.outcome is Outcome.FAILED:
            self.stats.bind_failures += 1
            self.metrics.bind_failures.inc()
            wait = self.backoff.get(binding.pod, (0.0, INITIAL_BACKOFF_S))[1]
            self.backoff[binding.pod] = (now + wait, min(wait * 2, MAX_BACKOFF_S))
            reason = f"BackOff: binding to {binding.node} failed ({reply.detail})"
            self._take(self.store.hold(binding.pod, reason))
            log.warning("bind of %s to %s failed: %s", binding.pod, binding.node, reply.detail)
        else:
            self.stats.lost += 1
            log.info("bind of %s: %s %s", binding.pod, reply.outcome.value, reply.detail)
        return False

    async def _wait_for_victims(self, binding: Binding, victims: set[str]) -> None:
        """A binding onto capacity that victims still hold: the pod is nominated to the node
        and held out of cycles until the victims' deletions are seen (so that no cycle
        evicts again for it meanwhile, as kube-scheduler does not preempt for a pod whose
        nominated node has terminating victims)."""
        self.cache.forget(binding.pod)
        await self._nominate(binding)
        self.waiting[binding.pod] = set(victims)
        reason = f"waiting on node {binding.node} for the pods evicted for it to terminate"
        self._take(self.store.hold(binding.pod, reason))

    def _release_holds(self, now: float) -> None:
        """End the holds whose time came: backoffs past their wait, preemptors whose victims
        are gone (their events join the buffer the cycle applies)."""
        for key, (until, _) in list(self.backoff.items()):
            if until <= now and key in self.store.held:
                self._take(self.store.release(key))
            if key not in self.cache.pods:
                del self.backoff[key]  # deleted meanwhile
        for key, victims in list(self.waiting.items()):
            if not any(v in self.cache.pods for v in victims):
                del self.waiting[key]
                self._take(self.store.release(key))

    async def _nominate(self, binding: Binding) -> None:
        ref = self._ref(binding.pod)
        patch = {"status": {"nominatedNodeName": binding.node}}
        await self._patch_status(ref, patch, "application/merge-patch+json")

    async def _patch_status(self, ref: PodRef, patch: dict[str, Any], kind: str) -> bool:
        """Write ``patch`` to the pod's status; False (logged) when the server did not take
        it — a later cycle writes again."""
        try:
            response = await self.http.patch(
                f"{ref.path}/status", json=patch, headers={"Content-Type": kind}
            )
        except httpx.HTTPError as exc:
            log.warning("status of %s/%s: %s", ref.namespace, ref.name, exc)
            return False
        if response.status_code >= 300:
            log.warning("status of %s/%s: %s", ref.namespace, ref.name, response.status_code)
            return False
        return True

    async def _conditions(self, result: CycleResult) -> None:
        """``PodScheduled=False`` with gpufleet's reason on each pending pod whose message
        changed (remembered per pod uid, and only once the server took it)."""
        for pending in result.pending:
            message = why_text(pending.why)
            ref = self._ref(pending.pod)
            if self.conditions.get(ref.uid or pending.pod) == message:
                continue
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": message,
                "lastTransitionTime": _rfc3339(self.clock()),
            }
            await self.events.record(
                self._regarding(pending.pod), "Warning", "FailedScheduling", "Scheduling", message
            )
            patch = {"status": {"conditions": [condition]}}
            if await self._patch_status(ref, patch, "application/strategic-merge-patch+json"):
                self.conditions[ref.uid or pending.pod] = message

    def _regarding(self, key: str) -> Regarding:
        ref = self._ref(key)
        return Regarding("Pod", ref.namespace, ref.name, ref.uid)

    def _ref(self, key: str) -> PodRef:
        namespace, name = key.split("/", 1)
        pod = self.cache.pods.get(key)
        return PodRef(namespace, name, pod.uid if pod is not None else "")


async def _wait(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return


def _rfc3339(moment: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


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
        self.metrics = Metrics(options.config.policy)
        self.elector = LeaderElector(http, lease) if lease is not None else None
        self.live: LiveScheduler | None = None
        self.terms = 0
        """Times this replica became leader."""

    @property
    def ready(self) -> bool:
        """A standby is ready; a leader once its cache holds the cluster."""
        live = self.live
        return live.ready if live is not None else self.elector is not None

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
        # A clean stop gives the Lease up. A killed replica (this task cancelled) does not
        # get here: as after a crash, the next leader waits out the lease, by when every
        # request the killed one had sent has landed.
        await elector.release()


async def _first(*events: asyncio.Event) -> None:
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    for waiter in waiters:
        waiter.cancel()
