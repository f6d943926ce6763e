"""The pods a cycle may evict, as numpy arrays, so that victim searches are masks.

Only pods running at the snapshot, scheduled by gpufleet and preemptible can ever be
victims; pods bound in the same cycle never are. A search narrows the pool with a boolean
mask (same queue and lower priority for preempt, queues above their fair share for
reclaim, pods outside gangs for consolidation) and bounds, in one vectorised step, where a
pod could fit if every candidate were gone — Python objects are touched only for the few
nodes worth trying.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.interpod import PodIndex, Signatures
    from gpufleet.model.workload import QueueSpec
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.state.ledger import Ledger


_COLUMNS: tuple[tuple[str, type], ...] = (
    ("node", np.int64),
    ("queue", np.int64),
    ("priority", np.int64),
    ("cpu", np.int64),
    ("memory", np.int64),
    ("started", np.float64),
    ("preempt_min", np.float64),
    ("reclaim_min", np.float64),
    ("via_state", np.bool_),
    ("claims", np.bool_),
    ("single", np.bool_),
    ("alive", np.bool_),
    ("preempt_ok", np.bool_),
    ("reclaim_ok", np.bool_),
    ("sid", np.int64),
    ("terms", np.bool_),
)
"""The one-dimensional columns and their types (``gpu`` is a matrix: pods x GPU slots)."""

_ONE_BY_ONE = 8
"""Pods joining at once up to which they are written row by row."""


def _via_state(r: Running) -> bool:
    """Whether ``r`` is freed through the state (see ``VictimPool.via_state``)."""
    return (
        r.spec.mig_profile is not None
        or (r.spec.exclusive_cpu and r.spec.num_gpu > 0)
        or bool(r.spec.extended)
        or bool(r.spec.volumes)
    )


NO_SIGNATURE = -1
UNKNOWN = -2


def _sid(r: Running) -> int:
    return NO_SIGNATURE if r.spec.placement is None else UNKNOWN


def _terms(r: Running) -> bool:
    p = r.spec.placement
    return p is not None and bool(p.anti_affinity or p.host_ports or p.weighted)


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
        self._signatures: Signatures | None = None
        """The signature ids ``sid`` holds are of these."""
        self._columns(0)
        self.add(sorted(running, key=lambda r: r.pod.key))
        self.at(now)

    @staticmethod
    def of(ledger: Ledger, now: float) -> VictimPool:
        """The pool of ``ledger``'s running pods that may be evicted, judged at ``now``."""
        victims = [r for r in ledger.running.values() if ledger.evictable(r.pod)]
        return VictimPool(victims, ledger.tree.queues, now, ledger.state.gpu_slots)

    def _columns(self, n: int) -> None:
        """Empty columns with room for ``n`` pods (the pool's arrays are views of their
        first ``len(self)`` rows)."""
        self._capacity = n
        self._buffers: dict[str, npt.NDArray[Any]] = {
            name: np.zeros(n, dtype=dtype) for name, dtype in _COLUMNS
        }
        self._buffers["gpu"] = np.zeros((n, self.gpu_slots), dtype=np.int64)
        self._views(0)

    def _views(self, n: int) -> None:
        """Point the columns at the first ``n`` rows of their buffers."""
        buffers = self._buffers
        self.node: IntArray = buffers["node"][:n]
        self.queue: IntArray = buffers["queue"][:n]
        self.priority: IntArray = buffers["priority"][:n]
        self.cpu: IntArray = buffers["cpu"][:n]
        self.memory: IntArray = buffers["memory"][:n]
        self.gpu: IntArray = buffers["gpu"][:n]
        self.started: FloatArray = buffers["started"][:n]
        self.preempt_min: FloatArray = buffers["preempt_min"][:n]
        self.reclaim_min: FloatArray = buffers["reclaim_min"][:n]
        self.via_state: BoolArray = buffers["via_state"][:n]
        """Pods holding a MIG slice, pinned CPUs, other resources or volumes: freed through
        the state, which knows the partitions, NUMA zones, other resources and volumes."""
        self.claims: BoolArray = buffers["claims"][:n]
        """Pods with ResourceClaims (they are not moved by consolidation)."""
        self.single: BoolArray = buffers["single"][:n]
        self.alive: BoolArray = buffers["alive"][:n]
        self.preempt_ok: BoolArray = buffers["preempt_ok"][:n]
        """Past the queue's preemptMinRuntime (as of :meth:`at`)."""
        self.reclaim_ok: BoolArray = buffers["reclaim_ok"][:n]
        """Past the queue's reclaimMinRuntime (as of :meth:`at`)."""
        self.sid: IntArray = buffers["sid"][:n]
        """The id of the pod's signature among the inter-pod filters' (``_signatures``'s),
        UNKNOWN until a search needs it, NO_SIGNATURE for a pod without placement."""
        self.terms: BoolArray = buffers["terms"][:n]
        """Pods with terms of their own or host ports (taken out of the index one by one)."""

    def _reserve(self, n: int) -> None:
        """Room for ``n`` pods in all: the buffers grow by doubling, so that pods joining
        one at a time cost O(1) each, not a copy of every column."""
        if n <= self._capacity:
            return
        size = len(self.items)
        old = self._buffers
        self._capacity = capacity = max(n, 2 * self._capacity, 64)
        self._buffers = {
            name: np.zeros((capacity, *array.shape[1:]), dtype=array.dtype)
            for name, array in old.items()
        }
        for name, array in old.items():
            self._buffers[name][:size] = array[:size]

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
        end = start + len(running)
        self._reserve(end)
        if len(running) <= _ONE_BY_ONE:
            for i, r in enumerate(running, start):
                self._row(i, r)
        else:
            self._rows(start, running)
        self.items.extend(running)
        for i, r in enumerate(running, start):
            self.index[r.pod.key] = i
        self._views(end)

    def _row(self, i: int, r: Running) -> None:
        """Write pod ``r`` into row ``i`` (a few pods: scalar writes beat building arrays)."""
        buffers = self._buffers
        spec, pod = r.spec, r.pod
        queue = self.queues[pod.queue]
        buffers["node"][i] = r.node
        buffers["queue"][i] = self._queue_id[pod.queue]
        buffers["priority"][i] = pod.priority
        buffers["cpu"][i] = spec.cpu_milli
        buffers["memory"][i] = spec.memory_mib
        gpu = buffers["gpu"][i]
        gpu[:] = 0
        gpu[list(r.gpus)] = spec.gpu_milli
        buffers["started"][i] = pod.started or 0.0
        buffers["preempt_min"][i] = queue.preempt_min_runtime_s
        buffers["reclaim_min"][i] = queue.reclaim_min_runtime_s
        buffers["via_state"][i] = _via_state(r)
        buffers["sid"][i] = _sid(r)
        buffers["terms"][i] = _terms(r)
        buffers["claims"][i] = bool(pod.claims)
        buffers["single"][i] = pod.gang == pod.key
        buffers["alive"][i] = True
        buffers["preempt_ok"][i] = False
        buffers["reclaim_ok"][i] = False

    def _rows(self, start: int, running: list[Running]) -> None:
        """Write ``running`` into the rows from ``start`` on, column by column."""
        buffers = self._buffers
        end = start + len(running)
        specs = [self.queues[r.pod.queue] for r in running]
        gpu = buffers["gpu"][start:end]
        gpu[:] = 0
        for row, r in zip(gpu, running, strict=True):
            row[list(r.gpus)] = r.spec.gpu_milli
        columns = {
            "node": [r.node for r in running],
            "queue": [self._queue_id[r.pod.queue] for r in running],
            "priority": [r.pod.priority for r in running],
            "cpu": [r.spec.cpu_milli for r in running],
            "memory": [r.spec.memory_mib for r in running],
            "started": [r.pod.started or 0.0 for r in running],
            "preempt_min": [q.preempt_min_runtime_s for q in specs],
            "reclaim_min": [q.reclaim_min_runtime_s for q in specs],
            "via_state": [_via_state(r) for r in running],
            "sid": [_sid(r) for r in running],
            "terms": [_terms(r) for r in running],
            "claims": [bool(r.pod.claims) for r in running],
            "single": [r.pod.gang == r.pod.key for r in running],
            "alive": [True] * len(running),
            "preempt_ok": [False] * len(running),
            "reclaim_ok": [False] * len(running),
        }
        for name, values in columns.items():
            column = buffers[name]
            column[start:end] = np.array(values, dtype=column.dtype)

    def _compact(self) -> None:
        """Drop the pods that are no candidates any more (into new buffers: arrays read
        before keep what they held)."""
        keep = np.flatnonzero(self.alive)
        old = self._buffers
        self._columns(len(keep))
        for name, array in old.items():
            self._buffers[name][:] = array[keep]
        self.items = [self.items[i] for i in keep]
        self.index = {r.pod.key: i for i, r in enumerate(self.items)}
        self._views(len(keep))

    def moved(self, ledger: Ledger, to: IntArray) -> None:
        """The same candidates on ``ledger``, whose nodes are this pool's renumbered
        (:meth:`Ledger.on_nodes`: node ``i`` is node ``to[i]`` there, -1: gone): pods that
        no longer run leave, the others keep their columns, on their nodes' new rows."""
        for key in [k for k in self.index if k not in ledger.running]:
            self.discard(key)
        self._compact()
        self.items = [ledger.running[r.pod.key] for r in self.items]
        self.node[:] = to[self.node]
        self.queues = ledger.tree.queues
        slots = ledger.state.gpu_slots
        if slots != self.gpu_slots:
            old = self._buffers["gpu"]
            gpu = np.zeros((old.shape[0], slots), dtype=old.dtype)
            keep = min(slots, self.gpu_slots)
            gpu[:, :keep] = old[:, :keep]
            self._buffers["gpu"], self.gpu_slots = gpu, slots
            self._views(len(self.items))

    def at(self, now: float) -> None:
        """Judge min-runtime protection at ``now``."""
        runtime = now - self.started
        np.greater_equal(runtime, self.preempt_min, out=self.preempt_ok)
        np.greater_equal(runtime, self.reclaim_min, out=self.reclaim_ok)

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
        self._forget(freed.pod_index, plain)
        for i in np.flatnonzero(mask & self.via_state):
            r = self.items[i]
            freed.release(r.node, r.spec, r.gpus)
        return freed

    def _forget(self, index: PodIndex, mask: BoolArray) -> None:
        """Take the pods of ``mask`` out of ``index`` (a copy's) in one step."""
        counted = mask & (self.sid != NO_SIGNATURE)
        if not counted.any():
            return
        if index.signatures is not self._signatures:  # another ledger's: ids anew
            self.sid[self.sid >= 0] = UNKNOWN
            self._signatures = index.signatures
        for i in np.flatnonzero(counted & (self.sid == UNKNOWN)):
            placement = self.items[i].spec.placement
            assert placement is not None
            self.sid[i] = index.signatures.id(placement.signature)
        holders = [
            (r.node, r.spec.placement)
            for i in np.flatnonzero(counted & self.terms)
            if (r := self.items[i]).spec.placement is not None
        ]
        index.forget(self.node[counted], self.sid[counted], holders)

    def on_nodes(self, mask: BoolArray, nodes: IntArray) -> list[Running]:
        return [self.items[i] for i in np.flatnonzero(mask & np.isin(self.node, nodes))]
