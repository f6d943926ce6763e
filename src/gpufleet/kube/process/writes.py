"""Writing a cycle's result to the API server: bindings, evictions, nominations, conditions
and events (the live scheduler's side that writes, ``serve.py`` the side that reads).

What a cycle decided is written back (``bind.py``):

* a binding is assumed in the cache by the cycle itself, then posted — after the volumes
  of its unbound PersistentVolumeClaims are written (a chosen volume's ``claimRef``, or the
  claim's selected node, ``volumes.py``, as kube-scheduler's VolumeBinding writes them in
  PreBind) and its ResourceClaims (their allocation and ``reservedFor``, ``claims.py``), as
  kube-scheduler's DRA plugin writes them in PreBind; a pod that is bound
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
  ``gpufleet explain`` would print, written through ``pods/status`` when it changes
  (``tell.py``, with the events of unreadable objects and a dry run's);
* each PodGroup of gpufleet's gets its status and, while its gang runs below
  ``minMember``, its ``gpufleet.io/stale-since`` (``podgroups.py``); each Queue its status
  (``queues.py``).

Each decision is logged as one line with its facts as fields (``logs.py``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpufleet.kube.cpu import phase
from gpufleet.kube.process.logs import decide
from gpufleet.kube.write.bind import Outcome, Reply, bind, evict
from gpufleet.kube.write.claims import ClaimWrite, release, reserve
from gpufleet.kube.write.recorder import Told
from gpufleet.kube.write.volumes import bind_volumes
from gpufleet.kube.write.workers import at_most
from gpufleet.model.volumes import VolumeClaim
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.state.changes import ClaimObject

if TYPE_CHECKING:
    import httpx

    from gpufleet.kube.process.logs import PendingLog
    from gpufleet.kube.process.metrics import Metrics, PodLatency
    from gpufleet.kube.process.options import ServeOptions, ServeStats
    from gpufleet.kube.process.tell import Teller
    from gpufleet.kube.read.objects import ObjectStore
    from gpufleet.kube.read.translated import Changes
    from gpufleet.kube.write.podgroups import PodGroupStatus
    from gpufleet.kube.write.queues import QueueStatus
    from gpufleet.kube.write.recorder import EventRecorder
    from gpufleet.scheduler.api.outcome import Binding, CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.cycle.session import Scheduler
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

INITIAL_BACKOFF_S = 1.0
MAX_BACKOFF_S = 10.0
"""kube-scheduler's podInitialBackoffSeconds and podMaxBackoffSeconds."""


