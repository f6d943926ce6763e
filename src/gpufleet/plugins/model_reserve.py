"""ModelReserveScore: leave on each GPU model what the pods that can only use it will need.

A pod that may run on many GPU models (or on any) competes for the GPUs of each of them
with pods that name fewer. Placed where it packs best, it fills the smaller models first
(FGD's fragment falls most where few typical pods have access), and the pods that name
those models fail later while other models keep GPUs free. So each model keeps a reserve:
the GPUs that the typical pods *more constrained* than this pod (allowed on models with
fewer GPUs in all) are expected to need there (their part of a workload that fills the
cluster, :func:`~gpufleet.plugins.model_pools.reserved_demand`), scaled by the share of the
cluster still free, since that much of the workload is still to come:

    reserve_m  = R_m x idle / capacity                     (milli-GPU, R_m for this pod)
    shortfall  = clip(reserve_m - (idle_m - gpu), 0, gpu)  (gpu: the pod's milli-GPU)
    score      = -shortfall

``idle_m`` is the model's idle milli-GPU, ``idle`` and ``capacity`` the cluster's. The score
is the same on every node of a model: it only moves the pod to another model, and only when
this one is down to its reserve. Pods that name no model nobody else names, and workloads
where no pod names a model, score 0 everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import NO_MODEL, ClusterState
from gpufleet.model.fragmentation import TypicalPods
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.model_pools import allowed_models, model_gpus, reserved_demand

NAME = "ModelReserveScore"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class ModelReserveScore:
    name = NAME

    def __init__(self, typical: TypicalPods) -> None:
        self.typical = typical
        self._key: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._reserves: dict[frozenset[str] | None, FloatArray] = {}
        self._uid = -1
        """The state last seen: its nodes' models and GPU counts are fixed for its life."""
        self._gpus: IntArray = np.zeros(0, dtype=np.int64)

    def reserve(self, state: ClusterState, pod: PodSpec) -> FloatArray:
        """``R_m`` (``(M,)``) for ``pod``'s allowed models, cached per cluster and set."""
        if state.uid != self._uid:
            self._uid, self._gpus = state.uid, model_gpus(state)
            key = (state.models, tuple(self._gpus.tolist()))
            if key != self._key:
                self._key, self._reserves = key, {}
        gpus = self._gpus
        reserve = self._reserves.get(pod.gpu_models)
        if reserve is None:
            allowed = allowed_models(state.models, gpus, pod.gpu_models)
            reserve = reserved_demand(self.typical, state.models, gpus, allowed)
            self._reserves[pod.gpu_models] = reserve
        return reserve

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        if not pod.num_gpu or not state.models:
            return np.zeros(nodes.size, dtype=np.float64)
        reserve = self.reserve(state, pod)
        if not reserve.any():
            return np.zeros(nodes.size, dtype=np.float64)
        has = state.model_id != NO_MODEL
        idle_m = np.bincount(
            state.model_id[has], weights=state.gpu_idle[has], minlength=len(state.models)
        )
        free_share = float(state.gpu_idle.sum()) / max(1, state.total_gpu_milli)
        gpu = float(pod.total_gpu_milli)
        shortfall = np.clip(reserve * free_share - (idle_m - gpu), 0.0, gpu)
        model = state.model_id[nodes]
        return np.where(model == NO_MODEL, 0.0, -shortfall[np.maximum(model, 0)])


def new(args: Args, handle: Handle) -> ModelReserveScore:
    if handle.fragments is None:
        raise ValueError("ModelReserveScore needs the target workload (typical pods) in the handle")
    return ModelReserveScore(handle.fragments.typical)
