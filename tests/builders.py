"""Builders for test objects, in kube-scheduler's wrapper style.

``pod("p").cpu(4).gpus(2).obj()`` is a pod asking for 4 CPUs and 2 whole GPUs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec


@dataclass
class PodBuilder:
    spec: PodSpec

    def cpu(self, cores: float) -> PodBuilder:
        self.spec = replace(self.spec, cpu_milli=round(cores * 1000))
        return self

    def mem(self, mib: int) -> PodBuilder:
        self.spec = replace(self.spec, memory_mib=mib)
        return self

    def gpus(self, count: int) -> PodBuilder:
        self.spec = replace(self.spec, num_gpu=count, gpu_milli=1000 if count else 0)
        return self

    def share(self, milli: int) -> PodBuilder:
        self.spec = replace(self.spec, num_gpu=1, gpu_milli=milli)
        return self

    def gpu_memory(self, mib: int) -> PodBuilder:
        """A share of one GPU sized by GPU memory (``gpufleet.io/gpu-memory``)."""
        self.spec = replace(self.spec, num_gpu=1, gpu_milli=0, gpu_memory_mib=mib)
        return self

    def models(self, *names: str) -> PodBuilder:
        self.spec = replace(self.spec, gpu_models=frozenset(names))
        return self

    def obj(self) -> PodSpec:
        return self.spec


def pod(name: str = "p") -> PodBuilder:
    return PodBuilder(PodSpec(name, cpu_milli=1000, memory_mib=1024))


def node(
    name: str,
    cpu: float = 96,
    gpus: int = 8,
    model: str | None = "G2",
    mem: int = 393216,
    *,
    gpu_mem: int | None = None,
) -> NodeSpec:
    """A node; ``gpu_mem``: MiB of each GPU (label ``nvidia.com/gpu.memory``)."""
    return NodeSpec(
        name, round(cpu * 1000), mem, gpus, model if gpus else None, gpu_memory_mib=gpu_mem
    )


@dataclass
class ClusterBuilder:
    nodes: list[NodeSpec] = field(default_factory=list)

    def add(self, *nodes: NodeSpec) -> ClusterBuilder:
        self.nodes.extend(nodes)
        return self

    def obj(self) -> ClusterState:
        return ClusterState(self.nodes)


def cluster(*nodes: NodeSpec) -> ClusterState:
    return ClusterState(list(nodes))


def with_gpu_free(state: ClusterState, node_index: int, free: list[int]) -> ClusterState:
    """Set a node's GPUs' free milli directly (a state after some placements)."""
    state.gpu_free[node_index, : len(free)] = free
    state.refresh_gpu_totals(node_index)
    state.generation[node_index] += 1
    return state


def write_pods_csv(path: Path, pods: list[PodSpec]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"])
        for p in pods:
            spec = "|".join(sorted(p.gpu_models)) if p.gpu_models else ""
            writer.writerow([p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, spec])
    return path


def write_nodes_csv(path: Path, nodes: list[NodeSpec]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for n in nodes:
            writer.writerow([n.name, n.cpu_milli, n.memory_mib, n.gpus, n.gpu_model or ""])
    return path
