"""Read Volcano's Queue and PodGroup into gpufleet's queues and gangs.

Volcano's ``scheduling.volcano.sh/v1beta1`` Queue writes its resources as a Kubernetes
resource list (``nvidia.com/gpu: 4``, ``cpu: "8"``, ``memory: 64Gi``); gpufleet reads those
three and no other resource:

* ``spec.capability`` is the queue's limit; a resource it does not name has none;
* ``spec.deserved`` (the capacity plugin's "resources the queue may lend and reclaim back")
  is the queue's quota, as gpufleet's quota is; where a resource has no ``deserved``,
  ``spec.guarantee.resource`` (what Volcano reserves for the queue) is — gpufleet lends a
  queue's idle quota and reclaims it, it does not hold it empty;
* Volcano's own webhook keeps ``guarantee <= deserved <= capability``, and so does gpufleet;
* ``spec.weight`` (1 to 65535, default 1) is the queue's weight for every resource;
* ``spec.priority`` (default 0) is the queue's priority;
* ``spec.parent`` is the parent queue; ``root``, the queue Volcano makes for the whole
  cluster, is none — and the ``root`` Queue object itself, which a dump of a hierarchical
  Volcano lists, is not a queue of gpufleet's (it stands for the cluster), so it is not
  read.

* ``spec.reclaimable: false`` (default true): no pod of the queue is ever a reclaim victim,
  even above its deserved share, as in Volcano's reclaim action; gpufleet gives the queue an
  infinite reclaim minimum runtime (preemption inside the queue is not affected).

The older hierarchy (the annotations ``volcano.sh/hierarchy`` and
``volcano.sh/hierarchy-weights``, whose levels are not Queues) and ``status`` are not read;
a Queue carrying the annotations is a warning (load/objects/checks.py).

Volcano's PodGroup: ``spec.minMember`` (0 or absent: 1), ``spec.queue`` (default
``default``) and ``spec.minResources`` (its GPUs, CPU and memory, as a Queue's): the gang is
not tried while the cluster's free resources, or the room its queue has under its limit,
fall short of them — Volcano's enqueue lets a PodGroup with ``minResources`` into the
queue's scheduling only when its queue's capability has room for them (proportion) and the
cluster is not overused (overcommit). ``spec.minTaskMember`` and ``spec.priorityClassName``
are not read (docs/migration.md says what does not map).
"""

from __future__ import annotations

import math

from gpufleet.load.objects.queues import read_min_resources
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import LIST_RESOURCES, resource_list
from gpufleet.model.workload import DEFAULT_QUEUE, GroupSpec, QueueSpec, vector

ROOT = "root"
"""The queue Volcano makes for the whole cluster: a queue under it is a top-level queue."""
MAX_WEIGHT = 65535


def read_volcano_queue(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
    """A Volcano Queue as gpufleet's queue (see the module's docstring for the mapping)."""
    capability = resource_list(r, "spec.capability")
    deserved = resource_list(r, "spec.deserved")
    r.mapping("spec.guarantee")
    guarantee = resource_list(r, "spec.guarantee.resource")
    quotas, limits, given = [], [], []
    for res in LIST_RESOURCES:
        limit = capability.get(res, math.inf)
        if res in deserved and deserved[res] < guarantee.get(res, 0.0):
            raise r.fail(
                f"spec.deserved.{res}",
                f"at least spec.guarantee.resource.{res} ({guarantee[res]:g})",
                deserved[res],
            )
        field, quota = (
            ("spec.deserved", deserved[res])
            if res in deserved
            else ("spec.guarantee.resource", guarantee.get(res, 0.0))
        )
        if quota > limit:
            raise r.fail(f"{field}.{res}", f"at most spec.capability.{res} ({limit:g})", quota)
        quotas.append(quota)
        limits.append(limit)
        given.append(res in deserved or res in guarantee)
    weight = r.integer("spec.weight", 1, minimum=1)
    if weight > MAX_WEIGHT:
        raise r.fail("spec.weight", f"an integer from 1 to {MAX_WEIGHT}", weight)
    parent = r.string("spec.parent")
    uid, version = r.identity()
    flags = tuple(given)
    spec = QueueSpec(
        r.name,
        None if parent in (None, "", ROOT) else parent,
        r.integer("spec.priority", 0, minimum=0),
        vector(*quotas),
        vector(*limits),
        vector(*([float(weight)] * len(LIST_RESOURCES))),
        reclaim_min_runtime_s=math.inf if _reclaimable(r) is False else 0.0,
        quota_set=flags,
        uid=uid,
        resource_version=version,
    )
    return spec, flags


def _reclaimable(r: Reader) -> bool:
    value = r.get("spec.reclaimable", True)
    if not isinstance(value, bool):
        raise r.fail("spec.reclaimable", "true or false", value)
    return value


def read_volcano_group(r: Reader) -> GroupSpec:
    """A Volcano PodGroup as a gang: ``minMember`` pods together, in ``spec.queue``, not
    tried until its ``minResources`` fit the cluster and its queue."""
    queue = r.string("spec.queue")
    uid, version = r.identity()
    return GroupSpec(
        r.key,
        max(1, r.integer("spec.minMember", 1, minimum=0)),  # 0: a group without a gang
        queue or DEFAULT_QUEUE,
        r.created(),
        min_resources=read_min_resources(r),
        min_resources_in_queue=True,
        uid=uid,
        resource_version=version,
    )
