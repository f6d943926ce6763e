"""What a replay of training beside a serving load measured (``sim/balance.py``): the
serving side's figures and, per policy, the run's."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

LENDING_POLICY_NAMES = ("static", "naive-loaning", "lyra-greedy", "gpufleet")
"""The lending replay's policies (``sim/balance.py`` ``BALANCE_POLICIES``, which says what
each is), by name: what a study may name."""

if TYPE_CHECKING:
    from gpufleet.model.results import ReplayRun


@dataclass(slots=True)
class ServingFigures:
    """What the serving side got."""

    windows: int = 0
    short_windows: int = 0
    """Windows that ended with fewer replicas running than asked for."""
    short_replica_s: float = 0.0
    """Replica-seconds asked for but not running."""
    latencies_s: list[float] = field(default_factory=list)
    """Per replica: from its creation to its start (its binding, plus the eviction grace
    where it evicted pods); one never bound counts at its wait until it was deleted or the
    replay ended."""
    never_bound: int = 0
    """Replicas deleted (scaled down) before they were bound."""
    requests: float = 0.0
    served: float = 0.0
    held_gpu_s: float = 0.0
    lent_gpus: list[float] = field(default_factory=list)
    """Per window's end: GPUs of the serving queue's quota that training held."""
    replicas: list[int] = field(default_factory=list)
    """Per window: the replicas asked for."""

    @property
    def short_share(self) -> float:
        return self.short_windows / self.windows if self.windows else 0.0

    def latency_s(self, q: float) -> float:
        return float(np.quantile(self.latencies_s, q)) if self.latencies_s else math.nan

    def to_json(self) -> dict[str, object]:
        return {
            "windows": self.windows,
            "short_windows": self.short_windows,
            "short_replica_minutes": round(self.short_replica_s / 60.0, 3),
            "latency_p50_s": _finite(self.latency_s(0.5)),
            "latency_p99_s": _finite(self.latency_s(0.99)),
            "never_bound": self.never_bound,
            "requests": round(self.requests, 3),
            "served": round(self.served, 3),
            "held_gpu_hours": round(self.held_gpu_s / 3600.0, 3),
            "replicas": list(self.replicas),
            "lent_gpus": [round(g, 3) for g in self.lent_gpus],
        }


@dataclass(slots=True)
class BalanceRun:
    """One policy's replay: the training run's figures (the replay's), the serving ones,
    and the work training kept."""

    policy: str
    training: ReplayRun
    serving: ServingFigures
    work_gpu_hours: float
    """Training work done and kept, in GPU-hours of the jobs at full size."""
    shrinks: int
    evicted_gpus: float
    hours: float

    @property
    def preemptions(self) -> int:
        """Jobs stopped or shrunk by an eviction."""
        return self.training.preemptions + self.shrinks

    @property
    def per_reclaimed_gpu(self) -> float:
        return self.preemptions / self.evicted_gpus if self.evicted_gpus else 0.0

    def useful_usage(self) -> float:
        """Work done over capacity: training's kept work and the replica time that served."""
        capacity = self.training.capacity_gpu_hours
        serving = self.serving.held_gpu_s / 3600.0
        return (self.work_gpu_hours + serving) / capacity if capacity else 0.0

    def costs(self, hourly: float) -> tuple[float, float]:
        """$ per finished training job and per million requests served, the cluster at
        ``hourly`` $ an hour: serving pays for the GPU-hours its replicas held, training
        for the rest (its pool, what it borrowed and what stood idle)."""
        total = hourly * self.hours
        capacity = self.training.capacity_gpu_hours
        serving = total * (self.serving.held_gpu_s / 3600.0) / capacity if capacity else 0.0
        finished = self.training.finished_jobs
        per_job = (total - serving) / finished if finished else math.inf
        served = self.serving.served / 1e6
        return per_job, serving / served if served else math.inf

    def to_json(self, hourly: float) -> dict[str, object]:
        """The run's figures; its costs with the cluster at ``hourly`` $ an hour."""
        per_job, per_million = self.costs(hourly)
        return {
            "policy": self.policy,
            "training": self.training.to_json(),
            "serving": self.serving.to_json(),
            "work_gpu_hours": round(self.work_gpu_hours, 3),
            "useful_usage": round(self.useful_usage(), 6),
            "jobs_stopped": self.training.preemptions,
            "jobs_shrunk": self.shrinks,
            "evicted_gpus": round(self.evicted_gpus, 3),
            "cost_per_finished_job": _finite(per_job),
            "cost_per_million_requests": _finite(per_million),
        }


def _finite(value: float) -> float | None:
    return round(value, 3) if math.isfinite(value) else None
