"""The composition root: the one place where gpufleet's parts are put together.

The scheduling core takes its placement plugins, policies and actions from the
:class:`~gpufleet.scheduler.components.Components` it is handed; this module builds the one
that ships — the registrations of ``plugins/registry.py`` and ``scheduler/actions/`` — and
offers the entry points the edges call: a cache for a live cluster or a replay, and one
cycle over a snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.plugins.registry import FIT_FILTERS, PLUGINS, POLICIES
from gpufleet.scheduler.actions import builtin_actions
from gpufleet.scheduler.admission import QueueAdmission
from gpufleet.scheduler.cache import ClusterCache
from gpufleet.scheduler.components import Components
from gpufleet.scheduler.cycle import Cycle, CycleConfig
from gpufleet.scheduler.events import snapshot_events
from gpufleet.scheduler.order import QueueOrder
from gpufleet.scheduler.session import Session
from gpufleet.scheduler.topology import DomainTopology

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import Snapshot
    from gpufleet.scheduler.outcome import CycleResult

COMPONENTS = Components(
    PLUGINS, POLICIES, FIT_FILTERS, builtin_actions(), QueueOrder, QueueAdmission, DomainTopology
)
"""gpufleet's plugins, policies, actions and queue rules."""


def new_cache(
    config: CycleConfig, workload: Sequence[PodSpec] | None = None, *, strict: bool = True
) -> ClusterCache:
    """An empty cluster cache with gpufleet's components (see ``scheduler/cache.py``; a
    live cluster's is not ``strict``)."""
    return ClusterCache(
        config.non_preemptible_priority, components=COMPONENTS, workload=workload, strict=strict
    )


def schedule_snapshot(
    snapshot: Snapshot, now: float, config: CycleConfig | None = None
) -> CycleResult:
    """Schedule ``snapshot`` once at ``now``: every object applied to an empty cache, then
    one session — the what-if edge (``gpufleet schedule``)."""
    config = config or CycleConfig()
    cache = new_cache(config)
    cache.apply_all(snapshot_events(snapshot))
    return Session(cache, config, now).run()


def run_cycle(snapshot: Snapshot, now: float, config: CycleConfig | None = None) -> CycleResult:
    """One cycle built straight from ``snapshot`` at ``now`` (no cache)."""
    return Cycle(snapshot, config or CycleConfig(), now, components=COMPONENTS).run()
