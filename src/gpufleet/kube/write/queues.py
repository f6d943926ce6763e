"""Queue status: what each of gpufleet's Queues holds, its fair share and what waits in it.

After each cycle the live scheduler writes ``status`` of each ``gpufleet.io`` Queue the
cluster has, the fields ``kubectl get queues`` shows (the CRD's printer columns,
``tools/crds/``):

* ``allocated`` — per resource (``gpu`` in GPUs, ``cpu`` in millicores, ``memory`` in MiB,
  as the ``gpufleet_queue_allocated`` metric) what the running pods of the queue and of the
  queues below it hold;
* ``fairShare`` — per resource its fair share in the cycle (``gpufleet_queue_fair_share``;
  0 where the cycle computed none);
* ``lent`` and ``borrowed`` — GPUs: what a serving queue (``spec.serving``) lends of its
  unused quota, and what a top-level queue runs beyond its quota
  (``scheduler/queues/admission.py`` ``lending``; ``gpufleet_queue_lent_gpus``,
  ``gpufleet_queue_borrowed_gpus``);
* ``pendingJobs`` and ``pendingPods`` — the gangs (a pod without a PodGroup is one) and the
  pods of the queue that wait;
* ``conditions`` — ``Valid``: ``True``, or ``False`` with the reason (``ParentMissing``,
  ``ParentCycle``, ``TooDeep``, ``UnderInvalidQueue``) and the message the queue's event
  gives: an invalid queue is left out of the cycle and its pods wait
  (``model/workload.py`` ``queue_problems``).

As for PodGroups (``podgroups.py``), a status is written as a merge patch of ``/status`` only
when it differs from the one last written (or, after a restart, from the object's), and
remembered once the server took it.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from gpufleet.kube.write.status import JSON, StatusWriter
from gpufleet.model.workload import RESOURCES, QueueProblem
from gpufleet.scheduler.queues.admission import lending

if TYPE_CHECKING:
    from gpufleet.kube.read.objects import ObjectStore
    from gpufleet.scheduler.api.outcome import CycleResult
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

FIELDS = ("allocated", "fairShare", "lent", "borrowed", "pendingJobs", "pendingPods", "conditions")
REASONS = {
    "missing": "ParentMissing",
    "cycle": "ParentCycle",
    "deep": "TooDeep",
    "under": "UnderInvalidQueue",
}
"""The fields of a Queue's status that gpufleet writes."""


def amounts(vector: Any) -> JSON:
    """``{"gpu": 4, "cpu": 16000, "memory": 65536}`` of a resource vector, to a thousandth
    (a shared GPU's fraction) and whole numbers as such, so that an unchanged amount reads
    back equal."""
    return {
        resource: _number(float(vector[i]) if vector is not None else 0.0)
        for i, resource in enumerate(RESOURCES)
    }


def _number(value: float) -> float | int:
    """An amount to a thousandth, a whole number as such (so that it reads back equal)."""
    rounded = round(value, 3)
    return int(rounded) if rounded.is_integer() else rounded


def statuses(
    names: Collection[str],
    cache: ClusterCache[Components],
    result: CycleResult,
    since: dict[str, tuple[str, str]] | None = None,
) -> dict[str, JSON]:
    """The status of each Queue of ``names`` (module docstring); ``since`` keeps, per queue,
    its Valid condition's reason and when it last changed (now where it changed)."""
    ledger = cache.ledger()
    alloc = ledger.alloc
    lent = lending(ledger)
    since = {} if since is None else since
    pods: dict[str, int] = {}
    jobs: dict[str, set[str]] = {}
    for pod in cache.pending():
        pods[pod.queue] = pods.get(pod.queue, 0) + 1
        jobs.setdefault(pod.queue, set()).add(pod.group or pod.key)
    return {
        name: {
            "allocated": amounts(alloc.get(name)),
            "fairShare": amounts(result.fair_shares.get(name)),
            "lent": _number(lent.get(name, (0.0, 0.0))[0]),
            "borrowed": _number(lent.get(name, (0.0, 0.0))[1]),
            "pendingJobs": len(jobs.get(name, ())),
            "pendingPods": pods.get(name, 0),
            "conditions": [_valid(name, ledger.invalid_queues.get(name), since)],
        }
        for name in names
    }


def _valid(name: str, problem: QueueProblem | None, since: dict[str, tuple[str, str]]) -> JSON:
    reason = "Valid" if problem is None else REASONS[problem.kind]
    before = since.get(name)
    when = before[1] if before is not None and before[0] == reason else _now()
    since[name] = (reason, when)
    condition: JSON = {"type": "Valid", "status": "True" if problem is None else "False"}
    condition["reason"] = reason
    condition["message"] = (
        "its parent queues reach the top"
        if problem is None
        else f"it {problem.text()}; its pods wait until it is fixed"
    )
    condition["lastTransitionTime"] = when
    return condition


def _written_valid(obj: Mapping[str, Any]) -> tuple[str, str]:
    """The Valid condition's reason and transition time in a Queue's status ("" if none)."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, Mapping) else None
    for condition in conditions if isinstance(conditions, list) else ():
        if isinstance(condition, Mapping) and condition.get("type") == "Valid":
            return str(condition.get("reason", "")), str(condition.get("lastTransitionTime", ""))
    return "", ""


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class QueueStatus(StatusWriter):
    """Writes the status of the cluster's Queues (module docstring)."""

    def __init__(self, http: httpx.AsyncClient) -> None:
        super().__init__(http, "Queue")
        self.since: dict[str, tuple[str, str]] = {}
        """Per queue, its Valid condition's reason and when it last changed."""

    async def write(
        self,
        store: ObjectStore,
        cache: ClusterCache[Components],
        result: CycleResult,
        may_act: Callable[[], bool],
    ) -> None:
        """Write each changed status."""
        queues = {  # those read (the others are reported as such), not another scheduler's
            _name(obj): obj
            for key, obj in store.raw["Queue"].items()
            if store.defined_by("Queue", key) == "Queue"
        }
        self.keep_only(queues)
        for name, obj in queues.items():  # after a restart: the condition as last written
            if name not in self.since:
                self.since[name] = _written_valid(obj)
        for name, status in sorted(statuses(queues, cache, result, self.since).items()):
            own = queues[name].get("status") or {}
            if not await self.put(name, status, {f: own.get(f) for f in FIELDS}, may_act):
                return


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))
