"""The cluster cache's accounting of what runs: the ledger and the victim pool, kept up to
date pod by pod as events start and stop pods, and dropped for a rebuild from the objects
when a change is too large for that (``cache.py`` says which).

A cache that is not ``strict`` (a live cluster) fences a node whose bound pods contradict
each other instead of refusing the cluster: the pod that does not fit is left out, recorded
in :attr:`Accounting.conflicts`, and the node is tainted ``gpufleet.io/conflict`` until the
pods' objects agree again.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.model.selectors import Taint
from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.state.ledger import Ledger, SnapshotError

if TYPE_CHECKING:
    from collections.abc import Mapping, Set

    from gpufleet.model.cluster import NodeSpec
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.state.pool import VictimPool

CONFLICT_TAINT = Taint("gpufleet.io/conflict", "", "NoSchedule")
"""What fences a node whose bound pods contradict each other (a cache that is not strict)."""


class Accounting:
    """The ledger and the victim pool of the cache's pods (None: to be rebuilt); ``nodes``
    the cache's Node objects, ``leaving`` its terminating pods (never victims)."""

    def __init__(self, strict: bool, nodes: Mapping[str, object], leaving: Set[str]) -> None:
        self.strict, self.nodes, self.leaving = strict, nodes, leaving
        self.ledger: Ledger | None = None
        self.pool: VictimPool | None = None
        self.joining: dict[str, Running] = {}
        """Pods that became possible victims since the pool was last read (the pool
        takes them in one step: growing its arrays costs as much for one as for many)."""
        self.moved: set[str] = set()
        """Nodes that joined or left since the ledger was built: it takes them in (copying
        the other nodes' rows) at the next session."""
        self.conflicts: dict[str, str] = {}
        """Not strict: bound pods that contradict their node's other pods, with why."""
        self.fenced: set[str] = set()

    def invalidate(self) -> None:
        """The ledger is rebuilt from the objects at the next session."""
        self.ledger = self.pool = None
        self.joining.clear()
        self.moved.clear()

    def built(self, ledger: Ledger, pool: VictimPool) -> None:
        """A ledger rebuilt from the objects (or moved onto the nodes there are now), and its
        pool (conflicts found anew)."""
        self.ledger, self.pool = ledger, pool
        self.joining.clear()
        self.moved.clear()
        for key in self.leaving:
            pool.discard(key)

    def read_pool(self) -> VictimPool:
        """The pool with the pods that joined since it was last read."""
        assert self.pool is not None
        if self.joining:
            self.pool.add(sorted(self.joining.values(), key=lambda r: r.pod.key))
            self.joining.clear()
        return self.pool

    def same(self, running: Running, new: PodInfo) -> bool:
        """Whether bound ``new`` is where ``running`` runs and asks its queue for the same:
        then only its record changes (its start time kept if the event has none);
        otherwise the caller stops and starts it."""
        ledger = self.ledger
        assert ledger is not None
        old = running.pod
        if new.node != ledger.state.names[running.node] or (new.gpus and new.gpus != running.gpus):
            return False
        if (old.spec, old.queue, old.priority, old.group, old.managed) != (
            new.spec,
            new.queue,
            new.priority,
            new.group,
            new.managed,
        ):
            return False
        pod = new if new.started is not None else replace(new, started=old.started)
        kept = Running(pod, running.node, running.gpus, running.spec)
        ledger.running[new.key] = kept
        if new.key in self.joining:
            self.joining[new.key] = kept
        elif self.pool is not None:
            self.pool.update(kept)
        return True

    def start(self, pod: PodInfo) -> None:
        """Bound ``pod`` takes its capacity (a pod on a node the cache has not seen yet
        takes it when the node arrives: the ledger reserves the pods of nodes that join).
        Pods on its node whose GPUs were guessed (their objects name none) give way to a
        pod whose object names them, and take others."""
        ledger = self.ledger
        assert ledger is not None
        if pod.node not in ledger.node_index or pod.node not in self.nodes:
            return  # not there yet, or gone (the ledger takes nodes in and out at a session)
        try:
            stopped, started = ledger.bind_naming(pod)
        except SnapshotError as error:
            if not self.strict:
                self.conflict(ledger, pod, error)
                return
            self.invalidate()  # the cluster contradicts itself: the rebuild says where
            raise
        for gone in stopped:
            self.pool_drop(gone.pod.key)
        for running in started:
            if ledger.evictable(running.pod) and running.pod.key not in self.leaving:
                self.joining[running.pod.key] = running

    def conflict(self, ledger: Ledger, pod: PodInfo, error: SnapshotError) -> None:
        """Not strict: ``pod`` contradicts its node; fence the node (see the module doc)."""
        self.conflicts[pod.key] = str(error)
        self.fenced.add(pod.node or "")
        row = ledger.node_index[pod.node or ""]
        node: NodeSpec = self.nodes[pod.node or ""]  # type: ignore[assignment]
        for state in (ledger.state, ledger.empty):
            state.node_labels.set_node(row, node.labels, (*node.taints, CONFLICT_TAINT))
            state.generation[row] += 1
            state.changes += 1

    def stop(self, key: str) -> None:
        ledger = self.ledger
        assert ledger is not None
        ledger.finish(key)
        self.pool_drop(key)

    def pool_drop(self, key: str) -> None:
        assert self.pool is not None
        self.pool.discard(key)
        self.joining.pop(key, None)
