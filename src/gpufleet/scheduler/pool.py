"""The pods a cycle may evict, as numpy arrays, so that victim searches are masks.

Only pods running at the snapshot, scheduled by gpufleet and preemptible can ever be
victims; pods bound in the same cycle never are. A search narrows the pool with a boolean
mask (same queue and lower priority for preempt, queues above their fair share for
reclaim, pods outside gangs for consolidation) and bounds, in one vectorised step, where a
pod could fit if every candidate were gone — Python objects are touched only for the few
nodes worth trying.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import QueueSpec
    from gpufleet.scheduler.ledger import Ledger
    from gpufleet.scheduler.transaction import Running


class VictimPool:
    """Arrays over the candidate victims; ``alive`` drops evicted and finished pods.

    A what-if cycle builds the pool once, in name order. The cluster cache keeps one across
    cycles: pods bound by one cycle (or seen bound by events) join it before the next
    (:meth:`add`), finished and evicted ones leave it (:meth:`discard`), and :meth:`at`
    re-judges the min-runtime protection at each cycle's time.
    """

    def __init__(
        self,
        running: Sequence[Running],
        queues: Mapping[str, QueueSpec],
        now: float,
        gpu_slots: int,
    ) -> None:
        self.queues = queues
        self.queue_names = sorted(queues)
        self._queue_id = {q: i for i, q in enumerate(self.queue_names)}
        self.gpu_slots = gpu_slots
        self.items: list[Running] = []
        self.index: dict[str, int] = {}
        self.generation = 0
        """Bumped whenever pods join the pool (new candidates for a search)."""
        self._columns(0)
        self.add(sorted(running, key=lambda r: r.pod.key))
        self.at(now)

    @staticmethod
    def of(ledger: Ledger, now: float) -> VictimPool:
        """The pool of ``ledger``'s running pods that may be evicted, judged at ``now``."""
        victims = [r for r in ledger.running.values() if ledger.evictable(r.pod)]
        return VictimPool(victims, ledger.tree.queues, now, ledger.state.gpu_slots)

    def _columns(self, n: int) -> None:
        self.node: IntArray = np.zeros(n, dtype=np.int64)
        self.queue: IntArray = np.zeros(n, dtype=np.int64)
        self.priority: IntArray = np.zeros(n, dtype=np.int64)
        self.cpu: IntArray = np.zeros(n, dtype=np.int64)
        self.memory: IntArray = np.zeros(n, dtype=np.int64)
        self.gpu: IntArray = np.zeros((n, self.gpu_slots), dtype=np.int64)
        self.started: FloatArray = np.zeros(n, dtype=np.float64)
        self.preempt_min: FloatArray = np.zeros(n, dtype=np.float64)
        self.reclaim_min: FloatArray = np.zeros(n, dtype=np.float64)
        self.via_state: BoolArray = np.zeros(n, dtype=np.bool_)
        """Pods holding a MIG slice, pinned CPUs or other resources: freed through the state,
        which knows the partitions, NUMA zones and other resources."""
        self.claims: BoolArray = np.zeros(n, dtype=np.bool_)
        """Pods with ResourceClaims (they are not moved by consolidation)."""
        self.single: BoolArray = np.zeros(n, dtype=np.bool_)
        self.alive: BoolArray = np.zeros(n, dtype=np.bool_)
        self.preempt_ok: BoolArray = np.zeros(n, dtype=np.bool_)
        """Past the queue's preemptMinRuntime (as of :meth:`at`)."""
        self.reclaim_ok: BoolArray = np.zeros(n, dtype=np.bool_)
        """Past the queue's reclaimMinRuntime (as of :meth:`at`)."""

    def add(self, running: Sequence[Running]) -> None:
        """Make ``running`` candidates (after those already in the pool). A pod that is a
        candidate already stays one, once: the cache and a cycle may both report it."""
        running = [r for r in running if r.pod.key not in self.index]
        if not running:
            return
        self.generation += 1
        if len(self.items) >= 64 and np.count_nonzero(self.alive) * 2 < len(self.items):
            self._compact()
        start = len(self.items)
        self.items.extend(running)
        for i, r in enumerate(running, start):
            self.index[r.pod.key] = i
        specs = [self.queues[r.pod.queue] for r in running]
        gpu = np.zeros((len(running), self.gpu_slots), dtype=np.int64)
        for i, r in enumerate(running):
            gpu[i, list(r.gpus)] = r.spec.gpu_milli
        columns = {
            "node": [r.node for r in running],
            "queue": [self._queue_id[r.pod.queue] for r in running],
            "priority": [r.pod.priority for r in running],
            "cpu": [r.spec.cpu_milli for r in running],
            "memory": [r.spec.memory_mib for r in running],
            "started": [r.pod.started or 0.0 for r in running],
            "preempt_min": [q.preempt_min_runtime_s for q in specs],
            "reclaim_min": [q.reclaim_min_runtime_s for q in specs],
            "via_state": [
                r.spec.mig_profile is not None
                or (r.spec.exclusive_cpu and r.spec.num_gpu > 0)
                or bool(r.spec.extended)
                for r in running
            ],
            "claims": [bool(r.pod.claims) for r in running],
            "single": [r.pod.gang == r.pod.key for r in running],
            "alive": [True] * len(running),
            "preempt_ok": [False] * len(running),
            "reclaim_ok": [False] * len(running),
        }
        for name, values in columns.items():
            old = getattr(self, name)
            setattr(self, name, np.concatenate([old, np.array(values, dtype=old.dtype)]))
        self.gpu = np.concatenate([self.gpu, gpu])

    def _compact(self) -> None:
        keep = np.flatnonzero(self.alive)
        for name in (
            "node", "queue", "priority", "cpu", "memory", "gpu", "started", "preempt_min",
            "reclaim_min", "via_state", "claims", "single", "alive", "preempt_ok", "reclaim_ok",
        ):  # fmt: skip
            setattr(self, name, getattr(self, name)[keep])
        self.items = [self.items[i] for i in keep]
        self.index = {r.pod.key: i for i, r in enumerate(self.items)}

    def at(self, now: float) -> None:
        """Judge min-runtime protection at ``now``."""
        runtime = now - self.started
        self.preempt_ok = runtime >= self.preempt_min
        self.reclaim_ok = runtime >= self.reclaim_min

    def __len__(self) -> int:
        return len(self.items)

    def discard(self, key: str) -> None:
        """``key`` was evicted, moved or finished: it can no longer be a victim."""
        i = self.index.pop(key, None)
        if i is not None:
            self.alive[i] = False

    def update(self, running: Running) -> None:
        """Pod ``running.pod.key`` is the same candidate, with a newer object (its bind was
        confirmed): only its record changes, not where it runs or what it holds."""
        i = self.index.get(running.pod.key)
        if i is not None:
            self.items[i] = running
            self.started[i] = running.pod.started or 0.0

    def in_queues(self, names: Sequence[str]) -> BoolArray:
        table = np.zeros(len(self.queue_names), dtype=np.bool_)
        table[[self._queue_id[q] for q in names if q in self._queue_id]] = True
        return table[self.queue]

    def without(self, mask: BoolArray, keys: Sequence[str]) -> BoolArray:
        out = mask.copy()
        for key in keys:
            i = self.index.get(key)
            if i is not None:
                out[i] = False
        return out

    def freed(self, state: ClusterState, mask: BoolArray) -> ClusterState:
        """A copy of ``state`` with every pod of ``mask`` gone (an upper bound for a search)."""
        freed = state.copy()
        plain = mask & ~self.via_state
        nodes = self.node[plain]
        np.add.at(freed.cpu_free, nodes, self.cpu[plain])
        np.add.at(freed.memory_free, nodes, self.memory[plain])
        np.add.at(freed.gpu_free, nodes, self.gpu[plain])
        np.add.at(freed.pods_free, nodes, 1)
        freed.refresh_gpu_totals(np.unique(nodes))
        for i in np.flatnonzero(mask & self.via_state):
            r = self.items[i]
            freed.release(r.node, r.spec, r.gpus)
        return freed

    def on_nodes(self, mask: BoolArray, nodes: IntArray) -> list[Running]:
        return [self.items[i] for i in np.flatnonzero(mask & np.isin(self.node, nodes))]
