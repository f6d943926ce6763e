"""The composition root: the one place where gpufleet's parts are put together.

The scheduling core takes its placement plugins, policies and actions from the
:class:`~gpufleet.scheduler.cycle.components.Components` it is handed; this module builds the one
that ships — the catalogue of ``plugins/registry.py`` and the actions of
``scheduler/room/`` — and offers the entry points the edges call: a cache for a live
cluster or a replay, and one cycle over a snapshot.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.autoscale import (
    DRAIN_SHARE,
    FITS_HELD,
    NodeUse,
    Release,
    Room,
    ScaleUp,
    Stock,
    Waiting,
    Want,
    per_node,
    plan_drain,
    plan_scale_down,
    plan_scale_up,
    price_stock,
)
from gpufleet.cost.nodes import price_nodes
from gpufleet.cost.rates import hourly_cost, running_hourly
from gpufleet.model.costs import CycleCost, HourlyCost, Sheet
from gpufleet.model.node import NodeSpec
from gpufleet.model.progress import move_after_checkpoint
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.model.workload import GroupSpec, QueueSpec
from gpufleet.plugins.registry import FIT_FILTERS, PLUGINS, POLICIES
from gpufleet.scheduler.cycle.components import Components
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Session
from gpufleet.scheduler.placement.topology import DomainTopology
from gpufleet.scheduler.queues.admission import QueueAdmission
from gpufleet.scheduler.queues.holds import freed_within
from gpufleet.scheduler.queues.order import QueueOrder
from gpufleet.scheduler.room.builtin import builtin_actions
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import snapshot_events

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.supply import NodeOffer
    from gpufleet.model.workload import PodInfo, Snapshot
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.state.ledger import Ledger

COMPONENTS = Components(
    PLUGINS, POLICIES, FIT_FILTERS, builtin_actions(), QueueOrder, QueueAdmission, DomainTopology
)
"""gpufleet's plugins, policies, actions and queue rules."""


def new_cache(
    config: CycleConfig, workload: Sequence[PodSpec] | None = None, *, strict: bool = True
) -> ClusterCache[Components]:
    """An empty cluster cache with gpufleet's components (see ``scheduler/state/cache.py``; a
    live cluster's is not ``strict``)."""
    return ClusterCache(
        config.non_preemptible_priority, components=COMPONENTS, workload=workload, strict=strict
    )


def schedule_snapshot(
    snapshot: Snapshot, now: float, config: CycleConfig | None = None
) -> CycleResult:
    """Schedule ``snapshot`` once at ``now``: every object applied to an empty cache, then
    one session — the what-if edge (``gpufleet schedule``)."""
    config = config or CycleConfig()
    # The cache is dropped after this one cycle: its decisions need not be assumed into it.
    return Session(_snapshot_cache(snapshot, config), config, now).cycle.run()


def _snapshot_cache(snapshot: Snapshot, config: CycleConfig) -> ClusterCache[Components]:
    """A cache holding every object of ``snapshot``, as a what-if reads it."""
    cache = new_cache(config)
    cache.apply_all(snapshot_events(snapshot))
    return cache


def schedule_snapshot_autoscaled(
    snapshot: Snapshot, now: float, config: CycleConfig, sheet: PriceSheet
) -> tuple[CycleResult, ScaleUp]:
    """:func:`schedule_snapshot`, and the nodes to buy for the jobs it leaves pending, or
    the nodes that may go (``gpufleet schedule --autoscale``, :func:`plan_pending`). A node
    type the sheet does not price raises :class:`~gpufleet.cost.nodes.UnpricedNodeError`."""
    cache = _snapshot_cache(snapshot, config)
    result = Session(cache, config, now).run()
    return result, plan_pending(
        cache, result, offers=snapshot.offers, sheet=sheet, config=config, now=now, releases=True
    )


