"""Gangs inside topology domains: NVLink domain, rack, block (Kueue's Topology levels).

A level is a node-label key (``topology.kubernetes.io/rack``); a domain is the set of nodes
sharing a value of it. A PodGroup asks for one of two things:

* ``gpufleet.io/topology-required: <key>`` — every pod of the gang inside one domain of
  that level, or none placed: the job waits with a reason per domain ("rack r1 can hold 3
  of 4 pods; rack r2 can hold 2 of 4 pods");
* ``gpufleet.io/topology-preferred: <key>`` — one domain of that level if any can hold the
  gang; otherwise one domain of the next wider level of the Topology object (rack, then
  block, ...); otherwise anywhere, filling the domains of the preferred level with the most
  free GPUs first so that the gang spans as few of them as possible.

Among the domains that can hold the gang, the fullest wins (the least free GPU that still
fits): whole racks stay free for the next large gang, as best-fit does for nodes. Inside
the domain the placement policy chooses nodes and GPUs as for any pod.

A gang whose subgroups confine their pods (KAI's ``spec.subGroups[].topologyConstraint``,
:class:`~gpufleet.model.workload.SubGroup`) is placed as a tree, widest first: the gang in
a domain of its own level (if any), inside it each subgroup in a domain of its level, and
so on down to the leaves, whose pods are placed as any gang's. At each level the domains
are tried fullest first; a subgroup that fits in none fails its parent's domain, and the
parent's next domain is tried (a preferred level falls back to no domain). Elastic pods of
such a gang go into the domains its running pods of the same subgroups are in. No victims
are sought for such a gang (a victim search places pods one by one): it waits for room.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.framework.status import Code, Status
from gpufleet.model.values import EMPTY, frozen_map
from gpufleet.scheduler.api.outcome import Why, WhyCode

if TYPE_CHECKING:
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.api.transaction import Transaction

from gpufleet.scheduler.placement.domains import (
    MAX_ROOM_DOMAINS,
    SHOWN_DOMAINS,
    Domains,
    Failure,
    PlaceAll,
    Where,
    count_largest,
    domain_order,
    levels_for,
    per_domain_facts,
    restrict,
)


class GangPlacement:
    """One gang's pods, placed all or nothing inside the domains its PodGroup asks for."""

    def __init__(
        self,
        place_all: PlaceAll,
        pods: tuple[PodInfo, ...],
        txn: Transaction,
        held: Exclusion | None,
    ) -> None:
        self.place_all, self.pods, self.txn, self.held = place_all, pods, txn, held
        self.state = txn.state

    def within(self, domains: Domains, d: int, pods: tuple[PodInfo, ...]) -> Failure | None:
        outside = restrict(
            self.held, domains.outside(d), f"node(s) outside {domains.short} {domains.names[d]}"
        )
        return self.place_all(pods, self.txn, outside)

    def first_fitting(
        self, domains: Domains, order: Sequence[int]
    ) -> tuple[int | None, dict[int, int], Failure | None]:
        """The first domain of ``order`` that holds every pod (kept in the transaction),
        how many pods each domain tried could hold, and the last failure."""
        counts: dict[int, int] = {}
        last: Failure | None = None
        for d in order:
            mark = self.txn.mark()
            failure = self.within(domains, d, self.pods)
            if failure is None:
                return d, counts, None
            counts[d] = failure.fitted
            last = failure
            self.txn.rollback(mark)
        return None, counts, last

    def count_untried(self, domains: Domains, counts: dict[int, int]) -> dict[int, int]:
        """How many pods the untried domains with the most free GPU could hold (for the reason)."""

        def fitted(d: int) -> int:
            failure = self.within(domains, d, self.pods)
            return len(self.pods) if failure is None else failure.fitted

        return count_largest(domains, self.txn, counts, fitted, limit=SHOWN_DOMAINS)

    def spread_fewest(self, domains: Domains) -> Failure | None:
        """Each pod in the domain with the most free GPU that holds it, else anywhere."""
        free = domains.free_milli(self.state)
        order = sorted(range(len(domains.names)), key=lambda d: (-int(free[d]), domains.names[d]))
        mark = self.txn.mark()
        for i, pod in enumerate(self.pods):
            last: Failure | None = None
            for d in [*order, None]:
                if d is None:  # finally anywhere, nodes without the label too
                    failure = self.place_all((pod,), self.txn, self.held)
                else:
                    failure = self.within(domains, d, (pod,))
                if failure is None:
                    break
                last = failure
            else:
                self.txn.rollback(mark)
                assert last is not None
                return Failure(pod, last.status, i)
        return None

    def allocate(
        self, group: GroupSpec, topology: Sequence[str], running: Sequence[int] = ()
    ) -> Failure | None:
        """Place the gang under its PodGroup's topology constraint (the module's rules).

        ``running``: nodes where pods of the gang already run; the rest of the gang joins
        their domain (required: only there; preferred: there first).
        """
        plan = levels_for(group, topology)
        assert plan is not None
        kind, levels = plan
        needed = sum(p.demand.total_gpu_milli for p in self.pods)
        facts: dict[str, object] | None = None
        last: Failure | None = None
        for level in levels:
            domains = Domains.of(self.state, level)
            order = domain_order(domains, self.state, needed)
            home = sorted({int(domains.ids[n]) for n in running if domains.ids[n] >= 0})
            if home:
                order = (
                    home if kind == "required" else [*home, *(d for d in order if d not in home)]
                )
            chosen, counts, failure = self.first_fitting(domains, order)
            if chosen is not None:
                return None
            last = failure or last
            if facts is None:
                facts = (
                    per_domain_facts(domains, self.count_untried(domains, counts))
                    if domains.names
                    else {"missing": True}
                )
        if kind == "preferred":
            last = self.spread_fewest(Domains.of(self.state, levels[0]))
            if last is None:
                return None
        status = (
            last.status
            if last is not None
            else Status(Code.UNSCHEDULABLE, total_nodes=self.state.size)
        )
        pod = last.pod if last is not None else self.pods[0]
        found = {"short": "", "counts": (), "more": 0, "missing": False, **(facts or {})}
        found.update(kind=kind, level=levels[0], pods=len(self.pods))
        return Failure(pod, status, 0, Why(WhyCode.TOPOLOGY, frozen_map(found)))


