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
  capacity; pods of other schedulers count towards a queue only if they carry its label.
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
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gpufleet.load.devices import allocation, claim_spec, device_class, pools
from gpufleet.load.errors import InputError, reading, warn_default
from gpufleet.load.kinds import Warn, sort_objects
from gpufleet.load.pods import read_pod
from gpufleet.load.reader import RESOURCE_VERSION, UID, Obj, Reader
from gpufleet.load.schema import LENIENT, STRICT, name_problem, unknown_fields
from gpufleet.load.vocabulary import (
    DEFAULT_SCHEDULER,
    DEVICE_MATCH,
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    INTEGER,
    MIG_DYNAMIC_LABEL,
    QUEUE_LABEL,
    SCHEDULER_NAME,
    STALE_ANNOTATION,
    TOPOLOGY_PREFERRED,
    TOPOLOGY_REQUIRED,
    cpu_milli,
    mib,
    mig_profile,
)
from gpufleet.model.cluster import MAX_GPUS_PER_NODE, NodeSpec
from gpufleet.model.devices import Allocation, Claim, Pool
from gpufleet.model.mig import table_for
from gpufleet.model.selectors import (
    Taint,
)
from gpufleet.model.workload import (
    DEFAULT_QUEUE,
    GroupSpec,
    PodInfo,
    QueueSpec,
    Snapshot,
    vector,
)

SINGLE_NUMA_POLICIES = frozenset(
    {"single-numa-node", "SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel"}
)

HOSTNAME_LABEL = "kubernetes.io/hostname"
KUBELET_MAX_PODS = 110
"""A node's allocatable ``pods`` where the snapshot does not say: the kubelet's default."""
NODE_RESOURCES = frozenset({"cpu", "memory", "pods", GPU_RESOURCE})
"""Allocatable resources the node model reads as such; the others are extended."""
MAX_POOL_NODES = 100_000
"""A NodePool larger than this is a typo, not a cluster."""
MAX_PODS = 1_000_000
"""Pods in one snapshot: Kubernetes' own scalability limit is 150,000 per cluster."""

T = TypeVar("T")


MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, refusing a mapping that repeats a key: the YAML spec forbids it,
    and last-wins would drop the first value (a whole pod, say) without a word."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue  # merge keys (<<) and complex keys: the constructor handles them
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise InputError(
                    self.name,
                    f"mapping key {key_node.value!r} appears twice (the YAML spec forbids it; "
                    "remove one of them)",
                    line=key_node.start_mark.line + 1,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def _documents(path: Path) -> Iterator[Any]:
    source = str(path)
    with reading(path, "a YAML file"):
        text = path.read_text(encoding="utf-8")
    loader = _UniqueKeyLoader(text)
    loader.name = source
    try:
        while loader.check_data():
            yield loader.get_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(source, f"is not valid YAML ({exc})", line=line) from None
    finally:
        loader.dispose()


def _objects(doc: Any, source: str) -> Iterator[Obj]:
    if doc is None:
        return
    if not isinstance(doc, Mapping):
        raise InputError(source, f"expected Kubernetes objects (mappings), got {doc!r}")
    if doc.get("kind") == "List" or (
        isinstance(doc.get("kind"), str) and str(doc.get("kind")).endswith("List")
    ):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputError(source, "expected a list", field="List.items")
        for item in items:
            yield from _objects(item, source)
        return
    yield doc


def load_snapshot(
    path: Path,
    *,
    warn: Warn = warn_default,
    need_nodes: bool = True,
    schedulers: Collection[str] = (SCHEDULER_NAME,),
) -> Snapshot:
    """The snapshot in the YAML file ``path``; what is skipped or doubtful goes to ``warn``.
    Without ``need_nodes`` the file may hold other objects only (a file of Queues). The
    pods gpufleet schedules are those whose ``spec.schedulerName`` is in ``schedulers``."""
    return parse_snapshot(
        (obj for doc in _documents(path) for obj in _objects(doc, str(path))),
        str(path),
        warn=warn,
        need_nodes=need_nodes,
        schedulers=schedulers,
    )


def parse_snapshot(
    objects: Iterator[Obj] | list[Obj],
    source: str,
    *,
    warn: Warn = warn_default,
    need_nodes: bool = True,
    schedulers: Collection[str] = (SCHEDULER_NAME,),
) -> Snapshot:
    """A snapshot from Kubernetes objects as dictionaries (``source`` names them in errors).

    Every field the loader reads is checked with its own message; a structure no check
    foresaw (a list where a string belongs, say) still ends as an InputError naming the
    object, never a traceback.
    """
    try:
        return _parse(
            objects, source, warn, need_nodes=need_nodes, schedulers=frozenset(schedulers)
        )
    except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(source, f"unexpected structure: {exc}") from None


def _each(readers: list[Reader], read: Callable[[Reader], T]) -> list[T]:
    """``read`` every object; a structure no field check foresaw names its object."""
    out = []
    for r in readers:
        try:
            out.append(read(r))
        except InputError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
            raise InputError(r.where, f"unexpected structure: {exc}") from None
    return out


def _parse(
    objects: Iterator[Obj] | list[Obj],
    source: str,
    warn: Warn,
    *,
    need_nodes: bool,
    schedulers: frozenset[str],
) -> Snapshot:
    by_kind: dict[str, list[Reader]] = {
        kind: [Reader(source, obj) for obj in objs]
        for kind, objs in sort_objects(objects, source, warn).items()
    }
    _check_fields(by_kind, warn)
    pools = _each(by_kind.get("NodePool", []), _node_pool)
    for _, pool_nodes in pools:
        by_kind.setdefault("Node", []).extend(pool_nodes)
    numa = dict(
        _unique(
            _each(by_kind.get("NodeResourceTopology", []), _numa),
            lambda item: item[0],
            "NodeResourceTopology",
            source,
        )
    )
    nodes = _unique(
        [_with_numa(n, numa.get(n.name)) for n in _each(by_kind.get("Node", []), _node)],
        lambda n: n.name,
        "Node",
        source,
    )
    class_readers = by_kind.get("PriorityClass", [])
    classes = dict(
        zip((r.name for r in class_readers), _each(class_readers, _priority_class), strict=True)
    )
    queues = _queues(_each(by_kind.get("Queue", []), _queue), source)
    groups = _unique(
        _each(by_kind.get("PodGroup", []), _group), lambda g: g.key, "PodGroup", source
    )
    group_queues = {g.key: g.queue for g in groups}
    node_gpus = {n.name: n.gpus for n in nodes}
    if len(by_kind.get("Pod", [])) > MAX_PODS:
        raise InputError(
            source, f"holds {len(by_kind['Pod']):,} Pods: gpufleet reads at most {MAX_PODS:,}"
        )
    read_pods = _each(
        by_kind.get("Pod", []),
        lambda r: read_pod(r, classes, group_queues, node_gpus, schedulers=schedulers),
    )
    pods = [pod for pod in read_pods if pod is not None]
    _other_schedulers(by_kind.get("Pod", []), read_pods, source, warn)
    topologies = by_kind.get("Topology", [])
    if len(topologies) > 1:
        raise InputError(
            f"{source}: Topology {topologies[1].name}", "a snapshot holds at most one Topology"
        )
    levels = _topology(topologies[0]) if topologies else _pool_levels(pools)
    for group in groups:
        for annotation, key in (
            (TOPOLOGY_REQUIRED, group.topology_required),
            (TOPOLOGY_PREFERRED, group.topology_preferred),
        ):
            if key is not None and levels and key not in levels:
                raise InputError(
                    f"{source}: PodGroup {group.key}",
                    f"expected one of the Topology's levels ({', '.join(levels)}), got {key!r}",
                    field=f"metadata.annotations.{annotation}",
                )
    claims, allocations = _claims(by_kind, pods)
    node_labels = {n.name: n.labels for n in nodes}
    snapshot = Snapshot(
        tuple(nodes),
        tuple(_unique(pods, lambda p: p.key, "Pod", source)),
        tuple(groups),
        queues,
        levels,
        tuple(_each(by_kind.get("DeviceClass", []), device_class)),
        _each_pools(by_kind.get("ResourceSlice", []), node_labels),
        tuple(claims),
        allocations,
    )
    if need_nodes and not nodes:
        raise InputError(
            source,
            "holds no Node (nor NodePool): a snapshot needs the cluster's nodes, "
            "as `kubectl get nodes -o yaml` prints them",
        )
    return snapshot


def _check_fields(by_kind: Mapping[str, list[Reader]], warn: Warn) -> None:
    """Unknown fields: an error in gpufleet's own kinds, a warning in Kubernetes' (see
    :mod:`gpufleet.load.schema`)."""
    unknown: dict[tuple[str, str], list[Reader]] = {}
    for kind, readers in by_kind.items():
        strict = STRICT.get(kind)
        schema = strict or LENIENT.get(kind)
        if schema is None:
            continue
        for r in readers:
            _check_names(r, kind, strict=strict is not None, warn=warn)
            for field in unknown_fields(r.obj, schema):
                if strict is not None:
                    raise InputError(
                        r.where,
                        f"unknown field (gpufleet's {kind} has no such field: misspelt?)",
                        field=field,
                    )
                unknown.setdefault((kind, field), []).append(r)
    for (kind, field), readers in unknown.items():  # one line per field, not per object
        also = f" (and {len(readers) - 1} more {kind}s)" if len(readers) > 1 else ""
        warn(
            f'{readers[0].where}{also}: unknown field "{field}" '
            "(gpufleet does not read it: misspelt?)"
        )


def _check_names(r: Reader, kind: str, *, strict: bool, warn: Warn) -> None:
    """Object names Kubernetes would refuse: an error in gpufleet's own kinds (a Queue's name
    is also a label value, so at most 63 characters), a warning elsewhere."""
    checks = [("metadata.name", name_problem(r.name, limit=63 if kind == "Queue" else 253))]
    if "namespace" in r.meta:
        checks.append(("metadata.namespace", name_problem(r.namespace, label=True)))
    for field, problem in checks:
        if problem is None:
            continue
        if strict:
            raise InputError(r.where, problem, field=field)
        warn(f"{r.where}: field '{field}': {problem} (Kubernetes would refuse it)")


def _other_schedulers(
    readers: list[Reader], pods: list[PodInfo | None], source: str, warn: Warn
) -> None:
    """Say how many pending pods belong to other schedulers: they are not in the result."""
    others = Counter(
        str(r.get("spec.schedulerName", DEFAULT_SCHEDULER))
        for r, pod in zip(readers, pods, strict=True)
        if pod is not None and not pod.managed and not pod.bound
    )
    if others:
        names = ", ".join(f"{name}: {n}" for name, n in sorted(others.items()))
        total = sum(others.values())
        warn(
            f"{source}: {total} pending pod{'s' * (total != 1)} belong{'s' * (total == 1)} "
            f"to other schedulers ({names}) and {'are' if total != 1 else 'is'} not scheduled "
            "(--scheduler-name NAME schedules that scheduler's pods too)"
        )


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


def _topology(r: Reader) -> tuple[str, ...]:
    levels = r.field_of_each("spec.levels", "nodeLabel", "a node-label key")
    if not levels:
        raise r.fail("spec.levels", "at least one level (nodeLabel), widest first", None)
    if len(set(levels)) != len(levels):
        raise r.fail("spec.levels", "distinct node labels", levels)
    return tuple(levels)


def _node_pool(r: Reader) -> tuple[tuple[str, ...], list[Reader]]:
    """A NodePool: its domain labels (widest first) and its nodes, as Node readers."""
    count = r.integer("spec.count", 0, minimum=1)
    if count > MAX_POOL_NODES:
        raise r.fail("spec.count", f"at most {MAX_POOL_NODES:,} nodes", count)
    template = r.mapping("spec.template")
    if not template:
        raise r.fail("spec.template", "a Node (metadata.labels, status.allocatable)", None)
    domains: list[tuple[str, int]] = []
    for i, raw in enumerate(r.sequence("spec.domains")):
        label = raw.get("label") if isinstance(raw, Mapping) else None
        size = raw.get("size") if isinstance(raw, Mapping) else None
        taken = {HOSTNAME_LABEL, *(known for known, _ in domains)}
        if not isinstance(label, str) or not label or label in taken:
            raise r.fail(
                f"spec.domains[{i}].label", f"a node-label key other than {sorted(taken)}", label
            )
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise r.fail(f"spec.domains[{i}].size", "a number of nodes >= 1", size)
        if domains and (size >= domains[-1][1] or domains[-1][1] % size):
            raise r.fail(
                f"spec.domains[{i}].size",
                f"fewer nodes than the wider domain before it, dividing its {domains[-1][1]}",
                size,
            )
        domains.append((label, size))
    meta = template.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise r.fail("spec.template.metadata", "a mapping", meta)
    # A template copied from a real Node carries its identity; the pool's nodes are new
    # objects, and must not all claim that one uid.
    meta = {k: v for k, v in meta.items() if k not in {UID, RESOURCE_VERSION}}
    labels = meta.get("labels") or {}
    if not isinstance(labels, Mapping):
        raise r.fail("spec.template.metadata.labels", "a mapping", labels)
    width = max(3, len(str(count - 1)))
    nodes = []
    for i in range(count):
        name = f"{r.name}-{i:0{width}d}"
        own = {label: f"{r.name}-{_short(label)}-{i // size:02d}" for label, size in domains}
        node = {
            **template,
            "kind": "Node",
            "metadata": {**meta, "name": name, "labels": {**labels, **own, HOSTNAME_LABEL: name}},
        }
        nodes.append(Reader(r.source, node))
    try:
        _node(nodes[0])  # every node is the template: check it once, naming the pool
    except InputError as exc:
        field = "spec.template" + (f".{exc.field}" if exc.field else "")
        raise InputError(r.where, exc.problem, field=field) from None
    return tuple(label for label, _ in domains), nodes


def _short(label: str) -> str:
    """``topology.gpufleet.io/rack`` -> ``rack``."""
    return label.rpartition("/")[2] or label


def _pool_levels(pools: list[tuple[tuple[str, ...], list[Reader]]]) -> tuple[str, ...]:
    levels = list(dict.fromkeys(label for labels, _ in pools for label in labels))
    return (*levels, HOSTNAME_LABEL) if levels else ()


def _unique(items: list[T], key: Any, kind: str, source: str) -> list[T]:
    seen: set[str] = set()
    for item in items:
        name = key(item)
        if name in seen:
            raise InputError(f"{source}: {kind} {name}", "appears twice in the snapshot")
        seen.add(name)
    return items


def _taints(r: Reader) -> tuple[Taint, ...]:
    taints = []
    for i, raw in enumerate(r.sequence("spec.taints")):
        if not isinstance(raw, Mapping) or not raw.get("key"):
            raise r.fail(f"spec.taints[{i}].key", "a taint with a key", raw)
        effect = str(raw.get("effect", "NoSchedule"))
        if effect not in {"NoSchedule", "PreferNoSchedule", "NoExecute"}:
            raise r.fail(
                f"spec.taints[{i}].effect", "NoSchedule, PreferNoSchedule or NoExecute", effect
            )
        taints.append(Taint(str(raw["key"]), str(raw.get("value") or ""), effect))
    if r.get("spec.unschedulable") is True:
        taints.append(Taint("node.kubernetes.io/unschedulable", "", "NoSchedule"))
    return tuple(taints)


def _node(r: Reader) -> NodeSpec:
    allocatable = r.mapping("status.allocatable")
    if not allocatable:
        raise r.fail("status.allocatable", "cpu, memory (and nvidia.com/gpu) quantities", None)
    for resource in ("cpu", "memory"):
        if resource not in allocatable:
            raise r.fail(f"status.allocatable.{resource}", "a quantity", None)
    cpu = r.quantity("status.allocatable.cpu", allocatable["cpu"])
    memory = r.quantity("status.allocatable.memory", allocatable["memory"])
    gpu_field = f"status.allocatable.{GPU_RESOURCE}"
    gpus = r.count(gpu_field, allocatable.get(GPU_RESOURCE, 0), "GPUs")
    if gpus > MAX_GPUS_PER_NODE:
        raise r.fail(
            gpu_field, f"at most {MAX_GPUS_PER_NODE} GPUs on one node", allocatable[GPU_RESOURCE]
        )
    labels = r.strings("metadata.labels")
    slices: dict[str, int] = {}
    extended: dict[str, int] = {}
    for resource, raw in allocatable.items():
        field = f"status.allocatable.{resource}"
        profile = mig_profile(r, field, str(resource))
        if profile is not None:
            slices[profile] = r.count(field, raw, "slices")
        elif resource not in NODE_RESOURCES:
            extended[str(resource)] = math.floor(r.quantity(field, raw))
    max_pods = r.count("status.allocatable.pods", allocatable.get("pods", KUBELET_MAX_PODS), "pods")
    product = labels.get(GPU_PRODUCT_LABEL)
    dynamic = labels.get(MIG_DYNAMIC_LABEL) == "true" and not slices and gpus > 0
    if dynamic and table_for(product) is None:
        raise r.fail(
            f"metadata.labels.{MIG_DYNAMIC_LABEL}",
            f"a node whose GPUs gpufleet can partition (label {GPU_PRODUCT_LABEL} of an "
            "A100, H100 or H200)",
            product,
        )
    uid, version = r.identity()
    return NodeSpec(
        r.name,
        cpu_milli(cpu),
        mib(memory, round_up=False),
        gpus,
        product,
        labels,
        _taints(r),
        slices,
        dynamic,
        extended=extended,
        max_pods=max_pods,
        uid=uid,
        resource_version=version,
        gpu_memory_mib=_gpu_memory(r, labels),
    )


def _numa(r: Reader) -> tuple[str, tuple[tuple[int, ...], tuple[int, ...], bool]]:
    """A NodeResourceTopology: per GPU its zone (GPUs numbered zone by zone), per zone its
    allocatable CPU, and whether the kubelet runs the single-numa-node policy."""
    gpu_zones: list[int] = []
    zone_cpu: list[int] = []
    zones = [z for z in r.sequence("zones") if isinstance(z, Mapping) and z.get("type") == "Node"]
    for i, zone in enumerate(zones):
        cpu, gpus = Decimal(0), Decimal(0)
        resources = zone.get("resources") or []
        if not isinstance(resources, list):
            raise r.fail(f"zones[{i}].resources", "a list", resources)
        for j, res in enumerate(resources):
            if not isinstance(res, Mapping):
                raise r.fail(f"zones[{i}].resources[{j}]", "a resource", res)
            amount = res.get("allocatable", res.get("capacity", 0))
            if res.get("name") == "cpu":
                cpu = r.quantity(f"zones[{i}].resources[{j}].allocatable", amount)
            elif res.get("name") == GPU_RESOURCE:
                gpus = r.quantity(f"zones[{i}].resources[{j}].allocatable", amount)
        gpu_zones.extend([i] * int(gpus))
        zone_cpu.append(cpu_milli(cpu))
    policies = {str(p) for p in r.sequence("topologyPolicies")}
    for attribute in r.sequence("attributes"):
        if isinstance(attribute, Mapping) and attribute.get("name") == "topologyManagerPolicy":
            policies.add(str(attribute.get("value")))
    return r.name, (tuple(gpu_zones), tuple(zone_cpu), bool(policies & SINGLE_NUMA_POLICIES))


def _with_numa(
    node: NodeSpec, numa: tuple[tuple[int, ...], tuple[int, ...], bool] | None
) -> NodeSpec:
    if numa is None:
        return node
    gpu_zones, zone_cpu, single = numa
    if len(gpu_zones) != node.gpus:
        gpu_zones = ()  # the topology does not account for every GPU: do not guess
    return replace(node, gpu_zones=gpu_zones, zone_cpu_milli=zone_cpu, single_numa=single)


def _gpu_memory(r: Reader, labels: Mapping[str, str]) -> int | None:
    """MiB of each of the node's GPUs (label ``nvidia.com/gpu.memory``), None without it."""
    raw = labels.get(GPU_MEMORY_LABEL)
    if raw is None:
        return None
    if not INTEGER.fullmatch(raw) or int(raw) <= 0 or len(raw) > 9:
        raise r.fail(f"metadata.labels.{GPU_MEMORY_LABEL}", "MiB as a positive integer", raw)
    return int(raw)


def _priority_class(r: Reader) -> tuple[int, bool, bool]:
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


def _queue(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
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
        uid,
        version,
    )
    return spec, given


def _queues(specs: list[tuple[QueueSpec, tuple[bool, ...]]], source: str) -> tuple[QueueSpec, ...]:
    queues = {spec.name: spec for spec, _ in _unique(specs, lambda s: s[0].name, "Queue", source)}
    for spec in queues.values():
        seen = {spec.name}
        parent = spec.parent
        while parent is not None:
            if parent not in queues:
                raise InputError(
                    f"{source}: Queue {spec.name}",
                    f"names parent queue {parent!r}, which is not in the snapshot",
                    field="spec.parentQueue",
                )
            if parent in seen:
                raise InputError(
                    f"{source}: Queue {spec.name}",
                    "parent queues form a cycle",
                    field="spec.parentQueue",
                )
            seen.add(parent)
            parent = queues[parent].parent
    return tuple(queues[name] for name in sorted(queues))


def _group(r: Reader) -> GroupSpec:
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
        r.time("metadata.creationTimestamp") or 0.0,
        stale,
        annotations.get(TOPOLOGY_REQUIRED) or None,
        annotations.get(TOPOLOGY_PREFERRED) or None,
        annotations.get(DEVICE_MATCH) or None,
        uid,
        version,
    )


