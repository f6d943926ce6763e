"""Training and inference on one cluster: a serving load beside a training trace.

A serving pool of whole nodes runs replicas of one inference service, as many per 600 s
window as its load asks (``load/traces/servegen.py``: ``ceil(rate x headroom / mu)``), each
a pod of one whole node's GPUs in the serving queue; the service's Deployment is scaled at each
window, as an HPA would: new replicas are created pending (the cycle binds them, taking lent
GPUs back by reclaim where it must) and surplus ones are deleted, pending ones first, then
the newest. Beside it, a training pool runs a training trace in one training queue. The
serving queue is guaranteed the serving pool's GPUs, the training queue the training
pool's.

Each :class:`BalancePolicy` is a configuration of the one cycle, run by the replay
(``sim/replay.py``) with the serving Deployment added:

* ``static`` — Lyra's baseline: each side on its own nodes (a node selector by pool),
  nothing lent, training jobs not elastic;
* ``naive-loaning`` — training may use any idle GPU; the serving queue takes its GPUs
  back by reclaim as soon as its replicas wait, victims judged by the GPU-time they have
  run (the cycle is not told when jobs checkpoint), no forecast, jobs not elastic;
* ``lyra-greedy`` — as naive loaning, but jobs of at least one node's GPUs are elastic
  (``minMember`` half their pods, rounded up; :func:`~gpufleet.sim.replay.elastic_rate`), so
  reclaim shrinks them before it stops any job and picks the nodes whose victims cost least
  (Lyra's greedy reclaim by preemption cost);
* ``gpufleet`` — as Lyra-greedy, and the serving queue keeps its forecast back from lending
  as whole free nodes (``spec.serving.forecastGPUs``, admission.py): the most replicas the
  same windows of the previous :data:`FORECAST_DAYS` days asked for over the next
  :data:`HORIZON_S`, or what it asks now if more; pods say when they checkpoint, so victims
  lose the least work since their last checkpoint; and borrowed pods are moved to gather
  whole nodes for replicas when no queue is over its quota (``consolidate-serving``).

What is measured for training comes from the replay's meter; for serving, here: the share
of windows that end with fewer replicas running than asked for, the replica-minutes short,
the time from a replica's creation to its binding (reclaim latency), and the requests
served (each window's requests, times the share of its replicas that ran).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.nodes import price_nodes
from gpufleet.model.balance import LENDING_POLICY_NAMES, BalanceRun, ServingFigures
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import NodeConstraint, Requirement
from gpufleet.model.workload import PodInfo, QueueSpec, ReplayJob, vector
from gpufleet.plugins.registry import ReplayPolicy
from gpufleet.scheduler.state.changes import Event
from gpufleet.sim.clock import ARRIVAL
from gpufleet.sim.replay import Replay
from gpufleet.sim.window import trace_window

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.arrays import IntArray
    from gpufleet.model.cluster import NodeSpec
    from gpufleet.scheduler.api.outcome import Binding, Eviction

SERVING = "serving"
"""The serving queue."""
TRAINING = "training"
"""The training queue."""
POOL_LABEL = "gpufleet.io/pool"
"""The node label naming a node's pool (``serving`` or ``training``)."""
HORIZON_S = 3600.0
"""How far ahead the forecast looks: the time a reclaim may take (eviction grace, restart
of the cycle) with margin; the previous day's windows over it are the forecast."""
DAY_S = 86_400.0
FORECAST_DAYS = 7
"""How many previous days' same windows the forecast looks at."""
GRACE_S = 30.0
"""The eviction grace of the pods a replica's binding evicts (Kubernetes' default
``terminationGracePeriodSeconds``): the replica starts that much after it is bound."""
WINDOW_EVENT = -1
"""The payload's job index of a window's scaling event."""


@dataclass(frozen=True, slots=True)
class BalancePolicy:
    name: str
    lend: bool
    """Training may run on any node (else only on the training pool's)."""
    elastic: bool
    """Jobs of at least one node's GPUs are elastic (``minMember`` half their pods)."""
    forecast: bool
    """The serving queue keeps its forecast back from lending."""
    reads_checkpoints: bool
    """Pods say when they checkpoint (victims lose the least work since then)."""
    description: str = ""
    actions: tuple[str, ...] = ("reclaim",)
    """The cycle's actions that make room."""


BALANCE_POLICIES = (
    BalancePolicy("static", False, False, False, False, "each side on its own nodes, nothing lent"),
    BalancePolicy(
        "naive-loaning",
        True,
        False,
        False,
        False,
        "idle GPUs lent; reclaimed from the jobs that ran least, no forecast, not elastic",
    ),
    BalancePolicy(
        "lyra-greedy",
        True,
        True,
        False,
        False,
        "idle GPUs lent to elastic jobs; reclaim shrinks first, cheapest nodes, no forecast",
    ),
    BalancePolicy(
        "gpufleet",
        True,
        True,
        True,
        True,
        "as lyra-greedy, with the forecast kept back, checkpoint-aware victims, and borrowed "
        "pods moved to gather whole nodes for replicas",
        actions=("reclaim", "consolidate-serving"),
    ),
)


