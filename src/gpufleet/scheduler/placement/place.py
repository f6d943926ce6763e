"""Place one pod: filter -> score -> select host -> choose GPUs.

This is the inner step of every edge: the fill benchmark calls it once per arriving pod,
and the placer (``allocate.py``) and the victim search call it per pod inside a
transaction. It decides and returns a
value; committing the placement to the state is the caller's effect.

A share sized by GPU memory is placed as the share it takes on the chosen node
(:func:`on_node`): the placement, and so the binding and what the pod's queue is charged,
carry that node's milli-GPU; a pod placed on GPUs that are not whole ones (MIG slices of the
single strategy, time-sliced replicas) carries what they are worth.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.runtime import Exclusion, Framework
from gpufleet.framework.status import Status
from gpufleet.model.arrays import BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec


@dataclass(frozen=True, slots=True)
class Placement:
    """``pod`` (as the profile places it) goes to node index ``node``, on GPUs ``gpus``."""

    pod: PodSpec
    node: int
    gpus: tuple[int, ...]


def place(
    framework: Framework, state: ClusterState, pod: PodSpec, held: Exclusion | None = None
) -> Placement | Status:
    """Where ``pod`` goes under ``framework``'s profile, or why it cannot go anywhere."""
    pod = framework.prepare(pod)
    feasible = framework.run_filters(state, pod, held)
    if not feasible.status.is_success:
        return feasible.status
    nodes = feasible.nodes
    node = (
        int(nodes[0])
        if nodes.size == 1
        else framework.select_host(nodes, framework.run_scores(state, pod, nodes))
    )
    pod = on_node(state, pod, node)
    return Placement(pod, node, choose_gpus(framework, state, pod, node))


def on_node(state: ClusterState, pod: PodSpec, node: int) -> PodSpec:
    """``pod`` as it runs on ``node`` (which its filters let through): a share sized by GPU
    memory is sized for the node's GPUs, advertised GPUs are charged at their worth there
    (:meth:`ClusterState.as_run`)."""
    if not pod.sized_by_memory and not state.divided_gpus and not pod.shared_gpus:
        return pod
    run = state.as_run(pod, node)
    assert run is not None, "GpuMemory let only nodes with enough GPU memory through"
    return run


def share_over(state: ClusterState, pod: PodSpec, cap: int) -> BoolArray:
    """The nodes on which ``pod``, a share sized by GPU memory, takes more than ``cap``
    milli-GPU (those whose GPUs cannot hold it at all are GpuMemory's to reject)."""
    over = np.zeros(state.size, dtype=np.bool_)
    for size in np.unique(state.gpu_memory).tolist():
        sized = pod.sized_for(size)
        if sized is not None and sized.gpu_milli > cap:
            over |= state.gpu_memory == size
    return over


def choose_gpus(
    framework: Framework, state: ClusterState, pod: PodSpec, node: int
) -> tuple[int, ...]:
    """The GPUs ``pod`` takes on ``node`` (which fits it): the MIG choice or the profile's."""
    pod = on_node(state, pod, node)
    if pod.mig_profile is not None:
        gpus = state.mig_gpu(node, pod)
        assert gpus is not None, "MigFit let the node through"
        return gpus
    return framework.chooser.choose_gpus(state, pod, node)


def commit(state: ClusterState, placement: Placement) -> None:
    """Apply ``placement`` to ``state``."""
    state.reserve(placement.node, placement.pod, placement.gpus)
