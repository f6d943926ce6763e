"""StrandedGpuScore: don't leave GPUs behind CPU or memory that can no longer feed them.

A GPU is only useful while its node still has the CPU and memory that GPU pods need with it.
Let the workload's average GPU pod (over its typical pods, weighted by frequency) ask for
``c`` milli-CPU and ``m`` MiB per milli-GPU. A node with ``idle`` free milli-GPU, ``cpu``
free milli-CPU and ``mem`` free MiB can feed at most

    usable = min(idle, cpu / c, mem / m)

of its idle GPU; the rest is stranded. The score of placing a pod on a node is how much
the placement *reduces* the node's stranded GPU (milli-GPU, usually <= 0):

    score = stranded_before - stranded_after,    stranded = idle - usable

So a CPU-hungry pod goes where CPU is plentiful for the GPUs left, and a CPU-light GPU pod
is welcome on a node whose CPU is short. FGD's fragment measure sees CPU only as "does one
typical pod still fit", and not memory at all; on the openb traces pods fail near a full
cluster mostly on nodes with free GPUs and no CPU (FGD: no memory) left.

When pods name GPU models the ratios are per pool of models
(:mod:`gpufleet.plugins.model_pools`): the average over the GPU pods that model's nodes are
expected to receive, each typical pod weighted by ``fraction[pool, k]`` — a node whose
model only pods with little CPU can use strands nothing by keeping little CPU.

CPU-only pods are judged more strictly: as if GPU pods needed ``cpu_pod_reserve`` (5) times
the average CPU and memory per GPU. They use no GPU, so all they can do is take CPU and
memory some GPU pod will miss; the stricter ratio sends them to nodes whose GPUs are
(nearly) all allocated first. The factor was chosen by measurement on the openb traces (the
same value for every workload): at 1.5 CPU-only pods still strand GPUs when CPU is
oversubscribed (cpu250); without bound (CPU pods only where no GPU is idle) they crowd the
nodes that GPU-sharing workloads need.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import TypicalPods
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.model_pools import PoolCache, Pools

NAME = "StrandedGpuScore"


@dataclass(frozen=True, slots=True)
class Args:
    cpu_pod_reserve: float = 5.0
    """CPU-only pods are scored with the ratios scaled by this factor."""


@dataclass(frozen=True, slots=True)
class Ratios:
    """Milli-CPU and MiB the average GPU pod asks for per milli-GPU (inf: no GPU pods)."""

    cpu_per_gpu_milli: float
    memory_per_gpu_milli: float


def demand_ratios(typical: TypicalPods, fraction: FloatArray | None = None) -> Ratios:
    """The ratios of the typical GPU pods, each weighted by its frequency and by
    ``fraction[k]``, the part of its pods a pool of GPU models expects (all when None)."""
    prob = typical.prob if fraction is None else typical.prob * fraction
    gpu = (typical.gpu_milli > 0) & (prob > 0)
    if not gpu.any():
        return Ratios(np.inf, np.inf)
    weight = prob[gpu]
    gpu_milli = float((weight * typical.num_gpu[gpu] * typical.gpu_milli[gpu]).sum())
    return Ratios(
        float((weight * typical.cpu_milli[gpu]).sum()) / gpu_milli,
        float((weight * typical.memory_mib[gpu]).sum()) / gpu_milli,
    )


def stranded(
    idle: FloatArray,
    cpu: FloatArray,
    memory: FloatArray,
    ratios: Ratios | tuple[FloatArray, FloatArray],
) -> FloatArray:
    """Idle milli-GPU that ``cpu`` and ``memory`` cannot feed at the workload's ratios
    (one :class:`Ratios`, or CPU and memory ratios per entry)."""
    per_cpu: float | FloatArray
    per_memory: float | FloatArray
    if isinstance(ratios, Ratios):
        per_cpu, per_memory = ratios.cpu_per_gpu_milli, ratios.memory_per_gpu_milli
    else:
        per_cpu, per_memory = ratios
    with np.errstate(divide="ignore", invalid="ignore"):
        fed_by_cpu = np.where(per_cpu > 0, cpu / per_cpu, np.inf)
        fed_by_memory = np.where(per_memory > 0, memory / per_memory, np.inf)
    usable = np.minimum(idle, np.minimum(np.maximum(fed_by_cpu, 0), np.maximum(fed_by_memory, 0)))
    return np.asarray(idle - usable, dtype=np.float64)


def stranding_score(
    idle: IntArray,
    cpu: IntArray,
    memory: IntArray,
    pod: PodSpec,
    ratios: Ratios | tuple[FloatArray, FloatArray],
) -> FloatArray:
    idle_f, cpu_f, memory_f = (x.astype(np.float64) for x in (idle, cpu, memory))
    before = stranded(idle_f, cpu_f, memory_f, ratios)
    after = stranded(
        idle_f - pod.total_gpu_milli, cpu_f - pod.cpu_milli, memory_f - pod.memory_mib, ratios
    )
    return before - after


class StrandedGpuScore:
    """The score, with the ratios of each pool of GPU models (:mod:`model_pools`): a node
    is judged by the GPU pods its model's nodes are expected to receive."""

    name = NAME
    node_local = True
    """A node's score depends on the pod and the node's own row (``Framework.run_scores``)."""

    def __init__(self, typical: TypicalPods, cpu_pod_reserve: float) -> None:
        self.typical = typical
        self.cpu_pod_reserve = cpu_pod_reserve
        self._pools = PoolCache(typical)
        self._ratios: FloatArray = np.zeros((0, 2), dtype=np.float64)
        """``(pools, 2)``: milli-CPU and MiB per milli-GPU of each pool's GPU pods."""

    def ratios(self, state: ClusterState) -> tuple[Pools, FloatArray]:
        pools, changed = self._pools.get(state)
        if changed or not self._ratios.size:
            ratios = [demand_ratios(self.typical, pools.fraction[p]) for p in range(pools.size)]
            self._ratios = np.array(
                [[r.cpu_per_gpu_milli, r.memory_per_gpu_milli] for r in ratios],
                dtype=np.float64,
            )
        return pools, self._ratios

    def node_key(self, state: ClusterState, node: int) -> Hashable:
        """What the score reads of ``node``: its model (its pool's ratios), idle milli-GPU,
        free CPU and free memory."""
        return (
            int(state.model_id[node]),
            int(state.gpu_idle[node]),
            int(state.cpu_free[node]),
            int(state.memory_free[node]),
        )

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        pools, ratios = self.ratios(state)
        per_node = ratios[pools.of_nodes(state, nodes)]
        if not pod.num_gpu:
            per_node = per_node * self.cpu_pod_reserve
        return stranding_score(
            state.gpu_idle[nodes],
            state.cpu_free[nodes],
            state.memory_free[nodes],
            pod,
            (per_node[:, 0], per_node[:, 1]),
        )


def new(args: Args, handle: Handle) -> StrandedGpuScore:
    if handle.fragments is None:
        raise ValueError("StrandedGpuScore needs the target workload (typical pods) in the handle")
    return StrandedGpuScore(handle.fragments.typical, args.cpu_pod_reserve)
