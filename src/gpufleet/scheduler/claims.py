"""The cycle's book of ResourceClaims: which are allocated, to which devices, for whom.

The cycle asks it where a pod's claims can be allocated, commits them with the pod's
placement, gives a victim's claims back when the victim search evicts it (only claims no
other running pod shares: a claim shared by co-victims goes with the last of them) and takes
them back when the victim is reprieved. Every change registers its undo with the
transaction, so a rolled-back gang or victim search leaves the book as it found it.

``device_match`` (a CEL selector) is added to every open claim while a gang whose devices
must share one attribute value is placed (PodGroup ``gpufleet.io/device-match-attribute``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.dra.allocator import Allocator, Unsatisfiable
from gpufleet.model.devices import Allocation, Claim, DeviceResult
from gpufleet.scheduler.outcome import ClaimStatus

if TYPE_CHECKING:
    from gpufleet.model.cluster import BoolArray
    from gpufleet.model.workload import PodInfo, Snapshot
    from gpufleet.scheduler.transaction import Running, Transaction

Results = list[list[DeviceResult]]


class ClaimBook:
    def __init__(self, snapshot: Snapshot) -> None:
        self.claims = {c.key: c for c in snapshot.claims}
        self.classes = {c.name: c for c in snapshot.device_classes}
        self.initial = dict(snapshot.allocations)
        self.allocations: dict[str, Allocation] = dict(snapshot.allocations)
        self.allocator = Allocator(snapshot.pools, self.classes) if self.claims else None
        if self.allocator is not None:
            self.allocator.commit([a.results for a in self.allocations.values()])
        self.pod_claims: dict[str, dict[str, tuple[DeviceResult, ...]]] = {}
        """Per pod bound in this cycle, its claims' devices (for the binding)."""
        self.released: dict[str, dict[str, Allocation]] = {}
        """Claims a victim search gave back, per victim (to reprieve them)."""
        self.evicting: set[str] = set()
        """Pods a victim search has evicted so far (a claim they share goes with the last)."""
        self.device_match: str | None = None
        """A selector every device must meet while a device-matched gang is placed."""

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
        self.allocator.commit(results)
        for claim, claim_results in zip(open_claims, results, strict=True):
            local = any(
                self.allocator.devices[r.driver, r.pool, r.device].node is not None
                for r in claim_results
            )
            self.allocations[claim.key] = Allocation(tuple(claim_results), node if local else None)
        self.pod_claims[pod.key] = {k: self.allocations[k].results for k in pod.claims}

        def undo() -> None:
            assert self.allocator is not None
            self.allocator.release(results)
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
        self.allocator.release([a.results for a in freed.values()])

        def undo() -> None:
            assert self.allocator is not None
            self.allocator.commit([a.results for a in freed.values()])
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
            self.allocator.commit([allocation.results])
            self.allocations[key] = allocation

            def undo(
                key: str = key, holder: str = holder, allocation: Allocation = allocation
            ) -> None:
                assert self.allocator is not None
                self.allocator.release([allocation.results])
                self.allocations.pop(key, None)
                self.released.setdefault(holder, {})[key] = allocation

            txn.on_rollback(undo)

    def match_values(self, attribute: str) -> list[object]:
        """Values of ``attribute`` among the cluster's devices, fewest free devices first."""
        assert self.allocator is not None
        free: dict[object, int] = {}
        for device in self.allocator.devices.values():
            value = device.attribute(attribute)
            if value is not None:
                free[value] = free.get(value, 0) + (device.key not in self.allocator.in_use)
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