class ResultWriter:
    """What :class:`~gpufleet.kube.process.live.LiveScheduler` does with a cycle's result
    (module docstring). It holds the pods that wait (a backoff, or victims to be gone); what
    it holds out of cycles and lets back in goes to ``take``, the live scheduler's buffer."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: ServeOptions,
        store: ObjectStore,
        cache: ClusterCache[Components],
        teller: Teller,
        *,
        clock: Callable[[], float],
        may_act: Callable[[], bool],
        take: Callable[[Changes], None],
        stats: ServeStats,
        metrics: Metrics,
        events: EventRecorder,
        podgroups: PodGroupStatus,
        queues: QueueStatus,
        latency: PodLatency,
        pending_log: PendingLog,
    ) -> None:
        self.http, self.options, self.store, self.cache = http, options, store, cache
        self.teller, self.clock, self.may_act, self._take = teller, clock, may_act, take
        self.stats, self.metrics, self.events = stats, metrics, events
        self.podgroups, self.queues = podgroups, queues
        self.latency, self.pending_log = latency, pending_log
        self.waiting: dict[str, set[str]] = {}
        """Nominated pods held until the victims evicted for them are deleted."""
        self.backoff: dict[str, tuple[float, float]] = {}
        """Pods whose bind failed: when they may be tried again, and the next wait."""
        self.accepted: set[str] = set()
        """The evictions of the cycle last written that the API server accepted."""

    async def write(self, result: CycleResult, now: float, scheduler: Scheduler | None) -> None:
        self.accepted = set()
        reasons = {p.pod: why_text(p.why) for p in result.pending}
        self.pending_log.cycle(list(reasons.items()))
        self.teller.forget_gone()
        if self.options.dry_run or not self.may_act():
            await self.teller.shadow(result)
            self.teller.drop_problems()  # logged when read; a dry run writes no event of them
            return
        with phase("evict"):
            accepted = await self._evict(result)
        self.accepted = set(accepted)
        with phase("bind"):
            await self._bind(result, now)
        for key in accepted:  # after the bindings that wait for them were taken back
            self.cache.terminating(key)  # a victim holds its GPUs until it is gone
        with phase("status"):
            await self._report(result, reasons, scheduler)

    async def _report(
        self, result: CycleResult, reasons: dict[str, str], scheduler: Scheduler | None
    ) -> None:
        """Tell the pods that wait why, and write the PodGroups' and Queues' status."""
        await self.teller.tell_pending(result, reasons)
        await self.podgroups.write(
            self.store, self.cache, self._gang_reasons(reasons), self.may_act
        )
        if scheduler is not None:
            await self.podgroups.mark_stale(self.store, scheduler.stale, self.may_act)
        await self.queues.write(self.store, self.cache, result, self.may_act)
        await self.teller.report_problems()
        await self.teller.report_conflicts()

    async def _evict(self, result: CycleResult) -> list[str]:
        """Post the cycle's evictions; the victims the API server accepted to evict."""
        accepted: list[str] = []
        pods = self.cache.pods
        queue_of = result.queues_served(pods)  # whom a reclaim served
        for eviction in result.evictions:
            if not self.may_act():
                self.cache.keep(eviction.pod)
                continue
            reply = await evict(self.http, self.teller.ref(eviction.pod))
            if reply.outcome in (Outcome.EVICTED, Outcome.GONE):
                if reply.outcome is Outcome.EVICTED:
                    accepted.append(eviction.pod)
                self.stats.evicted += 1
                note = f"evicted {eviction.pod} ({eviction.action} for {eviction.for_})"
                reason = f"{eviction.action} for {eviction.for_}"
                decide(
                    note,
                    action=eviction.action,
                    pod=eviction.pod,
                    node=self.teller.node(eviction.pod),
                    reason=reason,
                    for_=eviction.for_,
                )
                note = f"Preempted by {eviction.for_} ({eviction.action})"
                if eviction.action == "reclaim" and eviction.for_ in queue_of:
                    note = (
                        f"Preempted by {eviction.for_} (reclaim by queue {queue_of[eviction.for_]})"
                    )
                await self.events.record(
                    self.teller.regarding(eviction.pod), "Normal", "Preempted", "Preempting", note
                )
                continue
            self.stats.evictions_refused += 1
            note = f"eviction of {eviction.pod} refused: {reply.detail}"
            decide(
                note,
                action="evict-refused",
                pod=eviction.pod,
                node=self.teller.node(eviction.pod),
                reason=reply.detail,
                for_=eviction.for_,
            )
            self.cache.keep(eviction.pod)
        return accepted

    async def _bind(self, result: CycleResult, now: float) -> None:
        by_gang: dict[str, list[Binding]] = {}
        evicted = {e.pod for e in result.evictions}
        moved: list[str] = []
        for binding in result.bindings:
            if binding.pod not in self.cache.assumed:
                continue  # its plan was dropped (an eviction refused): nothing to bind
            if binding.pod in evicted:
                # A pod consolidation moves: live, it is evicted and its controller makes it
                # anew; the pod itself is never bound again.
                moved.append(binding.pod)
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
        self.cache.forget(*moved)  # each holds its old GPUs until gone, once no binding does

        async def in_order(bindings: list[Binding]) -> None:
            for i, binding in enumerate(bindings):
                if not self.may_act():  # no longer leader: bind nothing more
                    for rest in bindings[i:]:
                        self.cache.forget(rest.pod)
                    return
                reply = await self._bind_one(binding, result)
                if not self._bound(binding, reply, now):
                    for rest in bindings[i + 1 :]:
                        self.cache.forget(rest.pod)
                    return
                note = f"Successfully assigned {binding.pod} to {binding.node}"
                if binding.device:
                    note += f" (each GPU a {binding.device})"
                told.append(
                    (self.teller.regarding(binding.pod), "Normal", "Scheduled", "Binding", note)
                )

        told: list[Told] = []
        # each gang bound in order by one of binds_at_once workers: at most that many binds
        # in flight, without a task and a semaphore wait per gang
        await at_most(
            self.options.binds_at_once, in_order, list(by_gang.values()), what="gang's binds"
        )
        await self.events.record_all(told)  # the Scheduled events, once every bind is out

    async def _bind_one(self, binding: Binding, result: CycleResult) -> Reply:
        """Write the pod's volumes (``volumes.py``) and claims (``claims.py``), then post its
        binding; what a failed bind wrote of its claims is taken back."""
        ref = self.teller.ref(binding.pod)
        if binding.volumes:
            claims = self.cache.objects["PersistentVolumeClaim"]
            uids = {
                k: c.uid for k in binding.volumes if isinstance(c := claims.get(k), VolumeClaim)
            }
            failed = await bind_volumes(self.http, binding.volumes, binding.node, uids)
            if failed:
                return Reply(Outcome.FAILED, failed)
        writes = self._claim_writes(binding, result)
        reserved, why = await reserve(self.http, ref, writes, self.clock())
        if why:
            reply = Reply(Outcome.FAILED, why)
        else:
            reply = await bind(self.http, ref, binding.node, binding.gpus)
        if reply.outcome in (Outcome.FAILED, Outcome.GONE) and reserved:
            # Only a bind known not to have been applied gives its claims back: one of
            # unknown outcome may have been, and one lost to another scheduler runs the pod
            # (whose claims it may have reserved itself).
            for failed in await release(self.http, ref, reserved):
                log.warning("claims of %s not taken back: %s", binding.pod, failed)
        return reply

    def _claim_writes(self, binding: Binding, result: CycleResult) -> list[ClaimWrite]:
        """What each claim of ``binding`` must read: the allocation the cycle made, or
        (allocated before, or held by the cache for an earlier cycle) its devices."""
        if not binding.claims:
            return []
        allocations = self.cache.ledger().book.allocations
        claims = self.cache.objects["ResourceClaim"]
        writes = []
        for key, results in sorted(binding.claims.items()):
            seen = claims.get(key)
            uid = seen.uid if isinstance(seen, ClaimObject) else ""
            status = result.claim_status.get(key)
            if status is not None:
                writes.append(ClaimWrite(key, status.results, status.node, status.config, uid))
                continue
            known = allocations.get(key)
            node = known.node if known is not None else None
            writes.append(ClaimWrite(key, results, node, uid=uid))
        return writes

    def _bound(self, binding: Binding, reply: Reply, now: float) -> bool:
        """Take in the reply to one bind; whether the gang's next pods may be bound."""
        if reply.outcome is Outcome.BOUND:
            self.stats.bound += 1
            self.backoff.pop(binding.pod, None)
            self.teller.conditions.pop(self.teller.ref(binding.pod).uid or binding.pod, None)
            self.latency.bound(binding.pod, self.clock(), self.metrics)
            note = f"bound {binding.pod} to {binding.node}"
            decide(note, action="bind", pod=binding.pod, node=binding.node, reason="bound")
            return True
        if reply.outcome is Outcome.UNKNOWN:
            # It may have been bound: it stays assumed (its GPUs and claims held) until its
            # watch event says so, or the assumption's deadline passes and it is tried again.
            self.stats.unknown += 1
            log.warning(
                "bind of %s to %s: outcome unknown (%s)", binding.pod, binding.node, reply.detail
            )
            return False
        self.cache.forget(binding.pod)
        if reply.outcome is Outcome.FAILED:
            self.stats.bind_failures += 1
            self.metrics.bind_failures.inc()
            wait = self.backoff.get(binding.pod, (0.0, INITIAL_BACKOFF_S))[1]
            self.backoff[binding.pod] = (now + wait, min(wait * 2, MAX_BACKOFF_S))
            reason = f"BackOff: binding to {binding.node} failed ({reply.detail})"
            self._take(self.store.hold(binding.pod, reason))
            note = f"bind of {binding.pod} to {binding.node} failed: {reply.detail}"
            decide(
                note,
                action="bind-failed",
                pod=binding.pod,
                node=binding.node,
                reason=reply.detail,
                backoff=wait,
                level=logging.WARNING,
            )
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

    def release_holds(self, now: float) -> None:
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
        ref = self.teller.ref(binding.pod)
        patch = {"status": {"nominatedNodeName": binding.node}}
        await self.teller.patch_status(ref, patch, "application/merge-patch+json")

    def _gang_reasons(self, reasons: dict[str, str]) -> dict[str, str]:
        """Why each waiting gang waits: the reason of its first pending pod."""
        gangs: dict[str, str] = {}
        for key, reason in reasons.items():
            pod = self.cache.pods.get(key)
            gangs.setdefault(pod.gang if pod is not None else key, reason)
        return gangs
