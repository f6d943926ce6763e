"""How the live scheduler runs (:class:`ServeOptions`) and what it counts (:class:`ServeStats`):
read by the loop (``serve.py``) and by the side that writes (``writes.py``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpufleet.scheduler.cycle.config import CycleConfig

if TYPE_CHECKING:
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.supply import NodeOffer


@dataclass(frozen=True, slots=True)
class ServeOptions:
    config: CycleConfig = field(default_factory=CycleConfig)
    scheduler_name: str = "gpufleet"
    period_s: float = 1.0
    """A cycle at least this often, for the rules that depend on time."""
    batch_s: float = 0.05
    """How long a cycle waits after the first event, to take the events with it."""
    binds_at_once: int = 16
    dry_run: bool = False
    """Bind and evict nothing: say what would be done."""
    dry_run_events: bool = True
    """In a dry run, tell each pod by an event what would be done with it (else only the
    logs and metrics say it)."""
    seed: int = 0
    price_sheet: PriceSheet | None = None
    """Prices for the hourly cost gauges of ``/metrics`` (none: no cost gauges)."""
    vocabularies: frozenset[str] = frozenset()
    """Other schedulers' vocabularies read (``load/foreign.py``; those of
    :data:`~gpufleet.kube.read.kinds.LIVE_VOCABULARIES`): none by default, gpufleet's own only."""
    forecast_prometheus: str | None = None
    """The Prometheus that serving queues' forecasts are read from (``forecast.py``; None:
    only their ``spec.serving.forecastGPUs``)."""
    offers: tuple[NodeOffer, ...] = ()
    """The node types the cluster's autoscaler may add (``--autoscale``; NodePools with
    ``spec.autoscaling``): with any, jobs that fit nowhere get ProvisioningRequests and
    running pods scale-down protection (``provision.py``); none: neither."""
    watch_down_grace_s: float = 60.0
    """How long the watch of a kind the cycle needs may be down before ``/readyz`` fails."""
    cpu_phases: bool = False
    """Count the CPU of each phase (``kube/cpu.py``) on ``/metrics``."""


@dataclass
class ServeStats:
    cycles: int = 0
    bound: int = 0
    bind_failures: int = 0
    lost: int = 0
    unknown: int = 0
    """Binds whose outcome neither the reply nor a read of the pod told."""
    evicted: int = 0
    evictions_refused: int = 0
    problems: int = 0
    """Objects reported unreadable (each once per change of its problem)."""
    cycle_errors: int = 0
