"""Autoscaling, live: gpufleet plans the nodes, the cluster's own autoscaler adds and removes
them (``gpufleet serve --autoscale``; the bodies in ``kube/write/provisioning.py``).

After each cycle that wrote, :class:`LiveAutoscaler`:

1. **asks** — for the jobs the cycle left pending whose nodes are not asked for yet, the plan
   of :func:`~gpufleet.compose.plan_pending` (the same as ``gpufleet schedule --autoscale``:
   whole jobs, queue limits, the cheapest set of node types, nothing bought for a job that
   what runs frees within the provisioning delay) becomes one ProvisioningRequest per job,
   of class ``best-effort-atomic-scale-up`` with the job's PodTemplate, and the job's
   pods are marked as its consumers. Event ``TriggeredScaleUp`` on the job's first pod;
2. **follows** each request (read at most every :data:`POLL_S`), as Kueue's provisioning
   admission check does: ``Provisioned`` — the nodes come; ``Failed``, ``BookingExpired``
   or ``CapacityRevoked`` before the job runs, or the request deleted — it failed: what it
   held is let go, the request and its template are deleted, and the job asks again after
   a backoff of :data:`BACKOFF_BASE_S` doubled per failure up to :data:`BACKOFF_MAX_S`,
   at most :data:`BACKOFF_LIMIT` times more (Kueue's defaults), then no more (event
   ``FailedScaleUp`` each time, the last saying it gave up);
3. **holds** each node that appears for a request — created after it, carrying the chosen
   type's labels, held for no other job — by labelling it ``gpufleet.io/provisioned-for``
   until the job has as many as it was bought: no other job is placed there, so the job
   starts whole once its last node is Ready, and a job is bound only when its whole
   capacity is there (the cycle places gangs whole);
4. **lets go** once the job runs (every pod bound) or is gone: the labels come off, the
   request and template are deleted;
5. **protects** from scale-down the running pods whose eviction would lose all their
   work — a job that never checkpoints, or has not yet saved anything
   (:func:`~gpufleet.model.progress.last_saved`) — with ``safe-to-evict: "false"`` and
   ``karpenter.sh/do-not-disrupt``, and takes the protection off once the job has saved
   work (then an autoscaler's consolidation may move it, losing at most one checkpoint
   interval) or is over.

A write the server refuses is logged and tried again at the next cycle; one bad pod or node
never stops the rest. What was asked for lives in this object: a new leader starts without
it and finds its predecessor's requests by name (a create of an existing one reads it).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from gpufleet.compose import plan_pending
from gpufleet.kube.process.logs import decide
from gpufleet.kube.write import provisioning as pr
from gpufleet.model.node import NodeSpec
from gpufleet.model.progress import last_saved
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.scheduler.state.changes import Event

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import httpx

    from gpufleet.cost.autoscale import Purchase
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.kube.process.metrics import Metrics
    from gpufleet.kube.process.options import ServeOptions
    from gpufleet.kube.process.tell import Teller
    from gpufleet.kube.read.objects import ObjectStore
    from gpufleet.kube.write.bind import PodRef
    from gpufleet.kube.write.recorder import EventRecorder
    from gpufleet.model.supply import NodeOffer
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

POLL_S = 2.0
"""How often a request's status is read."""
BACKOFF_BASE_S = 60.0
BACKOFF_MAX_S = 1800.0
BACKOFF_LIMIT = 3
"""Kueue's ``retryStrategy`` defaults: a failed request is asked again after 60 s, doubled
per failure up to 30 minutes, 3 times at most."""
FAILED = ("Failed", "BookingExpired", "CapacityRevoked")
"""A request's conditions that end it before its job runs."""


@dataclass
class Asked:
    """One job's request in flight."""

    job: str
    namespace: str
    name: str
    attempt: int
    pool: str
    nodes: int
    selector: Mapping[str, str]
    since: float
    """When the API server created the request (epoch seconds, its clock)."""
    pods: list[str]
    held: list[str] = field(default_factory=list)
    provisioned: bool = False
    polled: float = -math.inf


@dataclass
class Backoff:
    failures: int
    until: float
    reason: str