def plan_pending(
    cache: ClusterCache[Components],
    result: CycleResult,
    *,
    offers: Sequence[NodeOffer],
    sheet: PriceSheet,
    config: CycleConfig,
    now: float,
    skip: Collection[str] = (),
    avoid: frozenset[str] = frozenset(),
    coming: Mapping[str, int] | None = None,
    asked_gpus: Mapping[str, float] | None = None,
    releases: bool = False,
) -> ScaleUp:
    """The nodes to buy for the jobs ``result`` leaves pending, but ``skip`` (jobs whose
    nodes are already asked for), from ``offers`` priced by ``sheet`` (``cost/autoscale.py``):
    the room the cycle's bindings leave in ``cache`` (none on nodes held for a job, labelled
    :data:`~gpufleet.model.supply.PROVISIONED_FOR_LABEL`) and what running pods are expected
    to free within the longest provisioning delay. The edges share it: ``gpufleet schedule
    --autoscale`` and the live scheduler's ProvisioningRequests (``kube/process/provision.py``).
    A node already in the cluster counts toward its pool's ``maxNodes`` when it carries the
    pool's template labels; ``coming``: per pool, nodes asked for that are not there yet
    (counted too); ``asked_gpus``: per queue, the GPUs of jobs whose nodes are asked for
    (counted against its limit). With ``releases``, the plan also names the nodes that may
    go (:func:`plan_releases`)."""
    ledger = cache.ledger()
    state = ledger.state
    nodes = [n for name in state.names if isinstance(n := cache.objects["Node"][name], NodeSpec)]
    stock = price_stock(offers, sheet)
    for item in stock:  # the pool's own nodes hold their numbers
        prefix = f"{item.pool}-"
        item.used = {
            int(name[len(prefix) :])
            for name in state.names
            if name.startswith(prefix) and name[len(prefix) :].isdigit()
        }
        mine = sum(1 for node in nodes if item.offer.owns(node))
        # Nodes of the pool named otherwise (a cloud's names) count with placeholder numbers.
        item.used |= set(range(min(len(item.used) - mine, 0), 0))
        low = min(min(item.used, default=0), 0)  # and the nodes on their way, below those
        item.used |= set(range(low - (coming or {}).get(item.pool, 0), low))
    delay = max((o.delay_s for o in offers), default=0.0)
    freed = freed_within(
        ledger.running.values(), state.size, now, delay, config.expected_duration_s
    )
    held = np.array([PROVISIONED_FOR_LABEL in node.labels for node in nodes])
    gpus, cpu, memory = (
        np.where(held, 0.0, v.astype(np.float64))
        for v in (state.gpu_whole_free, state.cpu_free, state.memory_free)
    )
    room = Room.of(
        nodes,
        (gpus, cpu, memory),
        (
            np.where(held, 0.0, gpus + freed[0]),
            np.where(held, 0.0, cpu + freed[1]),
            np.where(held, 0.0, memory + freed[2]),
        ),
    )
    pods = cache.pods
    groups = cache.objects["PodGroup"]
    pending: dict[str, list[PodInfo]] = {}
    for waiting in result.pending:
        pod = pods.get(waiting.pod)
        if pod is not None and not pod.blocked and pod.gang not in skip:
            pending.setdefault(pod.gang, []).append(pod)
    own: dict[str, list[int]] = {}  # the nodes held for a job serve it first
    for k in np.flatnonzero(held):
        own.setdefault(nodes[k].labels[PROVISIONED_FOR_LABEL], []).append(int(k))
    wants: list[Want] = []
    served: list[Waiting] = []
    for key, members in pending.items():
        first = members[0]
        group = groups.get(key)
        kept = own.get(provisioned_for(key), [])
        fit = sum(per_node(first.spec, nodes[k]) for k in kept)
        if kept and fit >= len(members):
            names = tuple(nodes[k].name for k in kept)
            served.append(Waiting(key, FITS_HELD, names))
            continue
        members = members[fit:]  # noqa: PLW2901 (the pods its own nodes do not hold)
        wants.append(
            Want(
                key,
                first.queue or (group.queue if isinstance(group, GroupSpec) else ""),
                len(members),
                first.spec,
                first.progress.expected_duration_s or config.expected_duration_s,
                first.progress.checkpoint_interval_s,
                group.topology_required if isinstance(group, GroupSpec) else None,
            )
        )
    wants.sort(key=lambda w: min(p.created for p in pending[w.key]))
    headroom = {
        q.name: float(q.limit[0]) - float(ledger.alloc[q.name][0])
        for q in cache.objects["Queue"].values()
        if isinstance(q, QueueSpec) and np.isfinite(q.limit[0]) and q.name in ledger.alloc
    }
    for queue, taken in (asked_gpus or {}).items():
        if queue in headroom:
            headroom[queue] -= taken
    plan = plan_scale_up(wants, stock, room, headroom, avoid=avoid)
    waits = (*served, *plan.waiting)
    gone: tuple[Release, ...] = ()
    if releases and not plan.purchases:
        gone = plan_releases(cache, nodes=nodes, stock=stock, room=room, waits=waits, now=now)
    return ScaleUp(plan.purchases, waits, gone)


