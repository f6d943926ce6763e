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

CPU-only pods are judged more strictly: as if GPU pods needed ``cpu_pod_reserve`` (5) times
the average CPU and memory per GPU. They use no GPU, so all they can do is take CPU and
memory some GPU pod will miss; the stricter ratio sends them to nodes whose GPUs are
(nearly) all allocated first. The factor was chosen by measurement on the openb traces (the
same value for every workload): at 1.5 CPU-only pods still strand GPUs when CPU is
oversubscribed (cpu250); without bound (CPU pods only where no GPU is idle) they crowd the
nodes that GPU-sharing workloads need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.cluster import ClusterState, FloatArray, IntArray
from gpufleet.model.fragmentation import TypicalPods
from gpufleet.model.pod import PodSpec

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


def demand_ratios(typical: TypicalPods) -> Ratios:
    gpu = typical.gpu_milli > 0
    if not gpu.any():
        return Ratios(np.inf, np.inf)
    weight = typical.prob[gpu]
    gpu_milli = float((weight * typical.num_gpu[gpu] * typical.gpu_milli[gpu]).sum())
    return Ratios(
        float((weight * typical.cpu_milli[gpu]).sum()) / gpu_milli,
        float((weight * typical.memory_mib[gpu]).sum()) / gpu_milli,
    )


def stranded(idle: FloatArray, cpu: FloatArray, memory: FloatArray, ratios: Ratios) -> FloatArray:
    """Idle milli-GPU that ``cpu`` and ``memory`` cannot feed at the workload's ratios."""
    with np.errstate(divide="ignore", invalid="ignore"):
        fed_by_cpu = np.where(ratios.cpu_per_gpu_milli > 0, cpu / ratios.cpu_per_gpu_milli, np.inf)
        fed_by_memory = np.where(
            ratios.memory_per_gpu_milli > 0, memory / ratios.memory_per_gpu_milli, np.inf
        )
    usable = np.minimum(idle, np.minimum(np.maximum(fed_by_cpu, 0), np.maximum(fed_by_memory, 0)))
    return np.asarray(idle - usable, dtype=np.float64)


def stranding_score(
    idle: IntArray, cpu: IntArray, memory: IntArray, pod: PodSpec, ratios: Ratios
) -> FloatArray:
    idle_f, cpu_f, memory_f = (x.astype(np.float64) for x in (idle, cpu, memory))
    before = stranded(idle_f, cpu_f, memory_f, ratios)
    after = stranded(
        idle_f - pod.total_gpu_milli, cpu_f - pod.cpu_milli, memory_f - pod.memory_mib, ratios
    )
    return before - after


class StrandedGpuScore:
    name = NAME

    def __init__(self, ratios: Ratios, cpu_pod_ratios: Ratios) -> None:
        self.ratios = ratios
        self.cpu_pod_ratios = cpu_pod_ratios

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return stranding_score(
            state.gpu_idle[nodes],
            state.cpu_free[nodes],
            state.memory_free[nodes],
            pod,
            self.ratios if pod.num_gpu else self.cpu_pod_ratios,
        )


def new(args: Args, handle: Handle) -> StrandedGpuScore:
    if handle.fragments is None:
        raise ValueError("StrandedGpuScore needs the target workload (typical pods) in the handle")
    ratios = demand_ratios(handle.fragments.typical)
    strict = Ratios(
        ratios.cpu_per_gpu_milli * args.cpu_pod_reserve,
        ratios.memory_per_gpu_milli * args.cpu_pod_reserve,
    )
    return StrandedGpuScore(ratios, strict)
