"""Autoscaling plans: the cheapest nodes that let pending jobs start whole, and the nodes
that may go.

**Scale-up** (:func:`plan_scale_up`). Given the pending jobs that fit nowhere, in the order
the cycle would serve them, each whole (a gang's pods together, inside one topology domain
where it requires one), the node types the cluster may buy (:class:`Stock`: a
:class:`~gpufleet.model.supply.NodeOffer` priced by the sheet, with the node numbers it has
in use), the nodes there are (:class:`Room`: free now, and free within the provisioning
delay as running pods are expected to end) and each queue's GPU headroom, each job in turn:

1. waits if its queue's limit leaves it too few GPUs: capacity it may not use is never bought;
2. waits if it fits what is free now (nodes on their way included, and those bought for jobs
   before it in this plan: pending work is packed onto new nodes as placement would pack it);
3. waits if it fits what running jobs free within the provisioning delay: a node bought now
   would come later than that;
4. else buys, of the types that can hold its pods (resources, node affinity, taints, the
   type's ``maxNodes``; for a gang that requires a domain, nodes of one domain), the set of
   least expected cost: the nodes' price, and for spot nodes the work that interruptions
   are expected to lose (:func:`expected_hourly`).

**Scale-down** (:func:`plan_scale_down`). A node may go when it is empty and has been for
``grace_s``, keeping the free GPUs that the forecast of work arriving within the provisioning
delay would need; the dearest go first. A node not full is emptied (:func:`plan_drain`)
only by moves that lose no work: every job on it checkpoints, runs on it alone and is past
its queue's minimum runtime, so it is moved right after its next checkpoint, losing only its
restart; and only where its pods fit the other nodes' free room and the forecast's GPUs stay
free. A job that does not checkpoint is never evicted to scale
down. Pure: no clock, no I/O; the caller says what time it is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.calendar import iso_utc
from gpufleet.cost.nodes import price_nodes
from gpufleet.model.selectors import BLOCKING_EFFECTS
from gpufleet.model.supply import HOSTNAME_LABEL

if TYPE_CHECKING:
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.node import NodeSpec
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.supply import NodeOffer

EPS = 1e-9
DRAIN_SHARE = 0.10
"""The most nodes emptied by moves at once, as a share of the nodes of autoscaling pools."""


def node_hourly(spec: NodeSpec, sheet: PriceSheet) -> float:
    """What one node like ``spec`` costs an hour under ``sheet``."""
    priced = price_nodes([spec], sheet)
    return float((priced.capacity * priced.prices).sum())


def admits(pod: PodSpec, spec: NodeSpec) -> bool:
    """Whether ``pod``'s node affinity and tolerations let it run on a node like ``spec``."""
    if pod.gpu_models is not None and spec.gpu_model not in pod.gpu_models:
        return False
    constraint = pod.constraint
    if (
        constraint is not None
        and constraint.terms
        and not any(all(r.matches(spec.labels) for r in term) for term in constraint.terms)
    ):
        return False
    tolerations = constraint.tolerations if constraint is not None else ()
    return all(
        any(t.tolerates(taint) for t in tolerations)
        for taint in spec.taints
        if taint.effect in BLOCKING_EFFECTS
    )


def pod_gpus(pod: PodSpec) -> float:
    """The GPUs one pod takes: whole ones, or its share of one."""
    return pod.gpu_equivalent


def per_node(pod: PodSpec, spec: NodeSpec) -> int:
    """How many pods like ``pod`` one empty node like ``spec`` holds (0: none)."""
    if not admits(pod, spec):
        return 0
    fits = [
        spec.gpus // pod_gpus(pod) if pod_gpus(pod) else math.inf,
        spec.cpu_milli // pod.cpu_milli if pod.cpu_milli else math.inf,
        spec.memory_mib // pod.memory_mib if pod.memory_mib else math.inf,
    ]
    if spec.max_pods is not None:
        fits.append(spec.max_pods)
    most = min(fits)
    return 0 if math.isinf(most) else int(most)


@dataclass(frozen=True, slots=True)
class Want:
    """A pending job that fits nowhere: ``pods`` pods like ``spec``, of ``queue``, expected
    to run ``expected_s`` and to checkpoint every ``checkpoint_s`` (0: never)."""

    key: str
    queue: str
    pods: int
    spec: PodSpec
    expected_s: float
    checkpoint_s: float = 0.0
    domain: str | None = None
    """The topology label all its pods must share (a gang's required topology)."""
    may_wait: bool = True
    """It may wait for running jobs to free room (False: it has waited long enough)."""

    @property
    def gpus(self) -> float:
        return self.pods * pod_gpus(self.spec)