@dataclass(frozen=True, slots=True)
class Branch:
    """One subgroup of a gang as its placement walks it: its level, its own pods (those
    that name it) and its children."""

    name: str
    required: str | None
    preferred: str | None
    pods: tuple[PodInfo, ...]
    children: tuple[Branch, ...]
    names: frozenset[str]
    """The subgroups under it, its own included (the gang's: every one, and ``""``)."""

    @property
    def all_pods(self) -> tuple[PodInfo, ...]:
        return self.pods + tuple(p for c in self.children for p in c.all_pods)


def gang_tree(group: GroupSpec, pods: Sequence[PodInfo]) -> Branch:
    """The subgroups of ``group`` with ``pods`` in them, children in the order the gang
    lists them; the root is the gang, whose own pods are those of no leaf subgroup. Its
    walk (children first, depth first, then a branch's own pods) places pods in the order
    :func:`~gpufleet.scheduler.api.job.by_subgroup` gives the job's core."""
    under, ordered_leaves = group.placement_order()
    leaves = {s.name for s in ordered_leaves}

    def branch(name: str | None, required: str | None, preferred: str | None) -> Branch:
        children = tuple(branch(s.name, s.required, s.preferred) for s in under.get(name, ()))
        if name is None:
            mine = tuple(p for p in pods if p.subgroup not in leaves)
        else:
            mine = tuple(p for p in pods if p.subgroup == name and name in leaves)
        names = frozenset({name or "", *(n for c in children for n in c.names)})
        return Branch(name or "", required, preferred, mine, children, names)

    return branch(None, group.topology_required, group.topology_preferred)


class TreePlacement:
    """A gang placed subgroup by subgroup inside the domains each asks for (module doc)."""

    def __init__(
        self, place_all: PlaceAll, txn: Transaction, placed: Mapping[str, Sequence[int]] = EMPTY
    ) -> None:
        self.place_all, self.txn, self.placed = place_all, txn, placed
        """``placed``: per subgroup (``""``: none), the nodes its running pods are on."""
        self.state = txn.state

    def place(self, branch: Branch, held: Exclusion | None) -> Failure | None:
        """``branch``'s pods (its descendants' too) within ``held``, or the first failure."""
        level = branch.required or branch.preferred
        if level is None:
            return self.inside(branch, held)
        domains = Domains.of(self.state, level)
        pods = branch.all_pods
        needed = sum(p.demand.total_gpu_milli for p in pods)
        counts: dict[int, int] = {}
        last: Failure | None = None
        order = domain_order(domains, self.state, needed)
        home = sorted(
            {
                int(domains.ids[n])
                for name in branch.names
                for n in self.placed.get(name, ())
                if domains.ids[n] >= 0
            }
        )
        if home:  # its pods that run keep the rest in their domain (first, if preferred)
            order = home if branch.required else [*home, *(d for d in order if d not in home)]
        for d in order:
            mark = self.txn.mark()
            scope = restrict(held, domains.outside(d), f"node(s) outside {domains.short}")
            failure = self.inside(branch, scope)
            if failure is None:
                return None
            counts[d] = self.txn.reserved_since(mark)
            last = failure
            self.txn.rollback(mark)
        if branch.required is None:  # preferred: anywhere, when no domain holds it
            return self.inside(branch, held)

        def fitted(d: int) -> int:  # how many of its pods the domain could hold
            mark = self.txn.mark()
            self.inside(
                branch, restrict(held, domains.outside(d), f"node(s) outside {domains.short}")
            )
            return self.txn.reserved_since(mark)

        shown = max(0, SHOWN_DOMAINS - len(counts))
        count_largest(domains, self.txn, counts, fitted, limit=shown, among=home or None)
        facts = per_domain_facts(domains, counts) if domains.names else {"missing": True}
        found = {"short": "", "counts": (), "more": 0, "missing": False, **facts}
        subgroup = f" of subgroup {branch.name}" if branch.name else ""
        found.update(kind="required", level=f"{level}{subgroup}", pods=len(pods))
        status = (
            last.status
            if last is not None
            else Status(Code.UNSCHEDULABLE, total_nodes=self.state.size)
        )
        return Failure(pods[0], status, 0, Why(WhyCode.TOPOLOGY, frozen_map(found)))

    def inside(self, branch: Branch, held: Exclusion | None) -> Failure | None:
        """The children, then the branch's own pods, within ``held``."""
        for child in branch.children:
            failure = self.place(child, held)
            if failure is not None:
                return failure
        return self.place_all(branch.pods, self.txn, held) if branch.pods else None


