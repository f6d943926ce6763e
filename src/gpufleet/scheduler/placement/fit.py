"""How many pods of one plain spec the cluster can take: the exact bound a cycle counts
before it tries, so that a saturated cluster costs one count per spec, not one placement per
pod.

A pod is *plain* when it asks for whole GPUs (or none), has no claims, no MIG slice, no
pinned CPUs and no inter-pod term of its own (where it may go depends on where the pods
before it went, which no count of slots on an empty cluster knows). Placing such a pod on
a node takes exactly one of the node's *slots* — the least count of the profile's capacity
filters (:meth:`Framework.count`: whole free GPUs, CPU, memory, pod slots and other
resources divided by the pod's request, judged by the plugins that filter on them) — so
the sum of slots over the nodes its filters allow is exact (an upper bound where running
pods' anti-affinity may keep it off some of them). The cycle asks before placing a gang,
when judging whether a waiting class is worth a try, and the victim search on a state with
the candidates gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Hashable

    from gpufleet.framework.runtime import Exclusion, Framework
    from gpufleet.model.arrays import IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo


FEW_CHANGED = 64
"""At most this many nodes changed since a spec's slots were counted are counted again
alone; more, and every node is (one numpy pass either way, over fewer or more nodes)."""


@dataclass(slots=True)
class _Counted:
    """A plain request's slots on the cycle's state: counted at the state's ``version``
    and the empty state's ``static`` one, on ``nodes`` (those its constraints allow),
    ``counts`` per node, each node's generation then (``seen``)."""

    version: int
    static: int
    nodes: IntArray
    counts: IntArray
    seen: IntArray


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
        self._answers: dict[Hashable, tuple[int, float]] = {}
        """slots() on the cycle's state, with the state's version it was counted at."""
        self._slots: dict[Hashable, _Counted] = {}
        """Per plain request on the cycle's state: the nodes that may run it and how many
        each could take (:meth:`_counts`), and when they were counted."""

    def slots(
        self, pods: tuple[PodInfo, ...], state: ClusterState | None, held: Exclusion | None
    ) -> float:
        """At most how many of ``pods`` the cluster (or ``state``) could take, off the
        ``held`` nodes — for pods of one plain spec; infinite for others (no bound is
        known). On the cycle's own state the count per node is remembered until the state
        changes: a saturated cluster asks it for many jobs of the same few specs, kept off
        different reserved nodes."""
        first = pods[0].spec
        key = self.plain_key(pods)
        if key is None:
            return np.inf
        if state is not None:
            return self._slots_of(*self._counts(first, state), len(pods), held)
        version = self.state.changes
        asked = (key, len(pods), None if held is None else held.mask.tobytes())
        answer = self._answers.get(asked)
        if answer is not None and answer[0] == version:
            return answer[1]
        known = self._slots.get(key)
        if known is None or not self._recounted(known, first):
            nodes, counts = self._counts(first, self.state)
            seen = self.state.generation[nodes]
            known = self._slots[key] = _Counted(version, self.empty.changes, nodes, counts, seen)
        found = self._slots_of(known.nodes, known.counts, len(pods), held)
        self._answers[asked] = (version, found)
        return found

    def _recounted(self, known: _Counted, pod: PodSpec) -> bool:
        """Bring ``known`` up to the state's version by counting again only the nodes
        that changed since (a node's count reads its own row alone: its generation moves
        with it); False where that cannot be done or would not be cheaper — the filters
        judge more than resources, the nodes it may run on changed, or many nodes did."""
        state = self.state
        if known.version == state.changes:
            return True
        if not self.counting or known.static != self.empty.changes:
            return False
        now = state.generation[known.nodes]
        stale = np.flatnonzero(now != known.seen)
        if stale.size > FEW_CHANGED:
            return False
        if stale.size:
            spec = self.framework.prepare(pod)
            known.counts[stale] = self.framework.count(state, spec, known.nodes[stale])
        known.seen, known.version = now, state.changes
        return True

    @staticmethod
    def _slots_of(nodes: IntArray, counts: IntArray, most: int, held: Exclusion | None) -> float:
        if held is not None:
            counts = counts[~held.mask[nodes]]
        if most == 1:  # most jobs: one pod
            return float(np.count_nonzero(counts))
        return float(np.minimum(counts, most).sum())

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
            or (first.placement is not None and first.placement.constrained)
            or any(p.claims or p.spec.request_key != key for p in pods)
        ):
            key = None
        self._plain[memo] = key
        return key

    def _counts(self, pod: PodSpec, state: ClusterState) -> tuple[IntArray, IntArray]:
        """The nodes that may run ``pod`` and how many of it each could take now, in an
        array of its own (held nodes are left out by the caller: one count serves every
        job's exclusion)."""
        spec = self.framework.prepare(pod)
        if self.counting:
            nodes = self.static_nodes(spec)
        else:
            nodes = self.framework.run_filters(state, spec).nodes
        return nodes, self.framework.count(state, spec, nodes)

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
