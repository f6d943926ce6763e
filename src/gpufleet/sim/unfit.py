"""Pods of a fill workload that no node could hold even if the cluster were empty.

The fill protocol counts such a pod as arrived and failed, so a workload full of them
(a 100-GPU pod, a ``gpu_spec`` naming a model the cluster does not have) runs to a curve
that says nothing about placement. The CLI warns before it runs; this module decides.

A pod fits a node when the node, empty, has its CPU, memory and GPUs (a share needs one
GPU), and a GPU model the pod allows. Node selectors, taints and MIG slices are not
judged here: only what a fill workload (an openb pod list) can ask for. The check is
vectorised: distinct pod shapes against all nodes at once, never pod by pod and node by
node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpufleet.model.cluster import NodeSpec
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
    model_ids: dict[str | None, int] = {}
    node_model = np.array([model_ids.setdefault(n.gpu_model, len(model_ids)) for n in nodes])
    node_cpu = np.array([n.cpu_milli for n in nodes], dtype=np.int64)
    node_mem = np.array([n.memory_mib for n in nodes], dtype=np.int64)
    node_gpus = np.array([n.gpus for n in nodes], dtype=np.int64)

    # One row per distinct allowed-model set: which nodes have an allowed model.
    sets: dict[frozenset[str] | None, int] = {}
    set_of = np.array([sets.setdefault(p.gpu_models, len(sets)) for p in pods])
    allowed = np.ones((len(sets), len(nodes)), dtype=bool)
    for models, row in sets.items():
        if models is not None:
            ids = [i for m, i in model_ids.items() if m in models]
            allowed[row] = np.isin(node_model, ids)

    cpu = np.array([p.cpu_milli for p in pods], dtype=np.int64)
    mem = np.array([p.memory_mib for p in pods], dtype=np.int64)
    gpus = np.array([p.num_gpu for p in pods], dtype=np.int64)
    shapes, inverse = np.unique(
        np.stack([cpu, mem, gpus, set_of], axis=1), axis=0, return_inverse=True
    )
    inverse = inverse.reshape(-1)
    needs_model = shapes[:, 2] > 0
    fits = (
        (shapes[:, 0, None] <= node_cpu[None, :])
        & (shapes[:, 1, None] <= node_mem[None, :])
        & (shapes[:, 2, None] <= node_gpus[None, :])
        & (allowed[shapes[:, 3]] | ~needs_model[:, None])
    ).any(axis=1)
    unfit = ~fits[inverse]
    count = int(unfit.sum())
    if not count:
        return None
    first = int(np.argmax(unfit))
    return Unfit(count, pods[first].name, _reason(pods[first], nodes))


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
