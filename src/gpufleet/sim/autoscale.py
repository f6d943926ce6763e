"""Elastic supply: a replay whose cluster grows and shrinks by node type.

The cluster starts with its system node (CPU only; it holds no GPU pod) and the node types
it may buy (:class:`~gpufleet.model.supply.NodeOffer`, NodePools with ``spec.autoscaling``),
each priced by the price sheet, spot at its spot price. An autoscaler scans the cluster
(every :data:`SCAN_S` while something changes, as Cluster Autoscaler's loop does) and asks
for nodes; each asked node is Ready ``delay_s`` later, and billed from then until it goes.
A request for spot capacity is filled with the pool's ``availability`` (drawn from the
seeded generator); one that is not fails as a cloud's insufficient-capacity error does, at
once, and every autoscaler sees it at its next scan (Cluster Autoscaler reads such errors
off the node group; its ``max-node-provision-time`` of 15 minutes is for nodes that never
become Ready, which the replay does not model); the pool is then avoided for
:data:`BACKOFF_S` (Karpenter: :data:`KARPENTER_AVOID_S`). A Ready spot node is
interrupted after an exponential time of the pool's rate (seeded): its pods are evicted,
losing their work since their last checkpoint as a preemption's pods do, and the node goes.

Policies (:data:`SUPPLY_POLICIES`), each with the scheduler a user would pair it with:

* ``static-peak`` — no autoscaler: as many nodes of the cheapest on-demand type of the most
  GPUs as the trace's peak asks for (its GPUs demanded if nothing ever waited), up from the
  start; gpufleet schedules them.
* ``ca-price`` and ``ca-least-waste`` — Cluster Autoscaler's defaults, with kube-scheduler's
  defaults placing pods one at a time (no gangs: a gang's pods bind as they fit): every
  :data:`SCAN_S`, pending pods that fit no node (nor the nodes on their way) make one node
  group grow by the nodes that hold them packed; the expander picks the group — ``price``,
  the cheapest per GPU the new nodes give those pods, or ``least-waste``, the least CPU and
  memory left idle on them (ties drawn at random). Scale-down: a node whose GPUs are less
  than half allocated for 10 minutes, not within 10 minutes of a scale-up, goes if its pods
  fit on the other nodes — empty nodes together, others one at a time, their pods evicted.
* ``karpenter-like`` — Karpenter's defaults, with kube-scheduler's: pending pods launch
  nodes of the cheapest type that fits each (spot where offered), the pods of one scan packed
  onto the nodes it launches; insufficient capacity is seen at once and the type avoided
  for 3 minutes. Consolidation (``WhenEmptyOrUnderutilized``): a node empty for
  ``consolidateAfter`` goes; a node whose pods fit on the other nodes goes, its pods evicted,
  at most 10% of the nodes at a time (the default disruption budget).
* ``gpufleet`` — gpufleet's scheduler and planner (``cost/autoscale.py``): one request per
  job that fits nowhere, all of its nodes or none (best-effort-atomic), the nodes labelled
  for it (``gpufleet.io/provisioned-for``) until it starts; spot chosen only where its price
  beats on-demand with the work interruptions are expected to lose; nodes go only when
  empty, never by eviction, keeping the free GPUs the forecast of arriving work needs.
  Nodes not full are emptied by moving checkpointing jobs right after a checkpoint; and an
  on-demand node whose jobs checkpoint and are expected to run on for an hour is replaced by
  spot once spot is there to be had (bought while spot was refused): spot nodes are asked
  for its jobs, and once they are up it is emptied the same way; a gang's nodes are
  replaced together, with the jobs beside it, where no other job runs on them.
"""

from __future__ import annotations

import functools
import math
from collections import deque
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.autoscale import (
    DRAIN_SHARE,
    FITS_NOW,
    NodeUse,
    Room,
    Stock,
    Want,
    node_hourly,
    per_node,
    plan_drain,
    plan_scale_down,
    plan_scale_up,
    pod_gpus,
    price_stock,
)
from gpufleet.metering.runs import RunLog
from gpufleet.model.autoscale import SUPPLY_POLICY_NAMES, SupplyRun
from gpufleet.model.node import NodeSpec
from gpufleet.model.progress import move_after_checkpoint
from gpufleet.model.selectors import Taint
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.plugins.registry import REPLAY_POLICIES, ReplayPolicy
from gpufleet.scheduler.queues.holds import freed_within
from gpufleet.scheduler.state.changes import Event
from gpufleet.sim.clock import ARRIVAL
from gpufleet.sim.replay import Replay, pod_names

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from collections.abc import Set as AbstractSet

    from gpufleet.cost.prices import PriceSheet
    from gpufleet.metering.runs import RunColumns
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.supply import NodeOffer
    from gpufleet.model.workload import ReplayJob
    from gpufleet.scheduler.api.outcome import Binding

SCAN_S = 10.0
"""Cluster Autoscaler's ``scan-interval``: how often an autoscaler looks while things change."""
GPUFLEET_SCAN_S = 1.0
"""gpufleet plans after the cycle that left a job pending (the live scheduler after each
cycle, its batching wait and writes included: about a second)."""
BACKOFF_S = 300.0
"""How long a pool whose request failed is avoided (Cluster Autoscaler's initial node-group
backoff is 5 minutes)."""
KARPENTER_AVOID_S = 180.0
"""Karpenter's unavailable-offerings cache keeps a type out for 3 minutes."""
CA_UNNEEDED_S = 600.0
"""``scale-down-unneeded-time``: how long a node must be underused before it goes."""
CA_DELAY_AFTER_ADD_S = 600.0
"""``scale-down-delay-after-add``."""
CA_UTILIZATION = 0.5
"""``scale-down-utilization-threshold`` (of GPUs, on GPU nodes)."""
CA_EMPTY_BULK = 10
"""``max-empty-bulk-delete``."""
KARPENTER_CONSOLIDATE_AFTER_S = 60.0
KARPENTER_BUDGET = 0.10
"""Karpenter's default disruption budget: 10% of the nodes at a time."""
GRACE_S = 60.0
"""gpufleet lets a node be empty this long before it goes (a pending job may be on its way
to it)."""
SAMPLE_S = 600.0
"""Timeline samples, one per ten minutes."""
SPOT_EVICTION = "spot-interruption"
SCALE_DOWN = "scale-down"

DRAIN_MOVE = "drain-move"
"""A job moved off a node being emptied, right after a checkpoint (gpufleet)."""
DRAIN_EVERY_S = 60.0
"""How often gpufleet looks for nodes to empty."""
UNSCHEDULABLE = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")
SPARE = "spare-for-moves"
"""The ``gpufleet.io/provisioned-for`` value of spot nodes bought for jobs that are to move
there: no other job takes them meanwhile."""
REPLACE_NODES = 4
"""The most on-demand nodes one replacement by spot empties (a gang's nodes, all together,
may be more)."""
REPLACE_REMAINING_S = 3600.0
"""A job is moved to spot only if it is expected to run on at least this long (what the
move costs — a restart and the wait for a checkpoint — is then small against the saving)."""

SCAN_EVENT = -2
READY_EVENT = -3
INTERRUPT_EVENT = -4
MOVE_EVENT = -5
CYCLE_EVENT = -6
"""Nothing but a cycle at once (the nodes of a job that started are anyone's)."""


