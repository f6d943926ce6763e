"""Where the workload's pods are expected to go when they name GPU models: pools of models.

The share plan and the stranding ratios reason about the workload's *expected* pods on a
set of GPUs. When no pod names a GPU model, every GPU may receive any pod and the cluster
is one pool. When some do (a node selector on the GPU product, openb's ``gpu_spec``), the
pods a model's nodes will receive are those that name it, plus their part of the pods that
may go elsewhere too; the mix differs per model, and so should the plan and the ratios.

The expected split, per typical pod ``k`` (frequency ``p_k``, GPU demand
``d_k = p_k x n_k x m_k``) allowed on the models ``A_k`` (all of them when unconstrained):
the pods that may use fewer GPUs go first (ascending total GPUs of ``A_k``), and each set
of them spreads over its models in proportion to the GPUs still free there once the more
constrained pods have taken theirs (demand scaled so that the workload fills the cluster):

    share[m, k] = free_m / sum_{m' in A_k} free_{m'}     for m in A_k, else 0
    free_m     -= share[m, k] x D_{A_k}                  (clipped at 0)

where ``D_A`` is the scaled demand of all typical pods allowed exactly on ``A``. When every
model is full, the rest spreads in proportion to the models' GPUs. CPU-only pods spread in
proportion to GPUs (they only matter to the ratios through the GPU pods).

Models whose expected mix is the same (``share[m, :] / gpus_m`` equal) form one pool: with no
constrained pod that is the whole cluster, so unconstrained workloads are planned exactly as
one pool. ``fraction[P, k] = sum_{m in P} share[m, k]`` is the part of pod ``k``'s pods that
pool ``P`` expects.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import NO_MODEL, ClusterState
from gpufleet.model.fragmentation import TypicalPods


@dataclass(frozen=True, slots=True)
class Pools:
    """GPU models grouped by the mix of pods they expect."""

    of_model: IntArray
    """``(M,)`` pool of each of the cluster's GPU models (``state.models`` order)."""
    fraction: FloatArray
    """``(P, K)`` part of typical pod ``k``'s pods expected in pool ``P``."""

    @property
    def size(self) -> int:
        return int(self.fraction.shape[0])

    def of_nodes(self, state: ClusterState, nodes: IntArray) -> IntArray:
        """Pool of each node in ``nodes`` (pool 0 for nodes without GPUs: nothing to plan)."""
        model = state.model_id[nodes]
        if not self.of_model.size:  # no node has GPUs
            return np.zeros(nodes.size, dtype=np.int64)
        return np.where(model == NO_MODEL, 0, self.of_model[np.maximum(model, 0)])


def model_gpus(state: ClusterState) -> IntArray:
    """``(M,)`` GPUs of each GPU model of ``state``."""
    has = state.model_id != NO_MODEL
    return np.bincount(
        state.model_id[has], weights=state.gpu_count[has], minlength=len(state.models)
    ).astype(np.int64)


def allowed_models(
    models: tuple[str, ...], gpus: IntArray, names: frozenset[str] | None
) -> BoolArray:
    """``(M,)``: the models (with GPUs) a pod allowed on ``names`` (None: any) may use."""
    return np.array(
        [gpus[j] > 0 and (names is None or model in names) for j, model in enumerate(models)],
        dtype=np.bool_,
    )


def scaled_demand(typical: TypicalPods, gpus: IntArray) -> FloatArray:
    """``(K,)`` milli-GPU of each typical pod's pods in a workload that fills ``gpus``."""
    demand = typical.prob * typical.num_gpu * typical.gpu_milli
    total = float(demand.sum())
    return demand * (float(gpus.sum()) * 1000.0 / total) if total > 0 else demand


