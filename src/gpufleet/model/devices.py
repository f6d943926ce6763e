"""DRA as the allocator sees it: devices in pools, device classes, claims and their requests.

These mirror ``resource.k8s.io/v1`` (ResourceSlice, DeviceClass, ResourceClaim) with the
fields the allocator reads; the loader turns Kubernetes objects into them. Attribute and
capacity names are fully qualified (``gpu.nvidia.com/productName``): an unqualified name in
a ResourceSlice belongs to the driver's domain.

**What a device counts as toward a queue's ``gpu`` resource** (:func:`device_gpus`), so that
GPUs allocated through ResourceClaims count in quotas, limits and fair shares like
``nvidia.com/gpu`` requests:

1. a DeviceClass annotated ``gpufleet.io/gpus-per-device: "<number>"`` says it for every
   device allocated through it (``"0"``: not a GPU; ``"0.5"``: half a GPU);
2. otherwise a device of a GPU driver — one whose name's first label is ``gpu``
   (``gpu.nvidia.com``, the DRA example driver's ``gpu.example.com``, ``gpu.amd.com``,
   ``gpu.intel.com``) — is one GPU, and a MIG device (attribute ``type: mig``, as NVIDIA's
   driver publishes them) its compute slices out of 7 by its ``profile`` (``3g.40gb``: 3/7),
   as a ``nvidia.com/mig-<profile>`` request counts;
3. any other device (a NIC, an IMEX channel) counts nothing.

A device that several claims share (``allowMultipleAllocations``, consumable capacity)
counts, for each claim, the largest fraction of any of its capacities that the claim
consumes (20Gi of an 80Gi GPU: a quarter).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from gpufleet.model.selectors import Taint as DeviceTaint
from gpufleet.model.selectors import Toleration as DeviceToleration
from gpufleet.model.values import EMPTY, FrozenMap, frozen_map

# Device taints and tolerations follow the rules of node taints (model/selectors.py).
__all__ = [
    "MAX_DEVICES_PER_CLAIM",
    "Claim",
    "Constraint",
    "Device",
    "DeviceAllocation",
    "DeviceClass",
    "DeviceResult",
    "DeviceTaint",
    "DeviceToleration",
    "OpaqueConfig",
    "Pool",
    "Request",
    "Subrequest",
    "consumed_share",
    "device_gpus",
    "is_gpu_driver",
]

MAX_DEVICES_PER_CLAIM = 32
"""Kubernetes' limit on the devices one claim may be allocated (AllocationResultsMaxSize)."""

GPUS_PER_DEVICE = "gpufleet.io/gpus-per-device"
"""DeviceClass annotation: how many GPUs one device allocated through the class counts as."""

MIG_COMPUTE_SLICES = 7
_PROFILE = re.compile(r"^(\d+)g\.")


def mig_gpus(profile: str, count: int = 1) -> float:
    """The GPUs ``count`` MIG slices of ``profile`` (``1g.10gb``) count as: their compute
    slices out of 7 (0 for a name that is no profile)."""
    match = _PROFILE.match(profile)
    if match is None:
        return 0.0
    return count * min(int(match.group(1)), MIG_COMPUTE_SLICES) / MIG_COMPUTE_SLICES


MAX_CONSUMERS = 256
"""Kubernetes' ``ResourceClaimReservedForMaxSize``: the most pods one ResourceClaim can be
reserved for (``status.reservedFor``; the API server refuses a longer list). A pod that
would be one more waits, as kube-scheduler's DRA plugin has it wait."""


