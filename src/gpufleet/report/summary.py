"""Fill runs aggregated per (workload, policy): the numbers the table and the report show."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from gpufleet.model.results import FillRun

FRAG_AT = 90
"""Arrived % at which the table shows the fragment ratio (where policies differ most)."""


@dataclass(frozen=True, slots=True)
class Stat:
    mean: float | None
    sd: float

    def text(self, digits: int = 2) -> str:
        if self.mean is None:
            return "n/a"
        if self.sd == 0.0:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"


def stat(values: Sequence[float | None]) -> Stat:
    present = [v for v in values if v is not None]
    if not present:
        return Stat(None, 0.0)
    return Stat(statistics.fmean(present), statistics.stdev(present) if len(present) > 1 else 0.0)


@dataclass(frozen=True, slots=True)
class PolicySummary:
    workload: str
    policy: str
    seeds: tuple[int, ...]
    unallocated_at_100: Stat
    allocation_at_130: Stat
    frag_ratio: Stat
    failed_pods: Stat
    elapsed_s: Stat


def summarise(runs: Sequence[FillRun]) -> list[PolicySummary]:
    """One summary per (workload, policy), in the order they first appear in ``runs``."""
    groups: dict[tuple[str, str], list[FillRun]] = {}
    for run in runs:
        groups.setdefault((run.workload, run.policy), []).append(run)
    return [
        PolicySummary(
            workload=workload,
            policy=policy,
            seeds=tuple(r.seed for r in group),
            unallocated_at_100=stat([r.unallocated_at_100 for r in group]),
            allocation_at_130=stat([r.allocation_at(130) for r in group]),
            frag_ratio=stat([r.frag_ratio_curve[FRAG_AT] for r in group]),
            failed_pods=stat([float(r.failed_pods) for r in group]),
            elapsed_s=stat([r.elapsed_s for r in group]),
        )
        for (workload, policy), group in groups.items()
    ]
