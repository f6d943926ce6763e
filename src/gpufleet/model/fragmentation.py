"""GPU fragmentation as FGD defines it, kept incrementally per node.

FGD (Weng et al., USENIX ATC '23) measures fragmentation against a *target workload*: the
"typical pods" of the workload (its most frequent request shapes, covering 95% of pods, with
their frequencies ``p_k``). For a node with free milli-GPU ``f_g`` per GPU, ``S = sum_g f_g``
idle, and typical pod ``k`` asking for ``n_k`` GPUs of ``m_k`` milli and ``c_k`` milli-CPU:

    frag_k = sum_g f_g * [f_g < m_k]   if pod k fits the node (GPU model allowed,
                                        #{g: f_g >= m_k} >= n_k, free CPU >= c_k)
    frag_k = S                          otherwise, and always for pods that need no GPU

    F(node) = sum_k p_k * frag_k

The cluster's fragment amount is ``sum_n F(n)``; the fragment ratio is that over the idle
GPU milli. Memory is not part of the measure (as in the authors' simulator).

:class:`FragmentIndex` keeps, per node, the per-typical-pod GPU count ``count_k`` and
low sum ``low_k`` from which ``frag_k`` follows, and refreshes only nodes whose
``generation`` changed. :func:`fragment_delta` evaluates the change of ``F`` that placing a
pod would cause on many candidate nodes at once — the heart of the FGD score — with integer
per-pod terms so that "no change" is exactly zero.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.arrays import MILLI, BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.values import ArrayValue, read_only

if TYPE_CHECKING:
    from collections.abc import Iterable

    from gpufleet.model.pod import PodSpec

DEFAULT_COVERAGE = 0.95
"""Share of the workload's pods that the typical pods cover (FGD's popularity threshold)."""


@dataclass(frozen=True, slots=True, eq=False)
class TypicalPods(ArrayValue):
    """The target workload: ``K`` request shapes with probabilities summing to 1.

    The arrays are stored as read-only copies; equal workloads compare and hash equal
    (:class:`ArrayValue`)."""

    cpu_milli: IntArray
    gpu_milli: IntArray
    num_gpu: IntArray
    gpu_models: tuple[frozenset[str] | None, ...]
    prob: FloatArray
    memory_mib: FloatArray
    """Mean memory of the shape's pods (not part of the shape; FGD's measure ignores it)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "cpu_milli", read_only(self.cpu_milli))
        object.__setattr__(self, "gpu_milli", read_only(self.gpu_milli))
        object.__setattr__(self, "num_gpu", read_only(self.num_gpu))
        object.__setattr__(self, "prob", read_only(self.prob))
        object.__setattr__(self, "memory_mib", read_only(self.memory_mib))

    @property
    def size(self) -> int:
        return len(self.prob)


def _models_key(models: frozenset[str] | None) -> str:
    return "|".join(sorted(models)) if models else ""


def typical_pods(pods: Iterable[PodSpec], coverage: float = DEFAULT_COVERAGE) -> TypicalPods:
    """The most frequent request shapes of ``pods`` until they cover ``coverage`` of them.

    A shape is (CPU, milli-GPU per GPU, GPU count, allowed models); memory is not part of it
    (each shape carries its pods' mean memory). Shapes are ranked by frequency, ties broken by
    the larger shape first, then the kept shapes' frequencies are renormalised to sum to 1.
    """
    counts: Counter[tuple[int, int, int, frozenset[str] | None]] = Counter()
    memory: Counter[tuple[int, int, int, frozenset[str] | None]] = Counter()
    for p in pods:
        shape = (p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_models)
        counts[shape] += 1
        memory[shape] += p.memory_mib
    if not counts:
        raise ValueError("typical pods of an empty workload")
    total = sum(counts.values())
    ranked = sorted(
        counts.items(),
        key=lambda kv: (kv[1], kv[0][0], kv[0][1], kv[0][2], _models_key(kv[0][3])),
        reverse=True,
    )
    kept: list[tuple[tuple[int, int, int, frozenset[str] | None], int]] = []
    covered = 0
    for shape, count in ranked:
        if covered >= coverage * total:
            break
        kept.append((shape, count))
        covered += count
    prob = np.array([count for _, count in kept], dtype=np.float64) / covered
    return TypicalPods(
        cpu_milli=np.array([s[0] for s, _ in kept], dtype=np.int64),
        gpu_milli=np.array([s[1] for s, _ in kept], dtype=np.int64),
        num_gpu=np.array([s[2] for s, _ in kept], dtype=np.int64),
        gpu_models=tuple(s[3] for s, _ in kept),
        prob=prob,
        memory_mib=np.array([memory[s] / count for s, count in kept], dtype=np.float64),
    )


