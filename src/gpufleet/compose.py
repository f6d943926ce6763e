"""The composition root: the one place where gpufleet's parts are put together.

The scheduling core takes its placement plugins, policies and actions from the
:class:`~gpufleet.scheduler.cycle.components.Components` it is handed; this module builds the one
that ships — the catalogue of ``plugins/registry.py`` and the actions of
``scheduler/room/`` — and offers the entry points the edges call: a cache for a live
cluster or a replay, and one cycle over a snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.autoscale import (
    FITS_HELD,
    Room,
    ScaleUp,
    Waiting,
    Want,
    per_node,
    plan_scale_up,
    price_stock,
)
from gpufleet.cost.nodes import price_nodes
from gpufleet.cost.rates import hourly_cost, running_hourly
from gpufleet.model.costs import CycleCost, HourlyCost, Sheet
from gpufleet.model.node import NodeSpec
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
    """:func:`schedule_snapshot`, and the nodes to buy for the jobs it leaves pending
    (``gpufleet schedule --autoscale``, :func:`plan_pending`). A node type the sheet does not
    price raises :class:`~gpufleet.cost.nodes.UnpricedNodeError`."""
    cache = _snapshot_cache(snapshot, config)
    result = Session(cache, config, now).run()
    return result, plan_pending(
        cache, result, offers=snapshot.offers, sheet=sheet, config=config, now=now
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
    (counted against its limit)."""
    ledger = cache.ledger()
    state = ledger.state
    nodes = [n for name in state.names if isinstance(n := cache.objects["Node"][name], NodeSpec)]
    stock = price_stock(offers, sheet)
    for item in stock:  # the pool's own nodes hold their numbers
        wanted = item.offer.template.labels.items()
        prefix = f"{item.pool}-"
        item.used = {
            int(name[len(prefix) :])
            for name in state.names
            if name.startswith(prefix) and name[len(prefix) :].isdigit()
        }
        mine = sum(1 for node in nodes if wanted <= node.labels.items())
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
    return ScaleUp(plan.purchases, (*served, *plan.waiting))


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
