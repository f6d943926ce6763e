"""How many pods of one plain spec the cluster can take: the exact bound a cycle counts
before it tries, so that a saturated cluster costs one count per spec, not one placement per
pod.

A pod is *plain* when it asks for whole GPUs (or none), has no claims, no MIG slice and no
pinned CPUs. Placing such a pod on a node takes exactly one of the node's *slots* — the
minimum over its whole free GPUs, CPU, memory, pod slots and other resources divided by
the pod's request — so the sum of slots over the nodes its filters allow is exact. The
cycle asks before placing a gang, when judging whether a waiting class is worth a try, and
the victim search on a state with the candidates gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gpufleet.framework.runtime import Framework, Held
    from gpufleet.model.arrays import IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo


def per_node_slots(spec: PodSpec, state: ClusterState, nodes: IntArray) -> IntArray:
    """How many pods of plain ``spec`` each of ``nodes`` has whole GPUs, CPU, memory, pod
    slots and other resources for."""
    per_node = np.full(nodes.size, np.iinfo(np.int64).max, dtype=np.int64)
    if spec.num_gpu:
        per_node = np.minimum(per_node, state.gpu_whole_free[nodes] // spec.num_gpu)
    if spec.cpu_milli:
        per_node = np.minimum(per_node, state.cpu_free[nodes] // spec.cpu_milli)
    if spec.memory_mib:
        per_node = np.minimum(per_node, state.memory_free[nodes] // spec.memory_mib)
    if state.pods_limited:
        per_node = np.minimum(per_node, state.pods_free[nodes])
    for name, amount in spec.extended:
        column = state.extended_index.get(name)
        free = state.extended_free[nodes, column] if column is not None else 0
        per_node = np.minimum(per_node, free // max(amount, 1))
    return per_node


class Fit:
    """Slot counts and the nodes a spec's constraints allow, on one cluster's state.

    ``resource_filters`` are the profile filters that judge only constraints and free
    resources: with exactly these, a plain pod fits a node its constraints allow exactly
    when the node has a slot for it, and counting needs no filter run."""

    def __init__(
        self,
        framework: Framework,
        state: ClusterState,
        empty: ClusterState,
        resource_filters: tuple[str, ...],
    ) -> None:
        self.framework, self.state, self.empty = framework, state, empty
        self.counting = framework.profile.filters == resource_filters
        self._static: dict[Hashable, IntArray] = {}
        self._static_version = empty.changes
        """Per pod spec (name aside): the nodes that could run it empty."""
        self._plain: dict[tuple[str, int], Hashable | None] = {}
        """Per pod group (first pod, size): its plain request key (see plain_key)."""
        self._slots: dict[Hashable, tuple[int, float]] = {}
        """slots() on the state, with the state's version it was counted at."""

    def slots(
        self, pods: tuple[PodInfo, ...], state: ClusterState | None, held: Held | None
    ) -> float:
        """At most how many of ``pods`` the cluster (or ``state``) could take, off the
        ``held`` nodes — for pods of one plain spec; infinite for others (no bound is
        known). On the cycle's own state the answer is remembered until the state changes:
        a saturated cluster asks it for many jobs of the same few specs."""
        first = pods[0].spec
        key = self.plain_key(pods)
        if key is None:
            return np.inf
        cache_key: Hashable = None
        if state is None:
            state = self.state
            cache_key = (key, len(pods), None if held is None else held.mask.tobytes())
            version = state.changes
            known = self._slots.get(cache_key)
            if known is not None and known[0] == version:
                return known[1]
        answer = self._count(first, len(pods), state, held)
        if cache_key is not None:
            self._slots[cache_key] = (version, answer)
        return answer

    def plain_key(self, pods: tuple[PodInfo, ...]) -> Hashable | None:
        """The request key of ``pods`` if they are of one plain spec, else None.
        Remembered per pod group: a pod's key names one pod, and its request never
        changes."""
        memo = (pods[0].key, len(pods))
        if memo in self._plain:
            return self._plain[memo]
        first = pods[0].spec
        key: Hashable | None = first.request_key
        if (
            first.is_gpu_share
            or first.mig_profile is not None
            or first.exclusive_cpu
            or any(p.claims or p.spec.request_key != key for p in pods)
        ):
            key = None
        self._plain[memo] = key
        return key

    def _count(self, pod: PodSpec, count: int, state: ClusterState, held: Held | None) -> float:
        spec = self.framework.prepare(pod)
        if self.counting:
            nodes = self.static_nodes(spec)
            if held is not None:
                nodes = nodes[~held.mask[nodes]]
        else:
            nodes = self.framework.run_filters(state, spec, held).nodes
        return float(np.minimum(per_node_slots(spec, state, nodes), count).sum())

    def static_nodes(self, spec: PodSpec) -> IntArray:
        """Nodes that could run ``spec`` if they were empty (its constraints allow them);
        remembered until a node's labels or taints change."""
        if self.empty.changes != self._static_version:
            self._static, self._static_version = {}, self.empty.changes
        key = spec.request_key
        nodes = self._static.get(key)
        if nodes is None:
            nodes = self.framework.run_filters(self.empty, self.framework.prepare(spec)).nodes
            self._static[key] = nodes
        return nodes
