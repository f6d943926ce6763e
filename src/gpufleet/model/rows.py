"""What each node of a cluster is and has free, as parallel numpy arrays.

A cluster is a struct of numpy arrays over nodes, not a list of node objects, so that a
plugin's Filter is one boolean mask over all nodes and its Score one float array
(ARCHITECTURE.md, "The hot path is vectorised"). GPUs are a dense ``N x G`` matrix of free
milli-GPU, where ``G`` is the largest GPU count of any node; the slots a node does not have
are marked absent in ``gpu_present`` and hold 0 free milli, so they never fit anything.

This module owns the arrays built from the node descriptions
(:class:`~gpufleet.model.node.NodeSpec`) and the questions asked of them
(:class:`NodeRows`); how a placement changes them is ``model/cluster.py``'s
(:class:`~gpufleet.model.cluster.ClusterState`).
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Self

import numpy as np

from gpufleet.model.arrays import MILLI, BoolArray, FloatArray, IntArray
from gpufleet.model.interpod import PodIndex
from gpufleet.model.mig import MigLayouts, table_for
from gpufleet.model.pod import SHARED_GPU_RESOURCE
from gpufleet.model.selectors import NodeLabels
from gpufleet.model.volumes import VolumeState

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.node import NodeSpec
    from gpufleet.model.pod import PodSpec

NO_MODEL = -1
"""``model_id`` of a node without GPUs."""

MAX_GPUS_PER_NODE = 128
"""The most GPUs one node may have: the largest servers hold 16, so more is a typo — and the
``N x G`` matrices grow with it."""

UNLIMITED_PODS = 1 << 40
"""``pods_free`` of a node without a pod limit."""

_state_ids = itertools.count()

_ALL = slice(None)


class NodeRows:
    """Free and total capacity of every node, as parallel numpy arrays.

    Attributes (``N`` nodes, ``G`` GPU slots per node):
        names: node names, index ``i`` is node ``i`` everywhere.
        cpu_capacity, cpu_free: milli-CPU, shape ``(N,)``.
        memory_capacity, memory_free: MiB, shape ``(N,)``.
        gpu_count: GPUs per node, shape ``(N,)``.
        gpu_present: ``(N, G)`` bool, slot ``g`` exists on node ``i``.
        gpu_free: ``(N, G)`` free milli-GPU per GPU (0 for absent slots).
        gpu_idle: ``(N,)`` free milli-GPU per node (row sums of ``gpu_free``).
        gpu_whole_free: ``(N,)`` fully free GPUs per node.
        model_id: ``(N,)`` index into ``models``, ``NO_MODEL`` for nodes without GPUs.
        gpu_memory: ``(N,)`` MiB of each GPU of the node, 0 where unknown.
        gpu_unit: ``(N,)`` physical GPUs one advertised GPU of the node counts as (1: whole;
            a MIG slice of the single strategy or a time-sliced replica less);
            ``gpu_sharing`` per node what such a GPU is (empty: whole), ``divided_gpus``
            whether any node's are not whole; ``one_per_pod`` ``(N,)`` nodes that give a
            pod at most one (MPS), ``renamed_gpus`` ``(N,)`` nodes that advertise
            ``nvidia.com/gpu.shared``.
        gpu_worth: ``(N,)`` GPUs the node's pods can be charged in all
            (:attr:`NodeSpec.gpu_worth`).
        models: GPU model names, sorted.
        node_labels: labels and taints, with cached masks (shared by copies).
        mig_profiles: static MIG profiles of the cluster; ``mig_free`` ``(N, P)`` free slices.
        mig: the partitions of dynamic-MIG GPUs (None when the cluster has none).
        gpu_zone: ``(N, G)`` NUMA zone of each GPU, -1 where unknown.
        zone_cpu_free: ``(N, Z)`` milli-CPU free for exclusive (pinned) use per NUMA zone.
        single_numa: ``(N,)`` nodes whose pinned pods must sit in one NUMA zone.
        gpu_pod_kinds: ``(N, G + 1)`` pods per kind on each node: column 0 counts pods with
            a share of a GPU, column ``n`` pods with ``n`` whole GPUs (GPU "affinity").
        extended: names of the other resources nodes advertise; ``extended_free`` ``(N, R)``
            what is free of each (base units), ``extended_index`` name -> column.
        volumes: the storage objects and what placements changed of them (volumes attached
            per node, claims given a volume), for the volume filters
            (:class:`~gpufleet.model.volumes.VolumeState`).
        pod_index: the pods by labels, anti-affinity term and host port on each node, for
            the inter-pod filters (:class:`~gpufleet.model.interpod.PodIndex`).
        pods_free: ``(N,)`` pods each node may still run (``UNLIMITED_PODS`` without a limit);
            ``pods_limited``: whether any node has a limit.
        generation: ``(N,)`` counter bumped on every change of the node.
        uid: identity of this state object, so that a cache never mistakes a copy for it.
    """

    __slots__ = (
        "_model_masks",
        "changes",
        "cpu_capacity",
        "cpu_free",
        "divided_gpus",
        "extended",
        "extended_free",
        "extended_index",
        "generation",
        "gpu_count",
        "gpu_free",
        "gpu_idle",
        "gpu_memory",
        "gpu_pod_kinds",
        "gpu_present",
        "gpu_sharing",
        "gpu_unit",
        "gpu_whole_free",
        "gpu_worth",
        "gpu_zone",
        "memory_capacity",
        "memory_free",
        "mig",
        "mig_free",
        "mig_profiles",
        "model_id",
        "models",
        "names",
        "node_labels",
        "one_per_pod",
        "pod_index",
        "pods_free",
        "pods_limited",
        "renamed_gpus",
        "single_numa",
        "uid",
        "volumes",
        "zone_cpu_free",
    )

    def __init__(self, nodes: Sequence[NodeSpec]) -> None:
        if not nodes:
            raise ValueError("a cluster needs at least one node")
        n = len(nodes)
        g = max(1, *(node.gpus for node in nodes))
        self.names: tuple[str, ...] = tuple(node.name for node in nodes)
        self.models: tuple[str, ...] = tuple(
            sorted({node.gpu_model for node in nodes if node.gpu_model and node.gpus > 0})
        )
        index = {model: i for i, model in enumerate(self.models)}
        self.cpu_capacity: IntArray = np.array([node.cpu_milli for node in nodes], dtype=np.int64)
        self.memory_capacity: IntArray = np.array(
            [node.memory_mib for node in nodes], dtype=np.int64
        )
        self.gpu_count: IntArray = np.array([node.gpus for node in nodes], dtype=np.int64)
        self.model_id: IntArray = np.array(
            [
                index[node.gpu_model] if node.gpu_model and node.gpus > 0 else NO_MODEL
                for node in nodes
            ],
            dtype=np.int64,
        )
        self.gpu_memory: IntArray = np.array(
            [(node.gpu_memory_mib or 0) if node.gpus else 0 for node in nodes], dtype=np.int64
        )
        self.gpu_unit: FloatArray = np.array([node.gpu_unit for node in nodes], dtype=np.float64)
        self.gpu_sharing: tuple[str, ...] = tuple(node.gpu_sharing for node in nodes)
        self.divided_gpus = bool((self.gpu_unit != 1.0).any())
        self.one_per_pod: BoolArray = np.array(
            [node.gpu_one_per_pod for node in nodes], dtype=np.bool_
        )
        self.renamed_gpus: BoolArray = np.array(
            [node.extended.get(SHARED_GPU_RESOURCE, 0) > 0 for node in nodes], dtype=np.bool_
        )
        self.gpu_worth: FloatArray = np.array([node.gpu_worth for node in nodes])
        self.gpu_present: BoolArray = np.arange(g)[None, :] < self.gpu_count[:, None]
        self.cpu_free: IntArray = self.cpu_capacity.copy()
        self.memory_free: IntArray = self.memory_capacity.copy()
        self.gpu_free: IntArray = np.where(self.gpu_present, MILLI, 0).astype(np.int64)
        self.gpu_idle: IntArray = self.gpu_count * MILLI
        self.gpu_whole_free: IntArray = self.gpu_count.copy()
        self.gpu_pod_kinds: IntArray = np.zeros((n, g + 1), dtype=np.int64)
        self.generation: IntArray = np.zeros(n, dtype=np.int64)
        self.changes = 0
        """Changes of any node so far (the sum of ``generation``)."""
        self.node_labels = NodeLabels(
            [node.labels for node in nodes], [node.taints for node in nodes], self.names
        )
        self.gpu_zone, self.zone_cpu_free, self.single_numa = _numa_rows(nodes, g)
        self.mig_profiles, self.mig_free, self.mig = _mig_rows(nodes)
        self.extended, self.extended_free = _extended_rows(nodes)
        self.extended_index = {name: i for i, name in enumerate(self.extended)}
        self.pods_free: IntArray = np.array(
            [UNLIMITED_PODS if node.max_pods is None else node.max_pods for node in nodes],
            dtype=np.int64,
        )
        self.pods_limited = any(node.max_pods is not None for node in nodes)
        self.pod_index = PodIndex(n)
        self.volumes = VolumeState(n)
        self.uid = next(_state_ids)
        self._model_masks: dict[frozenset[str] | None, BoolArray] = {}

    @property
    def size(self) -> int:
        """Number of nodes."""
        return len(self.names)

    @property
    def gpu_slots(self) -> int:
        """``G``: GPU slots per row of ``gpu_free``."""
        return int(self.gpu_free.shape[1])

    @property
    def total_gpus(self) -> int:
        return int(self.gpu_count.sum())

    @property
    def chargeable_gpus(self) -> float:
        """The GPUs pods can be charged on all nodes: advertised GPUs at their worth, static
        MIG slices at their compute slices out of 7 (what queues' fair shares divide)."""
        return float(self.gpu_worth.sum())

    @property
    def total_gpu_milli(self) -> int:
        return self.total_gpus * MILLI

    def node_gpu_free(self, node: int) -> IntArray:
        """Free milli-GPU of the GPUs that node ``node`` really has."""
        return self.gpu_free[node, : int(self.gpu_count[node])]

    def model_mask(self, allowed: frozenset[str] | None) -> BoolArray:
        """Nodes whose GPU model is in ``allowed`` (every GPU node when ``allowed`` is None).

        Cached per distinct set, since a workload has only a handful of GPU constraints.
        """
        mask = self._model_masks.get(allowed)
        if mask is None:
            if allowed is None:
                mask = self.model_id != NO_MODEL
            else:
                ids = [i for i, model in enumerate(self.models) if model in allowed]
                mask = np.isin(self.model_id, np.array(ids, dtype=np.int64))
            mask.setflags(write=False)
            self._model_masks[allowed] = mask
        return mask

    def allowed(self, pod: PodSpec) -> BoolArray:
        """Nodes whose labels, taints and GPU model ``pod`` allows (its node selector, required
        node affinity, tolerations and GPU models), with GPUs if it asks for any: where it
        could run if nothing else did. Capacity is not looked at."""
        mask = self.gpu_count > 0 if pod.num_gpu else np.ones(self.size, dtype=np.bool_)
        if pod.num_gpu and pod.gpu_models is not None:
            mask &= self.model_mask(pod.gpu_models)
        labels, constraint = self.node_labels, pod.constraint
        if constraint is not None and constraint.has_terms:
            mask &= labels.affinity_mask(constraint)
        tolerations = constraint.tolerations if constraint is not None else ()
        for taint in labels.blocking_taints:
            if not any(t.tolerates(taint) for t in tolerations):
                mask &= ~labels.taint_mask(taint)
        return mask

    def demand(self, pod: PodSpec) -> PodSpec:
        """``pod`` as its queue counts it while it waits: a share sized by GPU memory is sized
        for the largest GPU memory among the nodes it is :meth:`allowed` on (the least of a
        GPU it can take) — a whole GPU if none of them has enough; other pods as they are.

        Nodes it may not run on, and allowed nodes with less GPU memory, change nothing."""
        if not pod.sized_by_memory:
            return pod
        memory = self.gpu_memory[self.allowed(pod)]
        sized = pod.sized_for(int(memory.max()) if memory.size else 0)
        return sized if sized is not None else pod.with_share(MILLI)

    def demand_unit(self, pod: PodSpec) -> float:
        """What one advertised GPU ``pod`` asks for counts as toward its queue while it waits:
        the most any node it is :meth:`allowed` on and that advertises what it asks
        (``nvidia.com/gpu``, or ``nvidia.com/gpu.shared``) charges — a whole GPU if any of
        them has whole ones, so that a queue never admits more than it may run."""
        mask = self.allowed(pod)
        if not pod.num_gpu:  # replicas the device plugin renamed nvidia.com/gpu.shared
            mask &= self.renamed_gpus
        units = self.gpu_unit[mask]
        return float(units.max()) if units.size else 1.0

    def as_run(self, pod: PodSpec, node: int) -> PodSpec | None:
        """``pod`` as it runs on ``node``: a share sized by GPU memory sized for the node's
        GPUs (None where they lack the memory), and the advertised GPUs it takes charged at
        their worth there (:attr:`gpu_unit`). Other pods are returned as they are."""
        if pod.sized_by_memory:
            sized = pod.sized_for(int(self.gpu_memory[node]))
            if sized is None:
                return None
            pod = sized
        if self.divided_gpus or pod.shared_gpus:
            pod = pod.charged(float(self.gpu_unit[node]))
        return pod

    def pins_cpu(self, node: int, pod: PodSpec) -> bool:
        """Whether ``pod`` takes pinned CPUs from one NUMA zone of ``node`` with its GPUs."""
        return pod.exclusive_cpu and pod.num_gpu > 0 and bool(self.single_numa[node])

    def numa_aligned(self, pod: PodSpec, rows: slice = _ALL) -> BoolArray:
        """Nodes (of ``rows``) with one NUMA zone holding ``pod``'s GPUs (and pinned CPUs,
        if it pins)."""
        fits = self.gpu_free[rows] >= pod.gpu_milli
        zones, cpu = self.gpu_zone[rows], self.zone_cpu_free[rows]
        ok = np.zeros(len(fits), dtype=np.bool_)
        for zone in range(cpu.shape[1]):
            gpus = np.count_nonzero(fits & (zones == zone), axis=1) >= pod.num_gpu
            ok |= gpus & (cpu[:, zone] >= pod.cpu_milli)
        return ok

    def gpu_zone_of(self, node: int, gpus: Sequence[int]) -> int:
        return int(self.gpu_zone[node, gpus[0]]) if gpus else -1

    def mig_profile_index(self, profile: str) -> int | None:
        try:
            return self.mig_profiles.index(profile)
        except ValueError:
            return None

    def refresh_gpu_totals(self, nodes: int | IntArray) -> None:
        """Recompute ``gpu_idle`` and ``gpu_whole_free`` of ``nodes`` from ``gpu_free``."""
        if isinstance(nodes, int):  # one node: plain Python beats numpy on 8 numbers
            row = self.gpu_free[nodes].tolist()
            self.gpu_idle[nodes] = sum(row)
            self.gpu_whole_free[nodes] = row.count(MILLI)
            return
        rows = self.gpu_free[nodes]
        self.gpu_idle[nodes] = rows.sum(axis=-1)
        self.gpu_whole_free[nodes] = np.count_nonzero(rows == MILLI, axis=-1)

    def carry(self, old: NodeRows, to: IntArray) -> None:
        """Take over what ``old``'s pods hold, on a fresh state of the same nodes less some
        that left and plus some that joined: ``old``'s node ``i`` is node ``to[i]`` here
        (-1: it left, and holds no pod), with the same capacity. Copies rows, never replays
        pods. Neither state may have dynamic-MIG GPUs, whose partitions are per node."""
        assert self.mig is None
        assert old.mig is None
        kept = np.flatnonzero(to >= 0)
        rows = to[kept]
        for name in (
            "cpu_free",
            "memory_free",
            "pods_free",
            "gpu_idle",
            "gpu_whole_free",
            "generation",
        ):
            getattr(self, name)[rows] = getattr(old, name)[kept]
        # a kept node's GPUs, zones and resources are columns of both states
        g = min(self.gpu_slots, old.gpu_slots)
        self.gpu_free[rows, :g] = old.gpu_free[kept, :g]
        self.gpu_pod_kinds[rows, : g + 1] = old.gpu_pod_kinds[kept, : g + 1]
        z = min(self.zone_cpu_free.shape[1], old.zone_cpu_free.shape[1])
        self.zone_cpu_free[rows, :z] = old.zone_cpu_free[kept, :z]
        for mine, theirs, names, old_names in (
            (self.mig_free, old.mig_free, self.mig_profiles, old.mig_profiles),
            (self.extended_free, old.extended_free, self.extended, old.extended),
        ):
            for column, name in enumerate(old_names):
                if name in names:
                    mine[rows, names.index(name)] = theirs[kept, column]
        self.changes = old.changes + 1
        self.pod_index = old.pod_index.moved(to, self.size)

    def copy(self) -> Self:
        """An independent copy (for what-if evaluation); it gets a new ``uid``."""
        other = object.__new__(type(self))
        for name in NodeRows.__slots__:
            value = getattr(self, name)
            setattr(other, name, value.copy() if isinstance(value, np.ndarray) else value)
        other.uid = next(_state_ids)
        other._model_masks = dict(self._model_masks)
        other.mig = None if self.mig is None else self.mig.copy()
        other.pod_index = self.pod_index.copy()
        other.volumes = self.volumes.copy()
        return other


def _numa_rows(nodes: Sequence[NodeSpec], g: int) -> tuple[IntArray, IntArray, BoolArray]:
    """``gpu_zone`` ``(N, G)``, ``zone_cpu_free`` ``(N, Z)`` and ``single_numa`` ``(N,)`` of
    :class:`NodeRows`, from the nodes' NUMA zones."""
    n = len(nodes)
    gpu_zone: IntArray = np.full((n, g), -1, dtype=np.int64)
    for i, node in enumerate(nodes):
        gpu_zone[i, : len(node.gpu_zones)] = node.gpu_zones
    zones = max(1, *(len(node.zone_cpu_milli) for node in nodes))
    zone_cpu_free: IntArray = np.zeros((n, zones), dtype=np.int64)
    for i, node in enumerate(nodes):
        zone_cpu_free[i, : len(node.zone_cpu_milli)] = node.zone_cpu_milli
    single_numa: BoolArray = np.array(
        [node.single_numa and bool(node.gpu_zones) for node in nodes], dtype=np.bool_
    )
    return gpu_zone, zone_cpu_free, single_numa


def _mig_rows(
    nodes: Sequence[NodeSpec],
) -> tuple[tuple[str, ...], IntArray, MigLayouts | None]:
    """``mig_profiles``, ``mig_free`` ``(N, P)`` and ``mig`` of :class:`NodeRows`: the static
    MIG slices nodes advertise, and the partitions of dynamic-MIG GPUs (None without any)."""
    profiles = tuple(sorted({p for node in nodes for p in node.mig_slices}))
    free: IntArray = np.array(
        [[node.mig_slices.get(p, 0) for p in profiles] for node in nodes], dtype=np.int64
    ).reshape(len(nodes), len(profiles))
    dynamic = {
        i: table
        for i, node in enumerate(nodes)
        if node.mig_dynamic and (table := table_for(node.gpu_model)) is not None
    }
    layouts = MigLayouts(dynamic, {i: nodes[i].gpus for i in dynamic}) if dynamic else None
    return profiles, free, layouts


def _extended_rows(nodes: Sequence[NodeSpec]) -> tuple[tuple[str, ...], IntArray]:
    """``extended`` and ``extended_free`` ``(N, R)`` of :class:`NodeRows`: the other
    resources nodes advertise, and what is free of each."""
    names = tuple(sorted({r for node in nodes for r in node.extended}))
    free: IntArray = np.array(
        [[node.extended.get(r, 0) for r in names] for node in nodes], dtype=np.int64
    ).reshape(len(nodes), len(names))
    return names, free
