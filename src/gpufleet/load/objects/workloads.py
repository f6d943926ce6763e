"""The replica counts of serving workloads: what an HPA or KEDA asks of a serving queue.

A Deployment or StatefulSet (``apps/v1``) or a LeaderWorkerSet
(``leaderworkerset.x-k8s.io/v1``) whose pod template carries ``gpufleet.io/queue`` asks that
queue for ``spec.replicas`` times the GPUs of one replica: its template's containers'
``nvidia.com/gpu`` (limits, else requests), and for a LeaderWorkerSet its leader's plus
``size - 1`` workers' (``spec.leaderWorkerTemplate``). A workload another of these kinds
controls (the StatefulSets a LeaderWorkerSet makes) is counted by its owner, not again. The
live scheduler keeps, for a serving queue, at least that many GPUs back from lending
(``kube/process/forecast.py``), so that a scale-up finds them before its pods exist. A
workload without the label asks nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gpufleet.load.objects.vocabulary import QUEUE_LABEL

if TYPE_CHECKING:
    from gpufleet.load.objects.reader import Reader

GPU = "nvidia.com/gpu"
MAX_REPLICAS = 1_000_000
"""The most replicas read (beyond any cluster: a typo otherwise asks for the world)."""


@dataclass(frozen=True, slots=True)
class Workload:
    """What a serving workload asks of its queue: ``gpus`` in all (its replicas')."""

    key: str
    queue: str
    gpus: float


def read_workload(r: Reader, kind: str) -> Workload | None:
    """Deployment, StatefulSet or LeaderWorkerSet ``r`` (``kind``) as its queue's demand, or
    None when its template names no queue."""
    if _owned(r):
        return None  # a LeaderWorkerSet's StatefulSets: the LeaderWorkerSet counts them
    if kind == "LeaderWorkerSet":
        base = "spec.leaderWorkerTemplate"
        worker = f"{base}.workerTemplate"
        leader = f"{base}.leaderTemplate" if r.get(f"{base}.leaderTemplate") is not None else worker
        queue = _queue(r, worker) or _queue(r, leader)
        if not queue:
            return None
        size = r.integer(f"{base}.size", 1, minimum=1, maximum=MAX_REPLICAS)
        per_replica = _gpus(r, leader) + (size - 1) * _gpus(r, worker)
    else:
        queue = _queue(r, "spec.template")
        if not queue:
            return None
        per_replica = _gpus(r, "spec.template")
    replicas = r.integer("spec.replicas", 1, minimum=0, maximum=MAX_REPLICAS)
    return Workload(r.key, queue, replicas * per_replica)


WATCHED = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet"})


def _owned(r: Reader) -> bool:
    """Whether another serving workload controls ``r`` (a LeaderWorkerSet its StatefulSets)."""
    owners = r.get("metadata.ownerReferences", [])
    return isinstance(owners, list) and any(
        isinstance(o, dict) and o.get("controller") is True and o.get("kind") in WATCHED
        for o in owners
    )


def _queue(r: Reader, template: str) -> str:
    return r.strings(f"{template}.metadata.labels").get(QUEUE_LABEL, "")


def _gpus(r: Reader, template: str) -> float:
    """The GPUs one pod of ``template`` asks for (its containers' ``nvidia.com/gpu``)."""
    total = 0.0
    containers: Any = r.get(f"{template}.spec.containers", [])
    if not isinstance(containers, list):
        raise r.fail(f"{template}.spec.containers", "a list of containers", containers)
    for i, container in enumerate(containers):
        field = f"{template}.spec.containers[{i}].resources"
        resources = container.get("resources") if isinstance(container, dict) else None
        if resources is None:
            continue
        if not isinstance(resources, dict):
            raise r.fail(field, "a mapping", resources)
        for part in ("limits", "requests"):
            amounts = resources.get(part)
            if isinstance(amounts, dict) and GPU in amounts:
                total += float(r.quantity(f"{field}.{part}.{GPU}", amounts[GPU]))
                break
    return total
