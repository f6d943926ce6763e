"""The cycle's rules as protocols: which queue goes next, whether a queue may take a job,
where a gang's pods may go together.

A cycle orders queues with a :class:`QueueRule`, admits jobs with an
:class:`AdmissionRule` and keeps gangs inside the domains their PodGroups ask for with a
:class:`TopologyRule`, each made by a factory the edges hand in
(:class:`~gpufleet.scheduler.components.Components`): gpufleet's are
:class:`~gpufleet.scheduler.order.QueueOrder` (hierarchical fair share, DRF),
:class:`~gpufleet.scheduler.admission.QueueAdmission` (limits; quota for non-preemptible
work) and :class:`~gpufleet.scheduler.topology.DomainTopology` (required and preferred
levels of node labels). Another policy — strict priority across queues, a quota system of another
scheduler — is another module implementing the same protocol, not an edit of the cycle.
The actions that make room are :class:`~gpufleet.scheduler.view.RoomAction`\\ s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from gpufleet.framework.runtime import Held
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.job import Job
    from gpufleet.scheduler.ledger import Ledger
    from gpufleet.scheduler.outcome import Why
    from gpufleet.scheduler.topology import Failure, PlaceAll, Where
    from gpufleet.scheduler.transaction import Transaction


class QueueRule(Protocol):
    """Which queue a cycle serves next, and each queue's fair share."""

    def start(self, pending: Mapping[str, FloatArray], capacity: FloatArray) -> None:
        """A cycle starts: queues' pending demands and the cluster's capacity."""

    @property
    def fair(self) -> dict[str, FloatArray]:
        """Every queue's fair share in this cycle."""

    def ratio(self, queue: str, extra: FloatArray | None = None) -> float:
        """``queue``'s share ratio with ``extra`` added (above 1: over its fair share)."""

    def key(self, queue: str, head: Job) -> tuple[object, ...]:
        """The queue whose key is least is served next (``head`` its next job)."""


class AdmissionRule(Protocol):
    """Whether a job's queues may take what it asks for."""

    def blocked(self, job: Job, request: FloatArray, freed: FloatArray | None = None) -> Why | None:
        """Why the queues cannot take ``request`` now, or None (``freed``: preemptible work
        of the job's own queue counted as gone)."""

    def share_caps(self, job: Job, pods: Sequence[PodInfo], request: FloatArray) -> dict[str, int]:
        """The most milli-GPU each share sized by GPU memory among ``pods`` may take."""


class TopologyRule(Protocol):
    """Where the pods of a gang may go together (a PodGroup's topology constraint)."""

    def constrains(self, group: GroupSpec | None) -> bool:
        """Whether ``group``'s pods must (or should) share a domain."""

    def place_gang(
        self,
        place_all: PlaceAll,
        group: GroupSpec,
        pods: tuple[PodInfo, ...],
        txn: Transaction,
        *,
        held: Held | None,
        running: Sequence[int],
        placed: Mapping[str, Sequence[int]] = ...,
    ) -> Failure | None:
        """Place ``pods`` of a constrained gang all or nothing with ``place_all`` (the
        cycle's placement within the nodes a ``Held`` leaves); ``running``: the nodes where
        pods of the gang already run (``placed``: per subgroup). On failure the first pod
        that did not fit, and why."""

    def room_scopes(
        self, state: ClusterState, group: GroupSpec | None, held: Held | None
    ) -> list[tuple[Where, Held | None]]:
        """Where victims may be sought for the gang, in order, each with what its notes say
        of it."""

    def extras_scope(
        self,
        state: ClusterState,
        group: GroupSpec | None,
        running: Sequence[int],
        held: Held | None,
        *,
        subgroup: str = "",
        placed: Mapping[str, Sequence[int]] = ...,
    ) -> Held | None:
        """Where the gang's elastic pods may go, given the nodes its pods run on (and, for
        a pod of ``subgroup``, the nodes each subgroup's pods run on: ``placed``)."""


if TYPE_CHECKING:
    QueueRuleFactory = Callable[[Ledger], QueueRule]
    AdmissionRuleFactory = Callable[[Ledger, int], AdmissionRule]
    """Made with the ledger and the non-preemptible priority."""
    TopologyRuleFactory = Callable[[tuple[str, ...]], TopologyRule]
    """Made with the cluster's topology levels (its Topology object), narrowest first."""
