"""Scheduling outcomes as values (kube-scheduler's ``framework.Status``).

"Does not fit" is not an exception: a cycle returns a :class:`Status` whose code says
whether trying again after preemption could help, with structured :class:`Reason` records
that ``report/reasons.py`` renders to text ("0/3 nodes are available: 2 Insufficient cpu, ...").
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Code(enum.Enum):
    """What a status means, as in kube-scheduler.

    SUCCESS: the pod fits.
    UNSCHEDULABLE: it does not fit now; evicting other pods could make it fit.
    UNSCHEDULABLE_AND_UNRESOLVABLE: no eviction can help (e.g. no node has the GPU model).
    ERROR: a bug or broken input reached the core; never used for "does not fit".
    """

    SUCCESS = "Success"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    ERROR = "Error"


@dataclass(frozen=True, slots=True)
class Reason:
    """``nodes`` nodes were rejected by ``plugin`` because of ``message``."""

    plugin: str
    message: str
    nodes: int
    pod_level: bool = False
    """The pod's own problem, whatever the node (kube-scheduler's PreFilter rejection)."""


@dataclass(frozen=True, slots=True)
class Status:
    """The outcome of filtering one pod."""

    code: Code
    reasons: tuple[Reason, ...] = ()
    plugin: str = ""
    """For a failure: the filter after which no node was left (kube's FailedPlugin)."""
    total_nodes: int = 0

    @property
    def is_success(self) -> bool:
        return self.code is Code.SUCCESS


SUCCESS = Status(Code.SUCCESS)