@dataclass(slots=True)
class Stock:
    """A node type the cluster may buy, its price, and the node numbers it has in use (up
    or on their way)."""

    offer: NodeOffer
    hourly: float
    used: set[int] = field(default_factory=set)

    @property
    def pool(self) -> str:
        return self.offer.pool

    def free_numbers(self, count: int) -> tuple[int, ...] | None:
        """``count`` unused node numbers, lowest first (None: the pool is at ``maxNodes``)."""
        if len(self.used) + count > self.offer.max_nodes:
            return None
        out: list[int] = []
        n = 0
        while len(out) < count:
            if n not in self.used:
                out.append(n)
            n += 1
        return tuple(out)

    def one_domain(self, count: int, label: str) -> tuple[int, ...] | None:
        """``count`` unused node numbers that share topology ``label``, in the lowest domain
        with room (None: none can hold them, or the pool is at ``maxNodes``)."""
        offer = self.offer
        if label == HOSTNAME_LABEL:
            return self.free_numbers(count) if count == 1 else None
        size = dict(offer.domains).get(label)
        if size is None:  # the template's own label: every node of the pool shares it
            return self.free_numbers(count) if label in offer.template.labels else None
        if count > size or len(self.used) + count > offer.max_nodes:
            return None
        for d in range(math.ceil(offer.max_nodes / size) + len(self.used) // size + 1):
            free = [n for n in range(d * size, (d + 1) * size) if n not in self.used]
            if len(free) >= count:
                return tuple(free[:count])
        return None


def price_stock(offers: Sequence[NodeOffer], sheet: PriceSheet) -> list[Stock]:
    return [Stock(offer, node_hourly(offer.template, sheet)) for offer in offers]


def expected_hourly(stock: Stock, want: Want, nodes: int) -> float:
    """What ``nodes`` nodes of ``stock`` are expected to cost an hour for ``want``: their
    price, and on spot nodes the work interruptions are expected to lose. A job loses, on
    each interruption of any of its nodes, the work since its last checkpoint (half an
    interval on average; without checkpoints, half its run) on all its nodes."""
    hourly = stock.hourly * nodes
    rate = stock.offer.interruptions_per_hour
    if rate <= 0:
        return hourly
    lost_s = want.checkpoint_s / 2 if want.checkpoint_s > 0 else want.expected_s / 2
    return hourly * (1.0 + rate * nodes * lost_s / 3600.0)


@dataclass(slots=True)
class Room:
    """Where pending pods may go without buying: per node (rows), free GPUs, milli-CPU and
    MiB now, and the same within the provisioning delay (``soon_*``: free now plus what
    running pods are expected to free by then); ``domains`` per topology label the
    domain id of each node (-1: none); ``admitted`` which nodes a pod spec may use."""

    gpus: FloatArray
    cpu: FloatArray
    memory: FloatArray
    soon_gpus: FloatArray
    soon_cpu: FloatArray
    soon_memory: FloatArray
    specs: list[NodeSpec]
    plain: np.ndarray | None = None
    """Cached: the nodes without a NoSchedule or NoExecute taint."""

    @classmethod
    def of(
        cls,
        specs: Sequence[NodeSpec],
        free: tuple[FloatArray, FloatArray, FloatArray],
        soon: tuple[FloatArray, FloatArray, FloatArray] | None = None,
    ) -> Room:
        """``specs`` with ``free`` (GPUs, milli-CPU, MiB per node) now and ``soon``."""
        gpus, cpu, memory = (np.array(a, dtype=np.float64) for a in free)
        soon_gpus, soon_cpu, soon_memory = (
            np.array(a, dtype=np.float64) for a in (free if soon is None else soon)
        )
        return cls(gpus, cpu, memory, soon_gpus, soon_cpu, soon_memory, list(specs))

    @classmethod
    def empty(cls) -> Room:
        z = np.zeros(0)
        return cls.of([], (z, z, z))

    def add(self, spec: NodeSpec) -> None:
        """An empty node like ``spec`` (bought, or on its way)."""

        def grow(a: FloatArray, value: float) -> FloatArray:
            return np.append(a, float(value))

        self.gpus = grow(self.gpus, spec.gpus)
        self.cpu = grow(self.cpu, spec.cpu_milli)
        self.memory = grow(self.memory, spec.memory_mib)
        self.soon_gpus = grow(self.soon_gpus, spec.gpus)
        self.soon_cpu = grow(self.soon_cpu, spec.cpu_milli)
        self.soon_memory = grow(self.soon_memory, spec.memory_mib)
        self.specs.append(spec)
        if self.plain is not None:
            plain = not any(t.effect in BLOCKING_EFFECTS for t in spec.taints)
            self.plain = np.append(self.plain, plain)

    def _allowed(self, pod: PodSpec) -> np.ndarray:
        """The nodes ``pod`` may use (:func:`admits`); one pass over the taints for pods with
        no affinity, no GPU model and no tolerations."""
        if pod.gpu_models is None and pod.constraint is None:
            if self.plain is None or self.plain.size != len(self.specs):
                self.plain = np.fromiter(
                    (not any(t.effect in BLOCKING_EFFECTS for t in s.taints) for s in self.specs),
                    dtype=np.bool_,
                    count=len(self.specs),
                )
            return self.plain
        return np.fromiter(
            (admits(pod, s) for s in self.specs), dtype=np.bool_, count=len(self.specs)
        )

    def copy(self) -> Room:
        return Room.of(
            self.specs,
            (self.gpus, self.cpu, self.memory),
            (self.soon_gpus, self.soon_cpu, self.soon_memory),
        )

    def domain_groups(self, label: str) -> list[np.ndarray]:
        """Per value of ``label``, the nodes that have it."""
        by: dict[str, list[int]] = {}
        for k, spec in enumerate(self.specs):
            value = spec.labels.get(label)
            if value is not None:
                by.setdefault(value, []).append(k)
        masks = []
        for value in sorted(by):
            mask = np.zeros(len(self.specs), dtype=np.bool_)
            mask[by[value]] = True
            masks.append(mask)
        return masks

    def take(self, want: Want, *, soon: bool) -> list[int] | None:
        """Place ``want``'s pods (best fit: the node left with the fewest free GPUs), inside
        one domain where it requires one, on what is free now (or ``soon``); the nodes
        taken (one per pod, by index) if all fit, else None and nothing taken."""
        if self.gpus.size == 0:
            return None
        gpus, cpu, memory = (
            (self.soon_gpus, self.soon_cpu, self.soon_memory)
            if soon
            else (self.gpus, self.cpu, self.memory)
        )
        allowed = self._allowed(want.spec)
        groups = [allowed]
        if want.domain is not None:
            groups = [allowed & m for m in self.domain_groups(want.domain)]
        for mask in groups:
            picks = self._fit(want, mask, gpus.copy(), cpu.copy(), memory.copy())
            if picks is not None:
                each = pod_gpus(want.spec)
                for g, c, m in (
                    (self.gpus, self.cpu, self.memory),
                    (self.soon_gpus, self.soon_cpu, self.soon_memory),
                ):
                    for node in picks:
                        g[node] -= each
                        c[node] -= want.spec.cpu_milli
                        m[node] -= want.spec.memory_mib
                return list(picks)
        return None

    def names(self, picks: Sequence[int]) -> tuple[str, ...]:
        """The nodes of ``picks`` by name, each once, in order."""
        return tuple(dict.fromkeys(self.specs[int(k)].name for k in picks))

    @staticmethod
    def _fit(
        want: Want, mask: np.ndarray, gpus: FloatArray, cpu: FloatArray, memory: FloatArray
    ) -> list[int] | None:
        spec = want.spec
        each = pod_gpus(spec)
        picks: list[int] = []
        for _ in range(want.pods):
            fits = (
                mask
                & (gpus >= each - EPS)
                & (cpu >= spec.cpu_milli - EPS)
                & (memory >= spec.memory_mib - EPS)
            )
            if not fits.any():
                return None
            left = np.where(fits, gpus - each, np.inf)
            node = int(np.argmin(left))
            picks.append(node)
            gpus[node] -= each
            cpu[node] -= spec.cpu_milli
            memory[node] -= spec.memory_mib
        return picks


@dataclass(frozen=True, slots=True)
class Purchase:
    """Nodes ``numbers`` of pool ``pool`` bought so that job ``key`` starts whole; they cost
    ``hourly`` (``expected`` with the work spot interruptions are expected to lose)."""

    key: str
    pool: str
    numbers: tuple[int, ...]
    hourly: float
    expected: float
    also: tuple[str, ...] = ()
    """Jobs after it that the plan packs onto these nodes' spare room."""
    names: tuple[str, ...] = ()
    """The nodes' names, as the pool will name them."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """Job ``key`` gets no nodes, and why; ``nodes``: those it fits on (now, or once what
    runs there is expected to finish), so that ``explain`` can name them."""

    key: str
    reason: str
    nodes: tuple[str, ...] = ()


FITS_NOW = "fits the free capacity (nodes on their way included)"
FITS_HELD = "fits the nodes provisioned for it (labelled gpufleet.io/provisioned-for)"
FITS_SOON = "fits what running jobs are expected to free within the provisioning delay"
NO_TYPE = "no node type can hold it (resources, affinity, taints, topology or maxNodes)"


@dataclass(frozen=True, slots=True)
class Release:
    """Node ``name`` of pool ``pool`` may go, saving ``hourly``: it is empty, or (``moves``)
    it is emptied by moving each job named, at the time given (one second after its next
    checkpoint)."""

    name: str
    pool: str
    hourly: float
    moves: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True, slots=True)
class ScaleUp:
    purchases: tuple[Purchase, ...]
    waiting: tuple[Waiting, ...]
    releases: tuple[Release, ...] = ()
    """The nodes that may go (asked for: ``gpufleet schedule --autoscale``)."""

    @property
    def hourly(self) -> float:
        return sum(p.hourly for p in self.purchases)

    @property
    def nodes(self) -> int:
        return sum(len(p.numbers) for p in self.purchases)


def plan_scale_up(
    wants: Sequence[Want],
    stock: Sequence[Stock],
    room: Room,
    headroom: Mapping[str, float],
    *,
    avoid: frozenset[str] = frozenset(),
) -> ScaleUp:
    """The plan for ``wants`` (see the module docstring). ``headroom``: GPUs each queue may
    still take (absent: no limit); ``avoid``: pools not to buy from now (a request there
    failed lately). ``stock``'s ``used`` and ``room`` are taken as the plan buys."""
    left = dict(headroom)
    purchases: list[Purchase] = []
    waiting: list[Waiting] = []
    packed: dict[int, list[str]] = {}
    owner: list[int] = [-1] * room.gpus.size
    for want in wants:
        cap = left.get(want.queue, math.inf)
        if want.gpus > cap + EPS:
            waiting.append(
                Waiting(want.key, f"queue {want.queue}'s limit leaves it {max(cap, 0):g} GPUs")
            )
            continue
        picks = room.take(want, soon=False)
        if picks is not None:
            for index in {owner[k] for k in picks if owner[k] >= 0}:
                packed.setdefault(index, []).append(want.key)
            waiting.append(Waiting(want.key, FITS_NOW, room.names(picks)))
            left[want.queue] = cap - want.gpus
            continue
        picks = room.take(want, soon=True) if want.may_wait else None
        if picks is not None:
            waiting.append(Waiting(want.key, FITS_SOON, room.names(picks)))
            left[want.queue] = cap - want.gpus
            continue
        best = _cheapest(want, stock, avoid)
        if best is None:
            waiting.append(Waiting(want.key, NO_TYPE))
            continue
        item, numbers, hourly, expected = best
        item.used.update(numbers)
        for number in numbers:
            owner.append(len(purchases))
            room.add(item.offer.node(number))
        room.take(want, soon=False)
        offer = item.offer
        names = tuple(offer.node(n).name for n in numbers)
        purchases.append(Purchase(want.key, offer.pool, numbers, hourly, expected, (), names))
        left[want.queue] = cap - want.gpus
    out = [replace(p, also=tuple(packed.get(i, ()))) for i, p in enumerate(purchases)]
    return ScaleUp(tuple(out), tuple(waiting))


def _cheapest(
    want: Want, stock: Sequence[Stock], avoid: frozenset[str]
) -> tuple[Stock, tuple[int, ...], float, float] | None:
    best: tuple[float, int, str, Stock, tuple[int, ...], float] | None = None
    for item in stock:
        if item.pool in avoid:
            continue
        offer = item.offer
        each = per_node(want.spec, offer.template)
        if each == 0:
            continue
        count = math.ceil(want.pods / each)
        numbers = (
            item.one_domain(count, want.domain)
            if want.domain is not None
            else item.free_numbers(count)
        )
        if numbers is None:
            continue
        expected = expected_hourly(item, want, count)
        key = (expected, count, item.pool)
        if best is None or key < best[:3]:
            best = (expected, count, item.pool, item, numbers, item.hourly * count)
    if best is None:
        return None
    expected, _, _, item, numbers, hourly = best
    return item, numbers, hourly, expected


@dataclass(frozen=True, slots=True)
class NodeUse:
    """One node as scale-down sees it."""

    name: str
    gpus: float
    hourly: float
    empty_since: float | None
    """Since when no pod has run there (None: pods run there now)."""
    floor: bool = False
    """The node keeps its pool at ``minNodes``: it may not go."""
    used: float = 0.0
    """GPUs its pods hold."""
    pods: tuple[PodSpec, ...] = ()
    movable: bool = False
    """Every job on it may be moved at no loss (module docstring)."""


def plan_scale_down(
    nodes: Sequence[NodeUse],
    *,
    now: float,
    grace_s: float,
    keep_gpus: float,
    free_gpus: float,
) -> tuple[str, ...]:
    """The empty nodes that may go (module docstring): empty for ``grace_s``, dearest per
    GPU first, while the free GPUs left cover ``keep_gpus`` (the forecast of work arriving
    within the provisioning delay, beyond the pending work)."""
    empty = sorted(
        (
            n
            for n in nodes
            if n.empty_since is not None and now - n.empty_since >= grace_s and not n.floor
        ),
        key=lambda n: (-n.hourly / max(n.gpus, 1.0), n.name),
    )
    out: list[str] = []
    for node in empty:
        if free_gpus - node.gpus < keep_gpus - EPS:
            continue
        free_gpus -= node.gpus
        out.append(node.name)
    return tuple(out)


def plan_drain(
    nodes: Sequence[NodeUse], room: Room, *, keep_gpus: float, limit: int
) -> tuple[str, ...]:
    """Up to ``limit`` nodes to empty by moves that lose no work (module docstring): not full
    and movable, dearest per GPU first, then fewest GPUs used; each only if its pods fit
    the free room of the nodes not drained (``room``, rows named by ``room.specs``; taken
    as they are placed) and the free GPUs left still cover ``keep_gpus``. A node that the
    pods of a node drained before were placed on is not drained itself."""
    names = [spec.name for spec in room.specs]
    candidates = sorted(
        (n for n in nodes if n.movable and not n.floor and 0 < n.used < n.gpus),
        key=lambda n: (-n.hourly / max(n.gpus, 1.0), n.used, n.name),
    )
    out: list[str] = []
    drained = np.zeros(len(names), dtype=np.bool_)
    receiving = np.zeros(len(names), dtype=np.bool_)  # took a drained node's pods: they stay
    for node in candidates:
        if len(out) >= limit:
            break
        if node.name not in names:
            continue
        row = names.index(node.name)
        if receiving[row]:
            continue
        others = ~drained
        others[row] = False
        free_after = float(room.gpus[others].sum()) - node.used
        if free_after < keep_gpus - EPS:
            continue
        trial = Room.of(
            [room.specs[k] for k in np.flatnonzero(others)],
            (room.gpus[others], room.cpu[others], room.memory[others]),
        )
        if not all(trial.take(Want("", "", 1, pod, 0.0), soon=False) for pod in node.pods):
            continue
        receiving[others] |= (trial.gpus < room.gpus[others]) | (trial.cpu < room.cpu[others])
        room.gpus[others], room.cpu[others], room.memory[others] = (
            trial.gpus,
            trial.cpu,
            trial.memory,
        )
        drained[row] = True
        out.append(node.name)
    return tuple(out)


def plan_json(plan: ScaleUp, currency: str) -> dict[str, object]:
    """A plan as ``gpufleet schedule --autoscale -o json`` prints it."""
    return {
        "currency": currency,
        "hourly": round(plan.hourly, 6),
        "purchases": [
            {
                "for": p.key,
                "pool": p.pool,
                "nodes": list(p.names),
                "hourly": round(p.hourly, 6),
                "expectedHourly": round(p.expected, 6),
                "alsoFor": list(p.also),
            }
            for p in plan.purchases
        ],
        "waiting": [
            {"job": w.key, "reason": w.reason, "nodes": list(w.nodes)} for w in plan.waiting
        ],
        "releases": [
            {
                "node": r.name,
                "pool": r.pool,
                "hourly": round(r.hourly, 6),
                "moves": [{"job": job, "at": iso_utc(at)} for job, at in r.moves],
            }
            for r in plan.releases
        ],
    }
