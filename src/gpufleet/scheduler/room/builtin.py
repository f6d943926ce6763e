"""What a cycle may do for a job that does not fit: the actions, one module each.

Allocation (``allocate.py``) places a job's pods; when they do not fit, the actions the
profile names (``CycleConfig.actions``) make room, in that order: ``consolidate.py`` moves
preemptible pods to defragment (``consolidate-serving`` only for serving queues' replicas),
``reclaim.py`` takes capacity back from queues above their
fair share, ``preempt.py`` evicts lower-priority pods of the job's own queue. Each of these
is a rule for who may be a victim (a :class:`~gpufleet.scheduler.room.protocols.RoomAction`); the
search for the cheapest victims (lowest priority, then least work lost) is the one
:class:`~gpufleet.scheduler.room.victims.VictimSearch` they share, and ``scheduler/room/room.py``
runs them with its memo of failures.
``stale_gang.py`` releases a gang left below its ``minMember``.

The edges hand the cycle a registry of actions (:func:`builtin_actions` lists these); a new
rule is a new module registered there, not an edit of the cycle.
"""

from __future__ import annotations

from gpufleet.framework.registry import Registry
from gpufleet.scheduler.room import consolidate, preempt, reclaim
from gpufleet.scheduler.room.protocols import RoomAction


def builtin_actions() -> Registry[RoomAction]:
    """The eviction actions gpufleet ships, by name."""
    registry: Registry[RoomAction] = Registry("action")
    registry.register(consolidate.NAME, consolidate.Consolidate())
    registry.register(
        consolidate.SERVING, consolidate.Consolidate(consolidate.SERVING, serving_only=True)
    )
    registry.register(reclaim.NAME, reclaim.Reclaim())
    registry.register(preempt.NAME, preempt.Preempt())
    return registry