class DomainTopology:
    """gpufleet's topology rule (:class:`~gpufleet.scheduler.placement.rules.TopologyRule`): the
    required and preferred levels of this module, over the cluster's ``levels`` (its
    Topology object, narrowest first)."""

    def __init__(self, levels: tuple[str, ...]) -> None:
        self.levels = levels

    def constrains(self, group: GroupSpec | None) -> bool:
        return group is not None and (
            levels_for(group, self.levels) is not None or group.sub_constrained
        )

    def place_gang(
        self,
        place_all: PlaceAll,
        group: GroupSpec,
        pods: tuple[PodInfo, ...],
        txn: Transaction,
        *,
        held: Exclusion | None,
        running: Sequence[int],
        placed: Mapping[str, Sequence[int]] = EMPTY,
    ) -> Failure | None:
        if group.sub_constrained:
            scope = self.extras_scope(txn.state, group, running, held)
            tree = gang_tree(group, pods)
            return TreePlacement(place_all, txn, placed).place(tree, scope)
        return GangPlacement(place_all, pods, txn, held).allocate(group, self.levels, running)

    def room_scopes(
        self, state: ClusterState, group: GroupSpec | None, held: Exclusion | None
    ) -> list[tuple[Where, Exclusion | None]]:
        """Inside each of the largest domains of the gang's first level (by GPUs), then —
        if the level is only preferred — anywhere; anywhere for other jobs. Nowhere for a
        gang whose subgroups are confined to domains: the victim search places pods one by
        one and cannot keep a subgroup together, so such a gang waits for room instead."""
        if group is not None and group.sub_constrained:
            return []
        plan = levels_for(group, self.levels) if group is not None else None
        if plan is None:
            return [((None, False), held)]
        kind, levels = plan
        domains = Domains.of(state, levels[0])
        inside = domains.ids >= 0
        capacity = np.bincount(
            domains.ids[inside], weights=state.gpu_count[inside], minlength=len(domains.names)
        )
        best = sorted(range(len(domains.names)), key=lambda d: (-capacity[d], domains.names[d]))
        out: list[tuple[Where, Exclusion | None]] = [
            (
                ((domains.short, domains.label(d)), False),
                restrict(held, domains.outside(d), f"node(s) outside {domains.short}"),
            )
            for d in best[:MAX_ROOM_DOMAINS]
        ]
        return [*out, ((None, True), held)] if kind == "preferred" else out

    def extras_scope(
        self,
        state: ClusterState,
        group: GroupSpec | None,
        running: Sequence[int],
        held: Exclusion | None,
        *,
        subgroup: str = "",
        placed: Mapping[str, Sequence[int]] = EMPTY,
    ) -> Exclusion | None:
        """The domain of the gang's running pods, if the gang has to keep one; for a pod of
        ``subgroup``, also the domain of each subgroup above it (itself included) that
        requires one and whose pods run somewhere (``placed``: nodes per subgroup)."""
        plan = levels_for(group, self.levels) if group is not None else None
        if plan is not None and plan[0] == "required" and running:
            domains = Domains.of(state, plan[1][0])
            domain = int(domains.ids[running[0]])
            held = restrict(
                held, domains.outside(domain), f"node(s) outside the gang's {domains.short}"
            )
        if group is None or not group.sub_constrained:
            return held
        subs = {s.name: s for s in group.subgroups}
        at = subs.get(subgroup)
        while at is not None:
            below = [n for name in _subtree(group, at.name) for n in placed.get(name, ())]
            if at.required and below:
                domains = Domains.of(state, at.required)
                held = restrict(
                    held,
                    domains.outside(int(domains.ids[below[0]])),
                    f"node(s) outside subgroup {at.name}'s {domains.short}",
                )
            at = subs.get(at.parent) if at.parent is not None else None
        return held


def _subtree(group: GroupSpec, name: str) -> list[str]:
    """``name`` and every subgroup below it."""
    out = [name]
    for sub in group.subgroups:  # parents come before children
        if sub.parent in out:
            out.append(sub.name)
    return out
