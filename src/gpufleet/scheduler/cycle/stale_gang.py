"""Stale-gang release: a gang running below its ``minMember`` is worth nothing.

A gang with some pods running and fewer than ``minMember`` (a member failed or was
evicted, or a bind failed after others of the gang were bound) cannot do its work. If it
cannot be completed in this cycle and has been stale for longer than the grace period,
its running pods are released — evicted with action ``stale-gang`` — so that their
capacity serves jobs that can run. The reason of the gang's pending pods says which case
holds. As KAI Scheduler judges it, a gang one of whose pods succeeded is never stale: its
members finish at their own pace, and the stragglers must not be killed for it (the
PodGroup's :attr:`~gpufleet.model.workload.GroupSpec.succeeded`). Pods already evicted
and terminating are not evicted again.

Since when a gang is stale: a scheduler that runs cycle after cycle (the live scheduler, a
replay) knows, from the first cycle that found it below ``minMember``
(:attr:`StaleGangs.since`; the live scheduler writes it on the
PodGroup as ``gpufleet.io/stale-since`` so that a restarted or new leader starts from it);
a what-if's one cycle reads that annotation.

Only gangs whose running pods are all gpufleet's are released: another scheduler's gang is
that scheduler's to judge. The grace period is the cycle's (``staleGrace``), unless the
PodGroup sets its own (``scheduleTimeoutSeconds``,
:attr:`~gpufleet.model.workload.GroupSpec.stale_grace_s`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.scheduler.api.outcome import Why, WhyCode, why

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from gpufleet.model.workload import GroupSpec
    from gpufleet.scheduler.cycle.commit import Commit
    from gpufleet.scheduler.state.ledger import Ledger

NAME = "stale-gang"


class StaleGangs:
    """The release of stale gangs over ``ledger``, ``grace_s`` after they went stale unless
    a PodGroup sets its own grace.

    ``since``: per stale gang, since when, as the scheduler that runs this cycle again and
    again saw it (``session.py``; a gang not in it is not stale); None: since its
    PodGroup's ``gpufleet.io/stale-since`` (a snapshot's one cycle). ``leaving``: pods
    evicted and terminating, which a release does not evict again.
    """

    def __init__(self, ledger: Ledger, grace_s: float) -> None:
        self.ledger, self.grace_s = ledger, grace_s
        self.since: Mapping[str, float] | None = None
        self.leaving: Collection[str] = frozenset()

    def release(self, commit: Commit, now: float, gang: str, reason: Why | None) -> Why | None:
        """Release ``gang``'s running pods through ``commit`` if it has been stale past its
        grace at ``now``; ``reason`` with what holds added (unchanged for a gang that is not
        stale)."""
        ledger = self.ledger
        group = ledger.groups[gang]
        running = len(ledger.gang_running.get(gang, ()))
        if not stale_gang(ledger, group):
            return reason
        grace_s = self.grace_s if group.stale_grace_s is None else group.stale_grace_s
        marks = self.since
        stale = group.stale_since if marks is None else marks.get(gang)
        if stale is not None and now - stale >= grace_s:
            leaving = self.leaving
            for key in sorted(k for k in ledger.gang_running[gang] if k not in leaving):
                released = commit.evict(key, NAME, gang)
                ledger.state.release(released.node, released.spec, released.gpus)
            return why(
                WhyCode.STALE_RELEASED,
                gang=gang,
                running=running,
                min_member=group.min_member,
                for_s=now - stale,
                grace_s=grace_s,
                then=reason,
            )
        return why(
            WhyCode.STALE,
            gang=gang,
            running=running,
            min_member=group.min_member,
            since_s=None if stale is None else now - stale,
            grace_s=grace_s,
            then=reason,
        )


def stale_gang(ledger: Ledger, group: GroupSpec) -> bool:
    """Whether ``group``'s gang is stale (module docstring): some of its pods run, fewer
    than its ``minMember``, none of them succeeded, and all that run are gpufleet's to
    release — a gang of another scheduler's pods (kube-scheduler's coscheduling, say) is
    that scheduler's to judge."""
    keys = ledger.gang_running.get(group.key, ())
    if group.succeeded or not 0 < len(keys) < group.min_member:
        return False
    return all(ledger.running[k].pod.managed for k in keys)
