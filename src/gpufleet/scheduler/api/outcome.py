"""What one scheduling cycle decided, as values the edges render (JSON, tables, explain).

Why a pod waits is a :class:`Why`: a code with the facts that decided it, and the reason it
adds to (``then``), never prose — ``report/reasons.py`` renders it for people, and the live
scheduler will render it to events and conditions.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpufleet.model.values import FrozenMap, frozen_map

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpufleet.framework.status import Status
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.devices import DeviceResult, OpaqueConfig
    from gpufleet.model.workload import PodInfo


class WhyCode(enum.Enum):
    """What keeps pods pending; the facts each carries are listed."""

    BLOCKED = "Blocked"
    """The pod may not be scheduled whatever the cluster holds: ``detail`` (its gates, its
    deletion, a missing PodGroup, as the reader found)."""
    QUEUE_MISSING = "QueueMissing"
    """``queue`` does not exist."""
    GANG_INCOMPLETE = "GangIncomplete"
    """``gang`` has ``pods`` pods, fewer than ``min_member``."""
    QUEUE_LIMIT = "QueueLimit"
    """``queue`` is at its ``limit`` (a resource vector; ``resource`` the first over):
    ``in_use`` and the job's ``needs``, the resources over in ``over``."""
    MIN_RESOURCES = "MinResources"
    """PodGroup ``gang`` is not tried: the cluster's ``free`` resources (with what its own
    running pods hold) fall short of its ``min_resources`` in the resources ``over``
    (vectors, as for a queue's limit)."""
    MIN_RESOURCES_QUEUE = "MinResourcesQueue"
    """PodGroup ``gang`` is not tried: ``queue`` has less room under its ``limit`` than its
    ``min_resources`` in the resources ``over``, with ``in_use`` by other work."""
    QUOTA_NON_PREEMPTIBLE = "NonPreemptibleQuota"
    """Non-preemptible work (``priority``) must fit ``queue``'s ``quota``: ``in_use`` by
    non-preemptible work, ``needs``, ``over``."""
    UNSCHEDULABLE = "Unschedulable"
    """The filters' verdict (``status``): counts of nodes per reason."""
    GANG_UNSCHEDULABLE = "GangUnschedulable"
    """``gang`` needs ``need`` pods, ``fitted`` fit; ``pod`` did not (``status``)."""
    CLAIMS = "ClaimsUnallocatable"
    """``pod``'s ResourceClaims cannot be allocated: ``detail`` (the allocator's)."""
    TOPOLOGY = "TopologyUnsatisfiable"
    """No domain of level ``level`` (``kind``: required or preferred) holds the gang:
    ``counts``, pairs of (domain, pods it can hold) best first (at most four shown, ``more``
    others), of ``pods``; ``short`` names the level's domains; ``missing``: no node has the
    level's label."""
    GANG = "Gang"
    """``then``, for a pod of gang ``gang`` of ``need`` pods."""
    STALE = "StaleGang"
    """``gang`` runs ``running`` of ``min_member`` pods, stale since ``since_s`` seconds
    (None: now), released after ``grace_s``; ``then`` the job's own reason."""
    STALE_RELEASED = "StaleGangReleased"
    """``gang`` ran ``running`` of ``min_member`` pods for ``for_s`` seconds, past
    ``grace_s``: its running pods were released; ``then`` the job's own reason."""
    STARVING = "Starving"
    """``then``, and the job has waited ``waited_s`` (over ``after_s``): ``nodes`` are held
    for it."""
    STRICT_FIFO = "StrictFIFO"
    """Behind job ``behind``, which does not fit (strict FIFO)."""
    ELASTIC = "Elastic"
    """An elastic pod beyond the ``minMember`` of ``job``, pending for ``then``."""


class NoteCode(enum.Enum):
    """What an action found when it tried to make room for a job; the facts each carries
    are listed. The words for each are ``report/reasons.py``'s. The outcomes of the victim
    search (``FOUND``, ``NOT_FOUND``, ``NO_ROOM``) carry the action's own words for its
    victims (``victims``) and whether it moves them rather than evicting (``moves``), so
    that an action added later reads right without an entry of its own."""

    FOUND = "Found"
    """The action found victims (or moves) that make room: ``victims``, ``moves``."""
    NOT_FOUND = "NotFound"
    """Evicting the pods the action may evict frees no node that fits: ``victims``,
    ``moves``."""
    NO_ROOM = "NoRoom"
    """Even evicting every pod the action may evict would leave no room for the job:
    ``victims``, ``moves``."""
    PREEMPTION_NEVER = "PreemptionPolicyNever"
    """The job's ``preemptionPolicy`` is ``Never``."""
    BEYOND_FREE = "BeyondFreeCapacity"
    """The job does not fit the cluster's total free capacity (so no move can help)."""
    NOT_SERVING = "NotServing"
    """The action serves only a serving queue's jobs within its GPU quota."""
    NO_LOWER_PRIORITY = "NoLowerPriority"
    """No lower-priority preemptible pods in ``queue`` (past its ``min_runtime_s``, 0:
    none set)."""
    OVER_FAIR_SHARE = "OverFairShare"
    """``queue`` would be at ``ratio`` times its fair share (``fair_gpus``) with the job;
    reclaim serves only a queue that stays within its fair share."""
    NOTHING_LENT = "NothingLent"
    """For a serving queue within its quota: no pod of a queue over its GPU quota may be
    reclaimed (``above`` queues are over it, ``protected`` as for ``NONE_RECLAIMABLE``)."""
    NONE_RECLAIMABLE = "NoneReclaimable"
    """No pod of a queue above its fair share may be reclaimed: ``above`` queues are above
    it, ``protected`` preemptible pods of other queues are within their reclaim min
    runtime."""


