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

    from gpufleet.model.cluster import BoolArray, ClusterState, IntArray
    from gpufleet.model.workload import QueueSpec
    from gpufleet.scheduler.transaction import Running


class VictimPool:
    """Arrays over the candidate victims (in name order); ``alive`` drops evicted pods."""

    def __init__(
        self,
        running: Sequence[Running],
        queues: Mapping[str, QueueSpec],
        now: float,
        gpu_slots: int,
    ) -> None:
        self.items = sorted(running, key=lambda r: r.pod.key)
        self.index = {r.pod.key: i for i, r in enumerate(self.items)}
        self.queue_names = sorted({r.pod.queue for r in self.items})
        queue_id = {q: i for i, q in enumerate(self.queue_names)}
        n = len(self.items)
        self.node: IntArray = np.array([r.node for r in self.items], dtype=np.int64)
        self.queue: IntArray = np.array([queue_id[r.pod.queue] for r in self.items], dtype=np.int64)
        self.priority: IntArray = np.array([r.pod.priority for r in self.items], dtype=np.int64)
        self.cpu: IntArray = np.array([r.spec.cpu_milli for r in self.items], dtype=np.int64)
        self.memory: IntArray = np.array([r.spec.memory_mib for r in self.items], dtype=np.int64)
        self.gpu: IntArray = np.zeros((n, gpu_slots), dtype=np.int64)
        for i, r in enumerate(self.items):
            self.gpu[i, list(r.gpus)] = r.spec.gpu_milli
        runtime = np.array([now - (r.pod.started or 0.0) for r in self.items], dtype=np.float64)
        self.preempt_ok: BoolArray = runtime >= np.array(
            [queues[r.pod.queue].preempt_min_runtime_s for r in self.items], dtype=np.float64
        )
        """Past the queue's preemptMinRuntime."""
        self.reclaim_ok: BoolArray = runtime >= np.array(
            [queues[r.pod.queue].reclaim_min_runtime_s for r in self.items], dtype=np.float64
        )
        """Past the queue's reclaimMinRuntime."""
        self.mig: BoolArray = np.array(
            [
                r.spec.mig_profile is not None or (r.spec.exclusive_cpu and r.spec.num_gpu > 0)
                for r in self.items
            ],
            dtype=np.bool_,
        )
        """Pods holding a MIG slice or pinned CPUs: freed through the state, which knows the
        partitions and NUMA zones."""
        self.claims: BoolArray = np.array([bool(r.pod.claims) for r in self.items], dtype=np.bool_)
        """Pods with ResourceClaims (they are not moved by consolidation)."""
        self.single: BoolArray = np.array(
            [r.pod.gang == r.pod.key for r in self.items], dtype=np.bool_
        )
        self.alive: BoolArray = np.ones(n, dtype=np.bool_)

    def __len__(self) -> int:
        return len(self.items)

    def discard(self, key: str) -> None:
        """``key`` was evicted (or moved): it can no longer be a victim."""
        i = self.index.get(key)
        if i is not None:
            self.alive[i] = False

    def in_queues(self, names: Sequence[str]) -> BoolArray:
        ids = [i for i, q in enumerate(self.queue_names) if q in set(names)]
        return np.isin(self.queue, np.array(ids, dtype=np.int64))

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
        plain = mask & ~self.mig
        nodes = self.node[plain]
        np.add.at(freed.cpu_free, nodes, self.cpu[plain])
        np.add.at(freed.memory_free, nodes, self.memory[plain])
        np.add.at(freed.gpu_free, nodes, self.gpu[plain])
        freed.refresh_gpu_totals(np.unique(nodes))
        for i in np.flatnonzero(mask & self.mig):
            r = self.items[i]
            freed.release(r.node, r.spec, r.gpus)
        return freed

    def on_nodes(self, mask: BoolArray, nodes: IntArray) -> list[Running]:
        return [self.items[i] for i in np.flatnonzero(mask & np.isin(self.node, nodes))]
