"""Pods of a fill workload that no node could hold even if the cluster were empty.

The fill protocol counts such a pod as arrived and failed, so a workload full of them
(a 100-GPU pod, a ``gpu_spec`` naming a model the cluster does not have) runs to a curve
that says nothing about placement. The CLI warns before it runs; this module decides.

A pod fits a node when the node, empty, has its CPU, memory and GPUs (a share needs one
GPU), and a GPU model the pod allows. Node selectors, taints and MIG slices are not
judged here: only what a fill workload (an openb pod list) can ask for. The check reads
the empty cluster's state (its capacity arrays and GPU-model masks), one distinct pod shape
against all nodes at once, never pod by pod and node by node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec


@dataclass(frozen=True, slots=True)
class Unfit:
    """How many pods fit no node, and the first of them with the reason."""

    count: int
    example: str
    """The first such pod's name."""
    reason: str


def _models_text(models: frozenset[str]) -> str:
    return ", ".join(sorted(models))


def unfit_pods(nodes: Sequence[NodeSpec], pods: Sequence[PodSpec]) -> Unfit | None:
    """The pods of ``pods`` that fit no node of ``nodes`` when every node is empty."""
    if not pods:
        return None
    if not nodes:
        return Unfit(len(pods), pods[0].name, "the cluster has no nodes")
    empty = ClusterState(nodes)
    fits: dict[tuple[int, int, int, frozenset[str] | None], bool] = {}
    unfit = []
    for pod in pods:
        shape = (pod.cpu_milli, pod.memory_mib, pod.num_gpu, pod.gpu_models)
        if shape not in fits:  # a few hundred shapes, each judged over all nodes at once
            room = (empty.cpu_capacity >= pod.cpu_milli) & (empty.memory_capacity >= pod.memory_mib)
            if pod.num_gpu:
                room &= empty.gpu_count >= pod.num_gpu
                if pod.gpu_models is not None:  # as GpuFit judges it
                    room &= empty.model_mask(pod.gpu_models)
            fits[shape] = bool(room.any())
        if not fits[shape]:
            unfit.append(pod)
    if not unfit:
        return None
    return Unfit(len(unfit), unfit[0].name, _reason(unfit[0], nodes))


def _reason(pod: PodSpec, nodes: Sequence[NodeSpec]) -> str:
    """Why one pod fits no node: the first request no node meets, or their combination."""
    gpu_nodes = [
        n
        for n in nodes
        if pod.num_gpu == 0 or pod.gpu_models is None or n.gpu_model in pod.gpu_models
    ]
    if pod.num_gpu and pod.gpu_models is not None and not gpu_nodes:
        return f"its gpu_spec allows {_models_text(pod.gpu_models)}, and no node has that model"
    most_gpus = max((n.gpus for n in gpu_nodes), default=0)
    if pod.num_gpu > most_gpus:
        return f"it asks for {pod.num_gpu} GPUs and the largest node has {most_gpus}"
    most_cpu = max(n.cpu_milli for n in gpu_nodes)
    if pod.cpu_milli > most_cpu:
        return f"it asks for {pod.cpu_milli} milli-CPU and the largest node has {most_cpu}"
    most_mem = max(n.memory_mib for n in gpu_nodes)
    if pod.memory_mib > most_mem:
        return f"it asks for {pod.memory_mib} MiB of memory and the largest node has {most_mem}"
    return (
        f"no node has {pod.cpu_milli} milli-CPU, {pod.memory_mib} MiB and "
        f"{pod.num_gpu} GPU(s) at once"
    )
