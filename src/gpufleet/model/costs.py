"""What a replay cost, and what a what-if cycle changes in a cluster's hourly cost, as values
the report layer renders (the ``cost`` of a replay run in ``results.json``, the ``cost`` of
``gpufleet schedule --cost``; the figures are computed by ``cost/summary.py`` and
``cost/rates.py``).

Field names in the JSON follow OpenCost's ``/allocation`` response (``gpuCost``,
``cpuCost``, ``ramCost``, ``totalCost``, ``gpuHours``, ``gpuEfficiency``), so that figures can
be set beside OpenCost's. A trace has no utilisation: efficiency is ``null`` with a note
saying so, never a number made up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.model.values import frozen_map

IDLE = "__idle__"
"""Unallocated cost: capacity paid for that no pod requested (OpenCost's name)."""

NO_UTILISATION = "unknown — the trace has no utilisation"
"""What a replay says of its GPU efficiency: a trace records requests, not usage."""

TOP_JOBS = 10
"""Jobs listed in ``results.json`` (all of them are in :data:`JOBS_FILE`)."""

RUNS_FILE = "cost-runs.csv"
"""A replay's runs, one row per pod and stretch of time on a node, for every policy and
seed (written by ``report/cost_files.py``, read by ``load/costs/cost_runs.py``)."""
RUN_COLUMNS = (
    "policy",
    "seed",
    "pod",
    "job",
    "queue",
    "outcome",
    "node",
    "start",
    "end",
    "gpus",
    "cpuCores",
    "ramGiB",
)
"""Times in seconds of the replay's clock (``end`` is ``inf`` for a run still going at the
end); requests in GPUs (a share's fraction, a MIG slice's share of its GPU), cores, GiB;
``outcome`` running, finished or evicted."""
NODES_FILE = "cost-nodes.csv"
"""The nodes the runs ran on, with the prices they were costed at."""
NODE_COLUMNS = (
    "node",
    "nodeType",
    "category",
    "gpus",
    "cpuCores",
    "ramGiB",
    "gpuHour",
    "vcpuHour",
    "ramGiBHour",
    "start",
    "end",
)
"""Capacity in GPUs, cores and GiB; prices per unit-hour in the sheet's currency; when the
node existed (``-inf`` and ``inf``: all along)."""
JOBS_FILE = "cost-jobs.csv"
"""What every job cost, for every policy and seed."""
JOB_COLUMNS = (
    "policy",
    "seed",
    "job",
    "queue",
    "gpuHours",
    "gpuCost",
    "cpuCost",
    "ramCost",
    "totalCost",
)


@dataclass(frozen=True, slots=True)
class Sheet:
    """Which price sheet a cost was computed under."""

    name: str
    title: str
    currency: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "title": self.title, "currency": self.currency}


@dataclass(frozen=True, slots=True)
class Split:
    """An amount of money split by resource: GPUs, CPU, memory."""

    gpu: float
    cpu: float
    ram: float

    @property
    def total(self) -> float:
        return self.gpu + self.cpu + self.ram

    def to_json(self) -> dict[str, object]:
        return {
            "gpuCost": round(self.gpu, 4),
            "cpuCost": round(self.cpu, 4),
            "ramCost": round(self.ram, 4),
            "totalCost": round(self.total, 4),
        }


@dataclass(frozen=True, slots=True)
class QueueCost:
    """A queue's cost: ``cost`` includes its child queues', ``own`` is its own pods';
    ``gpu_hours`` likewise includes the children's."""

    name: str
    parent: str | None
    cost: Split
    own: float
    gpu_hours: float

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "parent": self.parent,
            "gpuHours": round(self.gpu_hours, 4),
            **self.cost.to_json(),
            "ownCost": round(self.own, 4),
        }


@dataclass(frozen=True, slots=True)
class HourlyCost:
    """What a cluster costs per hour with the pods it runs at one moment: its nodes
    (``cluster``), what the running pods are charged (``allocated``) and the unallocated rest
    (``idle``), and per queue (a parent includes its children; ``gpu_hours`` is the GPUs
    held for the hour)."""

    cluster: Split
    allocated: Split
    idle: Split
    queues: tuple[QueueCost, ...]

    def to_json(self) -> dict[str, object]:
        return {
            "cluster": self.cluster.to_json(),
            "allocated": self.allocated.to_json(),
            IDLE: self.idle.to_json(),
            "queues": [q.to_json() for q in self.queues],
        }


