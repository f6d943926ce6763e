"""Read scheduler-plugins' ElasticQuota (the capacity scheduling plugin) into gpufleet's queues.

An ``scheduling.x-k8s.io/v1alpha1`` ElasticQuota bounds what the pods of its namespace use,
as two Kubernetes resource lists; gpufleet reads ``nvidia.com/gpu``, ``cpu`` and ``memory``
of each and no other resource:

* the queue's name is the ElasticQuota's namespace: the capacity scheduling plugin keeps one
  quota per namespace, so two ElasticQuotas in one namespace (or an ElasticQuota and a Queue
  of another vocabulary named as its namespace) define one queue twice and are refused,
  naming both objects. The ElasticQuota of namespace ``default`` is gpufleet's ``default``
  queue, which also holds every pod that names no queue (docs/migration.md);
* ``spec.min`` (what the namespace is guaranteed, lent while idle and taken back) is the
  queue's quota; a resource it does not name has none (0), as the plugin reads it;
* ``spec.max`` (the most the namespace may use) is the queue's limit; a resource it does
  not name (or no ``max`` at all) has no limit;
* a ``max`` below the ``min`` of one resource is refused, naming the field;
* a pod belongs to the queue of its namespace's ElasticQuota unless it names a queue of its
  own (a queue label or annotation of a vocabulary read), which wins.

The queue has gpufleet's default priority and a weight of 1 for every resource; it has no
parent. ``status.used`` is not read: gpufleet counts the pods themselves.
"""

from __future__ import annotations

import math

from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import LIST_RESOURCES, resource_list
from gpufleet.model.workload import QueueSpec, vector


def read_elastic_quota(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
    """An ElasticQuota as the queue of its namespace (see the module's docstring)."""
    low = resource_list(r, "spec.min")
    high = resource_list(r, "spec.max")
    for res in LIST_RESOURCES:
        if res in high and high[res] < low.get(res, 0.0):
            raise r.fail(f"spec.max.{res}", f"at least spec.min.{res} ({low[res]:g})", high[res])
    flags = tuple(res in low for res in LIST_RESOURCES)
    uid, version = r.identity()
    spec = QueueSpec(
        r.namespace,
        None,
        quota=vector(*(low.get(res, 0.0) for res in LIST_RESOURCES)),
        limit=vector(*(high.get(res, math.inf) for res in LIST_RESOURCES)),
        quota_set=flags,
        uid=uid,
        resource_version=version,
    )
    return spec, flags
