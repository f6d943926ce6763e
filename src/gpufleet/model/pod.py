"""Pods as the scheduler sees them: a resource request, nothing else.

A pod asks for CPU (milli), memory (MiB) and GPUs in one of two forms:

* ``num_gpu`` whole GPUs (``gpu_milli == 1000``), or
* a share of one GPU (``num_gpu == 1``, ``0 < gpu_milli < 1000``), as GPU-sharing
  schedulers (Alibaba's open-gpu-share, gpufleet's ``gpufleet.io/gpu-fraction``) express it.

``gpu_models`` restricts the GPU models the pod may run on (None: any); ``constraint`` its
nodes by labels and taints (:mod:`gpufleet.model.selectors`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpufleet.model.arrays import MILLI
from gpufleet.model.selectors import NodeConstraint


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

    def __post_init__(self) -> None:
        if min(self.cpu_milli, self.memory_mib, self.num_gpu, self.gpu_milli) < 0:
            raise ValueError(f"pod {self.name}: negative request")
        if self.num_gpu == 0 and self.gpu_milli != 0:
            raise ValueError(f"pod {self.name}: gpu_milli without GPUs")
        if self.num_gpu > 0 and not 0 < self.gpu_milli <= MILLI:
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
        interchangeable to the scheduler (the key of its caches and classes)."""
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
        )

    @property
    def mig_resource(self) -> str | None:
        """The extended resource of the pod's MIG slice (``nvidia.com/mig-3g.40gb``)."""
        return None if self.mig_profile is None else f"nvidia.com/mig-{self.mig_profile}"

    @property
    def gpu_equivalent(self) -> float:
        """GPUs the pod takes from its queue: whole GPUs, a share, or its MIG slices' compute
        slices out of 7."""
        if self.mig_profile is not None:
            return self.mig_count * int(self.mig_profile.split("g.", 1)[0]) / 7
        return self.total_gpu_milli / MILLI

    @property
    def is_gpu_share(self) -> bool:
        """True for a pod that asks for part of one GPU."""
        return self.num_gpu == 1 and self.gpu_milli < MILLI

    @property
    def total_gpu_milli(self) -> int:
        """The pod's whole GPU request in milli-GPU (``num_gpu * gpu_milli``)."""
        return self.num_gpu * self.gpu_milli

    def as_whole_gpus(self) -> PodSpec:
        """The same pod under device-plugin semantics: a share of a GPU takes a whole one."""
        if not self.is_gpu_share:
            return self
        return dataclasses.replace(self, gpu_milli=MILLI)