def gpu_stats(gpu_free: IntArray, typical: TypicalPods) -> tuple[IntArray, IntArray]:
    """Per node and typical pod: GPUs that can hold ``m_k`` and the free milli of the others.

    ``gpu_free`` is ``(R, G)``; returns ``count`` and ``low``, both ``(R, K)``.
    """
    fits = gpu_free[:, :, None] >= typical.gpu_milli[None, None, :]
    count = fits.sum(axis=1, dtype=np.int32)
    low = np.where(fits, 0, gpu_free[:, :, None]).sum(axis=1, dtype=np.int32)
    return count, low


def frag_terms(
    idle: IntArray,
    low: IntArray,
    gpu_ok: BoolArray,
    cpu_free: IntArray,
    typical: TypicalPods,
) -> IntArray:
    """``frag_k`` per node and typical pod, shape ``(R, K)``, in milli-GPU (integers).

    ``gpu_ok[r, k]``: typical pod ``k`` needs GPUs, may use the node's model and finds
    enough GPUs; it fits if the CPU is there too.
    """
    fits = gpu_ok & (cpu_free[:, None] >= typical.cpu_milli[None, :])
    return np.where(fits, low, idle[:, None])


def signature_key(state: ClusterState, node: int) -> tuple[int, ...]:
    """What a node's fragment reads of it: its GPU model, free CPU and the free milli-GPU of
    its GPU slots in any order (:attr:`FragmentIndex.signature`)."""
    return _signature(
        int(state.model_id[node]), int(state.cpu_free[node]), state.gpu_free[node].tolist()
    )


def _signature(model: int, cpu: int, free: list[int]) -> tuple[int, ...]:
    return (model, cpu, *sorted(free))


