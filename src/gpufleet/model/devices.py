"""DRA as the allocator sees it: devices in pools, device classes, claims and their requests.

These mirror ``resource.k8s.io/v1`` (ResourceSlice, DeviceClass, ResourceClaim) with the
fields the allocator reads; the loader turns Kubernetes objects into them. Attribute and
capacity names are fully qualified (``gpu.nvidia.com/productName``): an unqualified name in
a ResourceSlice belongs to the driver's domain.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

from gpufleet.model.selectors import Taint as DeviceTaint
from gpufleet.model.selectors import Toleration as DeviceToleration

# Device taints and tolerations follow the rules of node taints (model/selectors.py).
__all__ = [
    "MAX_DEVICES_PER_CLAIM",
    "Allocation",
    "Claim",
    "Constraint",
    "Device",
    "DeviceClass",
    "DeviceResult",
    "DeviceTaint",
    "DeviceToleration",
    "OpaqueConfig",
    "Pool",
    "Request",
    "Subrequest",
]

MAX_DEVICES_PER_CLAIM = 32
"""Kubernetes' limit on the devices one claim may be allocated (AllocationResultsMaxSize)."""


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
    attributes: Mapping[str, object] = field(default_factory=dict)
    capacity: Mapping[str, Decimal] = field(default_factory=dict)
    taints: tuple[DeviceTaint, ...] = ()
    consumes: tuple[tuple[str, tuple[tuple[str, Decimal], ...]], ...] = ()
    """Shared counters the device takes from its pool: (counter set, ((counter, amount), ...))."""
    multi: bool = False
    """``allowMultipleAllocations``: consumable capacity, shared by several claims."""

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
    counters: Mapping[str, Mapping[str, Decimal]] = field(default_factory=dict)
    """Shared counter sets: name -> counter -> amount."""
    invalid: str | None = None
    """Why the pool cannot be used (e.g. a device name in two slices), or None."""

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
class Allocation:
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
