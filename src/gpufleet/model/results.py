"""Results of simulation runs, as values the report layer renders (JSON schema in README)."""

from __future__ import annotations

from dataclasses import dataclass

ARRIVED_MAX_PCT = 130
"""Curves run over arrived workload 0..130% of cluster GPU capacity."""


@dataclass(frozen=True, slots=True)
class FillRun:
    """One fill run: a workload, a policy, a seed.

    ``allocation_curve[x]`` is the GPU allocation (% of cluster GPU capacity) when the
    arrived workload was ``x``% of capacity; ``frag_ratio_curve[x]`` the share of idle GPU
    that is fragment, in %. ``None`` where no pod arrival fell near ``x`` (e.g. past the
    inflation target).
    """

    workload: str
    policy: str
    seed: int
    allocation_curve: tuple[float | None, ...]
    frag_ratio_curve: tuple[float | None, ...]
    failed_pods: int
    pods: int
    elapsed_s: float

    def allocation_at(self, arrived_pct: int) -> float | None:
        return self.allocation_curve[arrived_pct]

    @property
    def unallocated_at_100(self) -> float | None:
        at = self.allocation_at(100)
        return None if at is None else round(100.0 - at, 2)

    def to_json(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "policy": self.policy,
            "seed": self.seed,
            "allocation_curve": list(self.allocation_curve),
            "frag_ratio_curve": list(self.frag_ratio_curve),
            "unallocated_at_100": self.unallocated_at_100,
            "failed_pods": self.failed_pods,
            "pods": self.pods,
            "elapsed_s": round(self.elapsed_s, 3),
        }
