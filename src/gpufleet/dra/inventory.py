"""The devices of the cluster, indexed per node, and what is allocated of them.

The bookkeeping under :mod:`gpufleet.dra.allocator`: which devices each node can use (its
own, those attached to several nodes, those attached to all), which are taken, how much of
each multi-allocatable device's capacity is consumed, and how much of each pool's shared
counters (``consumesCounters``) the taken devices use. :meth:`Inventory.commit` and
:meth:`Inventory.release` change it; the fit checks answer whether a device still fits,
counting what a search in progress has chosen but not committed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from decimal import Decimal

from gpufleet.model.devices import Device, DeviceResult, Pool, Subrequest

Key = tuple[str, str, str]


class Inventory:
    """Devices of the cluster, indexed per node, and what is already allocated."""

    def __init__(self, pools: Sequence[Pool]) -> None:
        self.by_node: dict[str | None, list[Device]] = defaultdict(list)
        self.counters: dict[tuple[str, str, str], dict[str, Decimal]] = {}
        self.invalid: list[str] = []
        for pool in pools:
            if pool.invalid is not None:
                self.invalid.append(f"pool {pool.driver}/{pool.name} is invalid: {pool.invalid}")
                continue
            if not pool.complete:
                continue  # an incomplete pool is not used
            for device in pool.devices:
                if device.nodes is not None:
                    for node in device.nodes:
                        self.by_node[node].append(device)
                else:
                    self.by_node[None if device.all_nodes else device.node].append(device)
            for name, counters in pool.counters.items():
                self.counters[pool.driver, pool.name, name] = dict(counters)
        for devices in self.by_node.values():
            devices.sort(key=size)
        self.devices: dict[Key, Device] = {
            d.key: d for devices in self.by_node.values() for d in devices
        }
        self.in_use: set[Key] = set()
        self.shared: dict[Key, dict[str, Decimal]] = defaultdict(dict)
        """Capacity consumed on multi-allocatable devices."""
        self.consumed: dict[tuple[str, str, str], dict[str, Decimal]] = defaultdict(dict)

    def devices_for(self, node: str) -> list[Device]:
        return [*self.by_node.get(node, ()), *self.by_node.get(None, ())]

    def commit(self, results: Sequence[Sequence[DeviceResult]]) -> None:
        """Mark allocated devices as in use (admin access takes nothing)."""
        for claim_results in results:
            for r in claim_results:
                key = (r.driver, r.pool, r.device)
                if r.admin_access or key not in self.devices:
                    continue  # a stale result names a device the slices no longer list
                if self._device(r).multi:
                    shared = self.shared[key]
                    for name, amount in r.consumed:
                        shared[name] = shared.get(name, Decimal(0)) + amount
                    continue
                self.in_use.add(key)
                self._consume(self._device(r), +1)

    def release(self, results: Sequence[Sequence[DeviceResult]]) -> None:
        """Undo :meth:`commit` (a gang rolled back, a pod evicted)."""
        for claim_results in results:
            for r in claim_results:
                key = (r.driver, r.pool, r.device)
                if key not in self.devices:
                    continue
                if not r.admin_access and self._device(r).multi:
                    for name, amount in r.consumed:
                        self.shared[key][name] = self.shared[key].get(name, Decimal(0)) - amount
                elif not r.admin_access and key in self.in_use:
                    self.in_use.discard(key)
                    self._consume(self._device(r), -1)

    def _device(self, r: DeviceResult) -> Device:
        device = self.devices.get((r.driver, r.pool, r.device))
        if device is None:
            raise KeyError(r.device)
        return device

    def _consume(self, device: Device, sign: int) -> None:
        for counter_set, amounts in device.consumes:
            used = self.consumed[device.driver, device.pool, counter_set]
            for counter, amount in amounts:
                used[counter] = used.get(counter, Decimal(0)) + sign * amount

    def fits_capacity(
        self,
        device: Device,
        sub: Subrequest,
        extra: Mapping[Key, Mapping[str, Decimal]] | None = None,
    ) -> bool:
        """Whether a multi-allocatable device has the capacity the request consumes left."""
        used = self.shared.get(device.key, {})
        pending = (extra or {}).get(device.key, {})
        for name, amount in consumption(device, sub):
            total = device.capacity.get(name, Decimal(0))
            if used.get(name, Decimal(0)) + pending.get(name, Decimal(0)) + amount > total:
                return False
        return True

    def counters_fit(self, device: Device, extra: Mapping[tuple[str, str, str], Decimal]) -> bool:
        """Whether the shared counters ``device`` consumes still fit its pool's counter sets,
        with ``extra`` (pool, counter set, counter) spent by a search not yet committed."""
        for counter_set, amounts in device.consumes:
            key = (device.driver, device.pool, counter_set)
            available = self.counters.get(key, {})
            used = self.consumed.get(key, {})
            for counter, amount in amounts:
                total = used.get(counter, Decimal(0)) + extra.get((*key[1:], counter), Decimal(0))
                if total + amount > available.get(counter, Decimal(0)):
                    return False
        return True


def consumption(device: Device, sub: Subrequest) -> list[tuple[str, Decimal]]:
    """What ``sub`` takes of each capacity of a multi-allocatable device (qualified names);
    a capacity it does not mention is taken whole."""
    asked = {
        (name if "/" in name else f"{device.driver}/{name}"): amount
        for name, amount in sub.capacity
    }
    return [(name, asked.get(name, total)) for name, total in sorted(device.capacity.items())]


def size(device: Device) -> tuple[Decimal, str]:
    """Smaller devices first: the sum of their capacities, then the name."""
    return (sum(device.capacity.values(), Decimal(0)), device.name)
