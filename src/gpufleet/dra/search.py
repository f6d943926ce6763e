"""The search for one choice of alternatives: devices for every slot, or why there are none.

A slot is one request (or one ``firstAvailable`` alternative of it) of one claim, with its
candidates on the node and how many devices it takes; :mod:`gpufleet.dra.allocator` makes
the slots and tries each combination of alternatives. :class:`Search` walks the slots
depth-first, pruning with counting arguments before it descends (enough candidates left,
enough devices sharing a ``matchAttribute`` value, enough distinct ``distinctAttribute``
values), and checks each device against the :class:`~gpufleet.dra.inventory.Inventory`:
untaken, its shared counters and capacity still fitting what the search has chosen.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass
from decimal import Decimal

from gpufleet.dra.inventory import Inventory, Key, consumption
from gpufleet.model.devices import (
    MAX_DEVICES_PER_CLAIM,
    Claim,
    Device,
    DeviceResult,
    Subrequest,
)

STEP_BUDGET = 100_000
"""Search steps per allocation before giving up (never reached by the pruned search in the
benchmarks; a guard against adversarial claims)."""


@dataclass(frozen=True, slots=True)
class Unsatisfiable:
    """Why the claims cannot be allocated on the node."""

    reason: str


@dataclass(slots=True)
class Slot:
    claim: Claim
    request: str
    sub: Subrequest
    result_name: str
    candidates: list[Device]
    count: int


class Search:
    """Depth-first over slots, with counting arguments pruning before descending."""

    def __init__(self, inventory: Inventory, slots: list[Slot]) -> None:
        self.inventory = inventory
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
                    tuple(consumption(d, slot.sub)) if d.multi else (),
                    slot.sub.tolerations,
                    slot.sub.device_class,
                )
                for d in devices
            )
        order = list(dict.fromkeys(slot.claim.key for slot in self.slots))
        return [results[key] for key in order]

    def _constraints(self, slot: Slot) -> list[tuple[str, str, list[int]]]:
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
            if not slot.sub.admin_access and not self.inventory.counters_fit(device, extra):
                continue
            if device.multi and not self.inventory.fits_capacity(device, slot.sub, self.consumed):
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
        taken = consumption(device, sub)
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