def reserved_demand(
    typical: TypicalPods, models: tuple[str, ...], gpus: IntArray, allowed: BoolArray
) -> FloatArray:
    """``(M,)`` milli-GPU of each model that pods *more* constrained than a pod allowed on
    ``allowed`` are expected to need: typical pods whose models have fewer GPUs in all,
    by their ``share[m, k]``, in a workload that fills the cluster."""
    share = expected_share(typical, models, gpus)
    capacity = gpus.astype(np.float64)
    own = float(capacity[allowed].sum())
    narrower = np.array(
        [
            float(capacity[allowed_models(models, gpus, names)].sum()) < own
            for names in typical.gpu_models
        ],
        dtype=np.bool_,
    )
    narrower &= typical.num_gpu > 0
    return np.asarray(share[:, narrower] @ scaled_demand(typical, gpus)[narrower], dtype=np.float64)


def expected_share(typical: TypicalPods, models: tuple[str, ...], gpus: IntArray) -> FloatArray:
    """``share[m, k]`` (``(M, K)``) of the module docstring, for models with ``gpus`` GPUs."""
    m, k = len(models), typical.size
    share = np.zeros((m, k), dtype=np.float64)
    capacity = gpus.astype(np.float64)
    total = capacity.sum()
    if m == 0 or total <= 0:
        return share
    proportional = capacity / total
    demand = typical.prob * typical.num_gpu * typical.gpu_milli
    gpu_pod = demand > 0
    share[:, ~gpu_pod] = proportional[:, None]
    if not gpu_pod.any():
        return share
    scale = total * 1000.0 / float(demand.sum())
    allowed: dict[tuple[bool, ...], list[int]] = {}
    for i in np.flatnonzero(gpu_pod).tolist():
        key = tuple(allowed_models(models, gpus, typical.gpu_models[i]).tolist())
        allowed.setdefault(key, []).append(i)
    free = capacity * 1000.0
    for key in sorted(allowed, key=lambda a: (float(capacity[list(a)].sum()), a)):
        mask = np.array(key, dtype=np.bool_)
        if not mask.any():
            continue  # allowed on no GPU this cluster has: expected nowhere
        base = np.where(mask, free, 0.0)
        if base.sum() <= 0:
            base = np.where(mask, capacity, 0.0)
        split = base / base.sum()
        pods = allowed[key]
        share[:, pods] = split[:, None]
        free = np.maximum(free - split * scale * float(demand[pods].sum()), 0.0)
    return share


def model_pools(typical: TypicalPods, models: tuple[str, ...], gpus: IntArray) -> Pools:
    """Pools of the models with ``gpus`` GPUs each: models with one mix share a pool."""
    share = expected_share(typical, models, gpus)
    with np.errstate(divide="ignore", invalid="ignore"):
        mix = np.where(gpus[:, None] > 0, share / gpus[:, None], 0.0)
    of_model = np.zeros(len(models), dtype=np.int64)
    rows: list[FloatArray] = []
    for j in range(len(models)):
        same = [p for p, row in enumerate(rows) if np.allclose(row, mix[j], rtol=1e-9, atol=0)]
        if same:
            of_model[j] = same[0]
        else:
            of_model[j] = len(rows)
            rows.append(mix[j])
    fraction = np.zeros((max(1, len(rows)), typical.size), dtype=np.float64)
    np.add.at(fraction, of_model, share)
    if not rows:
        fraction[0] = 1.0
    return Pools(of_model, fraction)


class PoolCache:
    """The pools of the last cluster seen, rebuilt when its models or GPU counts change."""

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._key: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._pools: Pools | None = None
        self._uid = -1
        """The state last seen: its nodes' models and GPU counts are fixed for its life."""

    def get(self, state: ClusterState) -> tuple[Pools, bool]:
        """The pools of ``state`` and whether they changed since the last call."""
        if self._pools is not None and state.uid == self._uid:
            return self._pools, False
        self._uid = state.uid
        gpus = model_gpus(state)
        key = (state.models, tuple(gpus.tolist()))
        if self._pools is None or key != self._key:
            self._key, self._pools = key, model_pools(self.typical, state.models, gpus)
            return self._pools, True
        return self._pools, False
