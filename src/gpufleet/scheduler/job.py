"""The unit a cycle schedules: a job, the pending pods of a PodGroup or one pod on its own.

A job needs ``minMember`` minus its running pods placed together (its *core*); pods beyond
that are elastic extras, placed if they fit. :func:`build_jobs` groups a snapshot's pending
gpufleet pods into jobs; a replay builds its own as its trace's jobs arrive.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot


@dataclass(frozen=True, slots=True)
class Job:
    key: str
    queue: str
    priority: int
    created: float
    min_member: int
    pods: tuple[PodInfo, ...]
    """Pending pods, core first."""
    running: int
    can_preempt: bool

    @property
    def need(self) -> int:
        return min(len(self.pods), max(0, self.min_member - self.running))

    @property
    def incomplete(self) -> bool:
        """Fewer pods exist (running and pending) than ``minMember``: it cannot start."""
        return self.running + len(self.pods) < self.min_member

    @property
    def core(self) -> tuple[PodInfo, ...]:
        return self.pods[: self.need]

    @property
    def extras(self) -> tuple[PodInfo, ...]:
        return self.pods[self.need :]


def job_gpus(job: Job) -> float:
    """GPUs the job's core asks for (what starvation protection compares)."""
    return sum(p.spec.total_gpu_milli for p in job.core) / 1000


def build_jobs(snapshot: Snapshot) -> list[Job]:
    groups: dict[str, GroupSpec] = {g.key: g for g in snapshot.groups}
    pending: dict[str, list[PodInfo]] = defaultdict(list)
    running: dict[str, int] = defaultdict(int)
    for pod in snapshot.pods:
        if pod.bound:
            running[pod.gang] += 1
        elif pod.managed and not pod.blocked:
            pending[pod.gang].append(pod)
    jobs = []
    for key, pods in pending.items():
        group = groups.get(key)
        pods.sort(key=lambda p: (-p.priority, p.created, p.key))
        jobs.append(
            Job(
                key,
                group.queue if group is not None and pods[0].queue == "" else pods[0].queue,
                max(p.priority for p in pods),
                group.created if group is not None else min(p.created for p in pods),
                group.min_member if group is not None else 1,
                tuple(pods),
                running[key],
                all(p.can_preempt for p in pods),
            )
        )
    return jobs
