"""What one scheduling cycle decided, as values the edges render (JSON, tables, explain)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.devices import DeviceResult, OpaqueConfig


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


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: str
    action: str
    """``preempt`` (for a higher-priority job of its queue), ``reclaim`` (for a queue below its
    fair share), ``consolidate`` (moved: it is bound again elsewhere) or ``stale-gang`` (its
    gang fell below ``minMember`` for longer than the grace period)."""
    for_: str
    """The job (gang key) the eviction makes room for."""


@dataclass(frozen=True, slots=True)
class Pending:
    pod: str
    reason: str


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
    notes: tuple[str, ...] = ()


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
