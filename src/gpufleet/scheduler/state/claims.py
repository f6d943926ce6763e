"""The cycle's book of ResourceClaims: which are allocated, to which devices, for whom.

The cycle asks it where a pod's claims can be allocated, commits them with the pod's
placement, gives a victim's claims back when the victim search evicts it (only claims no
other running pod shares: a claim shared by co-victims goes with the last of them) and takes
them back when the victim is reprieved. Every change registers its undo with the
transaction, so a rolled-back gang or victim search leaves the book as it found it.

``device_match`` (a CEL selector) is added to every open claim while a gang whose devices
must share one attribute value is placed (PodGroup ``gpufleet.io/device-match-attribute``).

It also says how many GPUs a claim counts as toward its pods' queue (each device by
:func:`gpufleet.model.devices.device_gpus`, a shared device by the part the claim consumes;
admin access counts nothing): an allocated claim what its devices count as, a claim still
to be allocated the most it may be (:meth:`ClaimBook.most_gpus`: per request the largest
matching device times its count, all of a node's matching devices for
``allocationMode: All``, the largest of a ``firstAvailable`` list's alternatives — as
Kubernetes' ResourceQuota charges a prioritized list). The cluster's GPUs for fair shares
count the devices of GPU drivers and of annotated classes once each; the devices of one
shared counter set (a GPU and the MIG devices carved from it) count once, as the largest.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.dra.allocator import Allocator, Unsatisfiable
from gpufleet.dra.cel import Selector, SelectorError, compile_selector
from gpufleet.model.devices import (
    Claim,
    Device,
    DeviceAllocation,
    DeviceResult,
    Subrequest,
    consumed_share,
    device_gpus,
)
from gpufleet.scheduler.api.outcome import ClaimStatus

if TYPE_CHECKING:
    from gpufleet.model.arrays import BoolArray
    from gpufleet.model.devices import DeviceClass
    from gpufleet.model.workload import PodInfo, Snapshot
    from gpufleet.scheduler.api.transaction import Running, Transaction

Results = list[list[DeviceResult]]


def _selects(selectors: list[Selector], device: Device) -> bool:
    try:
        return all(s.matches(device) for s in selectors)
    except SelectorError:
        return False


def node_local_of(device: Device) -> str | None:
    """The one node ``device`` is on (None: attached to the network, or reached by a node
    selector or from every node)."""
    return device.node if device.nodes is None and not device.all_nodes else None


def _device_share(device: Device, sub: Subrequest, per_class: float | None) -> float:
    gpus = device_gpus(device.driver, device, per_class)
    if not gpus or not device.multi:
        return gpus
    asked = {(n if "/" in n else f"{device.driver}/{n}"): a for n, a in sub.capacity}
    consumed = tuple((n, asked.get(n, total)) for n, total in device.capacity.items())
    return gpus * consumed_share(device, consumed)


def _device_gpus(
    devices: Iterable[Device], classes: Mapping[str, DeviceClass]
) -> Iterator[tuple[Device, float]]:
    """Each of ``devices`` that counts as GPUs, with how many: its DeviceClass's
    ``gpus_per_device`` where a class with one selects it, else the driver's count."""
    annotated: list[tuple[float, list[Selector]]] = []
    for c in sorted(classes.values(), key=lambda c: c.name):
        if c.gpus_per_device is None:
            continue
        try:
            selectors = [compile_selector(e) for e in c.selectors]
        except SelectorError:
            continue  # reported against the claims that use the class
        annotated.append((c.gpus_per_device, selectors))
    for device in devices:
        gpus = next(
            (n for n, chosen in annotated if _selects(chosen, device)),
            device_gpus(device.driver, device, None),
        )
        if gpus:
            yield device, gpus


