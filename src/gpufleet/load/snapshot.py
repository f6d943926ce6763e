"""Read a cluster snapshot: the YAML that ``kubectl get -o yaml`` prints, into a Snapshot.

Multi-document YAML and ``kind: List`` (and lists of lists) are both accepted. gpufleet
reads Nodes, Pods, PodGroups (``scheduling.x-k8s.io``), Queues (``gpufleet.io``) and
PriorityClasses, among others (ARCHITECTURE.md, "Vocabulary"); other kinds (Services,
ConfigMaps, …) are skipped. Quantities follow Kubernetes ("500m", "80Gi", "1e3").

Every object is checked; the first bad field stops the load with an :class:`InputError`
naming the file, the object (``Kind namespace/name``) and the field — nothing is dropped
silently. Raw Kubernetes dictionaries stop here: the core sees only model values.

Choices worth knowing:

* A pod's request per resource is the larger of the sum over its containers and the
  largest init container; a resource with limits but no requests requests its limits
  (Kubernetes' defaulting) — which is how ``nvidia.com/gpu`` is usually written.
* ``gpufleet.io/gpu-fraction: "0.5"`` asks for half of one GPU; ``gpufleet.io/gpu-memory``
  asks for that much memory of one GPU, kept as written: each object is read alone, so the
  share is sized only where the pod is judged against a node, by that node's GPU memory
  (label ``nvidia.com/gpu.memory``, MiB; see :meth:`PodSpec.sized_for`).
* Succeeded and Failed pods hold nothing and are skipped. Pods bound by any scheduler take
  capacity; pods of other schedulers count towards a queue only if they carry its label
  (or Kueue's label of a LocalQueue, or live in the namespace of an ElasticQuota, the queue
  of that namespace).
* ``spec.unschedulable`` on a Node acts as the taint ``node.kubernetes.io/unschedulable``.
* A ``NodePool`` (``gpufleet.io``) is the compact form of many identical nodes, for a
  cluster that is only a description (a replay's): ``spec.count`` nodes made from
  ``spec.template`` (a Node without a name), named ``POOL-000``, ``POOL-001``, …, each
  labelled ``kubernetes.io/hostname``; ``spec.domains`` (widest first) gives each run of
  ``size`` consecutive nodes its own value of a topology label (``POOL-rack-00``, …). With
  no ``Topology`` object, the pools' domain labels, then the hostname, are the topology.
  The nodes are new objects: they do not take the template's ``uid`` or
  ``resourceVersion`` (a template copied from a real Node has them).
* Nodes, Pods, PodGroups and Queues keep their ``metadata.uid`` and
  ``metadata.resourceVersion`` (:meth:`Reader.identity`); they never change a decision.

Here the objects are sorted by kind (:mod:`gpufleet.load.objects.kinds`) and each kind goes
through its reader, in the order their references need:
:mod:`~gpufleet.load.objects.node_pools`, :mod:`~gpufleet.load.objects.nodes`,
:mod:`~gpufleet.load.objects.queues`, :mod:`~gpufleet.load.objects.pods`,
:mod:`~gpufleet.load.objects.devices`; what is checked across objects is
:mod:`gpufleet.load.objects.checks`, and the YAML itself is read by
:mod:`gpufleet.load.objects.documents`.
"""

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TypeVar

from gpufleet.load.errors import InputError, warn_default
from gpufleet.load.foreign import (
    ALL,
    ELASTIC_QUOTA,
    KAI_POD_GROUP,
    KAI_QUEUE,
    KUEUE_CLUSTER_QUEUES,
    KUEUE_COHORTS,
    KUEUE_LOCAL_QUEUES,
    VOLCANO_POD_GROUP,
    VOLCANO_QUEUE,
    ForeignKind,
    installed_classes,
    pod_names,
)
from gpufleet.load.objects.checks import (
    check_fields,
    check_levels,
    foreign_fields,
    missing_classes,
    namespace_labels,
    other_schedulers,
    placement_fields,
    pod_claims,
    queue_tree,
    serving_queries,
    unique,
)
from gpufleet.load.objects.devices import device_class, pools
from gpufleet.load.objects.documents import documents, objects_of
from gpufleet.load.objects.kinds import Warn, sort_objects
from gpufleet.load.objects.node_pools import pool_levels, read_node_pool, read_topology
from gpufleet.load.objects.nodes import read_node, read_numa, with_numa
from gpufleet.load.objects.pods import read_pod, succeeded_in
from gpufleet.load.objects.queues import read_group, read_priority_class, read_queue
from gpufleet.load.objects.reader import Obj, Reader, each
from gpufleet.load.objects.storage import read_claim, read_csi_node, read_storage_class, read_volume
from gpufleet.load.objects.vocabulary import SCHEDULER_NAME
from gpufleet.load.vocabularies.elasticquota import read_elastic_quota
from gpufleet.load.vocabularies.kai import read_kai_group, read_kai_queue
from gpufleet.load.vocabularies.kueue import (
    NamedBy,
    kueue_queues,
    read_cluster_queue,
    read_cohort,
    read_local_queue,
)
from gpufleet.load.vocabularies.volcano import ROOT as VOLCANO_ROOT
from gpufleet.load.vocabularies.volcano import read_volcano_group, read_volcano_queue
from gpufleet.model.devices import Pool
from gpufleet.model.volumes import Storage
from gpufleet.model.workload import Snapshot