@dataclass(frozen=True, slots=True)
class SupplyPolicy:
    name: str
    scaler: str
    """``static``, ``ca``, ``karpenter`` or ``gpufleet``."""
    placement: ReplayPolicy
    expander: str = ""
    description: str = ""


def _kube(name: str) -> ReplayPolicy:
    return replace(REPLAY_POLICIES["kube-default"], name=name)


SUPPLY_POLICIES = (
    SupplyPolicy(
        "static-peak",
        "static",
        REPLAY_POLICIES["gpufleet"],
        description="the peak's nodes, on-demand, all the time; gpufleet schedules",
    ),
    SupplyPolicy(
        "ca-price",
        "ca",
        _kube("ca-price"),
        "price",
        "Cluster Autoscaler's defaults, price expander; kube-scheduler",
    ),
    SupplyPolicy(
        "ca-least-waste",
        "ca",
        _kube("ca-least-waste"),
        "least-waste",
        "Cluster Autoscaler's defaults, least-waste expander; kube-scheduler",
    ),
    SupplyPolicy(
        "karpenter-like",
        "karpenter",
        _kube("karpenter-like"),
        description="Karpenter's defaults, cheapest type per pod, consolidation; kube-scheduler",
    ),
    SupplyPolicy(
        "gpufleet",
        "gpufleet",
        REPLAY_POLICIES["gpufleet"],
        description="gpufleet's planner: whole gangs, atomic requests, no eviction to scale down",
    ),
)
if tuple(p.name for p in SUPPLY_POLICIES) != SUPPLY_POLICY_NAMES:  # what a study may name
    raise RuntimeError("SUPPLY_POLICIES and model/autoscale.py SUPPLY_POLICY_NAMES differ")


@dataclass(slots=True)
class _Node:
    """One node bought: its pool, number and price, when it was asked for, Ready and gone."""

    name: str
    stock: Stock
    number: int
    asked: float
    index: int
    spec: NodeSpec
    for_job: int = -1
    ready: float = math.nan
    down: float = math.nan
    unneeded_since: float | None = None
    empty_since: float | None = None
    draining: bool = False
    """Cordoned, its jobs moved at their next checkpoints (gpufleet)."""
    for_waiting: bool = False
    """Its job (a gang) was waiting when it came up: it is paid for while the gang cannot
    start, until the gang does."""


@dataclass(frozen=True, slots=True)
class _View:
    room: Room
    pods: dict[str, list[PodSpec]]
    rows: dict[str, int]
    """Each node's row of ``room``."""


@dataclass(slots=True)
class _Request:
    nodes: list[_Node]
    job: int
    filled: bool
    done: bool = False
    """Its nodes came, or its failure was noticed."""