class ClaimBook:
    def __init__(self, snapshot: Snapshot) -> None:
        self.claims = {c.key: c for c in snapshot.claims}
        self.pools = snapshot.pools
        self.classes = {c.name: c for c in snapshot.device_classes}
        self.initial = dict(snapshot.allocations)
        self.allocations: dict[str, DeviceAllocation] = dict(snapshot.allocations)
        self.allocator = Allocator(snapshot.pools, self.classes) if self.claims else None
        if self.allocator is not None:
            self.allocator.inventory.commit([a.results for a in self.allocations.values()])
        self.pod_claims: dict[str, dict[str, tuple[DeviceResult, ...]]] = {}
        """Per pod bound in this cycle, its claims' devices (for the binding)."""
        self.released: dict[str, dict[str, DeviceAllocation]] = {}
        """Claims a victim search gave back, per victim (to reprieve them)."""
        self.evicting: set[str] = set()
        """Pods a victim search has evicted so far (a claim they share goes with the last)."""
        self.device_match: str | None = None
        """A selector every device must meet while a device-matched gang is placed."""
        self._most: dict[Subrequest, float] = {}
        """The most each request shape may count as (see _sub_gpus)."""

    # -- what claims count as toward queues ------------------------------------------------

    def _class_gpus(self, name: str) -> float | None:
        device_class = self.classes.get(name)
        return None if device_class is None else device_class.gpus_per_device

    def _result_class(self, claim: str, result: DeviceResult) -> str:
        """The DeviceClass a result's device was allocated through (an allocation read
        from a snapshot names only the request: its class is the request's)."""
        if result.device_class:
            return result.device_class
        spec = self.claims.get(claim)
        request, _, sub = result.request.partition("/")
        for r in spec.requests if spec is not None else ():
            if r.name == request:
                for alternative in r.alternatives:
                    if not sub or alternative.name == sub:
                        return alternative.device_class
        return ""

    def allocated_gpus(self, key: str, *, node_local: bool = False) -> float:
        """GPUs claim ``key``'s allocation counts as (0 when it is not allocated); with
        ``node_local``, only its devices on one node (those :meth:`gpus_by_node` counts)."""
        allocation = self.allocations.get(key)
        if allocation is None:
            return 0.0
        devices = self.allocator.inventory.devices if self.allocator is not None else {}
        total = 0.0
        for r in allocation.results:
            if r.admin_access:
                continue
            device = devices.get((r.driver, r.pool, r.device))
            if node_local and (device is None or node_local_of(device) is None):
                continue
            gpus = device_gpus(r.driver, device, self._class_gpus(self._result_class(key, r)))
            total += gpus * consumed_share(device, r.consumed) if gpus else 0.0
        return total

    def most_gpus(self, key: str) -> float:
        """The most GPUs claim ``key`` may count as once allocated: what it counts as if it
        is allocated, else the bound of the module docstring."""
        if key in self.allocations:
            return self.allocated_gpus(key)
        claim = self.claims.get(key)
        if claim is None or self.allocator is None:
            return 0.0
        return sum(
            max((self._sub_gpus(sub) for sub in request.alternatives), default=0.0)
            for request in claim.requests
        )

    def _sub_gpus(self, sub: Subrequest) -> float:
        """The most one (sub)request may count as; remembered per request shape, as the
        claims of one template ask alike and devices never change."""
        known = self._most.get(sub)
        if known is None:
            known = self._most[sub] = self._most_of(sub)
        return known

    def _most_of(self, sub: Subrequest) -> float:
        if sub.admin_access:
            return 0.0
        assert self.allocator is not None
        per_class = self._class_gpus(sub.device_class)
        # Any node name reaches the network-attached devices (a name no device is on: them
        # alone, for a cluster whose devices are all network-attached).
        nodes = [n for n in self.allocator.inventory.by_node if n is not None] or [""]
        most = 0.0
        for node in nodes:
            try:
                found = self.allocator.candidates(sub, node)
            except SelectorError:
                return 0.0  # the claim cannot be allocated: the allocator says why
            each = [_device_share(d, sub, per_class) for d in found]
            if sub.all_devices:
                most = max(most, sum(each))
            elif each:
                most = max(most, sub.count * max(each))
        return most

    def gpu_capacity(self) -> float:
        """The GPUs the cluster's devices count as (for fair shares; see the module): none
        while no claim could use them."""
        if self.allocator is None:
            return 0.0
        by_counters: dict[tuple[str, str, str], float] = {}
        total = 0.0
        for device, gpus in _device_gpus(self.allocator.inventory.devices.values(), self.classes):
            if device.consumes:
                key = (device.driver, device.pool, device.consumes[0][0])
                by_counters[key] = max(by_counters.get(key, 0.0), gpus)
            else:
                total += gpus
        return total + sum(by_counters.values())

    def gpus_by_node(self) -> dict[str, float]:
        """The GPUs each node's node-local devices count as, as :meth:`gpu_capacity` counts
        them, claims or none (what the node costs; devices attached to the network, or
        reached by a node selector, are on no one node)."""
        allocator = self.allocator or Allocator(self.pools, self.classes)
        by_counters: dict[tuple[str, str, str], tuple[str, float]] = {}
        total: dict[str, float] = {}
        for device, gpus in _device_gpus(allocator.inventory.devices.values(), self.classes):
            node = node_local_of(device)
            if node is None:
                continue
            if device.consumes:
                key = (device.driver, device.pool, device.consumes[0][0])
                by_counters[key] = (node, max(by_counters.get(key, (node, 0.0))[1], gpus))
            else:
                total[node] = total.get(node, 0.0) + gpus
        for node, gpus in by_counters.values():
            total[node] = total.get(node, 0.0) + gpus
        return total

    # -- allocation ------------------------------------------------------------------------

    def open_claims(self, pod: PodInfo) -> list[Claim]:
        """``pod``'s claims not allocated yet (with ``device_match`` added, if set)."""
        claims = [self.claims[k] for k in pod.claims if k not in self.allocations]
        if self.device_match is None:
            return claims
        selector = self.device_match
        return [
            replace(
                claim,
                requests=tuple(
                    replace(
                        request,
                        alternatives=tuple(
                            replace(sub, selectors=(*sub.selectors, selector))
                            for sub in request.alternatives
                        ),
                    )
                    for request in claim.requests
                ),
            )
            for claim in claims
        ]

    def tied(self, pod: PodInfo) -> set[str]:
        """Nodes that ``pod``'s already allocated claims tie it to."""
        return {
            node
            for k in pod.claims
            if k in self.allocations and (node := self.allocations[k].node) is not None
        }

    def try_on(self, pod: PodInfo, node: str) -> Results | Unsatisfiable:
        """Devices for ``pod``'s open claims on ``node``, or why not."""
        assert self.allocator is not None
        if self.tied(pod) - {node}:
            return Unsatisfiable("its allocated claims are tied to another node")
        open_claims = self.open_claims(pod)
        return self.allocator.allocate(open_claims, node) if open_claims else []

    def nodes(self, pod: PodInfo, names: Sequence[str]) -> tuple[BoolArray, str]:
        """Which of ``names`` can allocate every claim of ``pod``, and the commonest reasons."""
        allowed = np.zeros(len(names), dtype=np.bool_)
        tied = self.tied(pod)
        if len(tied) > 1:
            return allowed, "its allocated claims are tied to different nodes"
        reasons: dict[str, int] = {}
        for i, name in enumerate(names):
            if tied and name not in tied:
                continue
            result = self.try_on(pod, name)
            if isinstance(result, Unsatisfiable):
                reasons[result.reason] = reasons.get(result.reason, 0) + 1
            else:
                allowed[i] = True
        why = "; ".join(
            f"{n} node(s): {r}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1])[:3]
        )
        return allowed, why or "no node can hold its claims"

    def take(self, pod: PodInfo, node: str, txn: Transaction) -> None:
        """Allocate ``pod``'s open claims on ``node`` (known to fit)."""
        assert self.allocator is not None
        open_claims = self.open_claims(pod)
        results = self.try_on(pod, node)
        assert not isinstance(results, Unsatisfiable), "the node was checked"
        self.allocator.inventory.commit(results)
        for claim, claim_results in zip(open_claims, results, strict=True):
            local = any(
                self.allocator.inventory.devices[r.driver, r.pool, r.device].node is not None
                for r in claim_results
            )
            self.allocations[claim.key] = DeviceAllocation(
                tuple(claim_results), node if local else None
            )
        self.pod_claims[pod.key] = {k: self.allocations[k].results for k in pod.claims}

        def undo() -> None:
            assert self.allocator is not None
            self.allocator.inventory.release(results)
            for claim in open_claims:
                self.allocations.pop(claim.key, None)
            self.pod_claims.pop(pod.key, None)

        txn.on_rollback(undo)

    def release(self, pod: PodInfo, running: Iterable[Running], txn: Transaction) -> None:
        """An evicted pod's claims that no other ``running`` pod uses give their devices back."""
        if self.allocator is None or not pod.claims:
            return
        self.evicting.add(pod.key)
        others = {k for r in running if r.pod.key not in self.evicting for k in r.pod.claims}
        owned = [k for k in pod.claims if k in self.allocations and k not in others]
        freed = {k: self.allocations.pop(k) for k in owned}
        self.allocator.inventory.release([a.results for a in freed.values()])

        def undo() -> None:
            assert self.allocator is not None
            self.allocator.inventory.commit([a.results for a in freed.values()])
            self.allocations.update(freed)
            self.released.pop(pod.key, None)
            self.evicting.discard(pod.key)

        txn.on_rollback(undo)
        self.released[pod.key] = freed

    def retake(self, pod: PodInfo, txn: Transaction) -> None:
        """A reprieved victim runs on: its claims that evictions in this search freed (its
        own, or a co-victim's it shares) take their devices back."""
        self.evicting.discard(pod.key)
        if self.allocator is None:
            return
        for key in pod.claims:
            holder = next((h for h, freed in self.released.items() if key in freed), None)
            if key in self.allocations or holder is None:
                continue
            allocation = self.released[holder].pop(key)
            self.allocator.inventory.commit([allocation.results])
            self.allocations[key] = allocation

            def undo(
                key: str = key, holder: str = holder, allocation: DeviceAllocation = allocation
            ) -> None:
                assert self.allocator is not None
                self.allocator.inventory.release([allocation.results])
                self.allocations.pop(key, None)
                self.released.setdefault(holder, {})[key] = allocation

            txn.on_rollback(undo)

    def match_values(self, attribute: str) -> list[object]:
        """Values of ``attribute`` among the cluster's devices, fewest free devices first."""
        assert self.allocator is not None
        free: dict[object, int] = {}
        for device in self.allocator.inventory.devices.values():
            value = device.attribute(attribute)
            if value is not None:
                free[value] = free.get(value, 0) + (
                    device.key not in self.allocator.inventory.in_use
                )
        return sorted(free, key=lambda v: (free[v], str(v)))

    def status(self) -> dict[str, ClaimStatus]:
        """The claims this cycle allocated, with the configuration Kubernetes copies in."""
        out = {}
        new = {k for claims in self.pod_claims.values() for k in claims}
        for key in sorted(new - set(self.initial)):
            allocation = self.allocations.get(key)
            if allocation is None:
                continue
            classes = dict.fromkeys(r.device_class for r in allocation.results)
            config = [
                ("FromClass", c)
                for name in classes
                for c in (self.classes[name].config if name in self.classes else ())
            ]
            config += [("FromClaim", c) for c in self.claims[key].config]
            out[key] = ClaimStatus(allocation.results, allocation.node, tuple(config))
        return out
