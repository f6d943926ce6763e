"""What one object's translation looks up in others, as the API server resolves it: a pod's
PriorityClass, its gang's queue, its namespace's queue (an ElasticQuota's), its node's GPUs;
a node's NUMA zones; a pool's nodes' labels; the claim templates that exist. Each kind is read
by the same reader as a snapshot's (``load/``), given these lookups."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING

from gpufleet.kube.read.definitions import Settled
from gpufleet.kube.read.devices import read_claim, read_device_class
from gpufleet.kube.read.kinds import WORKLOADS
from gpufleet.kube.read.translated import Context, NodeNuma, Numa, PriorityClass, Template
from gpufleet.load.foreign import (
    ELASTIC_QUOTA,
    KAI_POD_GROUP,
    KAI_QUEUE,
    VOLCANO_POD_GROUP,
    VOLCANO_QUEUE,
    PodNames,
)
from gpufleet.load.objects.devices import claim_spec
from gpufleet.load.objects.node_pools import read_topology
from gpufleet.load.objects.nodes import read_node, read_numa, with_numa
from gpufleet.load.objects.pods import read_pod
from gpufleet.load.objects.queues import read_group, read_priority_class, read_queue
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.storage import read_claim as read_volume_claim
from gpufleet.load.objects.storage import read_csi_node, read_storage_class, read_volume
from gpufleet.load.objects.workloads import Workload, read_workload
from gpufleet.load.vocabularies.elasticquota import read_elastic_quota
from gpufleet.load.vocabularies.kai import read_kai_group, read_kai_queue
from gpufleet.load.vocabularies.volcano import ROOT as VOLCANO_ROOT
from gpufleet.load.vocabularies.volcano import read_volcano_group, read_volcano_queue
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.workload import GroupSpec
from gpufleet.scheduler.state.changes import Namespace, Topology

if TYPE_CHECKING:
    from gpufleet.scheduler.state.changes import CacheObject


class Lookups:
    """What translations look up, kept in step with the objects it comes from."""

    def __init__(
        self,
        schedulers: frozenset[str],
        names: PodNames,
        default_classes: Mapping[str, tuple[int, bool, bool]],
    ) -> None:
        self.schedulers = schedulers
        self.names = names
        """Where pods name their queue and gang in the vocabularies read."""
        self.default_classes = default_classes
        """PriorityClasses Kubernetes makes and a vocabulary's scheduler installs (KAI's),
        where the cluster has none of that name."""
        self.classes: dict[str, tuple[int, bool, bool]] = dict(default_classes)
        self.group_queues: dict[str, str] = {}
        self.namespace_queues: dict[str, str] = {}
        """Per namespace with an ElasticQuota, the queue its pods belong to (its own)."""
        self.node_gpus: dict[str, int] = {}
        self.node_labels: dict[str, Mapping[str, str]] = {}
        self.numa: dict[str, Numa] = {}
        """Per node name, the NUMA zones of its NodeResourceTopology."""
        self.templates: set[str] = set()
        self.workloads: dict[tuple[str, str], Workload] = {}
        """Per serving workload (kind, key) whose template names a queue: what it asks."""

    def read(self, kind: str, r: Reader) -> CacheObject | Context | None:
        """Object ``r`` of ``kind`` as the cache (or these lookups) keep it."""
        return _READERS[kind](self, r)

    def read_pod(self, r: Reader) -> CacheObject | Context | None:
        return self.read("Pod", r)

    def keep(self, kind: str, key: str, made: CacheObject | Context | None) -> None:
        """Keep what other objects read of ``key`` of ``kind`` in step with ``made``."""
        if kind == "Node":
            self.node_gpus.pop(key, None)
            self.node_labels.pop(key, None)
            if isinstance(made, NodeSpec):
                self.node_gpus[key] = made.gpus
                self.node_labels[key] = made.labels
        elif kind == "PriorityClass":
            self.classes.pop(key, None)
            if isinstance(made, PriorityClass):
                self.classes[key] = (made.value, made.preempts, made.default)
            elif key in self.default_classes:
                self.classes[key] = self.default_classes[key]
        elif kind == "NodeResourceTopology":
            self.numa.pop(key, None)
            if isinstance(made, NodeNuma):
                self.numa[key] = made.zones
        elif kind == "ResourceClaimTemplate":
            self.templates.discard(key)
            if made is not None:
                self.templates.add(key)
        elif kind in WORKLOADS:
            self.workloads.pop((kind, key), None)
            if isinstance(made, Workload):
                self.workloads[kind, key] = made

    def serving_demand(self) -> dict[str, float]:
        """Per queue, the GPUs its serving workloads' replicas ask for."""
        demand: dict[str, float] = {}
        for workload in self.workloads.values():
            demand[workload.queue] = demand.get(workload.queue, 0.0) + workload.gpus
        return demand

    def settle(self, cache_kind: str, settled: Settled) -> None:
        """What pods read of a settled queue or gang: a gang's queue; an ElasticQuota's
        namespace's queue."""
        name = settled.name
        if cache_kind == "PodGroup":
            self.group_queues.pop(name, None)
            if isinstance(settled.made, GroupSpec):
                self.group_queues[name] = settled.made.queue
            return
        definers = (settled.read, *settled.others) if settled.read else ()
        if any(kind == ELASTIC_QUOTA.key for kind, _ in definers):
            self.namespace_queues[name] = name
        else:
            self.namespace_queues.pop(name, None)


