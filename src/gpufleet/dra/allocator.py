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

Here: which devices a request selects, and the combinations of ``firstAvailable``
alternatives to try. What is taken is the bookkeeping of the
:class:`~gpufleet.dra.inventory.Inventory` the allocator owns; the search over one
combination is :mod:`gpufleet.dra.search`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from gpufleet.dra.cel import SelectorError, compile_selector
from gpufleet.dra.inventory import Inventory
from gpufleet.dra.search import Search, Slot, Unsatisfiable
from gpufleet.model.devices import Claim, Device, DeviceClass, DeviceResult, Pool, Subrequest

__all__ = ["Allocator", "Unsatisfiable"]


class Allocator:
    """Which devices of the cluster a request selects, and the allocation of a set of claims
    on one node; what is taken is its :attr:`inventory`'s, which its owner commits to and
    releases from."""

    def __init__(self, pools: Sequence[Pool], classes: Mapping[str, DeviceClass]) -> None:
        self.inventory = Inventory(pools)
        """The devices, indexed per node, and what is already allocated of them."""
        self.classes = classes
        self._matching: dict[tuple[object, ...], list[Device]] = {}

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
        for device in self.inventory.devices_for(node):
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
        if isinstance(result, Unsatisfiable) and self.inventory.invalid:
            # An invalid pool is an error only when nothing else satisfies the claim.
            return Unsatisfiable(f"{result.reason}; {'; '.join(self.inventory.invalid)}")
        return result

    def _allocate(
        self, claims: Sequence[Claim], node: str
    ) -> list[list[DeviceResult]] | Unsatisfiable:
        last = Unsatisfiable("no request can be satisfied")
        for choice in self._alternatives(claims, node):
            if isinstance(choice, Unsatisfiable):
                last = choice
                continue
            found = Search(self.inventory, choice).run()
            if isinstance(found, Unsatisfiable):
                last = found
                continue
            # One list per claim, in the claims' order; a claim of no requests (its
            # spec.devices empty, as the API allows) gets no device.
            got = dict(zip(dict.fromkeys(s.claim.key for s in choice), found, strict=True))
            return [got.get(claim.key, []) for claim in claims]
        return last

    def _alternatives(
        self, claims: Sequence[Claim], node: str
    ) -> Iterator[list[Slot] | Unsatisfiable]:
        """Slot lists in firstAvailable preference order (the first alternative first)."""
        inventory = self.inventory
        per_request: list[list[Slot]] = []
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
                        or (
                            inventory.fits_capacity(d, sub)
                            if d.multi
                            else d.key not in inventory.in_use
                        )
                    ]
                    if sub.all_devices:
                        if len(available) < len(found) or not found:
                            continue  # All needs every matching device, and at least one
                        count = len(found)
                    else:
                        count = sub.count
                    options.append(Slot(claim, request.name, sub, name, available, count))
                if not options:
                    yield Unsatisfiable(f"claim {claim.key} request {request.name}: no devices")
                    return
                per_request.append(options)
        # Prefer the first alternative of every request; then vary the last requests first.
        yield from _product(per_request)


def _product(options: list[list[Slot]]) -> Iterator[list[Slot]]:
    if not options:
        yield []
        return
    for first in options[0]:
        for rest in _product(options[1:]):
            yield [first, *rest]