class SupplyReplay(Replay):
    """The replay of ``jobs`` on a cluster that buys ``offers`` (module docstring)."""

    def __init__(
        self,
        jobs: Sequence[ReplayJob],
        offers: Sequence[NodeOffer],
        policy: SupplyPolicy,
        *,
        sheet: PriceSheet,
        system: NodeSpec,
        seed: int = 0,
        checkpoint_interval_s: float = 1800.0,
        restart_s: float = 120.0,
        workload: str = "",
        static_nodes: int = 0,
    ) -> None:
        self.supply = policy
        self.stock = price_stock(offers, sheet)
        self.system_hourly = node_hourly(system, sheet)
        super().__init__(
            [system],
            jobs,
            policy.placement,
            seed=seed,
            workload=workload,
            checkpoint_interval_s=checkpoint_interval_s,
            restart_s=restart_s,
        )
        self.capacity = float(sum(s.offer.max_nodes * s.offer.gpus for s in self.stock))
        self.runlog = RunLog()
        self.node_index = {system.name: 0}
        self.lives = 0
        self.rng = np.random.default_rng([seed, 1])
        """Spot availability and interruptions (the cycle's generator is its own)."""
        self.nodes: dict[str, _Node] = {}
        self.gone: list[_Node] = []
        self.requests: list[_Request] = []
        self.first_open = 0
        """Requests before this one are all done (they come in order of their delay)."""
        self.asked_for: dict[int, int] = {}
        """Job -> its request in flight (gpufleet)."""
        self.avoid: dict[str, float] = {}
        """Pool -> until when it is avoided."""
        self.scan_at = math.inf
        self.timers: set[float] = set()
        self.last_scale_up = -math.inf
        self.waiting: dict[int, float] = {}
        """Jobs waiting to start (arrived or evicted), and since when."""
        self.waits: list[tuple[float, float, float]] = []
        """(from, to, GPUs) of each wait, for the timeline."""
        self.run_starts: dict[int, list[float]] = {}
        """Per job, when each of its runs started."""
        self.arrived = 0
        self.running_jobs = 0
        self.arrivals: deque[tuple[float, float]] = deque()
        """(time, GPUs) of the arrivals within the provisioning delay, for the forecast."""
        self.scale_down_evictions = 0
        self.checkpoint_moves = 0
        self.drain_after = 0.0
        self.moving: dict[int, tuple[str, float, float]] = {}
        """Job -> the node it is to leave, the run (its start) to move, and when."""
        self.replacing: tuple[int, tuple[str, ...]] | None = None
        """The request of spot nodes in flight for on-demand nodes to empty, and those."""
        self.spares: dict[str, tuple[str, ...]] = {}
        """On-demand node being emptied -> the spot nodes bought for its jobs, held (labelled
        :data:`SPARE`) until the first of those jobs moves (gpufleet)."""
        self.min_runtime = {q.name: q.reclaim_min_runtime_s for q in self.tenants}
        self.interruptions = 0
        self.interrupted_jobs = 0
        self.failed = 0
        self.peak = 0
        self.delay_s = max((s.offer.delay_s for s in self.stock), default=0.0)
        if policy.scaler == "static":
            self._static(static_nodes)

    # -- the trace's hooks ----------------------------------------------------------------

    def _enqueue(self, i: int, now: float) -> None:
        super()._enqueue(i, now)
        self.waiting[i] = now
        if i not in self.run_starts:
            self.arrivals.append((now, float(self.jobs[i].gpus)))
        self._soon(now)

    def _arrive(self, i: int, now: float) -> None:
        self.arrived += 1
        super()._arrive(i, now)

    def _bound(self, binding: Binding, now: float) -> bool:
        started = super()._bound(binding, now)
        if started:
            i = self.pod_job[binding.pod]
            since = self.waiting.pop(i, now)
            self.waits.append((since, now, float(self.jobs[i].gpus)))
            self.run_starts.setdefault(i, []).append(now)
            self.running_jobs += 1
            self._release_label(i, now)
        return started

    def _stop(
        self,
        i: int,
        now: float,
        *,
        evicted: bool = False,
        keep: frozenset[str] = frozenset(),
        action: str = "",
    ) -> None:
        if not math.isnan(self.progress[i].run_start):
            self.running_jobs -= 1
        super()._stop(i, now, evicted=evicted, keep=keep, action=action)

    def _complete(self, i: int, epoch: int, now: float) -> None:
        super()._complete(i, epoch, now)
        self._soon(now)
        self._finish_if_quiet(now)

    def _finish_if_quiet(self, now: float) -> None:
        """Every job has come, none runs and no node is on its way: nothing left can start a
        job (those waiting fit no node type), so the nodes go and the replay ends here
        rather than at the last spot interruption drawn for a node long gone."""
        if self.arrived < len(self.jobs) or self.running_jobs or self._in_flight():
            return
        if any(self._could_start(i) or self.progress[i].bound for i in self.waiting):
            return  # it may start yet, or holds nodes (a gang bound in part) that bill on
        for name in list(self.nodes):
            self._remove(name, now, SCALE_DOWN)
        self.events.clear()
        self.other_events = 0

    # -- events of the supply -------------------------------------------------------------

    def _other_event(self, payload: tuple[int, int], now: float) -> bool:
        kind, index = payload
        if kind == SCAN_EVENT:
            if now >= self.scan_at:
                self.scan_at = math.inf
            self.timers.discard(now)
            self._scan(now)
        elif kind == READY_EVENT:
            self._ready(index, now)
            self._replaced(index, now)
        elif kind == INTERRUPT_EVENT:
            self._interrupt(index, now)
        elif kind == MOVE_EVENT:
            self._move(index, now)
        elif kind == CYCLE_EVENT:
            pass  # the cycle that follows every supply event is what it is for
        else:
            raise ValueError(f"no supply event {kind}")
        if kind == SCAN_EVENT:  # after the cycles of what came before
            self._finish_if_quiet(now)
        return True

    def _push(self, at: float, kind: int, index: int = 0) -> None:
        self.events.push(at, ARRIVAL, (kind, index))
        self.other_events += 1

    def _soon(self, now: float) -> None:
        """Something changed: the autoscaler looks at its next scan (gpufleet's planner runs
        after the cycle, as ``gpufleet serve`` runs it after each cycle: within a second)."""
        if self.supply.scaler == "static":
            return
        quantum = GPUFLEET_SCAN_S if self.supply.scaler == "gpufleet" else SCAN_S
        at = (math.floor(now / quantum) + 1) * quantum
        if at < self.scan_at:
            self.scan_at = at
            self._push(at, SCAN_EVENT)

    def _at(self, at: float) -> None:
        """Look again at ``at`` (a timer: a node's unneeded or empty time running out),
        unless a look is due then already."""
        at = max(at, self.events.now)
        if at in self.timers:
            return
        self.timers.add(at)
        self._push(at, SCAN_EVENT)

    # -- nodes in and out -----------------------------------------------------------------

    def _static(self, count: int) -> None:
        on_demand = [s for s in self.stock if not s.offer.spot]
        stock = min(on_demand, key=lambda s: (s.hourly / max(s.offer.gpus, 1), -s.offer.gpus))
        numbers = stock.free_numbers(min(count, stock.offer.max_nodes)) or ()
        self._ask(stock, numbers, -1, 0.0)
        self._ready(len(self.requests) - 1, 0.0)

    def _ask(self, stock: Stock, numbers: Sequence[int], job: int, now: float) -> _Request:
        offer = stock.offer
        stock.used.update(numbers)
        filled = offer.availability >= 1 or bool(self.rng.random() < offer.availability)
        nodes = []
        for number in numbers:
            spec = offer.node(number)
            node = _Node(spec.name, stock, number, now, 0, spec, for_job=job)
            nodes.append(node)
        request = _Request(nodes, job, filled)
        self.requests.append(request)
        if job >= 0:
            self.asked_for[job] = len(self.requests) - 1
        at = now + (offer.delay_s if filled else SCAN_S)
        if self.supply.scaler != "static":
            self._push(at, READY_EVENT, len(self.requests) - 1)
            self.last_scale_up = now
        return request

    def _ready(self, index: int, now: float) -> None:
        request = self.requests[index]
        request.done = True
        if request.job >= 0 and self.asked_for.get(request.job) == index:
            del self.asked_for[request.job]
        if not request.filled:
            self.failed += 1
            for node in request.nodes:
                node.stock.used.discard(node.number)
            pool = request.nodes[0].stock.pool
            self.avoid[pool] = now + (
                KARPENTER_AVOID_S if self.supply.scaler == "karpenter" else BACKOFF_S
            )
            self._soon(now)
            self._at(self.avoid[pool])  # look again when the pool may be asked again
            return
        hold = self.supply.scaler == "gpufleet" and request.job >= 0 and request.job in self.waiting
        for node in request.nodes:
            spec = node.spec
            node.for_waiting = node.for_job >= 0 and node.for_job in self.waiting
            if hold:
                key = self._job_key(request.job)
                spec = replace(spec, labels={**spec.labels, PROVISIONED_FOR_LABEL: key})
            node.ready = now
            node.index = self.lives = self.lives + 1  # a name comes back: each life its own
            self.node_index[node.name] = node.index
            self.nodes[node.name] = node
            self.cache.apply(Event("ADDED", "Node", spec))
            rate = node.stock.offer.interruptions_per_hour
            if rate > 0:
                after = float(self.rng.exponential(3600.0 / rate))
                self._push(now + after, INTERRUPT_EVENT, node.index)
        self.peak = max(self.peak, len(self.nodes))
        self._soon(now)

    def _could_start(self, i: int) -> bool:
        """Whether some node type (at its ``maxNodes``) could hold job ``i`` whole."""
        job = self.jobs[i]
        return any(
            (each := per_node(job.spec, s.offer.template)) > 0
            and math.ceil(job.pods / each) <= s.offer.max_nodes
            for s in self.stock
        )

    def _job_key(self, i: int) -> str:
        job = self.jobs[i]
        return provisioned_for(job.name if self._gang(job) else pod_names(job)[0])

    def _release_label(self, i: int, now: float) -> None:
        """Job ``i`` started: the nodes bought for it are anyone's, from a cycle at once
        (jobs the plan packed beside it wait for them)."""
        key = self._job_key(i)
        released = False
        for node in self.nodes.values():
            if node.for_job != i:
                continue
            spec = self.cache.get("Node", node.name)
            if isinstance(spec, NodeSpec) and spec.labels.get(PROVISIONED_FOR_LABEL) == key:
                labels = {k: v for k, v in spec.labels.items() if k != PROVISIONED_FOR_LABEL}
                self.cache.apply(Event("MODIFIED", "Node", replace(spec, labels=labels)))
                released = True
        if released and self.waiting:
            self._push(now, CYCLE_EVENT)

    def _remove(self, name: str, now: float, action: str) -> None:
        """Node ``name`` goes; its running jobs are evicted by ``action`` first."""
        node = self.nodes.pop(name)
        ledger = self.cache.ledger()
        row = ledger.node_index.get(name)
        if row is not None:
            jobs = sorted(
                {self.pod_job[r.pod.key] for r in ledger.running.values() if r.node == row}
            )
            for i in jobs:
                key = next(k for k in pod_names(self.jobs[i]) if k in self.cache.pods)
                self._evicted(key, now, frozenset(), action)
                if action == SCALE_DOWN:
                    self.scale_down_evictions += 1
                else:
                    self.interrupted_jobs += 1
        spec = self.cache.get("Node", name)
        if spec is not None:
            self.cache.apply(Event("DELETED", "Node", spec))
        node.down = now
        node.stock.used.discard(node.number)
        self.gone.append(node)
        self._soon(now)

    def _interrupt(self, index: int, now: float) -> None:
        node = next((n for n in self.nodes.values() if n.index == index), None)
        if node is None:
            return  # it went before
        self.interruptions += 1
        self._remove(node.name, now, SPOT_EVICTION)

    # -- what the cluster looks like --------------------------------------------------------

    def _use(self) -> tuple[dict[str, float], dict[str, float]]:
        """Per node up: GPUs allocated, GPUs it has."""
        ledger = self.cache.ledger()
        state, index = ledger.state, ledger.node_index
        names = [name for name in self.nodes if name in index]
        rows = np.array([index[name] for name in names], dtype=np.int64)
        total = state.gpu_count[rows].astype(float)
        alloc = total - state.gpu_whole_free[rows]
        return dict(zip(names, alloc.tolist(), strict=True)), dict(
            zip(names, total.tolist(), strict=True)
        )

    def _room(self, now: float, *, soon: bool, held: bool) -> Room:
        """The nodes up as the planner sees them: free now and, with ``soon``, within the
        provisioning delay; without ``held``, nodes bought for other jobs are left out."""
        ledger = self.cache.ledger()
        state = ledger.state
        rows = [(ledger.node_index[name], name) for name in self.nodes if name in ledger.node_index]
        if not held:
            labels = state.node_labels.labels
            rows = [
                (r, n)
                for r, n in rows
                if PROVISIONED_FOR_LABEL not in labels[r] and not self.nodes[n].draining
            ]
        idx = np.array([r for r, _ in rows], dtype=np.int64)
        free = (
            state.gpu_whole_free[idx].astype(float),
            state.cpu_free[idx].astype(float),
            state.memory_free[idx].astype(float),
        )
        later = None
        if soon and idx.size:
            freed = freed_within(
                ledger.running.values(),
                state.size,
                now,
                self.delay_s,
                self.scheduler.config.expected_duration_s,
            )
            later = (free[0] + freed[0][idx], free[1] + freed[1][idx], free[2] + freed[2][idx])
        specs = [self.nodes[n].spec for _, n in rows]
        return Room.of(specs, free, later)

    def _pending_pods(self) -> list[tuple[int, PodSpec]]:
        """The pods waiting to be bound, job by job in the order they came."""
        out = []
        for i in sorted(self.waiting, key=lambda j: (self.waiting[j], j)):
            job = self.jobs[i]
            missing = job.pods - self.progress[i].bound
            out.extend([(i, job.spec)] * missing)
        return out

    def _in_flight(self) -> list[_Request]:
        """Requests whose nodes have not come (an autoscaler counts them as on their way
        until it notices a failure)."""
        while self.first_open < len(self.requests) and self.requests[self.first_open].done:
            self.first_open += 1
        return [r for r in self.requests[self.first_open :] if not r.done]

    # -- the scan ----------------------------------------------------------------------------

    def _scan(self, now: float) -> None:
        self.avoid = {p: t for p, t in self.avoid.items() if t > now}
        scaler = self.supply.scaler
        if scaler == "gpufleet":
            self._gpufleet(now)
        elif scaler == "ca":
            self._ca(now)
        elif scaler == "karpenter":
            self._karpenter(now)

    # gpufleet ------------------------------------------------------------------------------

    def _want_all(self, i: int) -> Want:
        """All of job ``i``'s pods, as the planner reads them."""
        job = self.jobs[i]
        return Want(str(i), self._cycle_queue(job), job.pods, job.spec, 0.0)

    def _want(self, i: int, now: float | None = None) -> Want:
        """Job ``i``'s pods not yet bound, as the planner reads them. It may wait for GPUs
        freeing soon only until it has waited the provisioning delay."""
        job = self.jobs[i]
        missing = job.pods - self.progress[i].bound
        since = self.waiting.get(i, now)
        return Want(
            str(i),
            self._cycle_queue(job),
            missing,
            job.spec,
            self.history.expected_s(self._tenant(job)),
            self.checkpoint_interval_s,
            may_wait=now is None or since is None or now - since < self.delay_s,
        )

    def _planned_room(self, now: float, *, soon: bool) -> Room:
        """The room the planner starts from: the nodes up but those held for other jobs or
        draining, and the nodes on their way, their own job's pods placed on them first."""
        room = self._room(now, soon=soon, held=False)
        spare = self.replacing[0] if self.replacing is not None else -1
        for request in self._in_flight():
            if self.requests[spare] is request:
                continue  # spot nodes for jobs to move: not room for others
            for node in request.nodes:
                room.add(node.spec)
            if request.job in self.waiting:
                room.take(self._want(request.job), soon=False)
        return room

    def _gpufleet(self, now: float) -> None:
        held = {self.nodes[name].for_job for name in self._held_nodes() if name in self.nodes}
        waiting = sorted(
            (i for i in self.waiting if i not in self.asked_for and i not in held),
            key=lambda j: (self.waiting[j], j),
        )
        wants = [self._want(i, now) for i in waiting]
        used = [set(s.used) for s in self.stock]
        avoid = frozenset(self.avoid)
        room = self._planned_room(now, soon=False)
        plan = plan_scale_up(wants, self.stock, room.copy(), {}, avoid=avoid)
        if plan.purchases and any(w.may_wait for w in wants):
            # what running jobs free within the delay may spare buying: judged only now,
            # as it asks for every running pod's expected end
            for stock, before in zip(self.stock, used, strict=True):
                stock.used = before
            room = self._planned_room(now, soon=True)
            plan = plan_scale_up(wants, self.stock, room.copy(), {}, avoid=avoid)
        draining = [n for n in self.nodes.values() if n.draining]
        if plan.purchases and draining:
            for stock in self.stock:  # nothing bought: the drained nodes serve first
                for purchase in plan.purchases:
                    if purchase.pool == stock.pool:
                        stock.used.difference_update(purchase.numbers)
            for node in draining:
                self._undrain(node)
            self._soon(now)
            return
        for purchase in plan.purchases:
            stock = next(s for s in self.stock if s.pool == purchase.pool)
            stock.used.difference_update(purchase.numbers)  # _ask takes them again
            self._ask(stock, purchase.numbers, int(purchase.key), now)
        self._gpufleet_down(now, float(room.gpus.sum()), drain=not plan.purchases)

    def _gpufleet_down(self, now: float, free_gpus: float, *, drain: bool) -> None:
        used, total = self._use()
        while self.arrivals and self.arrivals[0][0] < now - self.delay_s:
            self.arrivals.popleft()
        keep = sum(g for _, g in self.arrivals)
        views = []
        held = self._held_nodes()
        for name, node in self.nodes.items():
            empty = used.get(name, 0.0) == 0 and name not in held
            if not empty:
                node.empty_since = None
                continue  # only empty nodes may go
            if node.empty_since is None:
                node.empty_since = now
                self._at(now + GRACE_S)
            views.append(NodeUse(name, total.get(name, 0.0), node.stock.hourly, node.empty_since))
        # the planner's room leaves cordoned nodes out; emptied, their GPUs are free too
        free_gpus += sum(
            total.get(name, 0.0)
            for name, node in self.nodes.items()
            if node.draining and used.get(name, 0.0) == 0
        )
        for name in plan_scale_down(
            views, now=now, grace_s=GRACE_S, keep_gpus=keep, free_gpus=free_gpus
        ):
            self._remove(name, now, SCALE_DOWN)
        if drain and not self.waiting and now >= self.drain_after:
            self.drain_after = now + DRAIN_EVERY_S
            jobs_on = functools.cache(self._jobs_on)  # read once, by either
            self._drain(now, keep, used, jobs_on)
            self._replace(now, used, jobs_on)

    def _replace(
        self, now: float, used: dict[str, float], jobs_on: Callable[[], dict[str, set[int]]]
    ) -> None:
        """Ask for spot nodes to take the jobs of up to :data:`REPLACE_NODES` on-demand nodes
        (dearest per GPU first) whose jobs may all move at their next checkpoint — one the
        spot nodes are up just before — and are expected to run on for
        :data:`REPLACE_REMAINING_S`, if the spot nodes, all of one pool, cost less an hour
        (with the work interruptions are expected to lose) than the nodes they empty."""
        if (
            self.replacing is not None
            or not any(s.offer.spot for s in self.stock)
            or not any(not n.stock.offer.spot and used.get(name) for name, n in self.nodes.items())
        ):
            return
        self._at(now + DRAIN_EVERY_S)  # an on-demand node in use: look again in a while
        spot = [s for s in self.stock if s.offer.spot and s.pool not in self.avoid]
        if not spot:
            return
        delay = max(s.offer.delay_s for s in spot)
        chosen, wants = self._replaceable(now, used, delay, jobs_on())
        if not chosen:
            return
        before = [set(s.used) for s in spot]
        plan = plan_scale_up(wants, spot, Room.of([], (np.zeros(0), np.zeros(0), np.zeros(0))), {})
        for stock, kept in zip(spot, before, strict=True):
            stock.used = kept
        pools = {p.pool for p in plan.purchases}
        if len(pools) != 1 or any(w.reason != FITS_NOW for w in plan.waiting):
            return  # not all of them fit one spot pool now (the rest: packed beside the first)
        if sum(p.expected for p in plan.purchases) >= sum(
            self.nodes[n].stock.hourly for n in chosen
        ):
            return
        stock = next(s for s in spot if s.pool in pools)
        numbers = sorted({n for p in plan.purchases for n in p.numbers})
        self._ask(stock, numbers, -1, now)
        self.replacing = (len(self.requests) - 1, tuple(chosen))
        for name in chosen:  # no job lands there meanwhile: the spot nodes are sized for these
            self._cordon(self.nodes[name])

    def _replaceable(
        self, now: float, used: dict[str, float], delay: float, jobs_on: dict[str, set[int]]
    ) -> tuple[list[str], list[Want]]:
        """The on-demand nodes :meth:`_replace` may empty now, and their jobs as wants: a
        node with its jobs, or the nodes of a gang that runs alone on them, all together."""
        nodes_of: dict[int, set[str]] = {}
        for name, on in jobs_on.items():
            for i in on:
                nodes_of.setdefault(i, set()).add(name)
        chosen: list[str] = []
        wants: list[Want] = []
        for name, _ in sorted(
            self.nodes.items(), key=lambda kv: (-kv[1].stock.hourly / kv[1].stock.offer.gpus, kv[0])
        ):
            if len(chosen) >= REPLACE_NODES:
                break
            if name in chosen or not self._replaceable_node(name, used):
                continue
            jobs = sorted(jobs_on.get(name, ()))
            group: set[str] = set().union(*(nodes_of[i] for i in jobs)) if jobs else {name}
            if len(group) > 1 and (
                any(jobs_on.get(n, set()) - set(jobs) for n in group)
                or not all(self._replaceable_node(n, used) for n in group)
            ):
                continue  # a gang's nodes, replaced together only where it runs alone
            if chosen and len(chosen) + len(group) > REPLACE_NODES:
                continue
            if not jobs or any(
                (at := self._move_at(i, now, group)) is None
                or not delay <= at - now <= delay + 2 * DRAIN_EVERY_S  # spot up just before
                or self._expected_left(i, now) < REPLACE_REMAINING_S
                for i in jobs
            ):
                continue
            chosen += sorted(group)
            wants += [
                replace(self._want_all(i), checkpoint_s=self.checkpoint_interval_s) for i in jobs
            ]
        return chosen, wants

    def _replaceable_node(self, name: str, used: dict[str, float]) -> bool:
        """Whether on-demand node ``name`` is one :meth:`_replace` may empty: in use, not
        draining, not held for a job."""
        node = self.nodes.get(name)
        return (
            node is not None
            and not node.stock.offer.spot
            and not node.draining
            and not self._held(name)
            and bool(used.get(name))
        )

    def _jobs_on(self) -> dict[str, set[int]]:
        """The jobs running on each node."""
        ledger = self.cache.ledger()
        names = ledger.state.names
        out: dict[str, set[int]] = {}
        for running in ledger.running.values():
            i = self.pod_job.get(running.pod.key)
            if i is not None:
                out.setdefault(names[running.node], set()).add(i)
        return out

    def _expected_left(self, i: int, now: float) -> float:
        """How much longer job ``i`` is expected to run (its tenant's history; a run past
        its expectation, as long again as it has run)."""
        start = self.progress[i].run_start
        ran = max(0.0, now - start) if not math.isnan(start) else 0.0
        expected = self.history.expected_s(self._tenant(self.jobs[i]))
        return max(expected - ran, ran)

    def _replaced(self, index: int, now: float) -> None:
        """The spot nodes of replacement request ``index`` came (or failed): they are held
        for the jobs of the on-demand nodes they were bought for, which are emptied, each job
        moved after its next checkpoint; failed, those nodes are uncordoned."""
        if self.replacing is None or self.replacing[0] != index:
            return
        _, names = self.replacing
        self.replacing = None
        request = self.requests[index]
        spares = tuple(n.name for n in request.nodes) if request.filled else ()
        for spare in spares:
            self._label(spare, SPARE)
        jobs_on = self._jobs_on()
        for name in names:
            node = self.nodes.get(name)
            if node is None or not node.draining:
                continue  # uncordoned meanwhile: a job waiting needed it
            jobs = jobs_on.get(name, set())
            moves = {i: self._move_at(i, now, set(names)) for i in jobs}
            if not spares or not jobs or any(at is None for at in moves.values()):
                self._undrain(node)
                continue
            self.spares[name] = spares
            for i, at in moves.items():
                assert at is not None
                self.moving[i] = (name, self.progress[i].run_start, at)
                self._push(at, MOVE_EVENT, i)
        if spares and spares not in self.spares.values():
            self._free_spares(spares)  # no job left to move there

    def _label(self, name: str, value: str | None) -> None:
        """Set (None: take off) node ``name``'s ``gpufleet.io/provisioned-for``."""
        spec = self.cache.get("Node", name)
        if not isinstance(spec, NodeSpec):
            return
        labels = {k: v for k, v in spec.labels.items() if k != PROVISIONED_FOR_LABEL}
        if value is not None:
            labels[PROVISIONED_FOR_LABEL] = value
        self.cache.apply(Event("MODIFIED", "Node", replace(spec, labels=labels)))

    def _free_spares(self, spares: tuple[str, ...]) -> None:
        """The spot nodes ``spares`` are anyone's (the jobs they were for move now, or not)."""
        for key in [k for k, v in self.spares.items() if v == spares]:
            del self.spares[key]
        for name in spares:
            spec = self.cache.get("Node", name)
            if isinstance(spec, NodeSpec) and spec.labels.get(PROVISIONED_FOR_LABEL) == SPARE:
                self._label(name, None)

    def _drain(
        self,
        now: float,
        keep: float,
        used: dict[str, float],
        jobs_of: Callable[[], dict[str, set[int]]],
    ) -> None:
        """Empty the nodes :func:`plan_drain` picks: cordoned, each job moved right after
        its next checkpoint."""
        if not any(
            0 < used.get(name, 0.0) < node.stock.offer.gpus and not node.draining
            for name, node in self.nodes.items()
        ):
            return
        view = self._view(now)
        jobs_on = jobs_of()
        nodes = []
        for name, node in self.nodes.items():
            if node.draining or self._held(name) or name not in view.pods:
                continue
            if not 0 < used.get(name, 0.0) < node.stock.offer.gpus:
                continue
            jobs = jobs_on.get(name, set())
            movable = bool(jobs) and all(self._move_at(i, now, name) is not None for i in jobs)
            pods = tuple(view.pods[name])
            held = sum(pod_gpus(p) for p in pods)
            nodes.append(
                NodeUse(
                    name, node.stock.offer.gpus, node.stock.hourly, None, False, held, pods, movable
                )
            )
        room = view.room
        keep_rows = [k for k, spec in enumerate(room.specs) if not self.nodes[spec.name].draining]
        room = Room.of(
            [room.specs[k] for k in keep_rows],
            (room.gpus[keep_rows], room.cpu[keep_rows], room.memory[keep_rows]),
        )
        limit = max(1, math.floor(DRAIN_SHARE * len(self.nodes))) - sum(
            1 for n in self.nodes.values() if n.draining
        )
        if limit <= 0:
            return
        for name in plan_drain(nodes, room, keep_gpus=keep, limit=limit):
            self._cordon(self.nodes[name])
            for i in jobs_on.get(name, ()):
                at = self._move_at(i, now, name)
                assert at is not None
                self.moving[i] = (name, self.progress[i].run_start, at)
                self._push(at, MOVE_EVENT, i)

    def _move_at(self, i: int, now: float, names: str | AbstractSet[str]) -> float | None:
        """When job ``i`` (running on node ``names``, or on some of the nodes ``names``) may
        move at no loss: one second after its next checkpoint once its queue's minimum
        runtime has passed; None: never (it does not checkpoint, is elastic, or runs on
        other nodes too)."""
        job, state = self.jobs[i], self.progress[i]
        interval = self.checkpoint_interval_s if self.policy.reads_checkpoints else 0.0
        if interval <= 0 or math.isnan(state.run_start) or job.core_pods < job.pods:
            return None
        pods, within = self.cache.pods, {names} if isinstance(names, str) else names
        if any((pod := pods.get(key)) is None or pod.node not in within for key in pod_names(job)):
            return None
        start = state.run_start
        earliest = max(now, start + self.min_runtime.get(self._tenant(job), 0.0))
        return move_after_checkpoint(start, interval, earliest)

    def _move(self, i: int, now: float) -> None:
        target = self.moving.get(i)
        if target is None or target[2] != now:
            return  # no move, or one planned for another time (a drain cancelled since)
        name, run, _ = target
        spares = self.spares.get(name)
        if spares is not None:
            self._free_spares(spares)  # the first move: the spot nodes take the jobs now
        node = self.nodes.get(name)
        if node is None or not node.draining or self.progress[i].run_start != run:
            del self.moving[i]
            return  # the node went or came back, or the job ended or moved since
        room = self._room(now, soon=False, held=False)
        if not room.take(self._want_all(i), soon=False):
            # the room it was to move to is taken: it stays until its next checkpoint
            self.moving[i] = (name, run, now + self.checkpoint_interval_s)
            self._push(now + self.checkpoint_interval_s, MOVE_EVENT, i)
            return
        del self.moving[i]
        key = pod_names(self.jobs[i])[0]
        self._evicted(key, now, frozenset(), DRAIN_MOVE)
        self.checkpoint_moves += 1

    def _cordon(self, node: _Node) -> None:
        node.draining = True
        spec = self.cache.get("Node", node.name)
        assert isinstance(spec, NodeSpec)
        self.cache.apply(
            Event("MODIFIED", "Node", replace(spec, taints=(*spec.taints, UNSCHEDULABLE)))
        )

    def _undrain(self, node: _Node) -> None:
        node.draining = False
        spares = self.spares.get(node.name)
        if spares is not None:
            self._free_spares(spares)
        spec = self.cache.get("Node", node.name)
        if isinstance(spec, NodeSpec):
            taints = tuple(t for t in spec.taints if t != UNSCHEDULABLE)
            self.cache.apply(Event("MODIFIED", "Node", replace(spec, taints=taints)))
        for i in [i for i, (name, _, _) in self.moving.items() if name == node.name]:
            del self.moving[i]

    def _held_nodes(self) -> set[str]:
        """The nodes :meth:`_held` holds, read off the ledger's label index at once."""
        state = self.cache.ledger().state
        ids, _ = state.node_labels.label_ids(PROVISIONED_FOR_LABEL)
        return {state.names[r] for r in np.flatnonzero(ids >= 0)}

    def _held(self, name: str) -> bool:
        """Whether node ``name`` is still held for the job it was bought for (it carries
        the label until that job first starts on it)."""
        spec = self.cache.get("Node", name)
        return isinstance(spec, NodeSpec) and PROVISIONED_FOR_LABEL in spec.labels

    # Cluster Autoscaler ----------------------------------------------------------------------

    def _ca(self, now: float) -> None:
        self._ca_up(now)
        self._ca_down(now)

    def _unhelped(self, now: float) -> list[tuple[int, PodSpec]]:
        """Pending pods that fit neither the nodes up nor those on their way."""
        room = self._room(now, soon=False, held=True)
        for request in self._in_flight():
            for node in request.nodes:
                room.add(node.spec)
        out = []
        for i, spec in self._pending_pods():
            if not room.take(Want(str(i), "", 1, spec, 0.0), soon=False):
                out.append((i, spec))
        return out

    def _ca_up(self, now: float) -> None:
        pods = self._unhelped(now)
        if not pods:
            return
        options = []
        for stock in self.stock:
            if stock.pool in self.avoid:
                continue
            bins = _pack([spec for _, spec in pods], stock.offer.template)
            room = stock.offer.max_nodes - len(stock.used)
            bins = bins[: max(0, room)]
            if not bins:
                continue
            helped = [pods[k] for b in bins for k in b]
            gpus = sum(pod_gpus(spec) for _, spec in helped)
            tmpl = stock.offer.template
            if self.supply.expander == "price":
                score = stock.hourly * len(bins) / max(gpus, 1e-9)
            else:  # least-waste: CPU and memory left idle on the new nodes
                cpu = sum(spec.cpu_milli for _, spec in helped)
                mem = sum(spec.memory_mib for _, spec in helped)
                score = (1 - cpu / (tmpl.cpu_milli * len(bins))) + (
                    1 - mem / (tmpl.memory_mib * len(bins))
                )
            options.append((score, float(self.rng.random()), stock, bins))
        if not options:
            return
        _, _, stock, bins = min(options, key=lambda o: (o[0], o[1]))
        numbers = stock.free_numbers(len(bins))
        if numbers is None:
            return
        request = self._ask(stock, numbers, -1, now)
        for node, b in zip(request.nodes, bins, strict=True):
            i = pods[b[0]][0]
            node.for_job = i if self.jobs[i].pods > 1 else -1
        if sum(len(b) for b in bins) < len(pods):
            self._soon(now)  # one node group a loop: the pods left wait for the next scan

    def _ca_down(self, now: float) -> None:
        used, total = self._use()
        removable = []
        for name, node in self.nodes.items():
            gpus = total.get(name, 0.0)
            share = used.get(name, 0.0) / gpus if gpus else 0.0
            if share >= CA_UTILIZATION:
                node.unneeded_since = None
                continue
            if node.unneeded_since is None:
                node.unneeded_since = now
                self._at(now + CA_UNNEEDED_S)
            if (
                now - node.unneeded_since >= CA_UNNEEDED_S
                and now - self.last_scale_up >= CA_DELAY_AFTER_ADD_S
            ):
                removable.append(name)
        if not removable:
            if self.nodes and now - self.last_scale_up < CA_DELAY_AFTER_ADD_S:
                self._at(self.last_scale_up + CA_DELAY_AFTER_ADD_S)
            return
        empty = [n for n in removable if used.get(n, 0.0) == 0][:CA_EMPTY_BULK]
        for name in empty:
            self._remove(name, now, SCALE_DOWN)
        if empty:
            return
        view = self._view(now)
        for name in removable:  # one non-empty node a scan, if its pods fit elsewhere
            if self._fits_elsewhere(name, view, set()):
                self._remove(name, now, SCALE_DOWN)
                return

    def _fits_elsewhere(self, name: str, view: _View, skip: set[str]) -> bool:
        """Whether the pods of node ``name`` fit on the other nodes up (but ``skip``)."""
        pods = view.pods.get(name, [])
        if not pods:
            return True
        room = view.room
        out = [view.rows[n] for n in (name, *skip) if n in view.rows]
        free = float(room.gpus.sum()) - float(room.gpus[out].sum())
        if free < sum(pod_gpus(spec) for spec in pods) - 1e-9:
            return False  # not enough GPUs left at all: no need to place them one by one
        keep = np.ones(len(room.specs), dtype=np.bool_)
        keep[out] = False
        rows = np.flatnonzero(keep)
        if rows.size == 0:
            return False
        sub = Room.of(
            [room.specs[k] for k in rows], (room.gpus[rows], room.cpu[rows], room.memory[rows])
        )
        return all(sub.take(Want("", "", 1, spec, 0.0), soon=False) for spec in pods)

    def _view(self, now: float) -> _View:
        """The nodes up, what is free on them and which pods run where (one pass)."""
        ledger = self.cache.ledger()
        names = ledger.state.names
        pods: dict[str, list[PodSpec]] = {}
        for running in ledger.running.values():
            pods.setdefault(names[running.node], []).append(running.spec)
        room = self._room(now, soon=False, held=True)
        return _View(room, pods, {spec.name: k for k, spec in enumerate(room.specs)})

    # Karpenter ------------------------------------------------------------------------------

    def _karpenter(self, now: float) -> None:
        launched: list[tuple[Stock, int, Room, int]] = []
        for i, spec in self._unhelped(now):
            want = Want("", "", 1, spec, 0.0)
            if any(room.take(want, soon=False) for _, _, room, _ in launched):
                continue
            options = [
                s
                for s in self.stock
                if s.pool not in self.avoid and per_node(spec, s.offer.template) > 0
            ]
            for stock in sorted(options, key=lambda s: (s.hourly, s.pool)):
                numbers = stock.free_numbers(1)
                if numbers is None:
                    continue
                stock.used.update(numbers)
                room = Room.of([stock.offer.template], _full(stock.offer.template))
                room.take(want, soon=False)
                launched.append((stock, numbers[0], room, i))
                break
        for stock, number, _, i in launched:
            request = self._ask(stock, (number,), -1, now)
            request.nodes[0].for_job = i if self.jobs[i].pods > 1 else -1
        self._karpenter_down(now)

    def _karpenter_down(self, now: float) -> None:
        used, _ = self._use()
        budget = max(1, math.floor(KARPENTER_BUDGET * len(self.nodes)))
        gone: set[str] = set()
        view: _View | None = None
        for name, node in list(self.nodes.items()):
            if len(gone) >= budget:
                break
            if now - node.ready < KARPENTER_CONSOLIDATE_AFTER_S:
                self._at(node.ready + KARPENTER_CONSOLIDATE_AFTER_S)
                continue
            if used.get(name, 0.0) == 0:
                if node.empty_since is None:
                    node.empty_since = now
                    self._at(now + KARPENTER_CONSOLIDATE_AFTER_S)
                    continue
                if now - node.empty_since >= KARPENTER_CONSOLIDATE_AFTER_S:
                    self._remove(name, now, SCALE_DOWN)
                    gone.add(name)
                continue
            node.empty_since = None
            if self.waiting:
                continue  # pods wait: consolidation would only make more of them wait
            if view is None:
                view = self._view(now)
            if self._fits_elsewhere(name, view, gone):
                self._remove(name, now, SCALE_DOWN)
                gone.add(name)
                view = None

    # -- the figures --------------------------------------------------------------------------

    def replay(self) -> SupplyRun:
        """Run the replay to its end (every job finished, or waiting with nothing left to
        happen), then the nodes still up go."""
        run = self.run()
        end = run.simulated_s
        nodes = [*self.gone, *self.nodes.values()]
        ready = np.array([n.ready for n in nodes], dtype=np.float64)
        down = np.array([n.down if not math.isnan(n.down) else end for n in nodes])
        up_s = np.clip(down - ready, 0.0, None)
        hourly = np.array([n.stock.hourly for n in nodes])
        gpus = np.array([n.stock.offer.gpus for n in nodes], dtype=np.float64)
        spend = float((up_s * hourly).sum() / 3600.0 + self.system_hourly * end / 3600.0)
        columns = self.runlog.columns() if self.runlog is not None else None
        assert columns is not None
        run_end = np.minimum(columns.end, end)
        held = np.clip(run_end - columns.start, 0.0, None)
        allocated = float((held * columns.gpus).sum() / 3600.0)
        # idle: per node, time up minus the union of its runs
        by_index = {n.index: k for k, n in enumerate(nodes)}
        busy = np.zeros(len(nodes))
        order = np.lexsort((columns.start, columns.node))
        last_node, reach = -1, -math.inf
        for r in order:
            k = by_index.get(int(columns.node[r]))
            if k is None or columns.gpus[r] <= 0:
                continue
            s, e = float(columns.start[r]), float(run_end[r])
            if int(columns.node[r]) != last_node:
                last_node, reach = int(columns.node[r]), -math.inf
            s = max(s, reach)
            if e > s:
                busy[k] += e - s
                reach = e
        idle = float(np.clip(up_s - busy, 0.0, None).sum() / 3600.0)
        # incomplete gangs: nodes bought for a gang, up before it started; and pods of
        # gangs not started holding GPUs
        incomplete_s = 0.0
        incomplete_cost = 0.0
        runs_on: dict[int, list[tuple[float, float]]] = {}
        for r in range(len(columns.pods)):
            if columns.gpus[r] > 0:
                runs_on.setdefault(int(columns.node[r]), []).append(
                    (float(columns.start[r]), float(run_end[r]))
                )
        for k, n in enumerate(nodes):
            if not n.for_waiting or self.jobs[n.for_job].pods <= 1 or math.isnan(n.ready):
                continue
            start = self._started_after(n.for_job, n.ready, end)
            stop = min(start, float(down[k]))
            # the time it held nothing: what pods held there is counted by their share below
            span = _uncovered(n.ready, stop, runs_on.get(n.index, []))
            incomplete_s += span
            incomplete_cost += span * hourly[k] / 3600.0
        partial_s, partial_cost = self._partial_gangs(columns, run_end, nodes, by_index)
        incomplete_s += partial_s
        incomplete_cost += partial_cost
        work = sum(self.work_done_s(i, end) * job.gpus for i, job in enumerate(self.jobs))
        actions = {a.action: a for a in run.actions}
        down_lost = actions[SCALE_DOWN].lost_gpu_hours if SCALE_DOWN in actions else 0.0
        spot_lost = actions[SPOT_EVICTION].lost_gpu_hours if SPOT_EVICTION in actions else 0.0
        return SupplyRun(
            policy=self.supply.name,
            seed=self.seed,
            replay=run,
            spend=spend,
            node_hours=float(up_s.sum() / 3600.0),
            gpu_hours=float((up_s * gpus).sum() / 3600.0),
            allocated_gpu_hours=allocated,
            idle_node_hours=idle,
            incomplete_node_hours=incomplete_s / 3600.0,
            incomplete_spend=incomplete_cost,
            work_gpu_hours=work / 3600.0,
            scale_down_evictions=self.scale_down_evictions,
            scale_down_lost_gpu_hours=down_lost,
            checkpoint_moves=self.checkpoint_moves,
            interruptions=self.interruptions,
            interrupted_jobs=self.interrupted_jobs,
            interruption_lost_gpu_hours=spot_lost,
            requests=len(self.requests),
            failed_requests=self.failed,
            peak_nodes=self.peak,
            end_s=end,
            timeline=self._timeline(nodes, (ready, down), columns, run_end, end),
        )

    def _started_after(self, i: int, t: float, end: float) -> float:
        """When job ``i`` first started at or after ``t`` (``end``: it did not)."""
        return next((s for s in self.run_starts.get(i, ()) if s >= t), end)

    def _partial_gangs(
        self,
        columns: RunColumns,
        run_end: FloatArray,
        nodes: Sequence[_Node],
        by_index: dict[int, int],
    ) -> tuple[float, float]:
        """Node-time (and its cost) that pods of gangs not yet started held: each such
        pod's run before its job's start, at its node's price for its share of the GPUs."""
        seconds = cost = 0.0
        for r in range(len(columns.pods)):
            i = int(columns.owner[r])
            job = self.jobs[i]
            if job.pods <= 1:
                continue
            k = by_index.get(int(columns.node[r]))
            if k is None:
                continue
            start = self._job_start_for_run(i, float(columns.start[r]), float(run_end[r]))
            span = max(0.0, min(start, float(run_end[r])) - float(columns.start[r]))
            if span <= 0:
                continue
            node = nodes[k]
            share = float(columns.gpus[r]) / max(node.stock.offer.gpus, 1)
            seconds += span * share
            cost += span * share * node.stock.hourly / 3600.0
        return seconds, cost

    def _job_start_for_run(self, i: int, start: float, end: float) -> float:
        """When job ``i``'s run that holds a pod from ``start`` started (``end``: it never
        did while that pod held its GPUs)."""
        return next((s for s in self.run_starts.get(i, ()) if start <= s <= end), end)

    def _timeline(
        self,
        nodes: Sequence[_Node],
        span: tuple[FloatArray, FloatArray],
        columns: RunColumns,
        run_end: FloatArray,
        end: float,
    ) -> tuple[tuple[float, float, float, float], ...]:
        """Every :data:`SAMPLE_S`: GPUs of the nodes up, GPUs pods held, GPUs waiting jobs
        asked for."""
        ready, down = span
        times = np.arange(0.0, end + SAMPLE_S, SAMPLE_S)
        gpus = np.array([n.stock.offer.gpus for n in nodes], dtype=np.float64)
        up = ((ready[None, :] <= times[:, None]) & (down[None, :] > times[:, None])) @ gpus
        held = (
            (columns.start[None, :] <= times[:, None]) & (run_end[None, :] > times[:, None])
        ) @ columns.gpus
        waits = np.array(
            self.waits + [(s, end, float(self.jobs[i].gpus)) for i, s in self.waiting.items()]
        )
        if waits.size:
            pending = (
                (waits[None, :, 0] <= times[:, None]) & (waits[None, :, 1] > times[:, None])
            ) @ waits[:, 2]
        else:
            pending = np.zeros_like(times)
        return tuple(
            (float(t), float(u), float(h), float(p))
            for t, u, h, p in zip(times, up, held, pending, strict=True)
        )


