"""The queue rules as protocols: which queue a cycle serves next, and whether a queue may
take a job.

A cycle orders queues with a :class:`QueueRule` and admits jobs with an
:class:`AdmissionRule`, each made by a factory the edges hand in
(:class:`~gpufleet.scheduler.cycle.components.Components`): gpufleet's are
:class:`~gpufleet.scheduler.queues.order.QueueOrder` (hierarchical fair share, DRF) and
:class:`~gpufleet.scheduler.queues.admission.QueueAdmission` (limits; quota for
non-preemptible work). Another policy — strict priority across queues, a quota system of
another scheduler — is another module implementing the same protocol, not an edit of the
cycle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from gpufleet.framework.runtime import Exclusion
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Why
    from gpufleet.scheduler.state.ledger import Ledger


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

    def kept_nodes(self, job: Job) -> Exclusion | None:
        """The nodes other queues keep from ``job`` (serving queues' forecasts), or None."""


if TYPE_CHECKING:
    QueueRuleFactory = Callable[[Ledger], QueueRule]
    AdmissionRuleFactory = Callable[[Ledger, int], AdmissionRule]
    """Made with the ledger and the non-preemptible priority."""
