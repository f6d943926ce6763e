"""StrandedGpuScore and the gpufleet policy on clusters whose right answer is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.plugins.registry import PLUGINS, POLICIES
from gpufleet.plugins.stranding import Ratios, demand_ratios, stranding_score
from gpufleet.scheduler.placement import Placement, place
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