def _uncovered(start: float, stop: float, runs: Sequence[tuple[float, float]]) -> float:
    """How much of ``[start, stop)`` no run of ``runs`` covers."""
    covered, reach = 0.0, start
    for begin, end in sorted(runs):
        s, e = max(begin, reach), min(end, stop)
        if e > s:
            covered += e - s
            reach = e
    return max(0.0, stop - start - covered)


def _full(spec: NodeSpec) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return (
        np.array([float(spec.gpus)]),
        np.array([float(spec.cpu_milli)]),
        np.array([float(spec.memory_mib)]),
    )


def _pack(pods: Sequence[PodSpec], template: NodeSpec) -> list[list[int]]:
    """First-fit decreasing of ``pods`` (by index) onto nodes like ``template``; pods that
    fit no such node are left out."""
    order = sorted(range(len(pods)), key=lambda k: (-pod_gpus(pods[k]), k))
    bins: list[list[int]] = []
    free: list[list[float]] = []
    for k in order:
        pod = pods[k]
        if per_node(pod, template) == 0:
            continue
        need = (pod_gpus(pod), pod.cpu_milli, pod.memory_mib)
        for b, f in enumerate(free):
            if all(f[j] >= need[j] - 1e-9 for j in range(3)):
                bins[b].append(k)
                for j in range(3):
                    f[j] -= need[j]
                break
        else:
            bins.append([k])
            f = [float(template.gpus), float(template.cpu_milli), float(template.memory_mib)]
            free.append([f[j] - need[j] for j in range(3)])
    return bins


def peak_nodes(jobs: Sequence[ReplayJob], node_gpus: int) -> int:
    """Nodes of ``node_gpus`` GPUs that the trace's peak asks for: its GPUs demanded at the
    busiest moment if every job started on arrival, whole nodes per job of more than one."""
    if not jobs:
        return 0
    times = np.array([j.arrival_s for j in jobs] + [j.arrival_s + j.duration_s for j in jobs])
    gpus = np.array(
        [math.ceil(j.gpus / node_gpus) * node_gpus if j.pods > 1 else j.gpus for j in jobs]
    )
    delta = np.concatenate([gpus, -gpus]).astype(np.float64)
    order = np.lexsort((delta, times))  # ends before starts at one instant
    peak = float(np.cumsum(delta[order]).max())
    return math.ceil(peak / node_gpus)
