"""What one replay on an elastic cluster measured (``sim/autoscale.py``): the spend, the
nodes it bought and how they were used, and the training figures of the replay."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

from gpufleet.model.results import ReplayRun

SUPPLY_POLICY_NAMES = ("static-peak", "ca-price", "ca-least-waste", "karpenter-like", "gpufleet")
"""The autoscaling replay's policies (``sim/autoscale.py`` ``SUPPLY_POLICIES``, which says
what each is), by name: what a study may name."""


@dataclass(frozen=True, slots=True)
class SupplyRun:
    """One policy's replay on an elastic cluster. Node figures count every node from the
    moment it was Ready (billing starts) to its removal, the cluster's system node aside."""

    policy: str
    seed: int
    replay: ReplayRun
    spend: float
    """Dollars for the nodes' time, at the price sheet's prices (spot at its spot prices)."""
    node_hours: float
    gpu_hours: float
    """GPU-hours of the nodes bought (their GPUs times their time up)."""
    allocated_gpu_hours: float
    """GPU-hours pods held (bound, started or not)."""
    idle_node_hours: float
    """Node-hours with no GPU allocated."""
    incomplete_node_hours: float
    """Node-hours of nodes bought for a gang, up before that gang started, plus the
    GPU-hours (in node-hours) that pods of gangs not yet started held: capacity paid for
    while its gang could not run."""
    incomplete_spend: float
    work_gpu_hours: float
    """GPU-hours of work done and kept (finished jobs', and what running ones saved)."""
    scale_down_evictions: int
    """Running jobs evicted so that a node could go."""
    scale_down_lost_gpu_hours: float
    checkpoint_moves: int
    """Jobs moved right after a checkpoint to empty a node (their restart their only loss)."""
    interruptions: int
    """Spot nodes interrupted."""
    interrupted_jobs: int
    interruption_lost_gpu_hours: float
    requests: int
    """Scale-ups asked for (requests, or node-group increases)."""
    failed_requests: int
    peak_nodes: int
    end_s: float
    timeline: tuple[tuple[float, float, float, float], ...] = field(default=())
    """Samples of (time, GPUs of the nodes up, GPUs allocated, GPUs pending jobs ask for)."""

    @property
    def per_finished_job(self) -> float:
        finished = self.replay.finished_jobs
        return self.spend / finished if finished else float("nan")

    @property
    def per_useful_gpu_hour(self) -> float:
        return self.spend / self.work_gpu_hours if self.work_gpu_hours else float("nan")

    @property
    def idle_share(self) -> float:
        return self.idle_node_hours / self.node_hours if self.node_hours else 0.0

    @property
    def unallocated_gpu_hours(self) -> float:
        return max(0.0, self.gpu_hours - self.allocated_gpu_hours)

    def to_json(self) -> dict[str, object]:
        """Every figure, the replay's as ``results.json`` holds a replay, and the spend
        per finished job (None: none finished)."""
        doc: dict[str, object] = {"protocol": "autoscale"}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "replay":
                doc[f.name] = value.to_json()
            elif f.name == "timeline":
                doc[f.name] = [list(sample) for sample in value]
            else:
                doc[f.name] = round(value, 6) if isinstance(value, float) else value
        per_job = self.per_finished_job
        doc["spend_per_finished_job"] = None if math.isnan(per_job) else round(per_job, 6)
        doc["idle_share"] = round(self.idle_share, 6)
        return doc
