"""All-or-nothing changes to the cluster state: the statement of a gang's scheduling.

A :class:`Transaction` records every reserve and eviction it applies to a
:class:`~gpufleet.model.cluster.ClusterState`, so that a gang that cannot be placed
whole, or a victim search that tries one node after another, leaves the state exactly as it
found it (``rollback``). No partial gang ever holds resources past its own attempt.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo


@dataclass(frozen=True, slots=True)
class Running:
    """A pod holding capacity: where it runs and the request it was placed with."""

    pod: PodInfo
    node: int
    gpus: tuple[int, ...]
    spec: PodSpec


class Transaction:
    """Reserve and release on ``state``, undoable as a whole."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self._log: list[tuple[bool, int, PodSpec, tuple[int, ...]] | Callable[[], None]] = []

    def on_rollback(self, undo: Callable[[], None]) -> None:
        """Run ``undo`` if the transaction rolls back past this point (e.g. device claims)."""
        self._log.append(undo)

    def reserve(self, node: int, spec: PodSpec, gpus: tuple[int, ...]) -> None:
        self.state.reserve(node, spec, gpus)
        self._log.append((True, node, spec, gpus))

    def release(self, running: Running) -> None:
        self.state.release(running.node, running.spec, running.gpus)
        self._log.append((False, running.node, running.spec, running.gpus))

    def restore(self, running: Running) -> None:
        """Take an evicted pod's capacity back (the victim search reprieves it)."""
        self.reserve(running.node, running.spec, running.gpus)

    def reserved(self) -> list[tuple[int, PodSpec, tuple[int, ...]]]:
        """What this transaction reserved and still holds, in order."""
        return [entry[1:] for entry in self._log if isinstance(entry, tuple) and entry[0]]

    def reserved_since(self, mark: int) -> int:
        """How many reservations were made since ``mark()`` returned ``mark`` and are held."""
        return sum(1 for entry in self._log[mark:] if isinstance(entry, tuple) and entry[0])

    def mark(self) -> int:
        return len(self._log)

    def rollback(self, to: int = 0) -> None:
        """Undo everything since ``mark()`` returned ``to`` (everything by default)."""
        while len(self._log) > to:
            entry = self._log.pop()
            if not isinstance(entry, tuple):
                entry()
                continue
            reserved, node, spec, gpus = entry
            if reserved:
                self.state.release(node, spec, gpus)
            else:
                self.state.reserve(node, spec, gpus)
