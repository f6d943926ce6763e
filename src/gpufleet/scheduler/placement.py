"""Place one pod: filter -> score -> select host -> choose GPUs (one scheduling cycle).

This is the inner step of every edge: the fill benchmark calls it once per arriving pod,
and later the gang cycle calls it per pod inside a transaction. It decides and returns a
value; committing the placement to the state is the caller's effect.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.framework.runtime import Framework, Held
from gpufleet.framework.status import Status
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec


@dataclass(frozen=True, slots=True)
class Placement:
    """``pod`` (as the profile places it) goes to node index ``node``, on GPUs ``gpus``."""

    pod: PodSpec
    node: int
    gpus: tuple[int, ...]


def place(
    framework: Framework, state: ClusterState, pod: PodSpec, held: Held | None = None
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
    return Placement(pod, node, choose_gpus(framework, state, pod, node))


def choose_gpus(
    framework: Framework, state: ClusterState, pod: PodSpec, node: int
) -> tuple[int, ...]:
    """The GPUs ``pod`` takes on ``node`` (which fits it): the MIG choice or the profile's."""
    if pod.mig_profile is not None:
        gpus = state.mig_gpu(node, pod)
        assert gpus is not None, "MigFit let the node through"
        return gpus
    return framework.chooser.choose_gpus(state, pod, node)


def commit(state: ClusterState, placement: Placement) -> None:
    """Apply ``placement`` to ``state``."""
    state.reserve(placement.node, placement.pod, placement.gpus)
