"""What the edges hand the scheduling core: the registries it draws its parts from.

The core never imports a registry of its own accord: the composition root
(``gpufleet/compose.py``) builds one :class:`Components` — the placement plugins and the
policies (profiles) of ``plugins/registry.py``, the actions of ``scheduler/room/``, the
queue rules (``scheduler/queues/rules.py``) and the topology rule
(``scheduler/placement/rules.py``) — and the edges (the CLI, the simulators, the live
scheduler) pass it to the cache, which carries it to the sessions opened on it. The cache
itself reads only the plugins and policies (``scheduler/state/shapes.py``). A test or another
edge may hand in other registries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpufleet.framework.profile import Profile
    from gpufleet.framework.registry import PluginFactory, Registry
    from gpufleet.scheduler.placement.rules import TopologyRuleFactory
    from gpufleet.scheduler.queues.rules import AdmissionRuleFactory, QueueRuleFactory
    from gpufleet.scheduler.room.protocols import RoomAction


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
    """Makes the rule that orders queues (``scheduler/queues/rules.py``)."""
    admission_rule: AdmissionRuleFactory
    """Makes the rule that admits jobs to their queues."""
    topology_rule: TopologyRuleFactory
    """Makes the rule that keeps a gang's pods inside the domains its PodGroup asks for."""