MAX_PODS = 1_000_000
"""Pods in one snapshot: Kubernetes' own scalability limit is 150,000 per cluster."""


def load_snapshot(
    path: Path,
    *,
    warn: Warn = warn_default,
    need_nodes: bool = True,
    schedulers: Collection[str] = (SCHEDULER_NAME,),
    vocabularies: frozenset[str] = ALL,
) -> Snapshot:
    """The snapshot in the YAML file ``path``; what is skipped or doubtful goes to ``warn``.
    Without ``need_nodes`` the file may hold other objects only (a file of Queues). The
    pods gpufleet schedules are those whose ``spec.schedulerName`` is in ``schedulers``;
    other schedulers' queues and gangs are read in ``vocabularies``
    (:mod:`gpufleet.load.foreign`)."""
    return parse_snapshot(
        (obj for doc in documents(path) for obj in objects_of(doc, str(path))),
        str(path),
        warn=warn,
        need_nodes=need_nodes,
        schedulers=schedulers,
        vocabularies=vocabularies,
    )


def parse_snapshot(
    objects: Iterator[Obj] | list[Obj],
    source: str,
    *,
    warn: Warn = warn_default,
    need_nodes: bool = True,
    schedulers: Collection[str] = (SCHEDULER_NAME,),
    vocabularies: frozenset[str] = ALL,
) -> Snapshot:
    """A snapshot from Kubernetes objects as dictionaries (``source`` names them in errors).

    Every field the loader reads is checked with its own message; a structure no check
    foresaw (a list where a string belongs, say) still ends as an InputError naming the
    object, never a traceback.
    """
    try:
        return _parse(
            objects,
            source,
            warn,
            need_nodes=need_nodes,
            schedulers=frozenset(schedulers),
            vocabularies=vocabularies,
        )
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(source, f"unexpected structure: {exc}") from None


def _parse(
    objects: Iterator[Obj] | list[Obj],
    source: str,
    warn: Warn,
    *,
    need_nodes: bool,
    schedulers: frozenset[str],
    vocabularies: frozenset[str],
) -> Snapshot:
    by_kind: dict[str, list[Reader]] = {
        kind: [Reader(source, obj) for obj in objs]
        for kind, objs in sort_objects(objects, source, warn, vocabularies).items()
    }
    check_fields(by_kind, warn)
    foreign_fields(by_kind, warn)
    pools = each(by_kind.get("NodePool", []), read_node_pool)
    for _, pool_nodes, _ in pools:
        by_kind.setdefault("Node", []).extend(pool_nodes)
    numa = dict(
        unique(
            each(by_kind.get("NodeResourceTopology", []), read_numa),
            lambda item: item[0],
            "NodeResourceTopology",
            source,
        )
    )
    nodes = unique(
        [with_numa(n, numa.get(n.name)) for n in each(by_kind.get("Node", []), read_node)],
        lambda n: n.name,
        "Node",
        source,
    )
    class_readers = by_kind.get("PriorityClass", [])
    classes = installed_classes(vocabularies) | dict(
        zip((r.name for r in class_readers), each(class_readers, read_priority_class), strict=True)
    )
    volcano = [r for r in by_kind.get(VOLCANO_QUEUE.key, []) if r.name != VOLCANO_ROOT]
    queues = queue_tree(
        _one_each(
            [
                *_origins(by_kind, "Queue", read_queue),
                *_origins(by_kind, KAI_QUEUE.key, read_kai_queue),
                *_origins({"": volcano}, "", read_volcano_queue),
                *_origins(by_kind, ELASTIC_QUOTA.key, read_elastic_quota),
                *kueue_queues(
                    _origins({"": _all(by_kind, KUEUE_CLUSTER_QUEUES)}, "", read_cluster_queue),
                    _origins({"": _all(by_kind, KUEUE_COHORTS)}, "", read_cohort),
                ),
            ],
            lambda q: q[0].name,
            "Queue",
            source,
        ),
        source,
        {r.name: "spec.parent" for r in volcano},
    )
    groups = _one_each(
        [
            *_origins(by_kind, "PodGroup", read_group),
            *_origins(by_kind, KAI_POD_GROUP.key, read_kai_group),
            *_origins(by_kind, VOLCANO_POD_GROUP.key, read_volcano_group),
        ],
        lambda g: g.key,
        "PodGroup",
        source,
    )
    group_queues = {g.key: g.queue for g in groups}
    namespace_queues = {r.namespace: r.namespace for r in by_kind.get(ELASTIC_QUOTA.key, [])}
    local_queues = dict(
        unique(
            each(_all(by_kind, KUEUE_LOCAL_QUEUES), read_local_queue),
            lambda item: item[0],
            "LocalQueue",
            source,
        )
    )
    names = pod_names(vocabularies)
    node_gpus = {n.name: n.gpus for n in nodes}
    if len(by_kind.get("Pod", [])) > MAX_PODS:
        raise InputError(
            source, f"holds {len(by_kind['Pod']):,} Pods: gpufleet reads at most {MAX_PODS:,}"
        )
    read_pods = each(
        by_kind.get("Pod", []),
        lambda r: read_pod(
            r,
            classes,
            group_queues,
            node_gpus,
            schedulers=schedulers,
            names=names,
            namespace_queues=namespace_queues,
            local_queues=local_queues,
        ),
    )
    pods = [pod for pod in read_pods if pod is not None]
    other_schedulers(by_kind.get("Pod", []), read_pods, source, warn)
    placement_fields(by_kind.get("Pod", []), read_pods, source, warn)
    namespace_labels(pods, len(by_kind.get("Namespace", [])), source, warn)
    missing_classes(by_kind.get("Pod", []), classes, source, warn)
    serving_queries(queues, source, warn)
    done = Counter(g for r in by_kind.get("Pod", []) if (g := succeeded_in(r, names)))
    groups = [replace(g, succeeded=done[g.key]) if done[g.key] else g for g in groups]
    topologies = by_kind.get("Topology", [])
    if len(topologies) > 1:
        raise InputError(
            f"{source}: Topology {topologies[1].name}", "a snapshot holds at most one Topology"
        )
    levels = read_topology(topologies[0]) if topologies else pool_levels(pools)
    check_levels(groups, levels, source)
    claims, allocations = pod_claims(by_kind, pods)
    storage = Storage(
        tuple(
            unique(
                each(by_kind.get("StorageClass", []), read_storage_class),
                lambda c: c.name,
                "StorageClass",
                source,
            )
        ),
        tuple(
            unique(
                each(by_kind.get("PersistentVolume", []), read_volume),
                lambda v: v.name,
                "PersistentVolume",
                source,
            )
        ),
        tuple(
            unique(
                each(by_kind.get("PersistentVolumeClaim", []), read_claim),
                lambda c: c.key,
                "PersistentVolumeClaim",
                source,
            )
        ),
        tuple(
            unique(
                each(by_kind.get("CSINode", []), read_csi_node), lambda c: c.name, "CSINode", source
            )
        ),
    )
    node_labels = {n.name: n.labels for n in nodes}
    snapshot = Snapshot(
        tuple(nodes),
        tuple(unique(pods, lambda p: p.key, "Pod", source)),
        tuple(groups),
        queues,
        levels,
        tuple(each(by_kind.get("DeviceClass", []), device_class)),
        _each_pools(by_kind.get("ResourceSlice", []), node_labels),
        tuple(claims),
        allocations,
        storage,
        {r.name: r.strings("metadata.labels") for r in by_kind.get("Namespace", [])},
        tuple(offer for _, _, offer in pools if offer is not None),
    )
    if need_nodes and not nodes:
        raise InputError(
            source,
            "holds no Node (nor NodePool): a snapshot needs the cluster's nodes, "
            "as `kubectl get nodes -o yaml` prints them",
        )
    return snapshot


