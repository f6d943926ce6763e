"""Autoscaling, live: gpufleet plans the nodes, the cluster's own autoscaler adds and removes
them (``gpufleet serve --autoscale``; the bodies in ``kube/write/provisioning.py``).

After each cycle that wrote, :class:`LiveAutoscaler`:

1. **takes over** (a new leader, once) the requests its predecessor left — each carries the
   job, pool and node count it was made for — and the nodes they hold; labels of no request
   in flight come off, and of two requests for one job the older is deleted;
2. **asks** — for the jobs the cycle left pending whose nodes are not asked for yet, the plan
   of :func:`~gpufleet.compose.plan_pending` (the same as ``gpufleet schedule --autoscale``:
   whole jobs, queue limits, the cheapest set of node types, nothing bought for a job that
   what runs frees within the provisioning delay; the requests in flight count against
   each pool's ``maxNodes`` and each queue's limit) becomes one ProvisioningRequest per
   job, of class ``best-effort-atomic-scale-up`` with the job's PodTemplate, and the job's
   pending pods are marked as its consumers (a pod its controller makes anew is marked
   when the request is next read). Event ``TriggeredScaleUp`` on the job's first pod;
3. **follows** each request (read at most every :data:`POLL_S`), as Kueue's provisioning
   admission check does: ``Provisioned`` — the nodes come; ``Failed`` or
   ``CapacityRevoked`` before the job runs, ``BookingExpired`` before it was provisioned,
   the request deleted, or its nodes not all there :data:`NODES_DUE_S` after it was
   provisioned — it failed: what it held is let go, the request and its template are
   deleted, and the job asks again after a backoff of :data:`BACKOFF_BASE_S` doubled per
   failure up to :data:`BACKOFF_MAX_S`, at most :data:`BACKOFF_LIMIT` times more (Kueue's
   defaults), then no more (event ``FailedScaleUp`` each time, the last saying it gave up;
   the pods keep their consume marks while the job backs off, so that the autoscaler does
   not scale up for them one by one, and lose them when it gives up);
4. **holds** each node that appears for a request — created after it, carrying the chosen
   type's labels, held for no other job — by labelling it ``gpufleet.io/provisioned-for``
   until the job has as many as it was bought. The label is put in the cache at once and
   again after every batch of events until the watch brings it, so that the cycle that first
   sees the node places no other job there; the job starts whole once its last node is
   Ready, since the cycle places gangs whole;
5. **lets go** once the job runs (every pod bound) or is gone: the labels come off (only
   where they still name the job), the request and template are deleted;
6. **protects** from scale-down the running pods whose eviction would lose all their
   work — a job that never checkpoints, or has not yet saved anything
   (:func:`~gpufleet.model.progress.last_saved`) — with ``safe-to-evict: "false"`` and
   ``karpenter.sh/do-not-disrupt``, and takes the protection off once the job has saved
   work (then an autoscaler's consolidation may move it, losing at most one checkpoint
   interval) or is over. A pod whose owner set either annotation is never touched.

Every write is asked of ``may_act`` first (a replica that lost the Lease writes nothing
more). A release the server refuses (a label, a request, a template) is kept and tried again
at every step until it is taken; other refused writes are logged and made again when the
next step finds them undone. One bad object or reply is logged and skipped.
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
NODES_DUE_S = 900.0
"""How long after ``Provisioned`` a request's nodes may take to appear before it counts as
failed: Cluster Autoscaler's ``--max-node-provision-time`` default."""
FAILED = ("Failed", "CapacityRevoked")
"""A request's conditions that end it before its job runs; ``BookingExpired`` does too, but
only before ``Provisioned`` (after it, Cluster Autoscaler sets it once the booking ends,
whether or not the nodes were used, and Kueue ignores it)."""


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
    pods: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    provisioned: float | None = None
    """When this replica first read it ``Provisioned``."""
    polled: float = -math.inf


