"""The topology rule as a protocol: where a gang's pods may go together.

A cycle keeps gangs inside the domains their PodGroups ask for with a
:class:`TopologyRule`, made by a factory the edges hand in
(:class:`~gpufleet.scheduler.cycle.components.Components`): gpufleet's is
:class:`~gpufleet.scheduler.placement.topology.DomainTopology` (required and preferred
levels of node labels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from gpufleet.framework.runtime import Exclusion
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.api.transaction import Transaction
    from gpufleet.scheduler.placement.domains import Failure, PlaceAll, Where


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
        held: Exclusion | None,
        running: Sequence[int],
        placed: Mapping[str, Sequence[int]] = ...,
    ) -> Failure | None:
        """Place ``pods`` of a constrained gang all or nothing with ``place_all`` (the
        cycle's placement within the nodes a ``Exclusion`` leaves); ``running``: the nodes where
        pods of the gang already run (``placed``: per subgroup). On failure the first pod
        that did not fit, and why."""

    def room_scopes(
        self, state: ClusterState, group: GroupSpec | None, held: Exclusion | None
    ) -> list[tuple[Where, Exclusion | None]]:
        """Where victims may be sought for the gang, in order, each with what its notes say
        of it."""

    def extras_scope(
        self,
        state: ClusterState,
        group: GroupSpec | None,
        running: Sequence[int],
        held: Exclusion | None,
        *,
        subgroup: str = "",
        placed: Mapping[str, Sequence[int]] = ...,
    ) -> Exclusion | None:
        """Where the gang's elastic pods may go, given the nodes its pods run on (and, for
        a pod of ``subgroup``, the nodes each subgroup's pods run on: ``placed``)."""


if TYPE_CHECKING:
    TopologyRuleFactory = Callable[[tuple[str, ...]], TopologyRule]
    """Made with the cluster's topology levels (its Topology object), narrowest first."""