@dataclass(frozen=True, slots=True)
class Note:
    """What one action found for a job (see :class:`NoteCode` for the facts of each)."""

    code: NoteCode
    facts: FrozenMap[str, Any] = field(default_factory=lambda: frozen_map({}))
    action: str = ""
    """The action that found it (set by ``room.py``)."""
    domain: tuple[str, str] | None = None
    """Where the search was confined: a topology level's short name and the domain's label
    (None: no confinement)."""
    anywhere: bool = False
    """The search that follows the domains of a preferred topology: anywhere."""


SEARCH_CODES = frozenset({NoteCode.FOUND, NoteCode.NOT_FOUND, NoteCode.NO_ROOM})
"""The outcomes of the victim search itself, which carry the action's words."""


def note(code: NoteCode, **facts: object) -> Note:
    """A :class:`Note` of ``code`` with ``facts``."""
    return Note(code, frozen_map(facts))


@dataclass(frozen=True, slots=True)
class Why:
    """Why pods wait (see :class:`WhyCode` for the facts of each code)."""

    code: WhyCode
    facts: FrozenMap[str, Any] = field(default_factory=lambda: frozen_map({}))
    status: Status | None = None
    """The filters' verdict, where one decided."""
    then: Why | None = None
    """The reason this one adds to."""

    def fact(self, name: str) -> Any:
        return self.facts[name]


def why(
    code: WhyCode, *, status: Status | None = None, then: Why | None = None, **facts: object
) -> Why:
    """A :class:`Why` of ``code`` with ``facts``."""
    return Why(code, frozen_map(facts), status, then)


@dataclass(frozen=True, slots=True)
class Binding:
    pod: str
    node: str
    gpus: tuple[int, ...] | None
    """GPU indexes on the node; None for pods without GPUs."""
    pipelined: bool = False
    """Placed on capacity that this cycle's evictions free."""
    claims: dict[str, tuple[DeviceResult, ...]] | None = None
    """The pod's ResourceClaims and their devices."""
    volumes: dict[str, str] | None = None
    """The pod's unbound PersistentVolumeClaims and the volume each is to be bound to ("":
    one to provision on the node, which the claim is annotated with before the bind)."""
    device: str = ""
    """What each GPU the pod takes is where the node advertises MIG slices or time-sliced
    replicas as GPUs (``MIG 1g.5gb slice (1/7 of an NVIDIA-A100-SXM4-40GB)``); empty for
    whole GPUs and pods without any."""


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str
    action: str
    """``preempt`` (for a higher-priority job of its queue), ``reclaim`` (for a queue below its
    fair share), ``consolidate`` (moved: it is bound again elsewhere) or ``stale-gang`` (its
    gang fell below ``minMember`` for longer than the grace period)."""
    for_: str
    """The job (gang key) the eviction makes room for."""
    moved: bool = False
    """The pod is bound again elsewhere in the same cycle (its action relocates its
    victims): the eviction is half of a move."""


@dataclass(frozen=True, slots=True)
class Pending:
    pod: str
    why: Why


@dataclass(frozen=True, slots=True)
class Reconfiguration:
    """A dynamic-MIG GPU whose partition the cycle changes: its new layout, by start."""

    node: str
    gpu: int
    layout: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ClaimStatus:
    """A claim allocated by this cycle, as its ``status.allocation`` will read."""

    results: tuple[DeviceResult, ...]
    node: str | None
    config: tuple[tuple[str, OpaqueConfig], ...]
    """(``FromClass`` or ``FromClaim``, the configuration)."""


@dataclass(frozen=True, slots=True)
class JobRecord:
    """One job's story, for ``gpufleet explain``."""

    key: str
    queue: str
    priority: int
    pods: tuple[str, ...]
    fair_share: FloatArray
    allocated: FloatArray
    """The queue's allocation (its subtree's) when the job's turn came."""
    ratio: float
    outcome: str
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True, slots=True)
class CycleResult:
    bindings: tuple[Binding, ...]
    evictions: tuple[Eviction, ...]
    pending: tuple[Pending, ...]
    jobs: tuple[JobRecord, ...] = ()
    node_reasons: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = field(default_factory=dict)
    """For watched pods: each node's name and the filters' reasons against it."""
    fair_shares: dict[str, FloatArray] = field(default_factory=dict)
    """Every queue's fair share in this cycle (GPUs, milli-CPU, MiB)."""
    reconfigurations: tuple[Reconfiguration, ...] = ()
    claim_status: dict[str, ClaimStatus] = field(default_factory=dict)

    def queues_served(self, pods: Mapping[str, PodInfo]) -> dict[str, str]:
        """Per job (gang key) the cycle bound, its queue, read from ``pods``: whom an
        eviction made room for (``Eviction.for_``)."""
        return {pods[b.pod].gang: pods[b.pod].queue for b in self.bindings if b.pod in pods}
