"""The vectorised cluster state: what every filter and score reads, and how a placement
changes it.

:class:`ClusterState` is the node arrays of :class:`~gpufleet.model.rows.NodeRows` with
the one way to change them: :meth:`ClusterState.reserve` takes a pod's CPU, memory, GPUs
(whole, shared or MIG slices), pinned CPUs, pod slot and other resources from a node and
:meth:`ClusterState.release` gives them back. Each change bumps the node's ``generation``
so that caches (FGD's per-node fragment, for instance) can refresh exactly the nodes that
changed. :meth:`~gpufleet.model.rows.NodeRows.copy` gives an independent state for what-if
work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.model.arrays import MILLI
from gpufleet.model.node import NodeSpec
from gpufleet.model.rows import MAX_GPUS_PER_NODE, NO_MODEL, UNLIMITED_PODS, NodeRows

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.mig import MigLayouts
    from gpufleet.model.pod import PodSpec

__all__ = [
    "MAX_GPUS_PER_NODE",
    "NO_MODEL",
    "UNLIMITED_PODS",
    "ClusterState",
    "NodeSpec",
    "gpu_pod_kind",
]


class ClusterState(NodeRows):
    """Free and total capacity of every node (:class:`NodeRows`), changed by placements."""

    __slots__ = ()

    def mig_gpu(self, node: int, pod: PodSpec) -> tuple[int, ...] | None:
        """Where ``pod``'s MIG slices go on ``node``: on a dynamic-MIG node the GPU of each
        slice (the best option of :meth:`MigLayouts.candidates`, slice after slice), ``()`` on
        a static one, None if the node cannot serve them all."""
        assert pod.mig_profile is not None
        if self.mig is not None and self.mig.is_dynamic(node):
            whole = (self.gpu_free[node] == MILLI).tolist()
            options = self.mig.candidates(node, pod.mig_profile, whole)
            if pod.mig_count == 1 or not options:
                return (options[0][1],) if options else None
            gpus = self._plan_slices(self.mig.node_copy(node), node, pod, whole)
            if gpus is None:  # idle partitions in the way: lay the slices out anew
                trial = self.mig.node_copy(node)
                cleared = {g for g in range(self.mig.gpus[node]) if trial.clear_idle(node, g)}
                if cleared:
                    whole = [w or g in cleared for g, w in enumerate(whole)]
                    gpus = self._plan_slices(trial, node, pod, whole)
            return None if gpus is None else tuple(gpus)
        p = self.mig_profile_index(pod.mig_profile)
        return () if p is not None and self.mig_free[node, p] >= pod.mig_count else None

    @staticmethod
    def _plan_slices(
        layouts: MigLayouts, node: int, pod: PodSpec, whole: list[bool]
    ) -> list[int] | None:
        """Place ``pod``'s slices on ``layouts`` (changed) one after another, each on its
        best candidate; the GPU of each, or None if they do not all fit."""
        assert pod.mig_profile is not None
        gpus = []
        for _ in range(pod.mig_count):
            options = layouts.candidates(node, pod.mig_profile, whole)
            if not options:
                return None
            g = options[0][1]
            layouts.place(node, g, pod.mig_profile, pod.name)
            whole[g] = False
            gpus.append(g)
        return gpus

    def _others_problem(self, node: int, pod: PodSpec) -> str | None:
        """What ``node`` lacks of a pod slot and ``pod``'s other resources (None: nothing)."""
        if self.pods_free[node] < 1:
            return f"{self.names[node]} runs as many pods as it may"
        for name, amount in pod.extended:
            column = self.extended_index.get(name)
            free = 0 if column is None else int(self.extended_free[node, column])
            if free < amount:
                return f"it asks for {amount} {name}, {self.names[node]} has {free} free"
        return None

    def _take_others(self, node: int, pod: PodSpec, sign: int) -> None:
        """Take (``sign`` 1) or give back (-1) ``pod``'s pod slot, its place among the pods
        the inter-pod filters count (:class:`~gpufleet.model.interpod.PodIndex`) and other
        resources (those the node lists: a running pod's request of a resource the node
        does not list — one a scheduler extender handles — takes nothing)."""
        self.pods_free[node] -= sign
        if pod.placement is not None:
            self.pod_index.add(node, pod.placement, sign)
        if pod.volumes:
            self.volumes.take(self.node_labels, node, pod.volumes, sign)
        for name, amount in pod.extended:
            column = self.extended_index.get(name)
            if column is not None:
                self.extended_free[node, column] -= sign * amount

    def reserve(
        self, node: int, pod: PodSpec, gpus: Sequence[int], *, running: bool = False
    ) -> None:
        """Take ``pod``'s CPU, memory and ``pod.gpu_milli`` on each GPU in ``gpus`` from ``node``.

        Raises ValueError if that would over-commit anything: a placement that does not fit
        is a bug in the caller, never a silent over-allocation. A ``running`` pod (bound
        before the cycle) is not held to the pod count and other resources, which the kubelet
        and scheduler extenders judged: it takes what it has.
        """
        problem = None if running else self._others_problem(node, pod)
        if problem is not None:
            raise ValueError(f"pod {pod.name}: {problem}")
        if pod.mig_profile is not None:
            self._reserve_mig(node, pod, gpus)
            return
        count = int(self.gpu_count[node])
        _sized(pod)
        if len(gpus) != pod.num_gpu or len(set(gpus)) != len(gpus):
            raise ValueError(f"pod {pod.name} needs {pod.num_gpu} distinct GPU(s), got {gpus}")
        if any(not 0 <= g < count for g in gpus):
            raise ValueError(f"pod {pod.name}: no GPU {gpus} on {self.names[node]}")
        if self.cpu_free[node] < pod.cpu_milli or self.memory_free[node] < pod.memory_mib:
            raise ValueError(f"pod {pod.name} does not fit CPU/memory of {self.names[node]}")
        row = self.gpu_free[node]
        if any(row[g] < pod.gpu_milli for g in gpus):
            raise ValueError(f"pod {pod.name} does not fit GPUs {gpus} of {self.names[node]}")
        if self.pins_cpu(node, pod):
            zone = self.gpu_zone_of(node, gpus)
            if any(self.gpu_zone[node, g] != zone for g in gpus) or (
                self.zone_cpu_free[node, zone] < pod.cpu_milli
            ):
                raise ValueError(f"pod {pod.name}: GPUs {gpus} and CPUs not in one NUMA zone")
            self.zone_cpu_free[node, zone] -= pod.cpu_milli
        self._take_others(node, pod, 1)
        self.cpu_free[node] -= pod.cpu_milli
        self.memory_free[node] -= pod.memory_mib
        for g in gpus:
            row[g] -= pod.gpu_milli
        if pod.num_gpu:
            self.gpu_pod_kinds[node, gpu_pod_kind(pod)] += 1
            self.refresh_gpu_totals(node)
        self.generation[node] += 1
        self.changes += 1

    def _reserve_mig(self, node: int, pod: PodSpec, gpus: Sequence[int]) -> None:
        if self.cpu_free[node] < pod.cpu_milli or self.memory_free[node] < pod.memory_mib:
            raise ValueError(f"pod {pod.name} does not fit CPU/memory of {self.names[node]}")
        assert pod.mig_profile is not None
        if self.mig is not None and self.mig.is_dynamic(node):
            if len(gpus) != pod.mig_count:
                raise ValueError(f"pod {pod.name}: one GPU per MIG slice, got {gpus}")
            if len(gpus) > 1 and not self.mig.fits(node, gpus, pod.mig_profile, pod.name):
                for g in set(gpus):  # as mig_gpu planned: idle partitions laid out anew
                    if self.mig.clear_idle(node, g):
                        self.gpu_free[node, g] = MILLI
            for g in gpus:
                if not self.mig.partitioned(node, g) and self.gpu_free[node, g] != MILLI:
                    raise ValueError(f"pod {pod.name}: GPU {g} of {self.names[node]} is in use")
                self.mig.place(node, g, pod.mig_profile, pod.name)
                self.gpu_free[node, g] = 0  # a partitioned GPU serves no whole or shared pods
            self.refresh_gpu_totals(node)
        else:
            p = self.mig_profile_index(pod.mig_profile)
            if p is None or self.mig_free[node, p] < pod.mig_count:
                raise ValueError(
                    f"pod {pod.name}: not {pod.mig_count} free {pod.mig_resource} "
                    f"on {self.names[node]}"
                )
            self.mig_free[node, p] -= pod.mig_count
        self._take_others(node, pod, 1)
        self.cpu_free[node] -= pod.cpu_milli
        self.memory_free[node] -= pod.memory_mib
        self.generation[node] += 1
        self.changes += 1

    def _release_mig(self, node: int, pod: PodSpec, gpus: Sequence[int]) -> None:
        assert pod.mig_profile is not None
        if self.mig is not None and self.mig.is_dynamic(node):
            for g in gpus:
                self.mig.release(node, g, pod.name)
                if not self.mig.partitioned(node, g):
                    self.gpu_free[node, g] = MILLI
            self.refresh_gpu_totals(node)
        else:
            p = self.mig_profile_index(pod.mig_profile)
            assert p is not None
            self.mig_free[node, p] += pod.mig_count
        self._take_others(node, pod, -1)
        self.cpu_free[node] += pod.cpu_milli
        self.memory_free[node] += pod.memory_mib
        self.generation[node] += 1
        self.changes += 1

    def release(self, node: int, pod: PodSpec, gpus: Sequence[int]) -> None:
        """Give back what :meth:`reserve` took (a pod finished or was evicted)."""
        if pod.mig_profile is not None:
            self._release_mig(node, pod, gpus)
            return
        row = self.gpu_free[node]  # a few GPUs: plain indexing beats numpy's fancy kind
        if len(set(gpus)) != len(gpus) or any(row[g] + pod.gpu_milli > MILLI for g in gpus):
            raise ValueError(f"pod {pod.name}: releasing GPUs {gpus} beyond their capacity")
        if self.pins_cpu(node, pod):
            self.zone_cpu_free[node, self.gpu_zone_of(node, gpus)] += pod.cpu_milli
        self._take_others(node, pod, -1)
        self.cpu_free[node] += pod.cpu_milli
        self.memory_free[node] += pod.memory_mib
        for g in gpus:
            row[g] += pod.gpu_milli
        if pod.num_gpu:
            self.gpu_pod_kinds[node, gpu_pod_kind(pod)] -= 1
            self.refresh_gpu_totals(node)
        self.generation[node] += 1
        self.changes += 1


def _sized(pod: PodSpec) -> None:
    """Refuse a share sized by GPU memory that is not sized for a node: it has no milli-GPU
    to fit or take (the caller sizes it with :meth:`PodSpec.sized_for`)."""
    if pod.sized_by_memory:
        raise ValueError(f"pod {pod.name}: its GPU memory share is not sized for the node")


def gpu_pod_kind(pod: PodSpec) -> int:
    """Column of ``gpu_pod_kinds`` for a GPU pod: 0 for a share, else its GPU count."""
    return 0 if pod.is_gpu_share else pod.num_gpu