def _claims(
    by_kind: dict[str, list[Reader]], pods: list[PodInfo]
) -> tuple[list[Claim], dict[str, Allocation]]:
    """Every claim pods use: the ResourceClaims, and the claims made from templates."""
    claims = {}
    allocations = {}
    for r in by_kind.get("ResourceClaim", []):
        claims[r.key] = _each([r], lambda r: claim_spec(r, "spec", r.key))[0]
        found = allocation(r)
        if found is not None:
            allocations[r.key] = found
    templates = {r.key: r for r in by_kind.get("ResourceClaimTemplate", [])}
    pod_readers = {r.key: r for r in by_kind.get("Pod", [])}
    for pod in pods:
        r = pod_readers[pod.key]
        for i, ref in enumerate(r.sequence("spec.resourceClaims")):
            key = pod.claims[i]
            name = ref.get("resourceClaimTemplateName")
            if name is None:
                if key not in claims:
                    raise r.fail(
                        f"spec.resourceClaims[{i}].resourceClaimName",
                        "a ResourceClaim of the snapshot",
                        ref.get("resourceClaimName"),
                    )
                continue
            template = templates.get(f"{r.namespace}/{name}")
            if template is None:
                raise r.fail(
                    f"spec.resourceClaims[{i}].resourceClaimTemplateName",
                    "a ResourceClaimTemplate of the snapshot",
                    name,
                )
            claims.setdefault(key, claim_spec(template, "spec.spec", key))
    return list(claims.values()), allocations