def _stamp(value: object) -> float:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return math.inf


class LiveAutoscaler:
    """See the module docstring."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        options: ServeOptions,
        store: ObjectStore,
        cache: ClusterCache[Components],
        *,
        teller: Teller,
        events: EventRecorder,
        metrics: Metrics,
        sheet: PriceSheet,
        clock: Callable[[], float],
        backoff_base_s: float = BACKOFF_BASE_S,
    ) -> None:
        self.http, self.options, self.store, self.cache = http, options, store, cache
        self.teller, self.events, self.metrics, self.sheet = teller, events, metrics, sheet
        self.clock, self.backoff_base_s = clock, backoff_base_s
        self.offers: dict[str, NodeOffer] = {o.pool: o for o in options.offers}
        self.asked: dict[str, Asked] = {}
        self.backoff: dict[str, Backoff] = {}
        self.protected: dict[str, tuple[PodRef, tuple[str, ...]]] = {}
        """Pods gpufleet protected from scale-down, and the annotations it set on each, until
        it takes them off."""

    async def step(self, result: CycleResult, now: float) -> None:
        """What one cycle's result asks of the autoscaler (the module docstring's steps)."""
        members = self._members()
        await self._follow(now, members)
        await self.hold()
        await self._ask(result, now)
        await self._protect(now)
        self.metrics.protected_pods.set(len(self.protected))

    def _members(self) -> dict[str, list[PodInfo]]:
        if not self.asked:
            return {}
        out: dict[str, list[PodInfo]] = {job: [] for job in self.asked}
        for pod in self.cache.pods.values():
            if pod.gang in out:
                out[pod.gang].append(pod)
        return out

    # -- following requests ----------------------------------------------------------------

    async def _follow(self, now: float, members: Mapping[str, list[PodInfo]]) -> None:
        for job, asked in list(self.asked.items()):
            pods = members.get(job, [])
            if not pods or all(p.node is not None for p in pods):
                await self._end(asked, "ran" if pods else "gone")
                continue
            if now - asked.polled < POLL_S:
                continue
            asked.polled = now
            path = f"{pr.requests_path(asked.namespace)}/{asked.name}"
            found = await pr.read(self.http, path)
            if isinstance(found, str):
                log.warning("ProvisioningRequest %s/%s: %s", asked.namespace, asked.name, found)
                continue
            if found is None:
                await self._failed(asked, now, "the request was deleted")
                continue
            ended = next((c for kind in FAILED if (c := pr.condition(found, kind))), None)
            if ended is not None:
                why = f"{ended.get('type')}: {ended.get('reason', '')} {ended.get('message', '')}"
                await self._failed(asked, now, why.strip())
            elif not asked.provisioned and pr.condition(found, "Provisioned") is not None:
                asked.provisioned = True
                self.metrics.provisioning.labels(asked.pool, "provisioned").inc()
                decide(
                    f"ProvisioningRequest {asked.namespace}/{asked.name} provisioned",
                    action="provisioned",
                    pod=asked.pods[0] if asked.pods else asked.job,
                    reason=asked.pool,
                )

    async def _end(self, asked: Asked, how: str) -> None:
        """The job ran or is gone: its nodes are let go, its request deleted."""
        del self.asked[asked.job]
        self.backoff.pop(asked.job, None)
        await self._let_go(asked)
        decide(
            f"ProvisioningRequest {asked.namespace}/{asked.name} done: the job {how}",
            action="provisioning-done",
            pod=asked.job,
            reason=how,
        )

    async def _failed(self, asked: Asked, now: float, why: str) -> None:
        del self.asked[asked.job]
        await self._let_go(asked)
        for key in asked.pods:  # no longer a request's: an autoscaler may see them again
            await self._annotate(key, {pr.CONSUME_ANNOTATION: None, pr.CLASS_ANNOTATION: None})
        failures = asked.attempt
        wait = min(self.backoff_base_s * 2 ** (failures - 1), BACKOFF_MAX_S)
        self.backoff[asked.job] = Backoff(failures, now + wait, why)
        self.metrics.provisioning.labels(asked.pool, "failed").inc()
        if failures > BACKOFF_LIMIT:
            note = (
                f"ProvisioningRequest {asked.name} failed ({why}); gave up after "
                f"{failures} requests"
            )
        else:
            note = f"ProvisioningRequest {asked.name} failed ({why}); asking again in {wait:g}s"
        decide(note, action="provisioning-failed", pod=asked.job, reason=why, level=logging.WARNING)
        if asked.pods:
            await self.events.record(
                self.teller.regarding(asked.pods[0]),
                "Warning",
                "FailedScaleUp",
                "Provisioning",
                note,
            )

    async def _let_go(self, asked: Asked) -> None:
        for node in asked.held:
            done = await pr.merge(
                self.http, f"/api/v1/nodes/{node}", "labels", {PROVISIONED_FOR_LABEL: None}
            )
            if done is not True:
                log.warning("node %s keeps %s: %s", node, PROVISIONED_FOR_LABEL, done)
        asked.held = []
        for path in (pr.requests_path(asked.namespace), pr.templates_path(asked.namespace)):
            done = await pr.delete(self.http, f"{path}/{asked.name}")
            if done is not True:
                log.warning("%s/%s not deleted: %s", path, asked.name, done)

    # -- holding the nodes that come -------------------------------------------------------

    async def hold(self) -> None:
        """Label the nodes that came for a request in flight (step 3). Run before a cycle as
        well as after: a node held is held in the cache at once, as its watch event will
        say, so that the cycle that first sees it places no other job there."""
        wanting = [a for a in self.asked.values() if len(a.held) < a.nodes]
        if not wanting:
            return
        nodes = self.store.raw.get("Node", {})
        taken = {name for a in self.asked.values() for name in a.held}
        for asked in sorted(wanting, key=lambda a: a.since):
            value = provisioned_for(asked.job)
            for name, raw in sorted(nodes.items()):
                if len(asked.held) >= asked.nodes:
                    break
                meta = raw.get("metadata") or {}
                labels = meta.get("labels") or {}
                if (
                    name in taken
                    or labels.get(PROVISIONED_FOR_LABEL, value) != value
                    or _stamp(meta.get("creationTimestamp")) < asked.since
                    or any(labels.get(k) != v for k, v in asked.selector.items())
                ):
                    continue
                done = await pr.merge(
                    self.http, f"/api/v1/nodes/{name}", "labels", {PROVISIONED_FOR_LABEL: value}
                )
                if done is not True:
                    log.warning("node %s not held for %s: %s", name, asked.job, done)
                    continue
                asked.held.append(name)
                taken.add(name)
                spec = self.cache.objects["Node"].get(name)
                if isinstance(spec, NodeSpec):
                    held = replace(spec, labels={**spec.labels, PROVISIONED_FOR_LABEL: value})
                    self.cache.apply(Event("MODIFIED", "Node", held))

    # -- asking ----------------------------------------------------------------------------

    async def _ask(self, result: CycleResult, now: float) -> None:
        skip = set(self.asked)
        for job, backoff in self.backoff.items():
            if backoff.until > now or backoff.failures > BACKOFF_LIMIT:
                skip.add(job)
        if not any(
            (pod := self.cache.pods.get(p.pod)) is not None and pod.gang not in skip
            for p in result.pending
        ):
            return
        plan = plan_pending(
            self.cache,
            result,
            offers=list(self.offers.values()),
            sheet=self.sheet,
            config=self.options.config,
            now=now,
            skip=skip,
        )
        pending = {p.pod for p in result.pending}
        for purchase in plan.purchases:
            pods = sorted(
                key
                for key, pod in self.cache.pods.items()
                if pod.gang == purchase.key and key in pending
            )
            if pods:
                await self._request(purchase, pods)

    async def _request(self, purchase: Purchase, pods: list[str]) -> None:
        job, pool, nodes = purchase.key, purchase.pool, len(purchase.numbers)
        offer = self.offers[pool]
        raw = self.store.raw.get("Pod", {}).get(pods[0])
        if raw is None:
            return
        namespace = pods[0].split("/", 1)[0]
        attempt = self.backoff[job].failures + 1 if job in self.backoff else 1
        name = pr.request_name(job, attempt)
        template = pr.template_body(name, job, raw, offer.template.labels)
        made = await pr.create(self.http, pr.templates_path(namespace), template, read_back=False)
        if isinstance(made, str):
            log.warning("PodTemplate %s/%s not created: %s", namespace, name, made)
            return
        body = pr.request_body(name, job, len(pods), pool)
        made = await pr.create(self.http, pr.requests_path(namespace), body)
        if isinstance(made, str):
            log.warning("ProvisioningRequest %s/%s not created: %s", namespace, name, made)
            await pr.delete(self.http, f"{pr.templates_path(namespace)}/{name}")
            return
        since = _stamp((made.get("metadata") or {}).get("creationTimestamp"))
        self.asked[job] = Asked(
            job, namespace, name, attempt, pool, nodes, offer.template.labels, since, pods
        )
        for key in pods:
            await self._annotate(
                key, {pr.CONSUME_ANNOTATION: name, pr.CLASS_ANNOTATION: pr.ATOMIC_CLASS}
            )
        self.metrics.provisioning.labels(pool, "asked").inc()
        note = (
            f"ProvisioningRequest {namespace}/{name} asks for {nodes} node(s) of pool {pool} "
            f"for {len(pods)} pod(s) (${purchase.hourly:,.2f}/h)"
        )
        decide(note, action="provisioning", pod=job, reason=pool, nodes=nodes)
        await self.events.record(
            self.teller.regarding(pods[0]), "Normal", "TriggeredScaleUp", "Provisioning", note
        )

    async def _annotate(self, key: str, values: Mapping[str, str | None]) -> bool:
        ref = self.teller.ref(key)
        done = await pr.merge(self.http, ref.path, "annotations", values)
        if done is not True:
            log.warning("pod %s not annotated: %s", key, done)
        return done is True

    # -- scale-down protection -------------------------------------------------------------

    async def _protect(self, now: float) -> None:
        raws = self.store.raw.get("Pod", {})
        running: set[str] = set()
        for key, pod in self.cache.pods.items():
            if pod.node is None or not pod.managed:
                continue
            running.add(key)
            started = pod.started if pod.started is not None else pod.created
            needs = last_saved(pod.progress, started, now) <= started
            mine = key in self.protected
            if needs and not mine:
                await self._put_on(key, raws.get(key))
            elif not needs and (mine or self._adopt(key, raws.get(key))):
                await self._take_off(key)
        for key in [k for k in self.protected if k not in running]:
            await self._take_off(key)

    def _adopt(self, key: str, raw: Mapping[str, Any] | None) -> bool:
        """Whether pod ``key`` carries a former leader's protection, now taken as ours."""
        annotations = ((raw or {}).get("metadata") or {}).get("annotations") or {}
        marked = annotations.get(pr.PROTECTED_ANNOTATION)
        if marked is None:
            return False
        keys = tuple(k for k in str(marked).split(",") if k in pr.PROTECTION)
        self.protected[key] = (self.teller.ref(key), keys)
        return True

    async def _put_on(self, key: str, raw: Mapping[str, Any] | None) -> None:
        if self._adopt(key, raw):
            return
        annotations = ((raw or {}).get("metadata") or {}).get("annotations") or {}
        if any(k in annotations for k in pr.PROTECTION):
            return  # the user said it: never touched
        keys = tuple(sorted(pr.PROTECTION))
        values: dict[str, str | None] = {**pr.PROTECTION, pr.PROTECTED_ANNOTATION: ",".join(keys)}
        if await self._annotate(key, values):
            self.protected[key] = (self.teller.ref(key), keys)

    async def _take_off(self, key: str) -> None:
        ref, keys = self.protected[key]
        values: dict[str, str | None] = dict.fromkeys((*keys, pr.PROTECTED_ANNOTATION))
        done = await pr.merge(self.http, ref.path, "annotations", values)
        if done is True:
            del self.protected[key]
        else:
            log.warning("pod %s keeps its scale-down protection: %s", key, done)