if tuple(p.name for p in BALANCE_POLICIES) != LENDING_POLICY_NAMES:  # what a study may name
    raise RuntimeError("BALANCE_POLICIES and model/balance.py LENDING_POLICY_NAMES differ")


@dataclass(frozen=True, slots=True)
class Lending:
    """A lending replay's setup (``simulate --protocol balance``, a study's ``balance``
    runs): the training jobs of the span, the two pools, and the serving load per window."""

    jobs: tuple[ReplayJob, ...]
    span_s: float
    windows: int
    training_size: int
    serving_pool: tuple[NodeSpec, ...]
    training_pool: tuple[NodeSpec, ...]
    replicas: tuple[int, ...]
    rate: tuple[float, ...]
    window_s: float


def lending(
    jobs: Sequence[ReplayJob],
    template: NodeSpec,
    *,
    window: tuple[float, float | None],
    load: tuple[Sequence[float], float, Sequence[int]],
    serving_nodes: int,
) -> Lending:
    """The setup of a lending replay: the serving load (``load``: its rate per window, the
    window's seconds, and the replicas it needs per window) from ``window``'s start for
    ``until - since`` seconds (whole windows; the whole load without ``until``), the
    training ``jobs`` arriving in that span, ``serving_nodes`` serving nodes and a training
    pool sized by :func:`training_nodes`, every node like ``template``. ValueError: an
    ``until`` not after ``since``."""
    since, until = window
    rate, window_s, replicas = load
    span = len(rate) * window_s if until is None else until - since
    if not (math.isfinite(span) and span > 0):
        raise ValueError(f"until ({until:g}) must be after since ({since:g})")
    windows = min(len(rate), math.ceil(span / window_s))
    span = windows * window_s
    mine = tuple(j for j in trace_window(jobs, since) if j.arrival_s < span)
    size = training_nodes(mine, span, template.gpus)
    return Lending(
        mine,
        span,
        windows,
        size,
        tuple(pool_nodes(template, SERVING, serving_nodes)),
        tuple(pool_nodes(template, TRAINING, size)),
        tuple(int(r) for r in replicas[:windows]),
        tuple(float(r) for r in rate[:windows]),
        window_s,
    )


def replay_lending(setup: Lending, policy: str, workload: str) -> BalanceRun:
    """The lending replay of ``setup`` under policy ``policy`` (a name of
    :data:`BALANCE_POLICIES`)."""
    return BalanceReplay(
        list(setup.serving_pool),
        list(setup.training_pool),
        list(setup.jobs),
        next(p for p in BALANCE_POLICIES if p.name == policy),
        replicas=np.array(setup.replicas, dtype=np.int64),
        rate=list(setup.rate),
        window_s=setup.window_s,
        workload=workload,
    ).replay()


TRAINING_LOAD = 1.1
"""How much work the training trace offers its pool, over the pool's capacity."""


def pool_nodes(template: NodeSpec, pool: str, count: int) -> list[NodeSpec]:
    """``count`` nodes like ``template``, named ``<pool>-<k>``, labelled with their pool."""
    labels = {**template.labels, POOL_LABEL: pool}
    return [replace(template, name=f"{pool}-{k}", labels=labels) for k in range(count)]


def training_nodes(jobs: Sequence[ReplayJob], span_s: float, node_gpus: int) -> int:
    """Nodes of ``node_gpus`` GPUs such that ``jobs`` (arriving in ``[0, span_s)``) offer
    :data:`TRAINING_LOAD` of their capacity over the span: the GPU-time they could run
    within it, each job cut at the span's end, over the nodes' GPU-time."""
    work = sum(job.gpus * min(job.duration_s, max(0.0, span_s - job.arrival_s)) for job in jobs)
    return max(1, round(work / (TRAINING_LOAD * span_s * node_gpus)))


def elastic_jobs(jobs: Sequence[ReplayJob], node_gpus: int) -> list[ReplayJob]:
    """``jobs`` with those of at least ``node_gpus`` GPUs elastic: ``minMember`` is half
    their pods, rounded up (a one-pod job stays whole)."""
    return [
        replace(job, min_pods=math.ceil(job.pods / 2))
        if job.gpus >= node_gpus and job.pods > 1
        else job
        for job in jobs
    ]


