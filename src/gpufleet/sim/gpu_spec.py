"""Constrained variants of a workload: some GPU pods name the GPU models they need.

Real clusters mix GPU models, and many pods ask for one (a node selector or affinity on
``nvidia.com/gpu.product``; the openb trace's ``gpu_spec`` column, ``V100M16|V100M32``).
The published openb workloads other than the held-back ``gpuspec`` files have no such
constraints, so placement policies are also measured on variants of them built here:

* a ``fraction`` of the GPU pods (rounded to whole pods, chosen uniformly without
  replacement) get a constraint; the others keep none;
* a constrained pod names one model, drawn with probability proportional to the cluster's
  GPUs of that model, among the models with a node that could hold the pod when empty
  (enough GPUs, CPU and memory: nobody asks for a model that can never run them); with
  probability ``set_share`` it names a second model too, drawn the same way from the rest,
  as ``gpu_spec`` allows a set;
* a pod that no model's node could hold draws from all models.

Everything random comes from the ``numpy`` generator passed in, so the same pods, nodes,
fraction and generator seed give the same variant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec


def model_gpus(nodes: Sequence[NodeSpec]) -> dict[str, int]:
    """GPUs per model over ``nodes``, models sorted by name."""
    gpus: dict[str, int] = {}
    for n in nodes:
        if n.gpus > 0 and n.gpu_model:
            gpus[n.gpu_model] = gpus.get(n.gpu_model, 0) + n.gpus
    return dict(sorted(gpus.items()))


def constrain_gpu_models(
    pods: Sequence[PodSpec],
    nodes: Sequence[NodeSpec],
    fraction: float,
    rng: np.random.Generator,
    set_share: float = 0.0,
) -> tuple[PodSpec, ...]:
    """``pods`` (same order) with ``fraction`` of the GPU pods constrained to GPU models."""
    if not 0.0 <= fraction <= 1.0 or not 0.0 <= set_share <= 1.0:
        raise ValueError(f"fraction and set_share must be in 0..1, got {fraction}, {set_share}")
    gpus = model_gpus(nodes)
    if not gpus:
        raise ValueError("no node has GPUs, so no pod can name a GPU model")
    models = list(gpus)
    weight = np.array(list(gpus.values()), dtype=np.float64)
    # Per model, the distinct node sizes (GPUs, CPU, memory): a handful, not one per node.
    shapes = {
        m: sorted({(n.gpus, n.cpu_milli, n.memory_mib) for n in nodes if n.gpu_model == m})
        for m in models
    }
    gpu_pods = [i for i, p in enumerate(pods) if p.num_gpu > 0 and p.gpu_models is None]
    count = round(fraction * sum(p.num_gpu > 0 for p in pods))
    chosen = np.sort(rng.choice(len(gpu_pods), size=min(count, len(gpu_pods)), replace=False))
    out = list(pods)
    for j in chosen.tolist():
        i = gpu_pods[j]
        pod = pods[i]
        fits = np.array(
            [
                any(
                    g >= pod.num_gpu and c >= pod.cpu_milli and m >= pod.memory_mib
                    for g, c, m in shapes[model]
                )
                for model in models
            ]
        )
        if not fits.any():
            fits[:] = True
        first = _draw(rng, weight, fits)
        named = {models[first]}
        fits[first] = False
        if rng.random() < set_share and fits.any():
            named.add(models[_draw(rng, weight, fits)])
        out[i] = dataclasses.replace(pod, gpu_models=frozenset(named))
    return tuple(out)


def _draw(rng: np.random.Generator, weight: np.ndarray, allowed: np.ndarray) -> int:
    w = np.where(allowed, weight, 0.0)
    return int(rng.choice(w.size, p=w / w.sum()))
