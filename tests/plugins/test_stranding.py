"""StrandedGpuScore and the gpufleet policy on clusters whose right answer is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.plugins.stranding import Args, Ratios, demand_ratios, new, stranding_score
from gpufleet.scheduler.placement.place import Placement, place
from tests.builders import cluster, node, pod, with_gpu_free

TEN_CPU_PER_GPU = Ratios(cpu_per_gpu_milli=10.0, memory_per_gpu_milli=0.0)


def test_demand_ratios_average_the_gpu_pods_by_frequency() -> None:
    workload = [
        pod("a").cpu(8).mem(1000).gpus(1).obj(),
        pod("b").cpu(8).mem(1000).gpus(1).obj(),
        pod("c").cpu(2).mem(500).share(500).obj(),
        pod("cpu-only").cpu(64).mem(10_000).obj(),  # not a GPU pod: no part of the ratio
    ]
    ratios = demand_ratios(typical_pods(workload))
    # (2 x 8000 + 2000) milli-CPU over (2 x 1000 + 500) milli-GPU
    assert ratios.cpu_per_gpu_milli == pytest.approx(18_000 / 2_500)
    assert ratios.memory_per_gpu_milli == pytest.approx(2_500 / 2_500)
    assert math.isinf(demand_ratios(typical_pods([pod().obj()])).cpu_per_gpu_milli)


def score(idle: int, cpu: int, spec) -> float:  # type: ignore[no-untyped-def]
    one = np.array([idle]), np.array([cpu]), np.array([10**9])
    return float(stranding_score(*one, spec, TEN_CPU_PER_GPU)[0])


def test_cpu_taken_from_a_node_with_idle_gpus_strands_them() -> None:
    # 2 idle GPUs and 20 CPUs: all usable. 5 CPUs less leave 15 CPUs for 1.5 GPUs.
    assert score(2000, 20_000, pod().cpu(5).obj()) == -500
    # A node without idle GPUs has nothing to strand.
    assert score(0, 64_000, pod().cpu(5).obj()) == 0


def test_a_cpu_light_gpu_pod_is_welcome_where_cpu_is_short() -> None:
    # 4 idle GPUs, 10 CPUs: 3 GPUs stranded. A 1-GPU, 1-CPU pod uses one of them.
    assert score(4000, 10_000, pod().cpu(1).gpus(1).obj()) == 900
    # On a balanced node it changes nothing.
    assert score(2000, 20_000, pod().cpu(10).gpus(1).obj()) == 0


def test_gpufleet_keeps_cpu_pods_off_nodes_whose_gpus_need_the_cpu() -> None:
    # Typical pods: one GPU with 10 CPUs. An 8-CPU pod fits both nodes and FGD sees no
    # fragment change on either (the GPU pods still fit), so FGD takes the first node in
    # tie order; gpufleet sees that it would strand 0.4 GPU there and none on the node
    # whose GPUs are all in use.
    workload = [pod(f"w{i}").cpu(10).gpus(1).obj() for i in range(4)]
    state = cluster(node("gpus-free", cpu=24, gpus=2), node("gpus-busy", cpu=64, gpus=2))
    with_gpu_free(state, 1, [0, 0])
    chosen = {}
    for policy in ("fgd", "gpufleet"):
        handle = Handle(np.random.default_rng(0), FragmentIndex(typical_pods(workload)))
        outcome = place(Framework(POLICIES[policy], PLUGINS, handle), state, pod().cpu(8).obj())
        assert isinstance(outcome, Placement)
        chosen[policy] = state.names[outcome.node]
    assert chosen == {"fgd": "gpus-free", "gpufleet": "gpus-busy"}


def test_cpu_only_pods_are_judged_with_the_stricter_ratio() -> None:
    # With the average ratio (10 CPU per GPU) taking 8 of A's 40 CPUs strands nothing: its
    # one idle GPU needs 10. CPU-only pods are judged at 5x (50 per GPU): A's GPU is already
    # short of CPU and gets shorter (-160), while B has no idle GPU to strand.
    workload = [pod(f"w{i}").cpu(10).mem(0).gpus(1).obj() for i in range(3)]
    scorer = new(Args(), Handle(np.random.default_rng(0), FragmentIndex(typical_pods(workload))))
    state = cluster(node("A", cpu=40, gpus=1), node("B", cpu=20, gpus=1))
    _, ratios = scorer.ratios(state)
    assert ratios.tolist() == [[10, 0]]  # one pool (no pod names a model), 10 CPU per GPU
    with_gpu_free(state, 1, [0])
    nodes = np.arange(2)
    assert scorer.score(state, pod().cpu(8).mem(0).obj(), nodes).tolist() == [-160, 0]
    # A GPU pod with the same CPU is judged at the average ratio.
    assert scorer.score(state, pod().cpu(8).mem(0).share(100).obj(), nodes)[0] == 0
