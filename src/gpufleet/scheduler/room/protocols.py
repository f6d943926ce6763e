"""What the actions and the victim search share: the protocols between them and the cycle.

An action (``scheduler/room/``) is a rule for who may be a victim, a
:class:`RoomAction`; the search (``victims.py``) runs any of them; both read the cycle
through :class:`CycleView`, so that neither imports the cycle that runs them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from gpufleet.scheduler.api.transaction import Running

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Mapping, Sequence, Set

    from gpufleet.framework.runtime import Framework, Held
    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Note
    from gpufleet.scheduler.state.claims import ClaimBook
    from gpufleet.scheduler.state.fairshare import QueueTree
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

    def epoch(self, cycle: CycleView) -> Hashable:
        """How long a failed search stays failed (see ``scheduler/room/room.py``)."""


class CycleView(Protocol):
    """What a victim search reads of the cycle it makes room in, and the one thing it
    writes there: ``movable``, consolidation's candidates, kept across the cycle's searches.
    :class:`~gpufleet.scheduler.cycle.cycle.Cycle` is one."""

    movable: tuple[Hashable, BoolArray, ClusterState] | None

    @property
    def state(self) -> ClusterState: ...
    @property
    def empty(self) -> ClusterState: ...
    @property
    def framework(self) -> Framework: ...
    @property
    def pool(self) -> VictimPool: ...
    @property
    def book(self) -> ClaimBook: ...
    @property
    def tree(self) -> QueueTree: ...
    @property
    def fair(self) -> Mapping[str, FloatArray]: ...
    @property
    def groups(self) -> Mapping[str, GroupSpec]: ...
    @property
    def running(self) -> Mapping[str, Running]: ...
    @property
    def gang_running(self) -> Mapping[str, Sequence[str]]: ...
    @property
    def bound_now(self) -> Set[str]: ...
    @property
    def now(self) -> float: ...
    @property
    def cycles(self) -> int: ...
    @property
    def released(self) -> int: ...
    @property
    def started(self) -> int: ...
    @property
    def over_share(self) -> int: ...

    def held_for_claims(self, pod: PodInfo, held: Held | None) -> Held | None: ...
    def capped(self, pod: PodInfo, held: Held | None) -> Held | None: ...
    def claims_fit(self, pod: PodInfo, node: int) -> bool: ...
    def claims_freed(self, pods: Sequence[PodInfo]) -> FloatArray: ...
    def ratio(self, queue: str, extra: FloatArray | None = None) -> float: ...
    def slots(
        self, pods: tuple[PodInfo, ...], state: ClusterState | None, held: Held | None
    ) -> float: ...
    def consolidation_epoch(self) -> Hashable: ...


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
    def cycle(self) -> CycleView: ...
    @property
    def job(self) -> Job: ...
    @property
    def held(self) -> Held | None: ...
    @property
    def state(self) -> ClusterState: ...
    @property
    def framework(self) -> Framework: ...
    @property
    def pool(self) -> VictimPool: ...
