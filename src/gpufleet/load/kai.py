"""Read KAI Scheduler's Queue and PodGroup into gpufleet's queues and gangs.

KAI's ``scheduling.run.ai/v2`` Queue is the shape gpufleet's own Queue took, with other
units and defaults, all as KAI's scheduler reads them:

* ``spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}`` are plain numbers: GPUs,
  millicores, and megabytes (10^6 bytes, which gpufleet keeps in MiB, rounded down);
* a field not written is 0 — a ``limit`` of 0 admits nothing of that resource, an
  ``overQuotaWeight`` of 0 takes no share of the surplus (KAI's docs, "Special Values");
* ``-1`` is unlimited: as a limit, none; as a quota, gpufleet sets none (no guarantee, so
  non-preemptible work is not held to a quota there) — the queue still shares the surplus
  by its weight, up to its limit;
* a quota above a limit is cut to the limit (KAI never lets a queue past its limit).

``spec.priority`` (default 100), ``spec.parentQueue`` and the two minimum runtimes mean
what gpufleet's do. ``spec.displayName`` is a label for people, not the queue's name.

KAI's ``scheduling.run.ai/v2alpha2`` PodGroup: ``spec.minMember`` (default 1) and
``spec.queue``; ``spec.priorityClassName``, sub-groups and topology constraints are not read
(docs/migration.md says what does not map).
"""

from __future__ import annotations

import math

from gpufleet.load.reader import Reader
from gpufleet.load.vocabulary import MIB
from gpufleet.model.workload import DEFAULT_QUEUE, GroupSpec, QueueSpec, vector

RESOURCES = ("gpu", "cpu", "memory")
MEGABYTE = 10**6
UNLIMITED = -1


def _number(r: Reader, field: str) -> float:
    raw = r.get(field, 0)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise r.fail(field, "a number (-1: unlimited)", raw)
    if raw < 0 and raw != UNLIMITED:
        raise r.fail(field, "0 or more, or -1 for unlimited", raw)
    return float(raw)


def _in_gpufleet_units(resource: str, value: float) -> float:
    """GPUs as GPUs, millicores as millicores, megabytes as MiB (rounded down)."""
    if resource == "memory":
        return float(math.floor(value * MEGABYTE / MIB))
    return value


def read_kai_queue(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
    """A KAI Queue as gpufleet's queue (see the module's docstring for the units)."""
    r.mapping("spec.resources")
    quotas, limits, weights, given = [], [], [], []
    for resource in RESOURCES:
        base = f"spec.resources.{resource}"
        r.mapping(base)
        quota = _number(r, f"{base}.quota")
        limit = _number(r, f"{base}.limit")
        weight = _number(r, f"{base}.overQuotaWeight")
        if weight == UNLIMITED:
            raise r.fail(f"{base}.overQuotaWeight", "a weight of 0 or more", weight)
        limit = math.inf if limit == UNLIMITED else _in_gpufleet_units(resource, limit)
        quota = -1.0 if quota == UNLIMITED else min(_in_gpufleet_units(resource, quota), limit)
        given.append(quota >= 0 and r.get(f"{base}.quota") is not None)
        quotas.append(max(quota, 0.0))
        limits.append(limit)
        weights.append(weight)
    parent = r.string("spec.parentQueue")
    uid, version = r.identity()
    flags = tuple(given)
    spec = QueueSpec(
        r.name,
        parent or None,
        r.integer("spec.priority", 100),
        vector(*quotas),
        vector(*limits),
        vector(*weights),
        r.duration("spec.preemptMinRuntime"),
        r.duration("spec.reclaimMinRuntime"),
        flags,
        uid,
        version,
    )
    return spec, flags


def read_kai_group(r: Reader) -> GroupSpec:
    """A KAI PodGroup as a gang: ``minMember`` pods together, in ``spec.queue``."""
    queue = r.string("spec.queue")
    uid, version = r.identity()
    return GroupSpec(
        r.key,
        max(1, r.integer("spec.minMember", 1, minimum=0)),  # 0: KAI's "not set"
        queue or DEFAULT_QUEUE,
        r.time("metadata.creationTimestamp") or 0.0,
        uid=uid,
        resource_version=version,
    )
