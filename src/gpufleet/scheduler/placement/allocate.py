"""The placer: a job's core placed all or nothing, and where its elastic pods may go.

The core — ``minMember`` minus the pods already running — goes in one
:class:`~gpufleet.scheduler.api.transaction.Transaction`: every pod through the profile's filters,
scores and GPU choice (:func:`~gpufleet.scheduler.placement.place.place`), a gang with a topology
annotation through the cycle's topology rule (``rules.py``; gpufleet's is
:class:`~gpufleet.scheduler.placement.topology.DomainTopology`), pods with
ResourceClaims only where the claims can be allocated (:class:`~gpufleet.scheduler.state.claims.
ClaimBook`), and a gang whose devices must share one attribute value tried value by value
(none of them, if no device has the attribute).
Before trying, a gang of one plain spec is counted (:class:`~gpufleet.scheduler.placement.fit.Fit`):
when the cluster has fewer slots than pods, it fails without a placement. On failure the
first pod that did not fit, and why, comes back; the caller rolls the transaction back.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import TYPE_CHECKING

from gpufleet.dra.allocator import Unsatisfiable
from gpufleet.framework.status import Code, Reason, Status
from gpufleet.scheduler.api.outcome import WhyCode, why
from gpufleet.scheduler.placement.domains import Failure, restrict
from gpufleet.scheduler.placement.fit import Fit
from gpufleet.scheduler.placement.place import place, share_over

if TYPE_CHECKING:
    from collections.abc import Callable

    from gpufleet.framework.runtime import Exclusion, Framework
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Transaction
    from gpufleet.scheduler.placement.rules import TopologyRule
    from gpufleet.scheduler.state.ledger import Ledger

CLAIMS_REASON = "node(s) cannot allocate the pod's ResourceClaims"


class Placer:
    """Placement in one cycle over ``ledger`` with the policy's ``framework`` and the
    cycle's topology rule; ``caps`` are the share caps of the job being placed. The cycle
    and the victim search both place through it."""

    def __init__(
        self,
        ledger: Ledger,
        framework: Callable[[], Framework],
        resource_filters: tuple[str, ...],
        topology: TopologyRule,
    ) -> None:
        """``framework`` builds the policy's plugins when a pod is first placed (a cycle
        with nothing to place needs none); ``resource_filters`` as in :class:`Fit`."""
        self.ledger, self.topology = ledger, topology
        self._build, self._resource_filters = framework, resource_filters
        self.caps: dict[str, int] = {}
        """The most milli-GPU each memory-sized share of the job may take (admission)."""

    @cached_property
    def framework(self) -> Framework:
        framework = self._build()
        framework.forget_scores()  # a cycle of its own: the scores of the last one may be stale
        return framework

    @cached_property
    def fit(self) -> Fit:
        """Slot counts over the ledger's state, with the profile's resource filters."""
        state = self.ledger.state
        return Fit(self.framework, state, self.ledger.empty, self._resource_filters)

    def pods(
        self, pods: tuple[PodInfo, ...], txn: Transaction, held: Exclusion | None
    ) -> Failure | None:
        """Place ``pods`` in ``txn`` off ``held`` nodes; on failure the first that did not fit."""
        state, book = self.ledger.state, self.ledger.book
        for i, pod in enumerate(pods):
            limit = held
            if pod.claims:
                allowed, detail = book.nodes(pod, state.names)
                if not allowed.any():
                    status = Status(Code.UNSCHEDULABLE, total_nodes=state.size)
                    return Failure(pod, status, i, why(WhyCode.CLAIMS, pod=pod.key, detail=detail))
                limit = restrict(held, ~allowed, CLAIMS_REASON)
            outcome = place(self.framework, state, pod.spec, self.capped(pod, limit))
            if isinstance(outcome, Status):
                return Failure(pod, outcome, i)
            txn.reserve(outcome.node, outcome.pod, outcome.gpus)
            if pod.claims:
                book.take(pod, state.names[outcome.node], txn)
        return None

    def job(self, job: Job, txn: Transaction, held: Exclusion | None) -> Failure | None:
        """Place the job's core; a gang whose devices must share an attribute value is tried
        value by value, the value with the fewest free devices first (the fullest that fits)."""
        book = self.ledger.book
        group = self.ledger.groups.get(job.key)
        if group is None or group.device_match is None or book.allocator is None:
            return self._core(job, txn, held)
        values = book.match_values(group.device_match)
        if not values:  # a constraint no device can meet (DRA's matchAttribute alike)
            pod, size = job.core[0], self.ledger.state.size
            detail = f"no device has the attribute {group.device_match} the gang's devices share"
            reason = why(WhyCode.CLAIMS, pod=pod.key, detail=detail)
            return Failure(pod, Status(Code.UNSCHEDULABLE, total_nodes=size), 0, reason)
        last: Failure | None = None
        try:
            for value in values:
                book.device_match = _equals_selector(group.device_match, value)
                mark = txn.mark()
                failure = self._core(job, txn, held)
                if failure is None:
                    return None
                txn.rollback(mark)
                last = failure
        finally:
            book.device_match = None
        return last

    def _core(self, job: Job, txn: Transaction, held: Exclusion | None) -> Failure | None:
        core, state = job.core, self.ledger.state
        if len(core) > 1 and (slots := self.fit.slots(core, None, held)) < len(core):
            # The cluster cannot take the gang, whatever the domain: say so without trying
            # (a saturated cluster has many such gangs waiting) — with the filters' own
            # reasons where no node can take even one of its pods.
            fitted = int(slots)
            if not fitted:
                spec = self.framework.prepare(core[0].spec)
                result = self.framework.run_filters(state, spec, held)
                if not result.nodes.size:
                    return Failure(core[0], result.status, 0)
            full = "node(s) had no room left for another pod of the gang"
            status = Status(
                Code.UNSCHEDULABLE, (Reason("GangFit", full, state.size),), "GangFit", state.size
            )
            return Failure(core[fitted], status, fitted)
        group = self.ledger.groups.get(job.key)
        if group is not None and self.topology.constrains(group):
            running = self.gang_nodes(job.key)
            placed = self.subgroup_nodes(job.key) if group.subgroups else {}
            return self.topology.place_gang(
                self.pods, group, core, txn, held=held, running=running, placed=placed
            )
        return self.pods(core, txn, held)

    def for_claims(self, pod: PodInfo, held: Exclusion | None) -> Exclusion | None:
        """``held``, plus, for a pod with claims, the nodes that cannot allocate them, and
        the nodes where a capped share would be over its cap."""
        if not pod.claims:
            return self.capped(pod, held)
        allowed, _ = self.ledger.book.nodes(pod, self.ledger.state.names)
        return self.capped(pod, restrict(held, ~allowed, CLAIMS_REASON))

    def capped(self, pod: PodInfo, held: Exclusion | None) -> Exclusion | None:
        """``held``, plus the nodes where ``pod``'s share of GPU memory would be over its cap."""
        cap = self.caps.get(pod.key)
        if cap is None:
            return held
        over = share_over(self.ledger.state, self.framework.prepare(pod.spec), cap)
        if not over.any():
            return held
        return restrict(
            held,
            over,
            f"node(s) had GPUs on which the Pod's share of GPU memory is over the {cap}m "
            "its queue's limit or quota leaves it",
        )

    def claims_fit(self, pod: PodInfo, node: int) -> bool:
        """Whether ``pod``'s claims can be allocated on ``node`` now."""
        book, names = self.ledger.book, self.ledger.state.names
        return not isinstance(book.try_on(pod, names[node]), Unsatisfiable)

    def gang_nodes(self, gang: str) -> list[int]:
        """Nodes where the gang's pods run (at the snapshot or bound in this cycle)."""
        running = self.ledger.running
        return sorted({running[k].node for k in self.ledger.gang_running.get(gang, ())})

    def extras_held(self, job: Job, held: Exclusion | None, pod: PodInfo) -> Exclusion | None:
        """Where an elastic pod of the job may go: its gang's topology domain, and its
        subgroups' (if it has to keep them)."""
        group = self.ledger.groups.get(job.key)
        nodes = self.gang_nodes(job.key)
        if group is None or not group.sub_constrained:
            return self.topology.extras_scope(self.ledger.state, group, nodes, held)
        placed = self.subgroup_nodes(job.key)
        return self.topology.extras_scope(
            self.ledger.state, group, nodes, held, subgroup=pod.subgroup, placed=placed
        )

    def subgroup_nodes(self, gang: str) -> dict[str, list[int]]:
        """Per subgroup of the gang (``""``: none), the nodes its running pods are on."""
        placed: dict[str, list[int]] = {}
        running = self.ledger.running
        for key in self.ledger.gang_running.get(gang, ()):
            placed.setdefault(running[key].pod.subgroup, []).append(running[key].node)
        return placed


def _equals_selector(attribute: str, value: object) -> str:
    """CEL requiring ``attribute`` (``domain/name``) to equal ``value``."""
    domain, _, name = attribute.rpartition("/")
    literal = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
    # Devices of other drivers (a NIC claim of the same gang) are not constrained; a device
    # of the driver without the attribute does not match (rather than fail the selector).
    value = f'device.attributes["{domain}"].{name}'
    return f'device.driver != "{domain}" || (has({value}) && {value} == {literal})'
