"""What the cluster cache holds on a cycle's word until events confirm it.

kube-scheduler's cache *assumes* a binding the moment a cycle decides it, so that the next
cycle does not give the same GPUs away while the bind is on its way. The cache
(:mod:`gpufleet.scheduler.cache`) keeps here, per assumed pod, its deadline and where the
cycle put it (so that a rebuilt ledger binds it there again); per evicted pod, the assumed
bindings of the plan that evicted it (dropped with the plan if the eviction is refused);
and the claim allocations cycles made that no ResourceClaim event shows yet.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gpufleet.model.devices import Allocation
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.ledger import Ledger
    from gpufleet.scheduler.outcome import CycleResult


class Assumptions:
    """Deadlines and placements of assumed pods, plans of evictions, carried claims."""

    def __init__(self, ttl_s: float) -> None:
        self.ttl_s = ttl_s
        self.deadline: dict[str, float] = {}
        """Pods a cycle bound that no event confirmed yet: their deadline."""
        self.placed: dict[str, tuple[PodInfo, str, tuple[int, ...]]] = {}
        """Assumed pods as the cycle placed them: the pod (its start), node, GPUs."""
        self.plans: dict[str, tuple[str, ...]] = {}
        """Per evicted pod: the assumed bindings of the plan that evicted it."""
        self.carried: dict[str, Allocation] = {}
        """Claim allocations cycles decided that no ResourceClaim event shows yet."""

    def __contains__(self, key: str) -> bool:
        return key in self.deadline

    def record(
        self, result: CycleResult, now: float, ledger: Ledger, gang_of: Callable[[str], str]
    ) -> None:
        """``result``'s bindings (already held on ``ledger``) are assumed from ``now``; each
        eviction remembers the bindings of its plan (its job's pods, and moved pods)."""
        moved = {e.pod for e in result.evictions if e.action == "consolidate"}
        for eviction in result.evictions:
            self.settle(eviction.pod)
            self.plans[eviction.pod] = tuple(
                b.pod for b in result.bindings if b.pod in moved or gang_of(b.pod) == eviction.for_
            )
        names, book = ledger.state.names, ledger.book
        for binding in result.bindings:
            self.deadline[binding.pod] = now + self.ttl_s
            running = ledger.running.get(binding.pod)
            if running is None:
                continue
            pod = running.pod
            self.placed[binding.pod] = (pod, names[running.node], running.gpus)
            for claim in pod.claims:
                if claim in book.allocations and claim not in self.carried:
                    self.carried[claim] = book.allocations[claim]

    def settle(self, key: str) -> None:
        """Pod ``key`` is assumed no more (confirmed, forgotten, evicted or deleted)."""
        self.deadline.pop(key, None)
        self.placed.pop(key, None)

    def late(self, now: float) -> list[str]:
        """The assumed pods past their deadline, by key."""
        return sorted(k for k, d in self.deadline.items() if d <= now)

    def bound(self) -> list[PodInfo]:
        """The assumed pods where they were placed (what a rebuilt ledger binds)."""
        placed = (self.placed[k] for k in sorted(self.deadline) if k in self.placed)
        return [replace(pod, node=node, gpus=gpus) for pod, node, gpus in placed]

    def allocations(self, shown: Mapping[str, Allocation]) -> dict[str, Allocation]:
        """``shown`` (the claims' objects), with the carried allocations under it."""
        return {**self.carried, **shown}