@dataclass(frozen=True, slots=True)
class CycleCost:
    """What one what-if cycle changes in the cluster's hourly cost: ``before`` with the pods
    the snapshot runs, ``after`` once the cycle's bindings run and its evictions are gone."""

    sheet: Sheet
    before: HourlyCost
    after: HourlyCost

    def to_json(self) -> dict[str, object]:
        return {
            "sheet": self.sheet.to_json(),
            "unit": f"{self.sheet.currency} per hour",
            "before": self.before.to_json(),
            "after": self.after.to_json(),
        }


@dataclass(frozen=True, slots=True)
class JobCost:
    """A job's cost: every run of its pods (runs that were evicted included)."""

    name: str
    queue: str
    gpu_hours: float
    cost: Split

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "queue": self.queue,
            "gpuHours": round(self.gpu_hours, 4),
            **self.cost.to_json(),
        }


@dataclass(frozen=True, slots=True)
class CostTimeline:
    """Cumulative cost from the window's start to each of ``time_s``, per queue and
    :data:`IDLE` (their sum at a time is what the cluster cost until then)."""

    time_s: tuple[float, ...]
    cumulative: Mapping[str, tuple[float, ...]]

    def __post_init__(self) -> None:
        object.__setattr__(self, "cumulative", frozen_map(self.cumulative))

    def to_json(self) -> dict[str, object]:
        return {
            "time_s": [round(t, 3) for t in self.time_s],
            "cumulative": {k: [round(v, 4) for v in vs] for k, vs in self.cumulative.items()},
        }


@dataclass(frozen=True, slots=True)
class ReplayCost:
    """What a replay cost over ``window_s`` under ``sheet``.

    ``cluster`` is what the nodes cost over the window; ``allocated`` what pods were charged
    (their requests x hours x their node's prices); ``idle`` the rest, unallocated. ``lost``
    is the part of ``allocated`` charged to runs that were evicted (their work started
    over). Per finished job and per finished GPU-hour of work (the GPUs x the trace duration
    of the jobs that finished) divide the cluster's cost: what the cluster cost for the work
    it delivered. ``jobs`` holds every job, most costly first; ``elapsed_s`` the seconds the
    costing took.
    """

    sheet: Sheet
    window_s: tuple[float, float]
    cluster: Split
    allocated: Split
    idle: Split
    lost: float
    finished_jobs: int
    finished_gpu_hours: float
    queues: tuple[QueueCost, ...]
    jobs: tuple[JobCost, ...]
    timeline: CostTimeline
    elapsed_s: float = 0.0

    @property
    def idle_share(self) -> float:
        """Unallocated cost, as a share of the cluster's (0..1)."""
        return self.idle.total / self.cluster.total if self.cluster.total else 0.0

    @property
    def per_finished_job(self) -> float | None:
        return self.cluster.total / self.finished_jobs if self.finished_jobs else None

    @property
    def per_finished_gpu_hour(self) -> float | None:
        hours = self.finished_gpu_hours
        return self.cluster.total / hours if hours > 0 else None

    def to_json(self) -> dict[str, object]:
        def rounded(value: float | None) -> float | None:
            return None if value is None else round(value, 4)

        return {
            "sheet": self.sheet.to_json(),
            "currency": self.sheet.currency,
            "window_s": list(self.window_s),
            "totalCost": round(self.cluster.total, 4),
            "cluster": self.cluster.to_json(),
            "allocated": self.allocated.to_json(),
            IDLE: self.idle.to_json(),
            "idleShare": round(self.idle_share, 6),
            "lostCost": round(self.lost, 4),
            "finishedJobs": self.finished_jobs,
            "finishedGpuHours": round(self.finished_gpu_hours, 4),
            "costPerFinishedJob": rounded(self.per_finished_job),
            "costPerFinishedGpuHour": rounded(self.per_finished_gpu_hour),
            "gpuEfficiency": None,
            "gpuEfficiencyNote": NO_UTILISATION,
            "queues": [q.to_json() for q in self.queues],
            "jobs": len(self.jobs),
            "topJobs": [j.to_json() for j in self.jobs[:TOP_JOBS]],
            "files": {"runs": RUNS_FILE, "nodes": NODES_FILE, "jobs": JOBS_FILE},
            "timeline": self.timeline.to_json(),
            "elapsed_s": round(self.elapsed_s, 3),
        }
