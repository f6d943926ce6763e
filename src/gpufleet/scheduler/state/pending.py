"""The cluster cache's index of pods waiting to be scheduled, by gang.

gpufleet's pods that no event shows bound are indexed as they come and go, with the gangs
whose pending job may have changed since a scheduler last asked — pods of theirs added,
changed, deleted, bound, assumed, forgotten, evicted or kept, or their PodGroup changed —
in the order of the changes. A scheduler that keeps its pending jobs across cycles
(:class:`~gpufleet.scheduler.cycle.session.Scheduler`) rebuilds just those jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Container

    from gpufleet.model.workload import PodInfo


class PendingPods:
    """Unbound gpufleet pods by key and by gang, and the gangs changed since last read."""

    def __init__(self) -> None:
        self._unbound: dict[str, PodInfo] = {}
        self._of: dict[str, dict[str, PodInfo]] = {}
        self._changed: dict[str, None] = {}
        """An ordered set: gangs in the order of their changes."""

    def index(self, key: str, old: PodInfo | None, new: PodInfo | None) -> None:
        """Pod ``key`` was ``old`` and is ``new`` (None: absent)."""
        if old is not None:
            self._changed[old.gang] = None
            if self._unbound.pop(key, None) is not None:
                of = self._of[old.gang]
                del of[key]
                if not of:
                    del self._of[old.gang]
        if new is not None:
            self._changed[new.gang] = None
            if new.managed and not new.bound:
                self._unbound[key] = new
                self._of.setdefault(new.gang, {})[key] = new

    def touch(self, gang: str) -> None:
        """``gang``'s pending job changes (a pod of it started or stopped counting)."""
        self._changed[gang] = None

    def waiting(self, running: Container[str]) -> list[PodInfo]:
        """The unbound pods that are not ``running`` (assumed), by key."""
        return [p for k, p in sorted(self._unbound.items()) if k not in running]

    def waiting_of(self, gang: str, running: Container[str]) -> list[PodInfo]:
        """:meth:`waiting`, of one gang."""
        of = self._of.get(gang)
        if of is None:
            return []
        return [p for k, p in sorted(of.items()) if k not in running]

    @property
    def changed(self) -> bool:
        """Whether some gang changed since the last :meth:`changes`."""
        return bool(self._changed)

    def changes(self) -> list[str]:
        """The gangs changed since the last call, in the order of the changes."""
        if not self._changed:
            return []
        changed = list(self._changed)
        self._changed.clear()
        return changed

    def forget_changes(self) -> None:
        """Every pending pod is to be read anew (the ledger was rebuilt)."""
        self._changed.clear()