@dataclass
class Backoff:
    failures: int
    until: float
    reason: str
    request: str
    """The failed request the pods' consume marks still name."""


def _stamp(value: object) -> float:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return math.inf


def _annotations(raw: Mapping[str, Any] | None) -> Mapping[str, Any]:
    meta = (raw or {}).get("metadata")
    found = meta.get("annotations") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


def _labels(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = raw.get("metadata")
    found = meta.get("labels") if isinstance(meta, dict) else None
    return found if isinstance(found, dict) else {}


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
        may_act: Callable[[], bool],
        backoff_base_s: float = BACKOFF_BASE_S,
    ) -> None:
        self.http, self.options, self.store, self.cache = http, options, store, cache
        self.teller, self.events, self.metrics, self.sheet = teller, events, metrics, sheet
        self.clock, self.may_act, self.backoff_base_s = clock, may_act, backoff_base_s
        self.offers: dict[str, NodeOffer] = {o.pool: o for o in options.offers}
        self.asked: dict[str, Asked] = {}
        self.backoff: dict[str, Backoff] = {}
        self.protected: dict[str, tuple[PodRef, tuple[str, ...]]] = {}
        """Pods gpufleet protected from scale-down, and the annotations it set on each, until
        it takes them off."""
        self.releases: dict[tuple[str, str], str] = {}
        """Releases still to be taken: ``("node", name)`` → the label value to take off,
        ``("delete", path)`` → ""."""
        self.taken_over = False
        self._told_takeover = False

    async def step(self, result: CycleResult, now: float) -> None:
        """What one cycle's result asks of the autoscaler (the module docstring's steps)."""
        if not self.taken_over:
            await self._take_over()
        await self._release()
        members = self._members()
        await self._follow(now, members)
        await self.hold()
        await self._ask(result, now, members)
        await self._protect(now)
        await self._release()  # what this step let go, at once
        self._forget_gone()
        self.metrics.protected_pods.set(len(self.protected))

    def _members(self) -> dict[str, list[PodInfo]]:
        if not self.asked:
            return {}
        out: dict[str, list[PodInfo]] = {job: [] for job in self.asked}
        for pod in self.cache.pods.values():
            if pod.gang in out:
                out[pod.gang].append(pod)
        return out

    # -- taking over from a former leader --------------------------------------------------

    async def _take_over(self) -> None:
        path = f"/apis/{pr.GROUP_VERSION}/provisioningrequests"
        found = await pr.read(self.http, f"{path}?labelSelector={PROVISIONED_FOR_LABEL}")
        if not isinstance(found, dict):
            if not self._told_takeover:
                self._told_takeover = True
                log.warning("ProvisioningRequests not listed (tried again each cycle): %s", found)
            return
        self.taken_over = True
        items = found.get("items")
        for raw in sorted(
            (i for i in items if isinstance(i, dict)) if isinstance(items, list) else (),
            key=lambda i: pr.attempt_of(str((i.get("metadata") or {}).get("name", ""))),
        ):
            self._adopt_request(raw)
        values = {provisioned_for(a.job): a for a in self.asked.values()}
        for name, node in self.store.raw.get("Node", {}).items():
            value = _labels(node).get(PROVISIONED_FOR_LABEL)
            if not isinstance(value, str):
                continue
            asked = values.get(value)
            if asked is None:
                self.releases["node", name] = value  # held for no request in flight
            elif name not in asked.held:
                asked.held.append(name)

    def _adopt_request(self, raw: Mapping[str, Any]) -> None:
        found = raw.get("metadata")
        meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
        notes = _annotations(raw)
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        job, pool = str(notes.get(pr.JOB_ANNOTATION, "")), str(notes.get(pr.POOL_ANNOTATION, ""))
        nodes = str(notes.get(pr.NODES_ANNOTATION, ""))
        offer = self.offers.get(pool)
        if not name or offer is None or not nodes.isdigit() or not job.startswith(namespace + "/"):
            log.warning("ProvisioningRequest %s/%s: not one of this scheduler's", namespace, name)
            return
        older = self.asked.get(job)
        if older is not None:  # sorted by attempt: the older one is left over
            self._delete_request(older)
        self.asked[job] = Asked(
            job,
            namespace,
            name,
            pr.attempt_of(name),
            pool,
            int(nodes),
            pr.pool_selector(offer.template.labels),
            _stamp(meta.get("creationTimestamp")),
        )

    # -- releases, until taken -------------------------------------------------------------

    def _delete_request(self, asked: Asked) -> None:
        for path in (pr.requests_path(asked.namespace), pr.templates_path(asked.namespace)):
            self.releases["delete", f"{path}/{asked.name}"] = ""

    def _let_go(self, asked: Asked) -> None:
        value = provisioned_for(asked.job)
        for node in asked.held:
            self.releases["node", node] = value
        asked.held = []
        self._delete_request(asked)

    async def _release(self) -> None:
        if not self.releases:
            return
        holding = {node for a in self.asked.values() for node in a.held}
        for (kind, target), value in list(self.releases.items()):
            if not self.may_act():
                return
            if kind == "node" and target in holding:
                del self.releases[kind, target]  # held again (the same job asked again)
                continue
            if kind == "node":
                done = await pr.unlabel(self.http, target, value)
            else:
                done = await pr.delete(self.http, target)
            if done is True:
                del self.releases[kind, target]
            else:
                log.warning("%s %s not let go (tried again next cycle): %s", kind, target, done)

    # -- following requests ----------------------------------------------------------------

    async def _follow(self, now: float, members: Mapping[str, list[PodInfo]]) -> None:
        for job, asked in list(self.asked.items()):
            pods = members.get(job, [])
            if not pods or all(p.node is not None for p in pods):
                self._end(asked, "ran" if pods else "gone")
                continue
            if now - asked.polled < POLL_S:
                continue
            asked.polled = now
            await self._mark_consumers(asked, [p.key for p in pods if p.node is None])
            path = f"{pr.requests_path(asked.namespace)}/{asked.name}"
            found = await pr.read(self.http, path)
            if isinstance(found, str):
                log.warning("ProvisioningRequest %s/%s: %s", asked.namespace, asked.name, found)
                continue
            if found is None:
                await self._failed(asked, now, "the request was deleted")
                continue
            provisioned = asked.provisioned is not None or pr.condition(found, "Provisioned")
            ends = FAILED if provisioned else (*FAILED, "BookingExpired")
            ended = next((c for kind in ends if (c := pr.condition(found, kind))), None)
            if ended is not None:
                why = f"{ended.get('type')}: {ended.get('reason', '')} {ended.get('message', '')}"
                await self._failed(asked, now, why.strip())
            elif asked.provisioned is None and pr.condition(found, "Provisioned") is not None:
                asked.provisioned = now
                self.metrics.provisioning.labels(asked.pool, "provisioned").inc()
                decide(
                    f"ProvisioningRequest {asked.namespace}/{asked.name} provisioned",
                    action="provisioned",
                    pod=asked.job,
                    reason=asked.pool,
                )
            elif (
                asked.provisioned is not None
                and now - asked.provisioned > NODES_DUE_S
                and len(asked.held) < asked.nodes
            ):
                why = (
                    f"{len(asked.held)} of its {asked.nodes} node(s) came within "
                    f"{NODES_DUE_S:g}s of Provisioned"
                )
                await self._failed(asked, now, why)

    async def _mark_consumers(self, asked: Asked, pending: list[str]) -> None:
        """Mark the job's pending pods as the request's, those its controller made anew
        since included."""
        raws = self.store.raw.get("Pod", {})
        for key in pending:
            if _annotations(raws.get(key)).get(pr.CONSUME_ANNOTATION) != asked.name:
                await self._annotate(
                    key, {pr.CONSUME_ANNOTATION: asked.name, pr.CLASS_ANNOTATION: pr.ATOMIC_CLASS}
                )
        asked.pods = pending or asked.pods

    def _end(self, asked: Asked, how: str) -> None:
        """The job ran or is gone: its nodes are let go, its request deleted."""
        del self.asked[asked.job]
        self.backoff.pop(asked.job, None)
        self._let_go(asked)
        decide(
            f"ProvisioningRequest {asked.namespace}/{asked.name} done: the job {how}",
            action="provisioning-done",
            pod=asked.job,
            reason=how,
        )

    async def _failed(self, asked: Asked, now: float, why: str) -> None:
        del self.asked[asked.job]
        self._let_go(asked)
        failures = asked.attempt
        wait = min(self.backoff_base_s * 2 ** (failures - 1), BACKOFF_MAX_S)
        self.backoff[asked.job] = Backoff(failures, now + wait, why, asked.name)
        self.metrics.provisioning.labels(asked.pool, "failed").inc()
        if failures > BACKOFF_LIMIT:
            note = (
                f"ProvisioningRequest {asked.name} failed ({why}); gave up after "
                f"{failures} requests"
            )
            for key in asked.pods:  # no request will come: an autoscaler may see them again
                await self._annotate(key, {pr.CONSUME_ANNOTATION: None, pr.CLASS_ANNOTATION: None})
        else:
            note = f"ProvisioningRequest {asked.name} failed ({why}); asking again in {wait:g}s"
        decide(note, action="provisioning-failed", pod=asked.job, reason=why, level=logging.WARNING)
        if asked.pods:
            regarding = self.teller.regarding(asked.pods[0])
            await self.events.record(regarding, "Warning", "FailedScaleUp", "Provisioning", note)

    def _forget_gone(self) -> None:
        """Backoffs of jobs that are gone: one made again under the name starts afresh."""
        if not self.backoff:
            return
        present = {pod.gang for pod in self.cache.pods.values()}
        for job in [j for j in self.backoff if j not in present]:
            del self.backoff[job]

    # -- holding the nodes that come -------------------------------------------------------

    async def hold(self) -> None:
        """Label the nodes that came for a request in flight (step 4), and put the labels of
        every node held in the cache where its copy lacks them. Run before a cycle as well
        as after."""
        self._hold_in_cache()
        wanting = [a for a in self.asked.values() if len(a.held) < a.nodes]
        if not wanting or not self.may_act():
            return
        nodes = self.store.raw.get("Node", {})
        taken = {name for a in self.asked.values() for name in a.held}
        taken |= {name for kind, name in self.releases if kind == "node"}
        for asked in sorted(wanting, key=lambda a: a.since):
            value = provisioned_for(asked.job)
            for name, raw in sorted(nodes.items()):
                if len(asked.held) >= asked.nodes:
                    break
                labels = _labels(raw)
                meta = raw.get("metadata")
                created = meta.get("creationTimestamp") if isinstance(meta, dict) else None
                if (
                    name in taken
                    or labels.get(PROVISIONED_FOR_LABEL, value) != value
                    or _stamp(created) < asked.since
                    or any(labels.get(k) != v for k, v in asked.selector.items())
                ):
                    continue
                if not self.may_act():
                    return
                done = await pr.merge(
                    self.http, f"/api/v1/nodes/{name}", "labels", {PROVISIONED_FOR_LABEL: value}
                )
                if done is not True:
                    log.warning("node %s not held for %s: %s", name, asked.job, done)
                    continue
                asked.held.append(name)
                taken.add(name)
        self._hold_in_cache()

    def _hold_in_cache(self) -> None:
        specs = self.cache.objects["Node"]
        for asked in self.asked.values():
            value = provisioned_for(asked.job)
            for name in asked.held:
                spec = specs.get(name)
                if isinstance(spec, NodeSpec) and spec.labels.get(PROVISIONED_FOR_LABEL) != value:
                    held = replace(spec, labels={**spec.labels, PROVISIONED_FOR_LABEL: value})
                    self.cache.apply(Event("MODIFIED", "Node", held))

    # -- asking ----------------------------------------------------------------------------

    async def _ask(
        self, result: CycleResult, now: float, members: Mapping[str, list[PodInfo]]
    ) -> None:
        skip = set(self.asked)
        for job, backoff in self.backoff.items():
            if backoff.until > now or backoff.failures > BACKOFF_LIMIT:
                skip.add(job)
        pods = self.cache.pods
        if not any(
            (p := pods.get(w.pod)) is not None and p.gang not in skip for w in result.pending
        ):
            return
        coming: dict[str, int] = {}
        asked_gpus: dict[str, float] = {}
        for asked in self.asked.values():
            coming[asked.pool] = coming.get(asked.pool, 0) + max(asked.nodes - len(asked.held), 0)
            for pod in members.get(asked.job, ()):
                if pod.node is None:
                    asked_gpus[pod.queue] = asked_gpus.get(pod.queue, 0.0) + pod.spec.gpu_equivalent
        plan = plan_pending(
            self.cache,
            result,
            offers=list(self.offers.values()),
            sheet=self.sheet,
            config=self.options.config,
            now=now,
            skip=skip,
            coming=coming,
            asked_gpus=asked_gpus,
        )
        by_job: dict[str, list[str]] = {}  # the pending pods of each job, read once
        for waiting in result.pending:
            if (member := pods.get(waiting.pod)) is not None:
                by_job.setdefault(member.gang, []).append(waiting.pod)
        for purchase in plan.purchases:
            keys = sorted(by_job.get(purchase.key, ()))
            if keys and self.may_act():
                await self._request(purchase, keys)

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
        body = pr.request_body(name, job, len(pods), pool, nodes)
        made = await pr.create(self.http, pr.requests_path(namespace), body)
        if isinstance(made, str):
            log.warning("ProvisioningRequest %s/%s not created: %s", namespace, name, made)
            self.releases["delete", f"{pr.templates_path(namespace)}/{name}"] = ""
            return
        meta = made.get("metadata")
        since = _stamp(meta.get("creationTimestamp") if isinstance(meta, dict) else None)
        selector = pr.pool_selector(offer.template.labels)
        asked = Asked(job, namespace, name, attempt, pool, nodes, selector, since)
        self.asked[job] = asked
        await self._mark_consumers(asked, pods)
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
        if not self.may_act():
            return False
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
        marked = _annotations(raw).get(pr.PROTECTED_ANNOTATION)
        if marked is None:
            return False
        keys = tuple(k for k in str(marked).split(",") if k in pr.PROTECTION)
        self.protected[key] = (self.teller.ref(key), keys)
        return True

    async def _put_on(self, key: str, raw: Mapping[str, Any] | None) -> None:
        if self._adopt(key, raw):
            return
        if any(k in _annotations(raw) for k in pr.PROTECTION):
            return  # the user said it: never touched
        keys = tuple(sorted(pr.PROTECTION))
        values: dict[str, str | None] = {**pr.PROTECTION, pr.PROTECTED_ANNOTATION: ",".join(keys)}
        if await self._annotate(key, values):
            self.protected[key] = (self.teller.ref(key), keys)

    async def _take_off(self, key: str) -> None:
        if not self.may_act():
            return
        ref, keys = self.protected[key]
        values: dict[str, str | None] = dict.fromkeys((*keys, pr.PROTECTED_ANNOTATION))
        done = await pr.merge(self.http, ref.path, "annotations", values)
        if done is True:
            del self.protected[key]
        else:
            log.warning("pod %s keeps its scale-down protection: %s", key, done)