def _workload(kind: str, _lookups: Lookups, r: Reader) -> Workload | None:
    return read_workload(r, kind)


def _numa(r: Reader) -> NodeNuma:
    name, zones = read_numa(r)
    return NodeNuma(name, zones)


_READERS: Mapping[str, Callable[[Lookups, Reader], CacheObject | Context | None]] = {
    "NodeResourceTopology": lambda _lookups, r: _numa(r),
    "Node": lambda lookups, r: with_numa(read_node(r), lookups.numa.get(r.name)),
    "Queue": lambda _lookups, r: read_queue(r)[0],
    "PodGroup": lambda _lookups, r: read_group(r),
    "Topology": lambda _lookups, r: Topology(r.name, read_topology(r)),
    "PriorityClass": lambda _lookups, r: PriorityClass(r.name, *read_priority_class(r)),
    "DeviceClass": lambda _lookups, r: read_device_class(r),
    "ResourceClaimTemplate": lambda _lookups, r: Template(r.key, claim_spec(r, "spec.spec", r.key)),
    "ResourceClaim": lambda _lookups, r: read_claim(r),
    "StorageClass": lambda _lookups, r: read_storage_class(r),
    "PersistentVolume": lambda _lookups, r: read_volume(r),
    "PersistentVolumeClaim": lambda _lookups, r: read_volume_claim(r),
    "CSINode": lambda _lookups, r: read_csi_node(r),
    "Namespace": lambda _lookups, r: Namespace(r.name, r.strings("metadata.labels")),
    **{kind: partial(_workload, kind) for kind in WORKLOADS},
    "Pod": lambda lookups, r: read_pod(
        r,
        lookups.classes,
        lookups.group_queues,
        lookups.node_gpus,
        schedulers=lookups.schedulers,
        names=lookups.names,
        namespace_queues=lookups.namespace_queues,
    ),
    KAI_QUEUE.key: lambda _lookups, r: read_kai_queue(r)[0],
    VOLCANO_QUEUE.key: lambda _lookups, r: (
        None if r.name == VOLCANO_ROOT else read_volcano_queue(r)[0]
    ),
    ELASTIC_QUOTA.key: lambda _lookups, r: read_elastic_quota(r)[0],
    KAI_POD_GROUP.key: lambda _lookups, r: read_kai_group(r),
    VOLCANO_POD_GROUP.key: lambda _lookups, r: read_volcano_group(r),
}
