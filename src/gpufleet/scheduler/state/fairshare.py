"""Fair shares of hierarchical queues, and the order in which queues are served.

For each resource separately (GPUs, CPU, memory), a parent's share is divided among its
children (the cluster's capacity among the top-level queues):

1. each child first gets its quota, up to what it asks for (its *demand*: what it runs plus
   what waits) — quotas are guaranteed; if the quotas asked for exceed the parent's share,
   they are scaled down in proportion;
2. the rest is divided in proportion to ``overQuotaWeight`` among the children that still
   ask for more, never beyond a child's demand or its limit, repeating until nothing is
   left or nobody asks (water-filling).

A queue's standing is its *dominant share ratio*: ``max_r allocated_r / fair_r`` over the
resources (Dominant Resource Fairness); a resource it uses without any fair share counts as
infinitely over. Queues are served in order of their path from the root: at each level the
higher queue ``priority`` first, then the lower ratio — so a team furthest below its fair
share is served first, and siblings compete before cousins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.workload import vector

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.workload import QueueSpec

EPS = 1e-9


@dataclass(frozen=True, slots=True)
class QueueTree:
    """Queues by name, their children, and each queue's path from the root."""

    queues: Mapping[str, QueueSpec]
    children: Mapping[str | None, tuple[str, ...]]
    paths: Mapping[str, tuple[str, ...]]
    terms: Mapping[str | None, tuple[FloatArray, FloatArray, FloatArray]]
    """Per parent: its children's quota, limit and weight, stacked ``(k, R)``."""

    @staticmethod
    def of(queues: Sequence[QueueSpec]) -> QueueTree:
        by_name = {q.name: q for q in queues}
        children: dict[str | None, list[str]] = {}
        for q in sorted(queues, key=lambda q: q.name):
            children.setdefault(q.parent, []).append(q.name)
        paths: dict[str, tuple[str, ...]] = {}
        for name in by_name:
            path = [name]
            while (parent := by_name[path[-1]].parent) is not None:
                path.append(parent)
            paths[name] = tuple(reversed(path))
        terms = {
            parent: (
                np.array([by_name[k].quota for k in kids]),
                np.array([by_name[k].limit for k in kids]),
                np.array([by_name[k].weight for k in kids]),
            )
            for parent, kids in children.items()
        }
        return QueueTree(by_name, {k: tuple(v) for k, v in children.items()}, paths, terms)

    def subtree_sum(
        self, own: Mapping[str, FloatArray], zero: FloatArray | None = None
    ) -> dict[str, FloatArray]:
        """Per queue: ``own`` summed over the queue and all its descendants (``zero`` is
        an empty amount, by default a resource vector)."""
        total = {name: vector() if zero is None else zero.copy() for name in self.queues}
        for name, value in own.items():
            for ancestor in self.paths.get(name, ()):
                total[ancestor] += value
        return total


def divide(
    available: FloatArray,
    quota: FloatArray,
    limit: FloatArray,
    weight: FloatArray,
    demand: FloatArray,
) -> FloatArray:
    """Shares ``(k, R)`` of ``available`` ``(R,)`` among ``k`` siblings (the module's rule)."""
    cap = np.minimum(limit, demand)
    share = np.minimum(quota, cap)
    if (cap.sum(axis=0) <= available).all():
        # Enough for every cap: a queue with weight gets it; one without keeps its quota.
        return np.asarray(np.where(weight > 0, cap, share), dtype=np.float64)
    asked = share.sum(axis=0)
    scale = np.where(asked > available, available / np.maximum(asked, EPS), 1.0)
    share = share * scale
    remaining = np.maximum(available - share.sum(axis=0), 0.0)
    for _ in range(len(share) + 1):
        hungry = (share < cap - EPS) & (weight > 0)
        open_weight = np.where(hungry, weight, 0.0)
        total_weight = open_weight.sum(axis=0)
        active = (remaining > EPS) & (total_weight > 0)
        if not active.any():
            break
        offer = np.where(active, remaining / np.where(total_weight > 0, total_weight, 1.0), 0.0)
        give = np.minimum(open_weight * offer, cap - share)
        share = share + give
        remaining = remaining - give.sum(axis=0)
    return np.asarray(share, dtype=np.float64)


def fair_shares(
    tree: QueueTree,
    demand: Mapping[str, FloatArray],
    capacity: FloatArray,
    resource: int | None = None,
) -> dict[str, FloatArray]:
    """Fair share of every queue, given each queue's own ``demand`` and the cluster.

    With ``resource``, the amounts are of that one resource, in as many columns as there
    are (each an independent division: one per moment of a replay, for instance)."""
    subtree_demand = tree.subtree_sum(
        demand, None if resource is None else np.zeros_like(capacity, dtype=np.float64)
    )
    shares: dict[str, FloatArray] = {}

    def visit(parent: str | None, available: FloatArray) -> None:
        kids = tree.children.get(parent, ())
        if not kids:
            return
        own = demand.get(parent) if parent is not None else None
        terms = tree.terms[parent]
        if resource is not None:
            terms = (
                terms[0][:, resource, None],
                terms[1][:, resource, None],
                terms[2][:, resource, None],
            )
        split = divide(
            available if own is None else np.maximum(available - own, 0.0),
            *terms,
            np.array([subtree_demand[k] for k in kids]),
        )
        for kid, share in zip(kids, split, strict=True):
            shares[kid] = share
            if kid in tree.children:
                visit(kid, share)

    visit(None, capacity)
    return shares


def share_ratio(allocated: FloatArray, fair: FloatArray) -> float:
    """Dominant share ratio: ``max_r allocated_r / fair_r`` (0 when nothing is allocated)."""
    ratio = 0.0
    for used, share in zip(allocated.tolist(), fair.tolist(), strict=True):
        if used > EPS:
            ratio = max(ratio, used / share if share > EPS else math.inf)
    return ratio


def below_fair_share(allocated: FloatArray, fair: FloatArray) -> bool:
    """Whether ``allocated`` is below ``fair`` (by the dominant share ratio).

    A queue whose fair share is nothing is never below it, even with nothing allocated.
    """
    if not (fair > EPS).any():
        return False
    return share_ratio(allocated, fair) < 1 - EPS
