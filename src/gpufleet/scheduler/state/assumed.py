"""What the cluster cache holds on a cycle's word until events confirm it.

kube-scheduler's cache *assumes* a binding the moment a cycle decides it, so that the next
cycle does not give the same GPUs away while the bind is on its way. The cache
(:mod:`gpufleet.scheduler.state.cache`) keeps here, per assumed pod, its deadline and where the
cycle put it (so that a rebuilt ledger binds it there again); per evicted pod, the assumed
bindings of the plan that evicted it (dropped with the plan if the eviction is refused);
and the claim allocations cycles made that no ResourceClaim event shows yet
(:class:`Assumptions`); and the cache's operations on them — assume, forget, keep, expire
(:class:`AssumedBindings`, which the cache holds).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from gpufleet.model.devices import DeviceAllocation
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.state.accounting import Accounting
    from gpufleet.scheduler.state.ledger import Ledger
    from gpufleet.scheduler.state.pending import PendingPods


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
        self.carried: dict[str, DeviceAllocation] = {}
        """Claim allocations cycles decided that no ResourceClaim event shows yet."""

    def __contains__(self, key: str) -> bool:
        return key in self.deadline

    def record(
        self,
        result: CycleResult,
        now: float,
        ledger: Ledger,
        gang_of: Callable[[str], str],
        node_of: Callable[[str], str | None],
    ) -> None:
        """``result``'s bindings (already held on ``ledger``) are assumed from ``now``; each
        eviction remembers the bindings that count on it: its plan (its job's pods, and
        moved pods) and any binding pipelined onto its node — a later job of the cycle may
        have been placed on the capacity it frees."""
        moved = {e.pod for e in result.evictions if e.moved}
        for eviction in result.evictions:
            self.settle(eviction.pod)
            node = node_of(eviction.pod)
            self.plans[eviction.pod] = tuple(
                b.pod
                for b in result.bindings
                if b.pod in moved
                or gang_of(b.pod) == eviction.for_
                or (b.pipelined and b.node == node)
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

    def allocations(self, shown: Mapping[str, DeviceAllocation]) -> dict[str, DeviceAllocation]:
        """``shown`` (the claims' objects), with the carried allocations under it."""
        return {**self.carried, **shown}


class AssumedBindings:
    """The cluster cache's binding operations, as kube-scheduler's cache has them: assume
    a cycle's result, forget a bind that failed or timed out, keep a victim whose eviction
    was refused — over the cache's ``accounting`` of what runs (its ``ledger`` reads or
    rebuilds the ledger), its ``pods``, and its ``pending`` index, told of each pod that
    starts or stops counting; ``leaving`` is the set of terminating pods it shares with the
    accounting."""

    def __init__(
        self,
        ttl_s: float,
        accounting: Accounting,
        pods: Mapping[str, PodInfo],
        pending: PendingPods,
        ledger: Callable[[], Ledger],
        *,
        leaving: set[str],
    ) -> None:
        self.assumptions = Assumptions(ttl_s)
        self.accounting, self.pods, self.pending, self.ledger = accounting, pods, pending, ledger
        self.evicted: set[str] = set()
        """Pods a cycle evicted that are still in the cache (until their deletion)."""
        self.leaving = leaving
        """Evicted pods whose eviction the API server accepted: they hold their capacity
        until their deletion is seen (as kube-scheduler counts terminating pods), and are
        no victims meanwhile (:meth:`terminating`)."""

    @property
    def assumed(self) -> Mapping[str, float]:
        """Pods a cycle bound that no event confirmed yet, with their deadlines."""
        return self.assumptions.deadline

    def touch(self, key: str) -> None:
        """Pod ``key`` started or stopped counting: its gang's pending job changes (which
        pods wait, how many of the gang run)."""
        pod = self.pods.get(key)
        if pod is not None:
            self.pending.touch(pod.gang)

    def assume(self, result: CycleResult, now: float) -> None:
        """Hold what a session's ``result`` decided until events confirm it: its bindings
        count as running (with a deadline of the cache's ``assumed_ttl_s`` from ``now``),
        its evictions as gone. A session that assumes calls this itself."""
        ledger = self.ledger()
        pods = self.pods

        def gang_of(key: str) -> str:
            pod = pods.get(key)
            return key if pod is None else pod.gang

        def node_of(key: str) -> str | None:
            pod = pods.get(key)
            return None if pod is None else pod.node

        self.assumptions.record(result, now, ledger, gang_of, node_of)
        for eviction in result.evictions:
            self.evicted.add(eviction.pod)
            self.touch(eviction.pod)
        for binding in result.bindings:
            self.touch(binding.pod)
            self.evicted.discard(binding.pod)
            running = ledger.running.get(binding.pod)
            if running is not None and ledger.evictable(running.pod):
                self.accounting.joining[binding.pod] = running  # a victim of later cycles

    def forget(self, *keys: str) -> None:
        """The binds of assumed pods ``keys`` failed: give their capacity back; each is
        pending again, or runs where its object says (a pod consolidation moved, whose
        controller makes it anew). All are taken off their assumed places before any is
        counted again where it was: one may have been assumed onto GPUs another freed."""
        ledger = self.accounting.ledger
        back = []
        for key in keys:
            if key not in self.assumed:
                continue
            self.assumptions.settle(key)
            self.touch(key)
            if ledger is not None and key in ledger.running:
                self.accounting.stop(key)
                back.append(key)
        for key in back:
            pod = self.pods.get(key)
            if pod is not None and pod.bound:
                self.accounting.start(pod)

    def keep(self, key: str) -> None:
        """The eviction of ``key`` was refused (a disruption budget): the plan that evicted
        it is dropped — its assumed bindings forgotten — and the pod counts again."""
        if key not in self.evicted:
            return
        for planned in self.assumptions.plans.pop(key, ()):
            self.forget(planned)
        self.evicted.discard(key)
        self._count_again(key)

    def terminating(self, key: str) -> None:
        """The eviction of ``key`` was accepted: until the pod's deletion is seen it holds
        its capacity again — a live pod terminates for a while, and its GPUs are not free
        before it is gone (kube-scheduler counts terminating pods) — and it is no victim
        of later cycles. The replay, whose evictions are deletions, never calls this."""
        if key not in self.evicted:
            return
        self.evicted.discard(key)
        self.leaving.add(key)
        self._count_again(key)

    def _count_again(self, key: str) -> None:
        self.touch(key)
        pod = self.pods.get(key)
        ledger = self.accounting.ledger
        if ledger is not None and pod is not None and pod.bound and key not in ledger.running:
            self.accounting.start(pod)

    def expire(self, now: float) -> list[str]:
        """Forget the assumed pods past their deadline (their bind was never seen)."""
        late = self.assumptions.late(now)
        for key in late:
            self.forget(key)
        return late
