"""Topology domains and what placing a gang in them reads: the domains of one level, the
order they are tried in, the reason a gang did not fit, and the exclusion of nodes outside
a domain (``topology.py`` places gangs in them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.framework.status import Status
from gpufleet.scheduler.api.outcome import Why

if TYPE_CHECKING:
    from gpufleet.model.arrays import BoolArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.api.transaction import Transaction

Where = tuple[tuple[str, str] | None, bool]
"""A search's confinement, as its notes say it: the topology domain (level short name,
label), and whether it is the search anywhere after a preferred level's domains."""

MAX_ROOM_DOMAINS = 4
"""Topology domains (largest first) in which victims are sought for a constrained gang."""

PlaceAll = Callable[[tuple["PodInfo", ...], "Transaction", Exclusion | None], "Failure | None"]
"""The cycle's all-or-nothing placement of pods within the nodes ``Exclusion`` leaves."""

REQUIRED = "gpufleet.io/topology-required"
PREFERRED = "gpufleet.io/topology-preferred"


@dataclass(frozen=True, slots=True)
class Domains:
    """The domains of one level: per node its domain id (-1: the node lacks the label)."""

    level: str
    ids: IntArray
    names: tuple[str, ...]

    @staticmethod
    def of(state: ClusterState, level: str) -> Domains:
        ids, names = state.node_labels.label_ids(level)
        return Domains(level, ids, names)

    @property
    def short(self) -> str:
        """The level as people say it: ``rack`` for ``topology.kubernetes.io/rack``."""
        return self.level.rsplit("/", 1)[-1]

    def label(self, domain: int) -> str:
        """The domain's label value as people read it (``""`` for an empty value)."""
        return self.names[domain] or '""'

    def free_milli(self, state: ClusterState) -> IntArray:
        inside = self.ids >= 0
        return np.bincount(
            self.ids[inside], weights=state.gpu_idle[inside], minlength=len(self.names)
        ).astype(np.int64)

    def outside(self, domain: int) -> BoolArray:
        return np.asarray(self.ids != domain)


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a job's core could not be placed: the first pod that did not fit, and why."""

    pod: PodInfo
    status: Status
    fitted: int
    why: Why | None = None
    """A reason that replaces the pod's own (the claims, the topology domains)."""


def levels_for(group: GroupSpec, topology: Sequence[str]) -> tuple[str, tuple[str, ...]] | None:
    """("required" | "preferred", the levels to try in order), or None without a constraint."""
    if group.topology_required:
        return "required", (group.topology_required,)
    if group.topology_preferred:
        key = group.topology_preferred
        wider = tuple(reversed(topology[: topology.index(key)])) if key in topology else ()
        return "preferred", (key, *wider)
    return None


def restrict(held: Exclusion | None, outside: BoolArray, message: str) -> Exclusion:
    """``held`` plus the nodes outside a domain."""
    mask = outside if held is None else (held.mask | outside)
    return Exclusion(mask, message)


def domain_order(domains: Domains, state: ClusterState, needed_milli: int) -> list[int]:
    """Domains with enough free GPU for the gang, fullest first (then by name)."""
    free = domains.free_milli(state)
    fitting = np.flatnonzero(free >= needed_milli)
    return sorted((int(d) for d in fitting), key=lambda d: (int(free[d]), domains.names[d]))


SHOWN_DOMAINS = 4
"""Domains a reason names (the best); the others are counted."""


def per_domain_facts(domains: Domains, counts: dict[int, int]) -> dict[str, object]:
    """The best domains and how many of the gang's pods each can hold, and how many more
    domains hold fewer (a reason's facts,
    :data:`~gpufleet.scheduler.api.outcome.WhyCode.TOPOLOGY`)."""
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], domains.names[kv[0]]))
    shown = tuple((domains.label(d), n) for d, n in ranked[:SHOWN_DOMAINS])
    return {"short": domains.short, "counts": shown, "more": len(ranked) - len(shown)}


def count_largest(
    domains: Domains,
    txn: Transaction,
    counts: dict[int, int],
    fitted: Callable[[int], int],
    *,
    limit: int,
    among: Sequence[int] | None = None,
) -> dict[int, int]:
    """``counts`` completed, for the reason of a gang that fits no domain, with how many of
    its pods the ``limit`` untried domains (of ``among``, or all) with the most free GPU
    could hold: ``fitted`` tries one, and what it placed is taken back."""
    free = domains.free_milli(txn.state)
    candidates = range(len(domains.names)) if among is None else among
    untried = sorted((d for d in candidates if d not in counts), key=lambda d: -int(free[d]))
    for d in untried[:limit]:
        mark = txn.mark()
        counts[d] = fitted(d)
        txn.rollback(mark)
    return counts
