"""One node as a cluster description gives it: its capacity, labels, taints and GPUs.

What the loaders (``load/``, ``kube/``) read a node into, and what the cluster state is
built from: :class:`~gpufleet.model.rows.NodeRows` lays the nodes out as arrays, and
:class:`~gpufleet.model.cluster.ClusterState` changes them as pods are placed. Capacity
only, never usage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpufleet.model.devices import mig_gpus
from gpufleet.model.pod import SHARED_GPU_RESOURCE
from gpufleet.model.values import EMPTY, frozen_map

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpufleet.model.selectors import Taint


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node as a cluster description gives it (capacity, not usage)."""

    name: str
    cpu_milli: int
    memory_mib: int
    gpus: int
    gpu_model: str | None
    labels: Mapping[str, str] = EMPTY
    taints: tuple[Taint, ...] = ()
    mig_slices: Mapping[str, int] = EMPTY
    """Static MIG: slices the node advertises per profile (``{"1g.10gb": 7}``)."""
    mig_dynamic: bool = False
    """Dynamic MIG: gpufleet chooses how the node's GPUs are partitioned."""
    gpu_zones: tuple[int, ...] = ()
    """NUMA zone of each GPU (empty: unknown)."""
    zone_cpu_milli: tuple[int, ...] = ()
    """Allocatable milli-CPU of each NUMA zone (empty: unknown)."""
    single_numa: bool = False
    """The kubelet's topology manager runs the single-numa-node policy."""
    extended: Mapping[str, int] = EMPTY
    """Allocatable of every other resource (``vpc.amazonaws.com/efa``, ``hugepages-2Mi``,
    ``ephemeral-storage``), in its base unit (devices, bytes)."""
    max_pods: int | None = None
    """Allocatable ``pods``: how many pods the kubelet runs (None: no limit, as in a trace)."""
    gpu_memory_mib: int | None = None
    """Memory of each of the node's GPUs, MiB (label ``nvidia.com/gpu.memory``; None: unknown).
    It sizes the shares pods ask for by GPU memory (:meth:`PodSpec.sized_for`)."""
    gpu_unit: float = 1.0
    """Physical GPUs one advertised GPU (``nvidia.com/gpu``, or ``nvidia.com/gpu.shared``)
    counts as: 1 for a whole GPU, less for a MIG slice of the single strategy or a time-sliced
    or MPS replica (load/objects/gpu_operator.py). Placement takes advertised GPUs, as Kubernetes
    does; queues and cost count them at this worth."""
    gpu_sharing: str = ""
    """What one advertised GPU is where it is not a whole GPU (``MIG 1g.5gb slice (1/7 of an
    NVIDIA-A100-SXM4-40GB)``); empty for whole GPUs."""
    physical_gpus: int | None = None
    """Physical GPUs of the node where they differ from the advertised ones (what it is
    priced by); None: one per advertised GPU."""
    gpu_one_per_pod: bool = False
    """The device plugin gives a pod at most one of the node's advertised GPUs (MPS)."""
    uid: str = field(default="", compare=False)
    """``metadata.uid`` (empty: not read from a cluster). Like ``resource_version`` it says
    which object this is, not what it holds: neither takes part in ``==`` or ``hash``."""
    resource_version: str = field(default="", compare=False)
    """``metadata.resourceVersion``: which write of the object this is."""

    @property
    def gpu_worth(self) -> float:
        """The GPUs the node's pods can be charged in all: its advertised GPUs (and shared
        replicas) at their worth, and its static MIG slices at their compute slices out
        of 7."""
        advertised = self.gpus + self.extended.get(SHARED_GPU_RESOURCE, 0)
        return advertised * self.gpu_unit + sum(
            mig_gpus(profile, n) for profile, n in self.mig_slices.items()
        )

    @property
    def capacity_key(self) -> tuple[object, ...]:
        """Everything a node's row of the cluster state is built from besides its labels and
        taints: nodes with equal keys differ only in what their label masks say."""
        return (
            self.cpu_milli,
            self.memory_mib,
            self.gpus,
            self.gpu_model,
            tuple(sorted(self.mig_slices.items())),
            self.mig_dynamic,
            self.gpu_zones,
            self.zone_cpu_milli,
            self.single_numa,
            tuple(sorted(self.extended.items())),
            self.max_pods,
            self.gpu_memory_mib,
            self.gpu_unit,
            self.gpu_sharing,
            self.physical_gpus,
            self.gpu_one_per_pod,
        )

    def __post_init__(self) -> None:
        # The maps are stored frozen, so that the node compares and hashes by value.
        object.__setattr__(self, "labels", frozen_map(self.labels))
        object.__setattr__(self, "mig_slices", frozen_map(self.mig_slices))
        object.__setattr__(self, "extended", frozen_map(self.extended))
