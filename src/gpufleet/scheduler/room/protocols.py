"""What the actions and the victim search share: the protocols between them, and what they
work with.

An action (``scheduler/room/``) is a rule for who may be a victim, a
:class:`RoomAction`; the search (``victims.py``) runs any of them; both read the cycle
through :class:`Means` — the ledger, the victim pool, the placer, the queue order and the
:class:`Round` — so that neither knows the cycle that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TypeAlias

from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.state.fairshare import EPS

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Set

    from gpufleet.framework.runtime import Exclusion, Framework
    from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Note
    from gpufleet.scheduler.placement.allocate import Placer
    from gpufleet.scheduler.queues.rules import QueueRule
    from gpufleet.scheduler.state.ledger import Ledger
    from gpufleet.scheduler.state.pool import VictimPool


Slot = tuple[int, "PodSpec", tuple[int, ...]]
Unit = tuple[Running, ...]
if TYPE_CHECKING:
    Accept: TypeAlias = Callable[[Unit, list[Running]], bool]
    """Whether a unit of victims may be taken, given those taken so far."""
    Candidates: TypeAlias = tuple[BoolArray | None, Note | None, Accept]
    """The pods an action may evict (None: none, and the note says why), and its rule for
    each unit of victims."""


class RoomAction(Protocol):
    """An action that makes room for a job by evicting pods (``scheduler/room/``): its
    rule for who may be a victim; the search itself is :class:`VictimSearch`'s."""

    @property
    def name(self) -> str: ...
    @property
    def relocate(self) -> bool:
        """Victims are moved (bound again elsewhere in the same cycle), not stopped."""

    @property
    def victims(self) -> str:
        """Who it may evict, in ``explain``'s words: a plural noun phrase."""

    @property
    def needs_preemption(self) -> bool:
        """Only for jobs whose ``preemptionPolicy`` is not ``Never``."""

    @property
    def fair_share_bound(self) -> bool:
        """Its failures depend on the queues' fair shares: a binding that takes a queue
        above its share makes them worth retrying."""

    def candidates(self, search: SearchView, request: FloatArray) -> Candidates:
        """The pods this action may evict for ``search.job`` needing ``request``."""

    def freed(self, search: SearchView, mask: BoolArray) -> ClusterState:
        """The cluster with every pod of ``mask`` gone (an upper bound for the search)."""

    def scope(self, job: Job) -> Hashable:
        """What a failed search for ``job`` depends on besides the job's pods."""

    def epoch(self, means: Means) -> Hashable:
        """How long a failed search stays failed (see ``scheduler/room/room.py``)."""


@dataclass(eq=False, slots=True)
class Round:
    """What making room reads of the cycle it runs in, which changes from one cycle to the
    next: its time, its number, whether it may evict, how many bindings took a queue above
    its fair share, and the pods it bound (never victims)."""

    now: float = 0.0
    cycles: int = 0
    act: bool = True
    """Whether this cycle may evict (consolidate, reclaim, preempt)."""
    over_share: int = 0
    """Bindings that left a queue above its fair share, counted only where an action
    depends on fair shares: its failed searches are remembered until this changes."""
    bound_now: Set[str] = frozenset()


@dataclass(slots=True)
class Movable:
    """What consolidation may move within one consolidation epoch (``consolidate.py``)."""

    epoch: Hashable
    young: BoolArray
    """The pool's pods that would lose at most ``MAX_MOVE_LOSS_S`` of work if moved."""
    nodes: dict[Hashable, IntArray] = field(default_factory=dict)
    """Per request of a moved pod, the nodes that pass its filters (reservations aside)."""
    groups: list[tuple[Hashable, PodSpec, IntArray]] | None = None
    """The young pods that may still move, grouped by request: the request's key, a pod
    spec asking for it, and the pods' indices in the pool."""
    by_mask: dict[bytes | None, tuple[BoolArray, ClusterState]] = field(default_factory=dict)
    """Per held mask, the young pods that fit somewhere off it, and the state with them
    gone."""
    freed: dict[bytes, ClusterState] = field(default_factory=dict)
    """Per set of movable pods, the state with them gone."""


@dataclass(eq=False, slots=True)
class Means:
    """What making room works with: the ledger of what runs, the pods that may be evicted,
    the placer, the queues' fair shares, the round it runs in — and consolidation's
    candidates, kept across the cycle's searches (``room/consolidate.py``)."""

    ledger: Ledger
    pool: VictimPool
    placer: Placer
    order: QueueRule
    round: Round
    restart_s: float = 0.0
    """What a job pays to start again after an eviction, counted in the work it loses."""
    movable: Movable | None = None
    """Consolidation's movable pods in the current epoch (``consolidate.py``)."""

    def consolidation_epoch(self) -> Hashable:
        return consolidation_epoch(self.ledger, self.pool)


def consolidation_epoch(ledger: Ledger, pool: VictimPool) -> Hashable:
    """Consolidation fails again until capacity is freed or new pods may be moved."""
    return ("consolidate", ledger.released, pool.generation)


@dataclass(frozen=True, slots=True)
class Plan:
    action: str
    victims: tuple[Running, ...]
    placements: tuple[Slot, ...]
    moved: tuple[tuple[Running, Slot], ...] = ()


def always(_unit: Unit, _taken: list[Running]) -> bool:
    """Every unit of victims may be taken (preemption, consolidation)."""
    return True


def moving(running: Running) -> PodSpec:
    """What a pod that consolidation moves asks for elsewhere: what it holds, but a share
    sized by GPU memory as the pod asks for it, to be sized again for its new node."""
    return running.pod.spec if running.pod.spec.sized_by_memory else running.spec


class SearchView(Protocol):
    """What an action reads of the victim search it serves."""

    @property
    def means(self) -> Means: ...
    @property
    def job(self) -> Job: ...
    @property
    def held(self) -> Exclusion | None: ...
    @property
    def state(self) -> ClusterState: ...
    @property
    def framework(self) -> Framework: ...
    @property
    def pool(self) -> VictimPool: ...
    def lost_work(self, victims: list[Running]) -> float: ...


def takes_back(ledger: Ledger, job: Job, request: FloatArray) -> bool:
    """Whether ``job`` is a serving queue's (``spec.serving``) that stays within its GPU
    quota with ``request``, and so does each ancestor that has one: it takes back what it
    lent (``room/reclaim.py``) and gathers whole nodes for its replicas
    (``room/consolidate.py``) whatever its wait."""
    spec = ledger.tree.queues.get(job.queue)
    if spec is None or not spec.serving:
        return False
    for name in ledger.tree.paths[job.queue]:  # it, and each ancestor with a GPU quota
        queue = ledger.tree.queues[name]
        if (name == spec.name or queue.quota_set[0]) and float(
            ledger.alloc[name][0] + request[0]
        ) > float(queue.quota[0]) + EPS:
            return False
    return True
