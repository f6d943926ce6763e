"""Results of simulation runs, as values the report layer renders (``results.json``, its
schema in ``docs/simulate.md``)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.model.costs import ReplayCost
from gpufleet.model.values import frozen_map

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


@dataclass(frozen=True, slots=True)
class QueueUsage:
    """One tenant over a replay: GPU-hours it held, and what its fair share would have
    given it (the fair share integrated over time, while it had demand)."""

    queue: str
    jobs: int
    gpu_hours: float
    fair_share_gpu_hours: float

    def to_json(self) -> dict[str, object]:
        return {
            "queue": self.queue,
            "jobs": self.jobs,
            "gpu_hours": round(self.gpu_hours, 3),
            "fair_share_gpu_hours": round(self.fair_share_gpu_hours, 3),
        }


@dataclass(frozen=True, slots=True)
class Timeline:
    """Samples over simulated time: GPUs allocated per queue and GPUs pending."""

    time_s: tuple[float, ...]
    allocated: Mapping[str, tuple[float, ...]]
    pending_gpus: tuple[float, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocated", frozen_map(self.allocated))

    def to_json(self) -> dict[str, object]:
        return {
            "time_s": list(self.time_s),
            "allocated_gpus": {q: list(v) for q, v in self.allocated.items()},
            "pending_gpus": list(self.pending_gpus),
        }


SIZE_CLASSES: tuple[tuple[str, float], ...] = (
    ("1", 1.0),
    ("2-4", 4.0),
    ("5-8", 8.0),
    (">8", math.inf),
)
"""Job-size classes by GPUs, each with its largest size: a job of at most 1 GPU (shares
too), 2 to 4, 5 to 8 (one 8-GPU server), more than 8 (a gang across servers)."""


@dataclass(frozen=True, slots=True)
class SizeWaits:
    """The waits of one job-size class (:data:`SIZE_CLASSES`). Every job that arrived
    counts: one that never started waits from its arrival to the end of the run (its wait
    so far), so starvation raises the figures instead of leaving them."""

    size: str
    jobs: int
    never_started: int
    mean_wait_s: float | None
    p50_wait_s: float | None
    p95_wait_s: float | None

    def to_json(self) -> dict[str, object]:
        return {
            "size": self.size,
            "jobs": self.jobs,
            "never_started": self.never_started,
            "mean_wait_s": _rounded(self.mean_wait_s),
            "p50_wait_s": _rounded(self.p50_wait_s),
            "p95_wait_s": _rounded(self.p95_wait_s),
        }


@dataclass(frozen=True, slots=True)
class ActionTally:
    """What one evicting action cost and bought over a replay: the runs it ended
    (``evictions``: a moved job's run counts), the GPU-hours they lost (the work since
    their last checkpoint, and the restart time they paid after), the jobs it made room
    for that started, and the GPU-hours those jobs had waited when they started (what a
    move is weighed against, ``scheduler/room/consolidate.py``)."""

    action: str
    evictions: int
    lost_gpu_hours: float
    jobs_started: int
    waited_gpu_hours: float

    def to_json(self) -> dict[str, object]:
        return {
            "action": self.action,
            "evictions": self.evictions,
            "lost_gpu_hours": round(self.lost_gpu_hours, 3),
            "jobs_started": self.jobs_started,
            "waited_gpu_hours": round(self.waited_gpu_hours, 3),
        }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass(frozen=True, slots=True)
class ReplayRun:
    """One time-driven replay of a trace under a policy (protocol ``replay``).

    Waits are from arrival to the start of the job's first run, over the jobs that
    started; JCT from arrival to finish, over the finished ones. ``gpu_allocation_mean`` is
    the time-weighted share of the cluster's GPUs held by pods, in %, from the start to
    ``allocation_window_s``: the last arrival (or the cut, if earlier). After the last
    arrival the cluster only drains, and an average to the end would measure how long
    the last jobs took, not how busy the cluster was. ``lost_gpu_hours``
    is the GPU time evictions threw away: of each evicted run, the time since its last
    checkpoint (all of it, without checkpoints: the job reruns from the start), and of each
    restarted run, the restart time before it made progress. ``actions`` says which action
    cost what (:class:`ActionTally`); ``most_moves`` is the most times one job was moved.
    ``wait_quantiles_s[q]`` is the q-th percentile of the waits (q = 0..100).
    ``never_started_jobs`` arrived and never started; ``sizes`` are the waits per job-size
    class with those jobs counted at their wait so far (:class:`SizeWaits`), and
    ``all_waits`` the same over every job (None: not metered).
    ``cost`` is what the run cost under a price sheet (None: not costed).
    """

    workload: str
    policy: str
    seed: int
    jobs: int
    finished_jobs: int
    running_jobs: int
    pending_jobs: int
    mean_wait_s: float | None
    p50_wait_s: float | None
    p95_wait_s: float | None
    mean_jct_s: float | None
    gpu_allocation_mean: float
    allocation_window_s: float
    preemptions: int
    lost_gpu_hours: float
    gpu_hours: float
    capacity_gpu_hours: float
    simulated_s: float
    cycles: int
    queues: tuple[QueueUsage, ...]
    wait_quantiles_s: tuple[float, ...]
    timeline: Timeline
    elapsed_s: float
    never_started_jobs: int
    sizes: tuple[SizeWaits, ...]
    actions: tuple[ActionTally, ...] = ()
    most_moves: int = 0
    cost: ReplayCost | None = None
    all_waits: SizeWaits | None = None

    def to_json(self) -> dict[str, object]:
        rounded = _rounded

        return {
            "protocol": "replay",
            "workload": self.workload,
            "policy": self.policy,
            "seed": self.seed,
            "jobs": self.jobs,
            "finished_jobs": self.finished_jobs,
            "running_jobs": self.running_jobs,
            "pending_jobs": self.pending_jobs,
            "never_started_jobs": self.never_started_jobs,
            "mean_wait_s": rounded(self.mean_wait_s),
            "p50_wait_s": rounded(self.p50_wait_s),
            "p95_wait_s": rounded(self.p95_wait_s),
            "mean_jct_s": rounded(self.mean_jct_s),
            "gpu_allocation_mean": round(self.gpu_allocation_mean, 3),
            "allocation_window_s": round(self.allocation_window_s, 3),
            "preemptions": self.preemptions,
            "lost_gpu_hours": round(self.lost_gpu_hours, 3),
            "gpu_hours": round(self.gpu_hours, 3),
            "capacity_gpu_hours": round(self.capacity_gpu_hours, 3),
            "simulated_s": self.simulated_s,
            "cycles": self.cycles,
            "queues": [q.to_json() for q in self.queues],
            "wait_quantiles_s": [round(w, 3) for w in self.wait_quantiles_s],
            "sizes": [c.to_json() for c in self.sizes],
            **({} if self.all_waits is None else {"all_waits": self.all_waits.to_json()}),
            "actions": [a.to_json() for a in self.actions],
            "most_moves": self.most_moves,
            "timeline": self.timeline.to_json(),
            "elapsed_s": round(self.elapsed_s, 3),
            **({} if self.cost is None else {"cost": self.cost.to_json()}),
        }
