"""What a cycle tells about the jobs it could not place, and about every job it tried.

The journal keeps the pending pods with their reasons, the per-job records that
``gpufleet explain`` shows (the queue's fair share and allocation when the job's turn came,
the outcome, the notes of the actions tried) and, for watched pods, each node's filter
reasons. It composes a job's reason from its parts (:func:`failure_reason`); the rendering
of outcomes for people stays in ``report/``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.model.workload import vector
from gpufleet.scheduler.api.outcome import JobRecord, Note, Pending, Why, WhyCode, why

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.framework.runtime import Framework
    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.workload import GroupSpec, PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.placement.domains import Failure

Record = tuple["FloatArray", "FloatArray", float]
"""A job's queue's fair share, allocation and share ratio when its turn came."""


def failure_reason(job: Job, failure: Failure) -> Why:
    """Why ``job``'s core could not be placed: the first pod that did not fit, and why."""
    pod, status, fitted = failure.pod, failure.status, failure.fitted
    need = len(job.core)
    if failure.why is not None:
        return (
            failure.why
            if need == 1
            else why(WhyCode.GANG, gang=job.key, need=need, then=failure.why)
        )
    if need == 1:
        return why(WhyCode.UNSCHEDULABLE, status=status)
    return why(
        WhyCode.GANG_UNSCHEDULABLE,
        gang=job.key,
        need=need,
        fitted=fitted,
        pod=pod.key,
        status=status,
    )


class Journal:
    """Pending pods, job records and node reasons of one cycle."""

    def __init__(self, *, records: bool, watch: frozenset[str]) -> None:
        self.keep_records, self.watching = records, watch
        self.pending: list[Pending] = []
        self.records: list[JobRecord] = []
        self.node_reasons: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {}

    def pend(
        self,
        job: Job,
        pods: Sequence[PodInfo],
        reason: Why,
        *,
        notes: Sequence[Note] = (),
        record: Record | None = None,
    ) -> None:
        """``pods`` of ``job`` stay pending for ``reason``."""
        self.pending.extend(Pending(p.key, reason) for p in pods)
        self.record(job, record, "pending", notes)

    def alike(self, job: Job, others: Sequence[Job]) -> None:
        """``others``, of ``job``'s class, stay pending for the reason ``job`` got (the
        cycle does not try them: they are interchangeable with it)."""
        first = job.pods[0].key if job.pods else None
        reason = next((p.why for p in reversed(self.pending) if p.pod == first), None)
        if reason is None:
            return
        for other in others:
            self.pending.extend(Pending(p.key, reason) for p in other.pods)

    def record(self, job: Job, record: Record | None, outcome: str, notes: Sequence[Note]) -> None:
        """``job``'s turn: its queue's figures, its outcome and the notes of what was tried."""
        if not self.keep_records:
            return
        if record is None:
            record = (vector(), vector(), 0.0)
        keys = tuple(p.key for p in job.pods)
        self.records.append(
            JobRecord(job.key, job.queue, job.priority, keys, *record, outcome, tuple(notes))
        )

    def watch(self, job: Job, pod: PodInfo, framework: Framework, state: ClusterState) -> None:
        """Keep, for explain, why each node rejected ``pod`` (the first of its job that
        failed), if one of the job's pods is watched."""
        if any(p.key in self.watching for p in job.pods):
            reasons = framework.node_reasons(state, framework.prepare(pod.spec))
            self.node_reasons[pod.key] = tuple(zip(state.names, reasons, strict=True))


def incomplete_reason(job: Job) -> Why:
    """Why ``job`` cannot start: fewer pods than its ``minMember``, or than a subgroup's."""
    gang, pods, least = job.key, job.running + len(job.pods), job.min_member
    if job.short is not None:
        name, pods, least = job.short
        gang = f"{job.key} subgroup {name}"
    return why(WhyCode.GANG_INCOMPLETE, gang=gang, pods=pods, min_member=least)


def set_aside_strays(job: Job, group: GroupSpec | None, journal: Journal) -> Job:
    """``job`` without the pods that name no leaf subgroup of its gang (``group``); they
    wait, told why in ``journal`` (KAI schedules no such pod either)."""
    leaves = ", ".join(s.name for s in group.leaves) if group is not None else ""
    for pod in job.pods:
        if pod.key in job.strays:
            named = f"subgroup {pod.subgroup}" if pod.subgroup else "no subgroup"
            detail = (
                f"the pod names {named}, which is not a leaf subgroup of PodGroup "
                f"{job.key} (its leaves: {leaves}): it is not scheduled"
            )
            journal.pending.append(Pending(pod.key, why(WhyCode.BLOCKED, detail=detail)))
    kept = tuple(p for p in job.pods if p.key not in job.strays)
    return replace(job, pods=kept, strays=frozenset())
