"""Read the objects of gpufleet's queueing: PriorityClasses, Queues and PodGroups.

A Queue's quota, limit and over-quota weight per resource (GPUs, CPU in millicores,
memory in MiB; a limit of ``-1`` is none), its parent, priority and minimum runtimes. A
PodGroup's ``minMember``, queue, stale time and topology and device-matching annotations, and
the two fields scheduler-plugins' coscheduling acts on besides ``minMember``:

* ``spec.minResources``, a Kubernetes resource list of which ``nvidia.com/gpu``, ``cpu`` and
  ``memory`` are read (no other resource): the gang is not tried while the cluster's free
  resources fall short of it, as coscheduling's PreFilter holds it back;
* ``spec.scheduleTimeoutSeconds``, an integer of seconds: how long the gang may run below
  ``minMember`` before its running pods are released (the grace of the stale-gang action) —
  what bounds, in coscheduling, how long a gang's placed pods wait for the rest at Permit.
  ``0``, as in coscheduling, is the configured default (``staleGrace``).

Each object is read alone; the tree the Queues form is checked in
:mod:`gpufleet.load.objects.checks`.
"""

from __future__ import annotations

import math

from gpufleet.load.objects.reader import INT64_MAX, Reader
from gpufleet.load.objects.vocabulary import (
    DEVICE_MATCH,
    LIST_RESOURCES,
    QUEUE_LABEL,
    STALE_ANNOTATION,
    TOPOLOGY_PREFERRED,
    TOPOLOGY_REQUIRED,
    cpu_milli,
    mib,
    resource_list,
)
from gpufleet.model.workload import DEFAULT_QUEUE, GroupSpec, QueueSpec, vector


def read_priority_class(r: Reader) -> tuple[int, bool, bool]:
    value = r.integer("value", 0)
    policy = r.get("preemptionPolicy", "PreemptLowerPriority")
    if policy not in {"PreemptLowerPriority", "Never"}:
        raise r.fail("preemptionPolicy", "PreemptLowerPriority or Never", policy)
    return value, policy == "PreemptLowerPriority", r.get("globalDefault") is True


def _resource_spec(r: Reader, resource: str) -> tuple[float, float, float, bool]:
    """(quota, limit, weight, quota given) of one resource of a Queue."""
    base = f"spec.resources.{resource}"
    spec = r.mapping(base)

    def amount(field: str, default: float) -> float:
        raw = spec.get(field)
        if raw is None:
            return default
        if raw in (-1, "-1"):
            return math.inf if field == "limit" else -1.0
        q = r.quantity(f"{base}.{field}", raw)
        if resource == "cpu":
            return float(cpu_milli(q))
        if resource == "memory":
            return float(mib(q, round_up=False))
        return float(q)

    quota = amount("quota", 0.0)
    weight = spec.get("overQuotaWeight", 1)
    if (
        isinstance(weight, bool)
        or not isinstance(weight, int | float)
        or not math.isfinite(weight)
        or weight < 0
    ):
        raise r.fail(f"{base}.overQuotaWeight", "a non-negative number", weight)
    given = "quota" in spec and quota >= 0
    return max(quota, 0.0), amount("limit", math.inf), float(weight), given


def read_queue(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
    quota, limit, weight, given = zip(
        *(_resource_spec(r, res) for res in ("gpu", "cpu", "memory")), strict=True
    )
    parent = r.get("spec.parentQueue")
    if parent is not None and not isinstance(parent, str):
        raise r.fail("spec.parentQueue", "a queue name", parent)
    for q, lim, res in zip(quota, limit, ("gpu", "cpu", "memory"), strict=True):
        if lim < q:
            raise r.fail(f"spec.resources.{res}.limit", f"-1 or at least the quota ({q:g})", lim)
    uid, version = r.identity()
    spec = QueueSpec(
        r.name,
        parent or None,
        r.integer("spec.priority", 100),
        vector(*quota),
        vector(*limit),
        vector(*weight),
        r.duration("spec.preemptMinRuntime"),
        r.duration("spec.reclaimMinRuntime"),
        given,
        *_serving(r),
        uid=uid,
        resource_version=version,
    )
    return spec, given


MAX_FORECAST_GPUS = 2**40
"""The largest ``spec.serving.forecastGPUs`` read (far beyond any cluster)."""


MAX_QUERY_CHARS = 4096
"""The longest ``spec.serving.forecastQuery`` read."""


def _serving(r: Reader) -> tuple[bool, float, str]:
    """(serving, forecast GPUs, forecast query) from ``spec.serving``: absent, not a serving
    queue; ``{}``, a serving queue that keeps nothing back; ``forecastGPUs``, the GPUs its
    services are forecast to need over the reclaim horizon (lending keeps at most its GPU
    quota of it); ``forecastQuery``, a PromQL query of those GPUs for the live scheduler."""
    if r.get("spec.serving") is None:
        return False, 0.0, ""
    query = r.mapping("spec.serving").get("forecastQuery")
    if query is not None and (
        not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_CHARS
    ):
        raise r.fail(
            "spec.serving.forecastQuery",
            f"a PromQL query of at most {MAX_QUERY_CHARS} characters",
            query,
        )
    field = "spec.serving.forecastGPUs"
    raw = r.mapping("spec.serving").get("forecastGPUs")
    forecast = 0.0 if raw is None else float(r.quantity(field, raw))
    if forecast > MAX_FORECAST_GPUS:
        raise r.fail(field, f"a number of GPUs from 0 to {MAX_FORECAST_GPUS} (2^40)", raw)
    return True, forecast, query or ""


MAX_TIMEOUT_S = 2**31 - 1
"""``scheduleTimeoutSeconds`` is an int32 in scheduler-plugins' API."""


def read_min_resources(r: Reader) -> tuple[float, ...] | None:
    """A PodGroup's ``spec.minResources`` over gpufleet's resources (GPUs, millicores, MiB; a
    resource it does not name asks nothing); None where it names none of them."""
    listed = resource_list(r, "spec.minResources")
    if not listed:
        return None
    return tuple(listed.get(res, 0.0) for res in LIST_RESOURCES)


def read_schedule_timeout(r: Reader) -> float | None:
    """``spec.scheduleTimeoutSeconds`` as the gang's stale grace; None where it is absent or
    0 (coscheduling then waits its own default, ``permitWaitingTimeSeconds``)."""
    field = "spec.scheduleTimeoutSeconds"
    seconds = r.integer(field, 0, minimum=0, maximum=INT64_MAX)  # checked below, in its words
    if seconds > MAX_TIMEOUT_S:
        raise r.fail(field, f"an integer of seconds from 0 to {MAX_TIMEOUT_S}", seconds)
    return float(seconds) if seconds else None


def read_group(r: Reader) -> GroupSpec:
    labels = r.strings("metadata.labels")
    annotations = r.strings("metadata.annotations")
    stale = None
    if STALE_ANNOTATION in annotations:
        stale = r.time_of(f"metadata.annotations.{STALE_ANNOTATION}", annotations[STALE_ANNOTATION])
    uid, version = r.identity()
    return GroupSpec(
        r.key,
        r.integer("spec.minMember", 1, minimum=1),
        labels.get(QUEUE_LABEL, DEFAULT_QUEUE),
        r.created(),
        stale,
        annotations.get(TOPOLOGY_REQUIRED) or None,
        annotations.get(TOPOLOGY_PREFERRED) or None,
        annotations.get(DEVICE_MATCH) or None,
        min_resources=read_min_resources(r),
        stale_grace_s=read_schedule_timeout(r),
        uid=uid,
        resource_version=version,
    )
