"""Pods as the scheduler sees them: a resource request, nothing else.

A pod asks for CPU (milli), memory (MiB) and GPUs in one of two forms:

* ``num_gpu`` whole GPUs (``gpu_milli == 1000``), or
* a share of one GPU (``num_gpu == 1``, ``0 < gpu_milli < 1000``), as GPU-sharing
  schedulers (Alibaba's open-gpu-share, gpufleet's ``gpufleet.io/gpu-fraction``) express it;
* a share of one GPU sized by memory (``gpu_memory_mib > 0``, ``num_gpu == 1``,
  ``gpu_milli == 0``; gpufleet's ``gpufleet.io/gpu-memory``): how much of a GPU that is
  depends on the GPU, so the spec keeps the memory as written and :meth:`PodSpec.sized_for`
  turns it into a plain share for the GPU memory of one node. Under device-plugin semantics
  (:meth:`PodSpec.as_whole_gpus`) it is a whole GPU (``gpu_milli == 1000``) of at least
  that memory.

``gpu_models`` restricts the GPU models the pod may run on (None: any); ``constraint`` its
nodes by labels and taints (:mod:`gpufleet.model.selectors`); ``placement`` by the pods
already there (:mod:`gpufleet.model.interpod`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpufleet.model.arrays import MILLI
from gpufleet.model.devices import mig_gpus
from gpufleet.model.interpod import PodPlacement
from gpufleet.model.selectors import NodeConstraint

SHARED_GPU_RESOURCE = "nvidia.com/gpu.shared"
"""The resource NVIDIA's device plugin advertises time-sliced or MPS replicas as when it
renames them (``renameByDefault``); a pod asks for it as an extended resource."""


@dataclass(frozen=True, slots=True)
class PodSpec:
    """One pod's request."""

    name: str
    cpu_milli: int
    memory_mib: int
    num_gpu: int = 0
    gpu_milli: int = 0
    gpu_models: frozenset[str] | None = None
    constraint: NodeConstraint | None = None
    """Node selector, required node affinity and tolerations (None: any node, no taints)."""
    mig_profile: str | None = None
    """The MIG profile of the slices the pod asks for (``3g.40gb``: ``nvidia.com/mig-3g.40gb``)."""
    exclusive_cpu: bool = False
    """Guaranteed QoS with whole CPUs: the kubelet pins its CPUs (static CPU manager)."""
    mig_count: int = 1
    """How many slices of ``mig_profile`` (the device plugin gives a pod several)."""
    extended: tuple[tuple[str, int], ...] = ()
    """Other resources the pod requests (``vpc.amazonaws.com/efa``, ``hugepages-2Mi``,
    ``ephemeral-storage``), sorted by name, in their base unit: every node it runs on must
    offer them (kube-scheduler's NodeResourcesFit)."""
    gpu_memory_mib: int = 0
    """GPU memory (MiB) of a share sized by memory (0: the share, if any, is ``gpu_milli``)."""
    volumes: tuple[str, ...] = ()
    """Keys (``namespace/name``) of the PersistentVolumeClaims the pod mounts (its generic
    ephemeral volumes' included): :mod:`gpufleet.model.volumes`."""
    placement: PodPlacement | None = None
    """Namespace, labels and required inter-pod terms, spread constraints and host ports
    (:mod:`gpufleet.model.interpod`; None: a pod of a trace, which no other pod selects)."""
    gpu_charge: float | None = None
    """GPUs the pod is charged where its advertised GPUs are worth less than whole ones (MIG
    slices of the single strategy, time-sliced or MPS replicas: :meth:`NodeRows.as_run`);
    None: as it asks."""

    def __post_init__(self) -> None:
        if min(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli) < 0:
            raise ValueError(f"pod {self.name}: negative request")
        if self.gpu_memory_mib < 0:
            raise ValueError(f"pod {self.name}: negative GPU memory")
        if self.gpu_memory_mib and (self.num_gpu != 1 or self.gpu_milli not in (0, MILLI)):
            raise ValueError(
                f"pod {self.name}: a share sized by GPU memory is one GPU, its milli unsized "
                "(0) or whole"
            )
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"pod {self.name}: gpu_milli without GPUs")
        if self.num_gpu > 0 and not self.gpu_memory_mib and not 0 < self.gpu_milli <= MILLI:
            raise ValueError(f"pod {self.name}: gpu_milli must be in 1..{MILLI}")
        if self.num_gpu > 1 and self.gpu_milli != MILLI:
            raise ValueError(f"pod {self.name}: a share of a GPU is only possible with one GPU")
        if self.mig_profile is not None and self.num_gpu:
            raise ValueError(f"pod {self.name}: a MIG slice and whole GPUs in one pod")
        if self.mig_count < 1:
            raise ValueError(f"pod {self.name}: mig_count must be at least 1")

    @property
    def request_key(self) -> tuple[object, ...]:
        """Everything the pod asks for, its name aside: pods with equal keys are
        interchangeable to the scheduler (the key of its caches and classes). A pod's
        labels count only with terms of its own: without them they matter to running pods'
        anti-affinity alone, which every placement checks, so at worst a class one of whose
        pods such a term kept out waits for the cluster to change before it is tried again
        (the pods of a StatefulSet or an indexed Job, labelled one by one, stay one class)."""
        return (
            self.cpu_milli,
            self.memory_mib,
            self.num_gpu,
            self.gpu_milli,
            self.gpu_models,
            self.constraint,
            self.mig_profile,
            self.exclusive_cpu,
            self.mig_count,
            self.extended,
            self.gpu_memory_mib,
            self.volumes,
            self.placement if self.placement is not None and self.placement.constrained else None,
            self.gpu_charge,
        )

    @property
    def mig_resource(self) -> str | None:
        """The extended resource of the pod's MIG slice (``nvidia.com/mig-3g.40gb``)."""
        return None if self.mig_profile is None else f"nvidia.com/mig-{self.mig_profile}"

    @property
    def gpu_equivalent(self) -> float:
        """GPUs the pod takes from its queue: whole GPUs, a share, or its MIG slices' compute
        slices out of 7; where it runs on GPUs worth less than whole ones, ``gpu_charge``."""
        if self.gpu_charge is not None:
            return self.gpu_charge
        if self.mig_profile is not None:
            return mig_gpus(self.mig_profile, self.mig_count)
        return self.total_gpu_milli / MILLI

    @property
    def shared_gpus(self) -> int:
        """Replicas of ``nvidia.com/gpu.shared`` the pod asks for (0: none)."""
        for name, amount in self.extended:
            if name == SHARED_GPU_RESOURCE:
                return amount
        return 0

    @property
    def advertised_gpus(self) -> int:
        """Whole advertised GPUs the pod takes (``nvidia.com/gpu`` or its shared replicas),
        which a node whose GPUs are not whole ones charges at their worth; 0 for a share of
        a GPU (gpufleet's) and for MIG slices."""
        if self.num_gpu and self.gpu_milli == MILLI:
            return self.num_gpu
        return self.shared_gpus

    def charged(self, unit: float) -> PodSpec:
        """The pod where each advertised GPU it takes is worth ``unit`` physical GPUs (a
        whole GPU at 1: no charge of its own but for ``nvidia.com/gpu.shared``, which its
        request does not count)."""
        if not self.advertised_gpus or (unit == 1.0 and self.num_gpu):
            return self if self.gpu_charge is None else dataclasses.replace(self, gpu_charge=None)
        return dataclasses.replace(self, gpu_charge=self.advertised_gpus * unit)

    @property
    def is_gpu_share(self) -> bool:
        """True for a pod that asks for part of one GPU (sized by memory or not)."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def sized_by_memory(self) -> bool:
        """True for a pod whose share of a GPU is its GPU memory: its milli-GPU depend on
        the node (:meth:`sized_for`)."""
        return self.gpu_memory_mib > 0

    @property
    def total_gpu_milli(self) -> int:
        """The pod's whole GPU request in milli-GPU (``num_gpu * gpu_milli``).

        Raises ValueError for a share sized by memory that is not sized for a node yet: it
        has no milli-GPU of its own (a silent 0 would let it fit anywhere)."""
        if self.num_gpu and not self.gpu_milli:
            raise ValueError(
                f"pod {self.name}: a share of {self.gpu_memory_mib} MiB of GPU memory has no "
                "milli-GPU until it is sized for a node's GPUs"
            )
        return self.num_gpu * self.gpu_milli

    def with_share(self, gpu_milli: int) -> PodSpec:
        """The pod as a plain share of ``gpu_milli`` (a whole GPU at 1000) — what a share sized
        by memory takes on one GPU."""
        return dataclasses.replace(self, gpu_milli=gpu_milli, gpu_memory_mib=0)

    def sized_for(self, gpu_memory_mib: int) -> PodSpec | None:
        """The pod on a node whose GPUs have ``gpu_memory_mib`` MiB each (0: unknown): a share
        sized by memory becomes ``ceil(memory * 1000 / gpu_memory_mib)`` milli-GPU of one
        GPU (a whole GPU under device-plugin semantics); None where that memory is unknown or
        smaller than the pod asks for. Other pods are returned as they are."""
        if not self.gpu_memory_mib:
            return self
        if gpu_memory_mib < self.gpu_memory_mib:  # 0 (unknown) included
            return None
        if self.gpu_milli == MILLI:
            return self.with_share(MILLI)
        return self.with_share(-(-self.gpu_memory_mib * MILLI // gpu_memory_mib))  # ceil

    def as_whole_gpus(self) -> PodSpec:
        """The same pod under device-plugin semantics: a share of a GPU takes a whole one."""
        if not self.is_gpu_share:
            return self
        return dataclasses.replace(self, gpu_milli=MILLI)