@dataclass(frozen=True, slots=True)
class Device:
    driver: str
    pool: str
    name: str
    node: str | None = None
    """The node of a node-local device; None for network-attached ones."""
    all_nodes: bool = False
    nodes: frozenset[str] | None = None
    """The nodes a slice's ``nodeSelector`` reaches (None: not selector-based)."""
    attributes: Mapping[str, object] = EMPTY
    capacity: Mapping[str, Decimal] = EMPTY
    taints: tuple[DeviceTaint, ...] = ()
    consumes: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...] = ()
    """Shared counters the device takes from its pool: (counter set, ((counter, amount), ...))."""
    multi: bool = False
    """``allowMultipleAllocations``: consumable capacity, shared by several claims."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "attributes", frozen_map(self.attributes))
        object.__setattr__(self, "capacity", frozen_map(self.capacity))

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.name)

    def attribute(self, name: str) -> object | None:
        """A qualified attribute (``domain/name``), or an unqualified one of the driver."""
        if name in self.attributes:
            return self.attributes[name]
        return self.attributes.get(f"{self.driver}/{name}") if "/" not in name else None


@dataclass(frozen=True, slots=True)
class Pool:
    """One pool of one driver at its newest generation."""

    driver: str
    name: str
    generation: int
    slice_count: int
    slices_seen: int
    devices: tuple[Device, ...]
    counters: Mapping[str, Mapping[str, Decimal]] = EMPTY
    """Shared counter sets: name -> counter -> amount."""
    invalid: str | None = None
    """Why the pool cannot be used (e.g. a device name in two slices), or None."""

    def __post_init__(self) -> None:
        counters = {name: frozen_map(amounts) for name, amounts in self.counters.items()}
        object.__setattr__(self, "counters", FrozenMap(counters))

    @property
    def complete(self) -> bool:
        """All ``resourceSliceCount`` slices of the newest generation are there."""
        return self.slices_seen == self.slice_count


@dataclass(frozen=True, slots=True)
class OpaqueConfig:
    """Driver configuration a DeviceClass or claim carries into the allocation result."""

    driver: str
    parameters: str
    """The opaque parameters, as JSON text."""
    requests: tuple[str, ...] = ()
    """The requests it is for (empty: all)."""


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()
    gpus_per_device: float | None = None
    """The ``gpufleet.io/gpus-per-device`` annotation (None: the driver's rule applies)."""


@dataclass(frozen=True, slots=True)
class Subrequest:
    """What one request (or one of its ``firstAvailable`` alternatives) asks for."""

    name: str
    device_class: str
    selectors: tuple[str, ...] = ()
    count: int = 1
    all_devices: bool = False
    """``allocationMode: All``."""
    admin_access: bool = False
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: tuple[tuple[str, Decimal], ...] = ()
    """``capacity.requests``: what the request consumes of a multi-allocatable device."""


@dataclass(frozen=True, slots=True)
class Request:
    name: str
    alternatives: tuple[Subrequest, ...]
    """One for ``exactly``; several, in order of preference, for ``firstAvailable``."""
    first_available: bool = False


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...] = ()
    """The requests it applies to (empty: all of the claim's)."""
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    key: str
    requests: tuple[Request, ...]
    constraints: tuple[Constraint, ...] = ()
    config: tuple[OpaqueConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceAllocation:
    """A claim's allocation: its devices, and the node they tie its pods to (None: any)."""

    results: tuple[DeviceResult, ...]
    node: str | None


@dataclass(frozen=True, slots=True)
class DeviceResult:
    """One allocated device, as ``status.allocation.devices.results[]`` has it."""

    request: str
    """``<request>`` or, for firstAvailable, ``<request>/<subrequest>``."""
    driver: str
    pool: str
    device: str
    admin_access: bool = False
    consumed: tuple[tuple[str, Decimal], ...] = ()
    """Capacity taken from a multi-allocatable device (``consumedCapacity``)."""
    tolerations: tuple[DeviceToleration, ...] = ()
    """The request's tolerations, copied into the result as Kubernetes does."""
    device_class: str = ""
    """The DeviceClass the device was allocated through (its config applies)."""


def is_gpu_driver(driver: str) -> bool:
    """A driver whose name's first label is ``gpu`` (``gpu.nvidia.com``, ``gpu.example.com``)."""
    return driver.split(".", 1)[0] == "gpu" and "." in driver


def device_gpus(driver: str, device: Device | None, gpus_per_device: float | None) -> float:
    """GPUs one whole ``device`` of ``driver`` counts as toward its queue (the module's rule;
    ``device`` None: a device the slices no longer list, judged by its driver alone)."""
    if gpus_per_device is not None:
        return gpus_per_device
    if not is_gpu_driver(driver):
        return 0.0
    if device is not None and device.attribute("type") == "mig":
        share = mig_gpus(str(device.attribute("profile") or ""))
        if share:
            return share
    return 1.0


def consumed_share(device: Device | None, consumed: tuple[tuple[str, Decimal], ...]) -> float:
    """The part of a shared device that one claim takes: the largest fraction of any capacity
    it consumes (1 when it consumes nothing it names, or the device is not shared)."""
    if device is None or not device.multi or not consumed:
        return 1.0
    shares = [
        float(amount / total)
        for name, amount in consumed
        if (total := device.capacity.get(name, Decimal(0))) > 0
    ]
    return min(max(shares), 1.0) if shares else 1.0
