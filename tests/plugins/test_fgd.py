"""FGD on hand-made clusters: why it picks the node and the GPU it picks."""

from __future__ import annotations

import numpy as np

from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.fgd import FGD, Args
from tests.builders import cluster, node, pod, with_gpu_free


def fgd_for(workload: list[PodSpec]) -> FGD:
    return FGD("FGDScore", Args(), FragmentIndex(typical_pods(workload)))


def test_a_share_goes_where_it_completes_a_half_used_gpu() -> None:
    # The target workload is whole one-GPU pods. On A the share would break a free GPU
    # (fragment 0 -> 500: sigmoid(-0.5) -> 37); on B it fills the half-used GPU
    # (500 -> 0: sigmoid(0.5) -> 62), while B's free GPU would leave two halves (-> 37).
    plugin = fgd_for([pod("w").gpus(1).obj()])
    state = cluster(node("A", gpus=2), node("B", gpus=2))
    with_gpu_free(state, 1, [1000, 500])
    share = pod().share(500).obj()
    assert plugin.score(state, share, np.arange(2)).tolist() == [37, 62]
    assert plugin.choose_gpus(state, share, 1) == (1,)


def test_a_cpu_pod_avoids_stranding_gpus_behind_exhausted_cpu() -> None:
    # Typical pods need 8 CPUs with their GPU. 4 CPUs on A leave 6: its GPU is stranded
    # (0 -> 1000 fragment, sigmoid(-1) -> 26); B keeps 16 CPUs, nothing changes (50).
    plugin = fgd_for([pod("w").cpu(8).gpus(1).obj()])
    state = cluster(node("A", cpu=10, gpus=1), node("B", cpu=20, gpus=1))
    assert plugin.score(state, pod().cpu(4).obj(), np.arange(2)).tolist() == [26, 50]


def test_whole_gpus_keep_full_nodes_for_big_pods() -> None:
    # Typical pods want 4 GPUs. A 2-GPU pod on the 4-GPU node would leave a node that can
    # no longer host one (fragment grows by 2000); on the 2-GPU node it changes nothing.
    plugin = fgd_for([pod("w").gpus(4).obj()])
    state = ClusterState([node("four", gpus=4), node("two", gpus=2)])
    scores = plugin.score(state, pod().gpus(2).obj(), np.arange(2))
    assert scores[1] > scores[0]
    assert plugin.choose_gpus(state, pod().gpus(2).obj(), 0) == (0, 1)