def plan_releases(
    cache: ClusterCache[Components],
    *,
    nodes: Sequence[NodeSpec],
    stock: Sequence[Stock],
    room: Room,
    waits: Sequence[Waiting],
    now: float,
) -> tuple[Release, ...]:
    """The nodes of autoscaling pools that may go (``cost/autoscale.py``), when the plan buys
    nothing: empty ones (:func:`plan_scale_down`), then those emptied by moves that lose no
    work (:func:`plan_drain`: every pod on it is gpufleet's and preemptible, of a job that
    checkpoints, runs there whole, is not elastic, asks for nothing but GPUs, CPU and
    memory — no claims, volumes, other resources, MIG, pinned CPUs or inter-pod terms, which
    the room check does not judge — and moves one second after its next checkpoint past its
    queue's ``preemptMinRuntime``), dearest per GPU first, each pool kept at its
    ``minNodes``; DaemonSet and static pods go with their node. Nodes a pending job waits
    for or is held for stay. ``nodes`` are the
    ledger's, row by row; ``room`` the free room the plan left (rows named by its specs). A
    snapshot holds no history of arrivals: no GPUs are kept free for a forecast."""
    ledger = cache.ledger()
    state = ledger.state
    kept = {name for w in waits for name in w.nodes}
    pool_of: dict[str, Stock] = {}
    for node in nodes:
        item = next((i for i in stock if i.offer.owns(node)), None)
        if item is not None:
            pool_of[node.name] = item
    on: dict[int, list[Running]] = {}
    for running in ledger.running.values():
        on.setdefault(running.node, []).append(running)
    empty: list[NodeUse] = []
    busy: list[NodeUse] = []
    moves: dict[str, tuple[tuple[str, float], ...]] = {}
    for k, node in enumerate(nodes):
        item = pool_of.get(node.name)
        if item is None or node.name in kept or PROVISIONED_FOR_LABEL in node.labels:
            continue
        pods = [r for r in on.get(k, []) if not r.pod.daemon]  # they go with the node
        gpus = float(state.gpu_count[k])
        if not pods:
            empty.append(NodeUse(node.name, gpus, item.hourly, now))
            continue
        at = _move_times(cache, ledger, k, pods, now)
        if at is not None:
            moves[node.name] = at
        used = gpus - float(state.gpu_whole_free[k])
        specs = tuple(r.spec for r in pods)
        busy.append(NodeUse(node.name, gpus, item.hourly, None, False, used, specs, at is not None))
    free = float(room.gpus.sum())
    gone = list(plan_scale_down(empty, now=now, grace_s=0.0, keep_gpus=0.0, free_gpus=free))
    rows = [k for k, spec in enumerate(room.specs) if spec.name not in gone]
    rest = Room.of(
        [room.specs[k] for k in rows], (room.gpus[rows], room.cpu[rows], room.memory[rows])
    )
    limit = max(1, math.floor(DRAIN_SHARE * len(pool_of)))
    gone += plan_drain(busy, rest, keep_gpus=0.0, limit=limit)
    left = {i.pool: sum(1 for v in pool_of.values() if v is i) - i.offer.min_nodes for i in stock}
    out = []
    for name in gone:
        item = pool_of[name]
        if left[item.pool] <= 0:
            continue  # the pool keeps its minNodes
        left[item.pool] -= 1
        out.append(Release(name, item.pool, item.hourly, moves.get(name, ())))
    return tuple(out)


def _move_times(
    cache: ClusterCache[Components], ledger: Ledger, row: int, pods: Sequence[Running], now: float
) -> tuple[tuple[str, float], ...] | None:
    """When each job on node ``row`` may move at no loss (see :func:`plan_releases`), or
    None if one may not."""
    out: dict[str, float] = {}
    for running in pods:
        pod = running.pod
        interval = pod.progress.checkpoint_interval_s
        gang = ledger.gang_running.get(pod.gang, [])
        group = ledger.groups.get(pod.gang)
        spec = running.spec
        if not ledger.evictable(pod) or interval <= 0 or pod.started is None:
            return None  # not gpufleet's to move, non-preemptible, or it never saves
        if (
            pod.claims
            or spec.volumes
            or spec.extended
            or spec.mig_profile is not None
            or spec.exclusive_cpu
            or (spec.placement is not None and spec.placement.constrained)
        ):
            return None  # where it may go is more than GPUs, CPU and memory: not judged here
        if any(ledger.running[key].node != row for key in gang):
            return None  # runs on other nodes too
        if pod.gang in ledger.partial or (group is not None and group.min_member < len(gang)):
            return None  # elastic, or below its minimum: a move would shrink or stop it
        queue = cache.objects["Queue"].get(pod.queue)
        least = queue.preempt_min_runtime_s if isinstance(queue, QueueSpec) else 0.0
        earliest = max(now, pod.started + least)
        out[pod.gang] = move_after_checkpoint(pod.started, interval, earliest)
    return tuple(sorted(out.items()))


def schedule_snapshot_costed(
    snapshot: Snapshot, now: float, config: CycleConfig, sheet: PriceSheet
) -> tuple[CycleResult, CycleCost]:
    """:func:`schedule_snapshot`, and what the cycle changes in what the cluster costs per
    hour under ``sheet``: before, with the pods the snapshot runs; after, with the cycle's
    bindings running and its evictions gone (``gpufleet schedule --cost``). A node the sheet
    does not price raises :class:`~gpufleet.cost.nodes.UnpricedNodeError`."""
    cache = _snapshot_cache(snapshot, config)
    specs = {node.name: node for node in snapshot.nodes}
    parents = {q.name: q.parent for q in snapshot.queues}

    def now_cost() -> HourlyCost:
        ledger = cache.ledger()
        names = ledger.state.names
        nodes = price_nodes([specs[name] for name in names], sheet, ledger.book.gpus_by_node())
        running = running_hourly(list(ledger.running.values()), nodes, ledger.book)
        return hourly_cost(running, parents)

    before = now_cost()
    result = Session(cache, config, now).run()
    used = Sheet(sheet.name, sheet.title, sheet.currency)
    return result, CycleCost(used, before, now_cost())


def run_cycle(snapshot: Snapshot, now: float, config: CycleConfig | None = None) -> CycleResult:
    """One cycle of ``snapshot`` at ``now``, as :func:`schedule_snapshot` runs it."""
    return schedule_snapshot(snapshot, now, config)
