"""StrandedGpuScore: don't leave GPUs behind CPU or memory that can no longer feed them.

A GPU is only useful while its node still has the CPU and memory that GPU pods need with it.
Let the workload's average GPU pod (over its typical pods, weighted by frequency) ask for
``c`` milli-CPU and ``m`` MiB per milli-GPU. A node with ``idle`` free milli-GPU, ``cpu``
free milli-CPU and ``mem`` free MiB can feed at most

    usable = min(idle, cpu / c, mem / m)

of its idle GPU; the rest is stranded. The score of placing a pod on a node is how much
the placement *reduces* the node's stranded GPU (milli-GPU, usually <= 0):

    score = stranded_before - stranded_after,    stranded = idle - usable

So a CPU-hungry pod — a CPU-only pod above all — goes where CPU is plentiful for the GPUs
left, and a CPU-light GPU pod is welcome on a node whose CPU is short. FGD's fragment
measure sees CPU only as "does one typical pod still fit"; on the openb traces pods fail near
a full cluster mostly on nodes with free GPUs and no CPU left, which this term prevents.
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
    """No options: the ratios come from the workload's typical pods."""


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

    def __init__(self, ratios: Ratios) -> None:
        self.ratios = ratios

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        return stranding_score(
            state.gpu_free[nodes].sum(axis=1),
            state.cpu_free[nodes],
            state.memory_free[nodes],
            pod,
            self.ratios,
        )


def new(args: Args, handle: Handle) -> StrandedGpuScore:
    if handle.fragments is None:
        raise ValueError("StrandedGpuScore needs the target workload (typical pods) in the handle")
    return StrandedGpuScore(demand_ratios(handle.fragments.typical))
