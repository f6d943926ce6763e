"""A structured-parameters allocator: Kubernetes' semantics, without its exponential search.

For one node, :meth:`Allocator.allocate` finds devices for every request of a set of claims
(one pod's, or a whole gang's — allocated together or not at all):

* candidates of a request are the devices on the node or attached to all nodes, in complete
  pools, matching the DeviceClass's and the request's CEL selectors (ANDed), whose taints
  the request tolerates, not allocated already (unless ``adminAccess``), and whose shared
  counters (``consumesCounters``) still fit their pool's counter sets;
* ``exactly`` takes ``count`` devices, ``allocationMode: All`` every candidate on the node
  (and fails if any matching device is taken); ``firstAvailable`` tries its alternatives in
  order and names the result ``<request>/<subrequest>``;
* ``matchAttribute`` makes the constrained requests' devices share one value of the
  attribute, ``distinctAttribute`` makes them all differ.

Where upstream walks devices depth-first and takes the first fit — backtracking
exponentially when nothing fits — this search prunes with counting arguments before it
descends: a request with fewer candidates than it needs fails at once, a
``matchAttribute`` value is tried only if every constrained request has enough devices with
it, ``distinctAttribute`` only if there are enough distinct values. And it scores devices:
the smallest sufficient device first (least capacity), so that large devices stay free.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from gpufleet.dra.cel import SelectorError, compile_selector
from gpufleet.model.devices import (
    MAX_DEVICES_PER_CLAIM,
    Claim,
    Device,
    DeviceClass,
    DeviceResult,
    Pool,
    Subrequest,
)

Key = tuple[str, str, str]
STEP_BUDGET = 100_000
"""Search steps per allocation before giving up (never reached by the pruned search in the
benchmarks; a guard against adversarial claims)."""


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """Why the claims cannot be allocated on the node."""

    reason: str


@dataclass(slots=True)
class _Slot:
    claim: Claim
    request: str
    sub: Subrequest
    result_name: str
    candidates: list[Device]
    count: int


class Allocator:
    """Devices of the cluster, indexed per node, and what is already allocated."""

    def __init__(self, pools: Sequence[Pool], classes: Mapping[str, DeviceClass]) -> None:
        self.classes = classes
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
            devices.sort(key=_size)
        self.devices: dict[Key, Device] = {
            d.key: d for devices in self.by_node.values() for d in devices
        }
        self.in_use: set[Key] = set()
        self.shared: dict[Key, dict[str, Decimal]] = defaultdict(dict)
        """Capacity consumed on multi-allocatable devices."""
        self._matching: dict[tuple[object, ...], list[Device]] = {}
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
        for name, amount in _consumption(device, sub):
            total = device.capacity.get(name, Decimal(0))
            if used.get(name, Decimal(0)) + pending.get(name, Decimal(0)) + amount > total:
                return False
        return True

    def _counters_fit(self, device: Device, extra: Mapping[tuple[str, str, str], Decimal]) -> bool:
        for counter_set, amounts in device.consumes:
            key = (device.driver, device.pool, counter_set)
            available = self.counters.get(key, {})
            used = self.consumed.get(key, {})
            for counter, amount in amounts:
                total = used.get(counter, Decimal(0)) + extra.get((*key[1:], counter), Decimal(0))
                if total + amount > available.get(counter, Decimal(0)):
                    return False
        return True

    # -- candidates -----------------------------------------------------------------------

    def candidates(self, sub: Subrequest, node: str) -> list[Device]:
        """Devices on (or attached to) ``node`` that the request selects and tolerates.

        Devices do not change during a run, so the answer is cached per request shape and
        node: each selector runs once per device, not once per pod.
        """
        key = (sub.device_class, sub.selectors, sub.tolerations, node)
        cached = self._matching.get(key)
        if cached is None:
            cached = self._matching[key] = self._select(sub, node)
        return cached

    def _select(self, sub: Subrequest, node: str) -> list[Device]:
        device_class = self.classes.get(sub.device_class)
        if device_class is None:
            raise SelectorError(f"DeviceClass {sub.device_class} does not exist")
        try:
            class_selectors = [compile_selector(e) for e in device_class.selectors]
        except SelectorError as exc:
            raise SelectorError(f"DeviceClass {device_class.name}: {exc}") from None
        selectors = [compile_selector(e) for e in sub.selectors]
        out = []
        for device in self.devices_for(node):
            if any(not any(t.tolerates(taint) for t in sub.tolerations) for taint in device.taints):
                continue
            try:
                selected = all(s.matches(device) for s in class_selectors)
            except SelectorError as exc:
                raise SelectorError(f"DeviceClass {device_class.name}: {exc}") from None
            if selected and all(s.matches(device) for s in selectors):
                out.append(device)
        return out

    # -- allocation -----------------------------------------------------------------------

    def allocate(
        self, claims: Sequence[Claim], node: str
    ) -> list[list[DeviceResult]] | Unsatisfiable:
        """Devices for every request of ``claims`` on ``node``, or why there are none."""
        try:
            result = self._allocate(claims, node)
        except SelectorError as exc:
            return Unsatisfiable(f"selector error: {exc}")
        if isinstance(result, Unsatisfiable) and self.invalid:
            # An invalid pool is an error only when nothing else satisfies the claim.
            return Unsatisfiable(f"{result.reason}; {'; '.join(self.invalid)}")
        return result

    def _allocate(
        self, claims: Sequence[Claim], node: str
    ) -> list[list[DeviceResult]] | Unsatisfiable:
        last = Unsatisfiable("no request can be satisfied")
        for choice in self._alternatives(claims, node):
            if isinstance(choice, Unsatisfiable):
                last = choice
                continue
            found = _Search(self, choice).run()
            if isinstance(found, Unsatisfiable):
                last = found
                continue
            return found
        return last

    def _alternatives(
        self, claims: Sequence[Claim], node: str
    ) -> Iterator[list[_Slot] | Unsatisfiable]:
        """Slot lists in firstAvailable preference order (the first alternative first)."""
        per_request: list[list[_Slot]] = []
        for claim in claims:
            for request in claim.requests:
                options = []
                for sub in request.alternatives:
                    name = f"{request.name}/{sub.name}" if request.first_available else request.name
                    try:
                        found = self.candidates(sub, node)
                    except SelectorError as exc:
                        where = (
                            str(exc)
                            if str(exc).startswith("DeviceClass")
                            else (f"claim {claim.key} request {name}: {exc}")
                        )
                        raise SelectorError(where) from None
                    available = [
                        d
                        for d in found
                        if sub.admin_access
                        or (self.fits_capacity(d, sub) if d.multi else d.key not in self.in_use)
                    ]
                    if sub.all_devices:
                        if len(available) < len(found) or not found:
                            continue  # All needs every matching device, and at least one
                        count = len(found)
                    else:
                        count = sub.count
                    options.append(_Slot(claim, request.name, sub, name, available, count))
                if not options:
                    yield Unsatisfiable(f"claim {claim.key} request {request.name}: no devices")
                    return
                per_request.append(options)
        # Prefer the first alternative of every request; then vary the last requests first.
        yield from _product(per_request)


def _product(options: list[list[_Slot]]) -> Iterator[list[_Slot]]:
    if not options:
        yield []
        return
    for first in options[0]:
        for rest in _product(options[1:]):
            yield [first, *rest]


def _consumption(device: Device, sub: Subrequest) -> list[tuple[str, Decimal]]:
    """What ``sub`` takes of each capacity of a multi-allocatable device (qualified names);
    a capacity it does not mention is taken whole."""
    asked = {
        (name if "/" in name else f"{device.driver}/{name}"): amount
        for name, amount in sub.capacity
    }
    return [(name, asked.get(name, total)) for name, total in sorted(device.capacity.items())]


def _size(device: Device) -> tuple[Decimal, str]:
    """Smaller devices first: the sum of their capacities, then the name."""
    return (sum(device.capacity.values(), Decimal(0)), device.name)


class _Search:
    """Depth-first over slots, with counting arguments pruning before descending."""

    def __init__(self, allocator: Allocator, slots: list[_Slot]) -> None:
        self.allocator = allocator
        self.slots = slots
        self.steps = 0
        self.consumed: dict[Key, dict[str, Decimal]] = {}
        """Capacity of multi-allocatable devices taken by the slots chosen so far."""

    def run(self) -> list[list[DeviceResult]] | Unsatisfiable:
        per_claim: dict[str, int] = defaultdict(int)
        for slot in self.slots:
            per_claim[slot.claim.key] += slot.count
            if len(slot.candidates) < slot.count:
                return Unsatisfiable(
                    f"claim {slot.claim.key} request {slot.result_name}: "
                    f"{len(slot.candidates)} matching device(s) free, needs {slot.count}"
                )
        for claim, total in per_claim.items():
            if total > MAX_DEVICES_PER_CLAIM:
                return Unsatisfiable(
                    f"claim {claim} asks for {total} devices, more than {MAX_DEVICES_PER_CLAIM}"
                )
        chosen: list[list[Device]] = [[] for _ in self.slots]
        if not self._descend(0, chosen, set(), {}):
            reason = "no combination satisfies the constraints"
            if self.steps >= STEP_BUDGET:
                reason = f"search stopped after {STEP_BUDGET} steps"
            return Unsatisfiable(reason)
        results: dict[str, list[DeviceResult]] = defaultdict(list)
        for slot, devices in zip(self.slots, chosen, strict=True):
            results[slot.claim.key].extend(
                DeviceResult(
                    slot.result_name,
                    d.driver,
                    d.pool,
                    d.name,
                    slot.sub.admin_access,
                    tuple(_consumption(d, slot.sub)) if d.multi else (),
                    slot.sub.tolerations,
                    slot.sub.device_class,
                )
                for d in devices
            )
        order = list(dict.fromkeys(slot.claim.key for slot in self.slots))
        return [results[key] for key in order]

    def _constraints(self, slot: _Slot) -> list[tuple[str, str, list[int]]]:
        """(kind, attribute, indexes of the constrained slots) for ``slot``'s claim."""
        out = []
        for constraint in slot.claim.constraints:
            names = set(constraint.requests)
            members = [
                i
                for i, s in enumerate(self.slots)
                if s.claim.key == slot.claim.key and (not names or s.request in names)
            ]
            if constraint.match_attribute:
                out.append(("match", constraint.match_attribute, members))
            if constraint.distinct_attribute:
                out.append(("distinct", constraint.distinct_attribute, members))
        return out

    def _allowed(self, index: int, device: Device, chosen: list[list[Device]]) -> bool:
        slot = self.slots[index]
        for kind, attribute, members in self._constraints(slot):
            if index not in members:
                continue
            value = device.attribute(attribute)
            if value is None:
                return False
            others = [d.attribute(attribute) for i in members for d in chosen[i]]
            if kind == "match" and others and any(v != value for v in others):
                return False
            if kind == "distinct" and value in others:
                return False
        return True

    def _feasible(self, index: int, chosen: list[list[Device]], taken: set[Key]) -> bool:
        """Counting: every remaining slot still has enough allowed, untaken candidates."""
        for i in range(index, len(self.slots)):
            slot = self.slots[i]
            need = slot.count - len(chosen[i])
            if need <= 0:
                continue
            fits = [
                d for d in slot.candidates if d.key not in taken and self._allowed(i, d, chosen)
            ]
            if len(fits) < need:
                return False
            for kind, attribute, members in self._constraints(slot):
                if i not in members:
                    continue
                values = [d.attribute(attribute) for d in fits]
                if kind == "distinct" and len(set(values)) < need:
                    return False
                unset = kind == "match" and not any(chosen[m] for m in members)
                # No value chosen yet: some value must have enough devices by itself.
                if unset and max(Counter(values).values(), default=0) < need:
                    return False
        return True

    def _descend(
        self,
        index: int,
        chosen: list[list[Device]],
        taken: set[Key],
        extra: dict[tuple[str, str, str], Decimal],
    ) -> bool:
        self.steps += 1
        if self.steps >= STEP_BUDGET:
            return False
        if index == len(self.slots):
            return True
        slot = self.slots[index]
        if len(chosen[index]) == slot.count:
            return self._descend(index + 1, chosen, taken, extra)
        if not self._feasible(index, chosen, taken):
            return False
        start = chosen[index][-1] if chosen[index] else None
        seen_start = start is None
        for device in slot.candidates:
            if not seen_start:  # combinations, not permutations, within one slot
                seen_start = device is start
                continue
            if device.key in taken or not self._allowed(index, device, chosen):
                continue
            if not slot.sub.admin_access and not self.allocator._counters_fit(device, extra):
                continue
            if device.multi and not self.allocator.fits_capacity(device, slot.sub, self.consumed):
                continue
            chosen[index].append(device)
            added = [] if slot.sub.admin_access or device.multi else [device.key]
            taken.update(added)
            spent = _spend(extra, device) if not slot.sub.admin_access else []
            taken_capacity = self._take_capacity(device, slot.sub)
            if self._descend(index, chosen, taken, extra):
                return True
            for name, amount in taken_capacity:
                self.consumed[device.key][name] -= amount
            for key, amount in spent:
                extra[key] -= amount
            taken.difference_update(added)
            chosen[index].pop()
        return False

    def _take_capacity(self, device: Device, sub: Subrequest) -> list[tuple[str, Decimal]]:
        if not device.multi or sub.admin_access:
            return []
        taken = _consumption(device, sub)
        mine = self.consumed.setdefault(device.key, {})
        for name, amount in taken:
            mine[name] = mine.get(name, Decimal(0)) + amount
        return taken


def _spend(
    extra: dict[tuple[str, str, str], Decimal], device: Device
) -> list[tuple[tuple[str, str, str], Decimal]]:
    spent = []
    for counter_set, amounts in device.consumes:
        for counter, amount in amounts:
            key = (device.pool, counter_set, counter)
            extra[key] = extra.get(key, Decimal(0)) + amount
            spent.append((key, amount))
    return spent
