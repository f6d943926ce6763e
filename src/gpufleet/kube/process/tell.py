"""What the live scheduler tells the cluster besides bindings and evictions: each pending
pod's ``PodScheduled=False`` condition (``gpufleet explain``'s words, written through
``pods/status`` when they change; kept ``lastTransitionTime`` while it stays ``False``),
the events of objects it cannot read and of pods that contradict their node, and in a dry
run what it would do (``WouldSchedule``, ``WouldEvict``). Nothing is written by a replica
that does not lead, and nothing kept per pod outlives the pod.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import httpx

from gpufleet.kube.process.logs import decide
from gpufleet.kube.read.kinds import API, object_kind
from gpufleet.kube.transport import send_json
from gpufleet.kube.write.bind import PodRef
from gpufleet.kube.write.recorder import EventRecorder, Regarding, rfc3339
from gpufleet.load.objects.reader import is_mapping

if TYPE_CHECKING:
    from gpufleet.kube.process.options import ServeOptions
    from gpufleet.kube.read.objects import ObjectStore
    from gpufleet.kube.read.translated import Problem
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")


class Teller:
    """What the live scheduler tells besides bindings and evictions (module docstring):
    it reads the store and the cache, and remembers what it told per pod."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: ServeOptions,
        store: ObjectStore,
        cache: ClusterCache[Components],
        events: EventRecorder,
        *,
        clock: Callable[[], float],
        may_act: Callable[[], bool],
    ) -> None:
        self.http, self.options, self.store, self.cache = http, options, store, cache
        self.events, self.clock, self.may_act = events, clock, may_act
        self.conditions: dict[str, str] = {}
        """The PodScheduled=False message last written per pod."""
        self.shadowed: dict[str, tuple[str, str, str]] = {}
        """What a dry run last said it would do, per pod (reason, action, note of its event)."""
        self._conflicts: set[str] = set()
        """Conflicts of the cache already reported."""
        self._unreported: list[Problem] = []

    def problem(self, problem: Problem) -> None:
        """An object that could not be read: its event is written after the next cycle."""
        self._unreported.append(problem)

    def drop_problems(self) -> None:
        """Forget the problems not yet told (logged when read; a dry run tells none)."""
        self._unreported.clear()

    async def shadow(self, result: CycleResult) -> None:
        """What a dry run (or a replica that does not lead) would do: logged, and in a dry
        run told to the pod as a Normal event (``WouldSchedule``, ``WouldEvict``) unless
        ``dry_run_events`` is off — each once per change of what would be done, since every
        cycle decides again; then the cycle's assumptions are taken back."""
        now: dict[str, tuple[str, str, str]] = {}
        for b in result.bindings:
            gpus = f" (GPUs {','.join(str(g) for g in b.gpus)})" if b.gpus else ""
            now[b.pod] = ("WouldSchedule", "Binding", f"would assign {b.pod} to {b.node}{gpus}")
            if self.shadowed.get(b.pod) != now[b.pod]:
                note = f"would bind {b.pod} to {b.node}{gpus}"
                decide(note, action="would-bind", pod=b.pod, node=b.node, reason="fits")
        for e in result.evictions:
            why = f"{e.action} for {e.for_}"
            now[e.pod] = ("WouldEvict", "Preempting", f"would evict {e.pod}: {why}")
            if self.shadowed.get(e.pod) != now[e.pod]:
                note = f"would evict {e.pod} ({why})"
                node = self.node(e.pod)
                decide(note, action="would-evict", pod=e.pod, node=node, reason=why, for_=e.for_)
        for b in result.bindings:
            self.cache.forget(b.pod)
        for e in result.evictions:
            self.cache.keep(e.pod)
        if self.options.dry_run and self.options.dry_run_events and self.may_act():
            for key, told in sorted(now.items()):
                if self.shadowed.get(key) != told:
                    reason, action, note = told
                    await self.events.record(self.regarding(key), "Normal", reason, action, note)
        self.shadowed = now

    def forget_gone(self) -> None:
        """Drop what is remembered of pods that no longer exist, and event series past
        their window: nothing kept per pod outlives it."""
        raw = self.store.raw["Pod"]
        alive = set(raw) | {str((p.get("metadata") or {}).get("uid")) for p in raw.values()}
        for key in [k for k in self.conditions if k not in alive]:
            del self.conditions[key]
        self.events.prune(self.clock())

    async def report_conflicts(self) -> None:
        """Bound pods that contradict their node (the cache fenced it): one event each."""
        for key, message in self.cache.conflicts.items():
            if key not in self._conflicts:
                log.warning("conflict: %s", message)
                await self.events.record(
                    self.regarding(key), "Warning", "Conflict", "Accounting", message
                )
        self._conflicts = set(self.cache.conflicts)

    async def report_problems(self) -> None:
        problems, self._unreported = self._unreported, []
        for p in problems:
            regarding = Regarding(
                object_kind(p.kind), p.namespace or "", p.name, p.uid, API[p.kind][0]
            )
            await self.events.record(regarding, "Warning", "FailedToRead", "Reading", p.message)
            if p.kind == "Pod" and self._pending_of_ours(p.key):
                # It cannot be scheduled until it is fixed: its own status says why, too.
                ref = PodRef(p.namespace or "default", p.name, p.uid)
                if self.conditions.get(p.uid or p.key) != p.message:
                    await self.condition(ref, p.message)

    def _pending_of_ours(self, key: str) -> bool:
        raw = self.store.raw["Pod"].get(key) or {}
        spec = raw.get("spec") or {}
        return spec.get("schedulerName") in self.store.schedulers and not spec.get("nodeName")

    async def patch_status(self, ref: PodRef, patch: dict[str, Any], kind: str) -> bool:
        """Write ``patch`` to the pod's status; False (logged) when the server did not take
        it — a later cycle writes again — or when this replica no longer leads."""
        if not self.may_act():
            return False
        try:
            response = await send_json(self.http, "PATCH", f"{ref.path}/status", patch, kind)
        except httpx.HTTPError as exc:
            log.warning("status of %s/%s: %s", ref.namespace, ref.name, exc)
            return False
        if response.status_code >= 300:
            log.warning("status of %s/%s: %s", ref.namespace, ref.name, response.status_code)
            return False
        return True

    async def tell_pending(self, result: CycleResult, reasons: dict[str, str]) -> None:
        """``PodScheduled=False`` with gpufleet's reason on each pending pod whose message
        changed (remembered per pod uid, and only once the server took it)."""
        for pending in result.pending:
            message = reasons[pending.pod]
            ref = self.ref(pending.pod)
            if self.conditions.get(ref.uid or pending.pod) == message:
                continue
            await self.events.record(
                self.regarding(pending.pod), "Warning", "FailedScheduling", "Scheduling", message
            )
            await self.condition(ref, message)

    async def condition(self, ref: PodRef, message: str) -> None:
        """Write ``PodScheduled=False``, reason ``Unschedulable``, with ``message`` (and
        remember it per pod once the server took it). As kube-scheduler's, the condition
        keeps its ``lastTransitionTime`` while its status stays ``False``."""
        key = f"{ref.namespace}/{ref.name}"
        since = rfc3339(self.clock())
        raw = self.store.raw["Pod"].get(key)
        status = raw.get("status") if is_mapping(raw) else None
        conditions = status.get("conditions") if is_mapping(status) else None
        for old in conditions if isinstance(conditions, list) else []:
            if not is_mapping(old) or not isinstance(old.get("lastTransitionTime"), str):
                continue  # a condition not as the API writes one: the time is now
            if old.get("type") == "PodScheduled" and old.get("status") == "False":
                since = old["lastTransitionTime"] or since
        condition = {
            "type": "PodScheduled",
            "status": "False",
            "reason": "Unschedulable",
            "message": message,
            "lastTransitionTime": since,
        }
        patch = {"status": {"conditions": [condition]}}
        if await self.patch_status(ref, patch, "application/strategic-merge-patch+json"):
            self.conditions[ref.uid or f"{ref.namespace}/{ref.name}"] = message

    def regarding(self, key: str) -> Regarding:
        ref = self.ref(key)
        return Regarding("Pod", ref.namespace, ref.name, ref.uid)

    def ref(self, key: str) -> PodRef:
        namespace, name = key.split("/", 1)
        pod = self.cache.pods.get(key)
        return PodRef(namespace, name, pod.uid if pod is not None else "")

    def node(self, key: str) -> str | None:
        pod = self.cache.pods.get(key)
        return pod.node if pod is not None else None