T = TypeVar("T")


def _all(by_kind: Mapping[str, list[Reader]], kinds: Iterable[ForeignKind]) -> list[Reader]:
    """The objects of ``kinds`` (one kind in several API versions), in that order."""
    return [r for kind in kinds for r in by_kind.get(kind.key, [])]


def _origins(
    by_kind: Mapping[str, list[Reader]], key: str, read: Callable[[Reader], T]
) -> list[tuple[T, Reader]]:
    """Each object of ``key`` read, with its reader (to name it if it collides)."""
    readers = by_kind.get(key, [])
    return list(zip(each(readers, read), readers, strict=True))


def _one_each(
    items: Sequence[tuple[T, Reader | NamedBy]], name: Callable[[T], str], kind: str, source: str
) -> list[T]:
    """The items, each name once: two objects (of one vocabulary or two) that define the same
    queue or gang are an error naming both."""
    seen: dict[str, Reader | NamedBy] = {}
    for item, origin in items:
        key = name(item)
        if key in seen:
            raise InputError(
                f"{source}: {kind} {key}",
                f"defined twice: by {described(seen[key])} and by {described(origin)}; "
                "keep one, or leave one vocabulary out",
            )
        seen[key] = origin
    return [item for item, _ in items]


def described(origin: Reader | NamedBy) -> str:
    """``Queue scheduling.run.ai/v2 team-a``: the object a reader read; for a Kueue cohort
    no object defines, ``cohort team-ab (spec.cohortName of ClusterQueue ... team-a-cq)``."""
    if isinstance(origin, NamedBy):
        return f"cohort {origin.cohort} ({origin.field} of {described(origin.reader)})"
    name = origin.key if "namespace" in origin.meta else origin.name
    return f"{origin.obj.get('kind')} {origin.obj.get('apiVersion')} {name}"


def _each_pools(
    slices: list[Reader], node_labels: Mapping[str, Mapping[str, str]]
) -> tuple[Pool, ...]:
    try:
        return pools(slices, node_labels)
    except InputError:
        raise
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
        where = slices[0].where if slices else "ResourceSlice"
        raise InputError(where, f"unexpected structure: {exc}") from None