class FragmentIndex:
    """Per-node fragment of a :class:`ClusterState` against fixed typical pods.

    Call :meth:`sync` with the state before reading; it recomputes only nodes whose
    generation changed since the last sync (all nodes for a state it has not seen).
    """

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._uid = -1
        k = typical.size
        self._generation: IntArray = np.zeros(0, dtype=np.int64)
        self.usable: BoolArray = np.zeros((0, k), dtype=np.bool_)
        """``(N, K)``: typical pod ``k`` needs GPUs and may use node ``n``'s model."""
        self.idle: IntArray = np.zeros(0, dtype=np.int32)
        self.count: IntArray = np.zeros((0, k), dtype=np.int32)
        self.low: IntArray = np.zeros((0, k), dtype=np.int32)
        self.terms: IntArray = np.zeros((0, k), dtype=np.int32)
        self.fragment: FloatArray = np.zeros(0, dtype=np.float64)
        self.signature: IntArray = np.zeros(0, dtype=np.int64)
        """``(N,)``: equal for nodes whose fragment behaves the same (model, CPU, free GPUs)."""
        self._signatures: dict[tuple[int, ...], int] = {}

    def sync(self, state: ClusterState) -> None:
        if state.uid != self._uid:
            self._uid = state.uid
            access = np.stack(
                [state.model_mask(models) for models in self.typical.gpu_models], axis=1
            )
            self.usable = access & (self.typical.gpu_milli > 0)[None, :]
            n, k = state.size, self.typical.size
            self.idle = np.zeros(n, dtype=np.int32)
            self.count = np.zeros((n, k), dtype=np.int32)
            self.low = np.zeros((n, k), dtype=np.int32)
            self.terms = np.zeros((n, k), dtype=np.int32)
            self.fragment = np.zeros(n, dtype=np.float64)
            self.signature = np.zeros(n, dtype=np.int64)
            self._signatures = {}
            self._refresh(state, np.arange(n))
        else:
            stale = np.flatnonzero(state.generation != self._generation)
            if stale.size:
                self._refresh(state, stale)

    def _refresh(self, state: ClusterState, nodes: IntArray) -> None:
        free = state.gpu_free[nodes]
        count, low = gpu_stats(free, self.typical)
        idle = free.sum(axis=1, dtype=np.int32)
        gpu_ok = self.usable[nodes] & (count >= self.typical.num_gpu[None, :])
        terms = frag_terms(idle, low, gpu_ok, state.cpu_free[nodes], self.typical)
        self.idle[nodes] = idle
        self.count[nodes] = count
        self.low[nodes] = low
        self.terms[nodes] = terms
        self.fragment[nodes] = terms @ self.typical.prob
        models, cpus, rows = (
            state.model_id[nodes].tolist(),
            state.cpu_free[nodes].tolist(),
            free.tolist(),
        )
        for i, node in enumerate(nodes.tolist()):
            key = _signature(models[i], cpus[i], rows[i])
            self.signature[node] = self._signatures.setdefault(key, len(self._signatures))
        self._generation = state.generation.copy()

    @property
    def total(self) -> float:
        """The cluster's fragment amount in milli-GPU."""
        return float(self.fragment.sum())

    @property
    def total_idle(self) -> int:
        """Idle GPU milli in the cluster."""
        return int(self.idle.sum(dtype=np.int64))

    def fragment_delta(
        self, state: ClusterState, nodes: IntArray, pod: PodSpec, gpu_free_used: IntArray
    ) -> FloatArray:
        """How much placing ``pod`` would *reduce* the fragment of each candidate.

        ``nodes`` (``P``,) may repeat a node: each entry is one option, with
        ``gpu_free_used[i]`` the current free milli of the GPU a shared pod would take
        (ignored for whole-GPU and CPU-only pods, which take fully free GPUs).
        Returns ``F_before - F_after`` per option, summed from integer per-pod differences
        so that an option that changes nothing is exactly 0. Options on nodes of equal
        signature (and, for a share, equal free milli on the GPU) are evaluated once.
        """
        key = self.signature[nodes]
        if pod.is_gpu_share:
            key = key * (MILLI + 1) + gpu_free_used
        _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
        if first.size == nodes.size:
            return self._delta(state, nodes, pod, gpu_free_used)
        return self._delta(state, nodes[first], pod, gpu_free_used[first])[inverse]

    def _delta(
        self, state: ClusterState, nodes: IntArray, pod: PodSpec, gpu_free_used: IntArray
    ) -> FloatArray:
        typical = self.typical
        idle = self.idle[nodes]
        count = self.count[nodes]
        usable = self.usable[nodes]
        cpu_after = state.cpu_free[nodes] - pod.cpu_milli
        if pod.is_gpu_share:
            a = gpu_free_used[:, None]
            m_k = typical.gpu_milli[None, :]
            leaves = (a >= m_k) & (a - pod.gpu_milli < m_k)
            gpu_ok = usable & (count - leaves >= typical.num_gpu[None, :])
            low = self.low[nodes] + np.where(
                a < m_k, -pod.gpu_milli, np.where(leaves, a - pod.gpu_milli, 0)
            )
        else:
            # Whole GPUs come from fully free ones, which every typical pod could use.
            gpu_ok = usable & (count >= typical.num_gpu[None, :] + pod.num_gpu)
            low = self.low[nodes]
        after = frag_terms(idle - pod.total_gpu_milli, low, gpu_ok, cpu_after, typical)
        diff = self.terms[nodes] - after
        return np.asarray(diff @ typical.prob, dtype=np.float64)