def forecast(replicas: IntArray, windows_ahead: int, per_day: int, days: int = 1) -> IntArray:
    """Per window, the replicas to keep back: the most that the same windows of the last
    ``days`` days asked for over the next ``windows_ahead`` windows, or what the window asks
    now if more (before a day has passed, only what it asks)."""
    wanted = np.asarray(replicas, dtype=np.int64)
    out = wanted.copy()
    for day in range(1, days + 1):
        for k in range(windows_ahead + 1):
            lag = day * per_day - k  # window w looks at window w - lag
            if 0 < lag < wanted.size:
                np.maximum(out[lag:], wanted[:-lag], out=out[lag:])
    return out


class BalanceReplay(Replay):
    """The replay of ``jobs`` with a serving Deployment that wants ``replicas[w]`` pods of
    ``replica`` in window ``w`` (see the module docstring)."""

    def __init__(
        self,
        serving_nodes: Sequence[NodeSpec],
        training_nodes: Sequence[NodeSpec],
        jobs: Sequence[ReplayJob],
        policy: BalancePolicy,
        *,
        replicas: IntArray,
        rate: Sequence[float],
        window_s: float,
        seed: int = 0,
        period_s: float = 300.0,
        checkpoint_interval_s: float = 1800.0,
        restart_s: float = 120.0,
        grace_s: float = GRACE_S,
        workload: str = "",
    ) -> None:
        self.balance = policy
        self.grace_s = grace_s
        node_gpus = max(n.gpus for n in (*serving_nodes, *training_nodes))
        serving_gpus = float(sum(n.gpus for n in serving_nodes))
        training_gpus = float(sum(n.gpus for n in training_nodes))
        self.training_gpus = training_gpus
        """The training queue's GPU quota: what it holds beyond is borrowed."""
        train = [replace(job, queue=TRAINING) for job in jobs]
        if policy.elastic:
            train = elastic_jobs(train, node_gpus)
        if not policy.lend:
            train = [
                replace(job, spec=replace(job.spec, constraint=_pool(TRAINING))) for job in train
            ]
        self.window_s = window_s
        self.replicas = np.asarray(replicas, dtype=np.int64)
        self.rate = np.asarray(rate, dtype=np.float64)
        windows_ahead = max(0, math.ceil(HORIZON_S / window_s))
        self.keep = (
            forecast(self.replicas, windows_ahead, round(DAY_S / window_s), FORECAST_DAYS)
            if policy.forecast
            else None
        )
        self.replica_gpus = node_gpus
        template = serving_nodes[0]
        self.replica_spec = _replica_spec(template, node_gpus, lend=policy.lend)
        self.serving_queue = QueueSpec(
            SERVING,
            quota=vector(serving_gpus),
            quota_set=(True, False, False),
            serving=True,
        )
        queues = (
            self.serving_queue,
            QueueSpec(TRAINING, quota=vector(training_gpus), quota_set=(True, False, False)),
        )
        replay_policy = ReplayPolicy(
            policy.name,
            "gpufleet",
            gangs=True,
            tenant_queues=True,
            actions=policy.actions,
            reads_checkpoints=policy.reads_checkpoints,
        )
        super().__init__(
            [*serving_nodes, *training_nodes],
            train,
            replay_policy,
            queues=queues,
            seed=seed,
            period_s=period_s,
            workload=workload,
            checkpoint_interval_s=checkpoint_interval_s,
            restart_s=restart_s,
            other_pods=[self.replica_spec] * _created(self.replicas),
        )
        self.serving = ServingFigures()
        self.pods: list[str] = []
        """The Deployment's pods, oldest first."""
        self.created: dict[str, float] = {}
        self.bound: set[str] = set()
        self.count = 0
        self.last = 0.0
        """When the serving figures were last brought up to date."""
        self.window_running_s = 0.0
        for w in range(self.replicas.size):
            self.events.push(w * window_s, ARRIVAL, (WINDOW_EVENT, w))
            self.other_events += 1

    # -- the serving Deployment -------------------------------------------------------

    def _window(self, w: int, now: float) -> None:
        """Window ``w`` begins: the last one's figures are closed, the Deployment is scaled
        to its replicas and the serving queue's forecast set."""
        self._account(now)
        serving = self.serving
        if w > 0:
            self._close_window(w - 1)
        wanted = int(self.replicas[w])
        serving.replicas.append(wanted)
        while len(self.pods) < wanted:
            self._create_replica(now)
        while len(self.pods) > wanted:
            pending = [k for k in self.pods if k not in self.bound]
            key = pending[-1] if pending else self.pods[-1]
            self._delete_replica(key, now)
        if self.keep is not None:
            gpus = float(self.keep[w] * self.replica_gpus)
            if gpus != self.serving_queue.forecast_gpus:
                self.serving_queue = replace(self.serving_queue, forecast_gpus=gpus)
                self.cache.apply(Event("MODIFIED", "Queue", self.serving_queue))

    def _close_window(self, w: int) -> None:
        serving = self.serving
        wanted = int(self.replicas[w])
        serving.windows += 1
        running = len(self.bound)
        if running < wanted:
            serving.short_windows += 1
        requests = float(self.rate[w]) * self.window_s
        serving.requests += requests
        share = 1.0 if wanted == 0 else min(1.0, self.window_running_s / (wanted * self.window_s))
        serving.served += requests * share
        self.window_running_s = 0.0
        training = float(self.cache.ledger().alloc[TRAINING][0])
        serving.lent_gpus.append(max(0.0, training - self.training_gpus))

    def _create_replica(self, now: float) -> None:
        key = f"{SERVING}/replica-{self.count}"
        self.count += 1
        pod = PodInfo(
            key,
            replace(self.replica_spec, name=key),
            queue=SERVING,
            created=now,
        )
        self.pods.append(key)
        self.created[key] = now
        self.cache.apply(Event("ADDED", "Pod", pod))

    def _delete_replica(self, key: str, now: float) -> None:
        """Replica ``key`` is deleted: one never bound counts at its wait so far."""
        pod = self.cache.pods.get(key)
        if pod is not None:
            self.cache.apply(Event("DELETED", "Pod", pod))
        self.pods.remove(key)
        if key in self.bound:
            self.bound.discard(key)
        else:
            self.serving.never_bound += 1
            self.serving.latencies_s.append(now - self.created[key])
        self.created.pop(key, None)

    def _account(self, now: float) -> None:
        """Count the replica time since the last change, short or running."""
        dt = now - self.last
        if dt > 0:
            running = len(self.bound)
            wanted = len(self.pods)
            self.serving.short_replica_s += max(0, wanted - running) * dt
            self.window_running_s += min(running, wanted) * dt
            self.serving.held_gpu_s += running * self.replica_gpus * dt
        self.last = now

    # -- hooks of the replay ----------------------------------------------------------

    def _other_event(self, payload: tuple[int, int], now: float) -> bool:
        _, w = payload
        self._window(w, now)
        return True

    def _other_bound(self, binding: Binding, now: float) -> None:
        key = binding.pod
        self._account(now)
        pod = self.cache.pods[key]
        self.cache.apply(
            Event("MODIFIED", "Pod", pod.placed(binding.node, binding.gpus or (), now))
        )
        self.bound.add(key)
        latency = now - self.created[key]
        if binding.pipelined:  # on capacity being freed: it starts once its victims are gone
            latency += self.grace_s
            self.serving.short_replica_s += self.grace_s
            self.window_running_s = max(0.0, self.window_running_s - self.grace_s)
        self.serving.latencies_s.append(latency)

    def _other_evicted(self, eviction: Eviction, now: float) -> None:
        """A replica was evicted (its queue above its share): its ReplicaSet makes a new
        one, pending."""
        self._account(now)
        self._delete_replica(eviction.pod, now)
        self._create_replica(now)

    def replay(self) -> BalanceRun:
        """Replay the windows of the serving load (the training trace's jobs that have
        not finished by then are counted as they stand)."""
        end = self.replicas.size * self.window_s
        training = self.run(until=end)
        self._account(end)
        if self.replicas.size:
            self._close_window(self.replicas.size - 1)
        self.serving.latencies_s += [
            end - self.created[k] for k in self.pods if k not in self.bound
        ]
        work = sum(self.work_done_s(i, end) * job.gpus for i, job in enumerate(self.jobs))
        return BalanceRun(
            policy=self.balance.name,
            training=training,
            serving=self.serving,
            work_gpu_hours=work / 3600.0,
            shrinks=self.shrinks,
            evicted_gpus=self.evicted_gpus,
            hours=end / 3600.0,
        )


def hourly_price(nodes: Sequence[NodeSpec], sheet: PriceSheet) -> float:
    """What ``nodes`` cost an hour under ``sheet``."""
    priced = price_nodes(nodes, sheet)
    return float((priced.capacity * priced.prices).sum())


def _created(replicas: IntArray) -> int:
    """How many replicas scaling to ``replicas`` window by window creates."""
    return int(np.diff(replicas, prepend=0).clip(min=0).sum())


def _pool(name: str) -> NodeConstraint:
    return NodeConstraint(terms=((Requirement(POOL_LABEL, "In", (name,)),),))


def _replica_spec(template: NodeSpec, gpus: int, *, lend: bool) -> PodSpec:
    """A replica: ``gpus`` GPUs and three quarters of the CPU and memory that go with them
    on ``template`` (what the system leaves), on the serving pool's nodes unless lending."""
    share = 0.75 * gpus / template.gpus
    return PodSpec(
        "replica",
        int(template.cpu_milli * share),
        int(template.memory_mib * share),
        gpus,
        1000,
        constraint=None if lend else _pool(SERVING),
    )
