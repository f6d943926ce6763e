"""What the edges hand the scheduling core: the registries it draws its parts from.

The core never imports a registry of its own accord: the composition root
(``gpufleet/compose.py``) builds one :class:`Components` — the placement plugins and the
policies (profiles) of ``plugins/registry.py``, the actions of ``scheduler/actions/``, the
queue, admission and topology rules (``scheduler/rules.py``) —
and the edges (the CLI, the simulators, later the live scheduler) pass it to the cache, the
session and the cycle. A test or another edge may hand in other registries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufleet.framework.profile import Profile
    from gpufleet.framework.registry import PluginFactory, Registry
    from gpufleet.scheduler.rules import (
        AdmissionRuleFactory,
        QueueRuleFactory,
        TopologyRuleFactory,
    )
    from gpufleet.scheduler.view import RoomAction


@dataclass(frozen=True, eq=False)
class Components:
    plugins: Registry[PluginFactory]
    """Placement plugins by name."""
    policies: Registry[Profile]
    """Policies: profiles of those plugins, by name."""
    resource_filters: tuple[str, ...]
    """The filters that judge only a pod's constraints and free resources: a profile with
    exactly these lets a cycle count slots instead of running them (``fit.py``)."""
    actions: Registry[RoomAction]
    """Actions that make room, by the names a profile lists (``CycleConfig.actions``)."""
    queue_rule: QueueRuleFactory
    """Makes the rule that orders queues (``scheduler/rules.py``)."""
    admission_rule: AdmissionRuleFactory
    """Makes the rule that admits jobs to their queues."""
    topology_rule: TopologyRuleFactory
    """Makes the rule that keeps a gang's pods inside the domains its PodGroup asks for."""
