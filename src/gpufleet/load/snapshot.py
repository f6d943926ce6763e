"""Read a cluster snapshot: the YAML that ``kubectl get -o yaml`` prints, into a Snapshot.

Multi-document YAML and ``kind: List`` (and lists of lists) are both accepted. gpufleet
reads Nodes, Pods, PodGroups (``scheduling.x-k8s.io``), Queues (``gpufleet.io``) and
PriorityClasses — the vocabulary table of ARCHITECTURE.md; other kinds (Services,
ConfigMaps, …) are skipped. Quantities follow Kubernetes ("500m", "80Gi", "1e3").

Every object is checked; the first bad field stops the load with an :class:`InputError`
naming the file, the object (``Kind namespace/name``) and the field — nothing is dropped
silently. Raw Kubernetes dictionaries stop here: the core sees only model values.

Choices worth knowing:

* A pod's request per resource is the larger of the sum over its containers and the
  largest init container; a resource with limits but no requests requests its limits
  (Kubernetes' defaulting) — which is how ``nvidia.com/gpu`` is usually written.
* ``gpufleet.io/gpu-fraction: "0.5"`` asks for half of one GPU; ``gpufleet.io/gpu-memory``
  asks for that much GPU memory, as a fraction of the smallest GPU memory any node
  advertises (label ``nvidia.com/gpu.memory``, MiB), so it fits on every GPU it is given.
* Succeeded and Failed pods hold nothing and are skipped. Pods bound by any scheduler take
  capacity; pods of other schedulers count towards a queue only if they carry its label.
* ``spec.unschedulable`` on a Node acts as the taint ``node.kubernetes.io/unschedulable``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any, TypeVar

import yaml

from gpufleet.load.devices import DRA_KINDS, allocation, claim_spec, device_class, pools
from gpufleet.load.errors import InputError, reading
from gpufleet.load.reader import Obj, Reader
from gpufleet.model.cluster import MILLI, NodeSpec
from gpufleet.model.devices import Allocation, Claim, Pool
from gpufleet.model.mig import table_for
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import (
    FIELD_NODE_NAME,
    OPERATORS,
    NodeConstraint,
    Requirement,
    Taint,
    Toleration,
)
from gpufleet.model.workload import (
    DEFAULT_QUEUE,
    GroupSpec,
    PodInfo,
    QueueSpec,
    Snapshot,
    vector,
)

SCHEDULER_NAME = "gpufleet"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
GPU_MEMORY_LABEL = "nvidia.com/gpu.memory"
QUEUE_LABEL = "gpufleet.io/queue"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
FRACTION_ANNOTATION = "gpufleet.io/gpu-fraction"
GPU_MEMORY_ANNOTATION = "gpufleet.io/gpu-memory"
GPU_INDEX_ANNOTATION = "gpufleet.io/gpu-index"
STALE_ANNOTATION = "gpufleet.io/stale-since"
MIG_PREFIX = "nvidia.com/mig-"
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
_MIG_PROFILE = re.compile(r"[1-7]g\.[0-9]+gb(\+me)?")
TOPOLOGY_REQUIRED = "gpufleet.io/topology-required"
TOPOLOGY_PREFERRED = "gpufleet.io/topology-preferred"
DEVICE_MATCH = "gpufleet.io/device-match-attribute"
MIB = 1 << 20


KINDS = (
    frozenset(
        {"Node", "Pod", "PodGroup", "Queue", "PriorityClass", "Topology", "NodeResourceTopology"}
    )
    | DRA_KINDS
)
SINGLE_NUMA_POLICIES = frozenset(
    {"single-numa-node", "SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel"}
)

T = TypeVar("T")


def _cpu_milli(q: Decimal) -> int:
    return math.ceil(q * 1000)


def _mib(q: Decimal, *, round_up: bool) -> int:
    value = q / MIB
    return math.ceil(value) if round_up else math.floor(value)


def _documents(path: Path) -> Iterator[Any]:
    source = str(path)
    with reading(path, "a YAML file"):
        text = path.read_text(encoding="utf-8")
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        yield from yaml.load_all(text, Loader=loader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(source, f"is not valid YAML ({exc})", line=line) from None


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


def load_snapshot(path: Path) -> Snapshot:
    """The snapshot in the YAML file ``path``."""
    return parse_snapshot(
        (obj for doc in _documents(path) for obj in _objects(doc, str(path))), str(path)
    )


def parse_snapshot(objects: Iterator[Obj] | list[Obj], source: str) -> Snapshot:
    """A snapshot from Kubernetes objects as dictionaries (``source`` names them in errors).

    Every field the loader reads is checked with its own message; a structure no check
    foresaw (a list where a string belongs, say) still ends as an InputError naming the
    object, never a traceback.
    """
    try:
        return _parse(objects, source)
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


def _parse(objects: Iterator[Obj] | list[Obj], source: str) -> Snapshot:
    by_kind: dict[str, list[Reader]] = {}
    for obj in objects:
        kind = obj.get("kind")
        if isinstance(kind, str) and kind in KINDS:
            by_kind.setdefault(kind, []).append(Reader(source, obj))
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
    gpu_memory = _smallest_gpu_memory(by_kind.get("Node", []))
    node_gpus = {n.name: n.gpus for n in nodes}
    read_pods = _each(
        by_kind.get("Pod", []), lambda r: _pod(r, classes, group_queues, gpu_memory, node_gpus)
    )
    pods = [pod for pod in read_pods if pod is not None]
    topologies = by_kind.get("Topology", [])
    if len(topologies) > 1:
        raise InputError(
            f"{source}: Topology {topologies[1].name}", "a snapshot holds at most one Topology"
        )
    levels = _topology(topologies[0]) if topologies else ()
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
    return Snapshot(
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
    levels = []
    for i, level in enumerate(r.sequence("spec.levels")):
        label = level.get("nodeLabel") if isinstance(level, Mapping) else None
        if not isinstance(label, str) or not label:
            raise r.fail(f"spec.levels[{i}].nodeLabel", "a node-label key", label)
        levels.append(label)
    if not levels:
        raise r.fail("spec.levels", "at least one level (nodeLabel), widest first", None)
    if len(set(levels)) != len(levels):
        raise r.fail("spec.levels", "distinct node labels", levels)
    return tuple(levels)


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
    gpus = r.quantity(f"status.allocatable.{GPU_RESOURCE}", allocatable.get(GPU_RESOURCE, 0))
    if gpus != int(gpus):
        raise r.fail(f"status.allocatable.{GPU_RESOURCE}", "a whole number of GPUs", gpus)
    labels = r.strings("metadata.labels")
    slices: dict[str, int] = {}
    for resource, raw in allocatable.items():
        profile = _mig_profile(r, f"status.allocatable.{resource}", str(resource))
        if profile is not None:
            count = r.quantity(f"status.allocatable.{resource}", raw)
            if count != int(count):
                raise r.fail(f"status.allocatable.{resource}", "a whole number of slices", raw)
            slices[profile] = int(count)
    product = labels.get(GPU_PRODUCT_LABEL)
    dynamic = (
        labels.get(MIG_CAPABLE_LABEL) == "true"
        and not slices
        and table_for(product) is not None
        and gpus > 0
    )
    return NodeSpec(
        r.name,
        _cpu_milli(cpu),
        _mib(memory, round_up=False),
        int(gpus),
        product,
        labels,
        _taints(r),
        slices,
        dynamic,
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
        zone_cpu.append(_cpu_milli(cpu))
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


def _mig_profile(r: Reader, field: str, resource: str) -> str | None:
    """``3g.40gb`` for ``nvidia.com/mig-3g.40gb``; None for other resources."""
    if not resource.startswith(MIG_PREFIX):
        return None
    profile = resource.removeprefix(MIG_PREFIX)
    if not _MIG_PROFILE.fullmatch(profile):
        raise r.fail(field, "a MIG profile such as nvidia.com/mig-3g.40gb", resource)
    return profile


def _smallest_gpu_memory(readers: list[Reader]) -> int | None:
    sizes = []
    for r in readers:
        raw = r.strings("metadata.labels").get(GPU_MEMORY_LABEL)
        if raw is not None:
            if not _INTEGER.fullmatch(raw) or int(raw) <= 0 or len(raw) > 9:
                raise r.fail(
                    f"metadata.labels.{GPU_MEMORY_LABEL}", "MiB as a positive integer", raw
                )
            sizes.append(int(raw))
    return min(sizes) if sizes else None


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
            return float(_cpu_milli(q))
        if resource == "memory":
            return float(_mib(q, round_up=False))
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
    return GroupSpec(
        r.key,
        r.integer("spec.minMember", 1, minimum=1),
        labels.get(QUEUE_LABEL, DEFAULT_QUEUE),
        r.time("metadata.creationTimestamp") or 0.0,
        stale,
        annotations.get(TOPOLOGY_REQUIRED) or None,
        annotations.get(TOPOLOGY_PREFERRED) or None,
        annotations.get(DEVICE_MATCH) or None,
    )


def _requests(r: Reader) -> dict[str, Decimal]:
    def container_requests(path: str) -> list[dict[str, Decimal]]:
        out = []
        for i, container in enumerate(r.sequence(path)):
            if not isinstance(container, Mapping):
                raise r.fail(f"{path}[{i}]", "a container", container)
            resources = container.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise r.fail(f"{path}[{i}].resources", "a mapping", resources)
            merged: dict[str, Decimal] = {}
            for part in ("limits", "requests"):  # requests win; limits default them
                values = resources.get(part) or {}
                if not isinstance(values, Mapping):
                    raise r.fail(f"{path}[{i}].resources.{part}", "a mapping", values)
                for name, raw in values.items():
                    field = f"{path}[{i}].resources.{part}.{name}"
                    merged[str(name)] = r.quantity(field, raw)
            out.append(merged)
        return out

    containers = container_requests("spec.containers")
    if not containers:
        raise r.fail("spec.containers", "at least one container", r.get("spec.containers"))
    total: dict[str, Decimal] = {}
    for c in containers:
        for name, q in c.items():
            total[name] = total.get(name, Decimal(0)) + q
    for c in container_requests("spec.initContainers"):
        for name, q in c.items():
            total[name] = max(total.get(name, Decimal(0)), q)
    return total


def _gpu_request(
    r: Reader, requests: dict[str, Decimal], gpu_memory: int | None
) -> tuple[int, int]:
    """(num_gpu, gpu_milli) of a pod."""
    whole = requests.get(GPU_RESOURCE, Decimal(0))
    if whole != int(whole):
        raise r.fail(f"spec.containers[].resources.{GPU_RESOURCE}", "a whole number", whole)
    annotations = r.strings("metadata.annotations")
    fraction_field = f"metadata.annotations.{FRACTION_ANNOTATION}"
    memory_field = f"metadata.annotations.{GPU_MEMORY_ANNOTATION}"
    milli = None
    if FRACTION_ANNOTATION in annotations:
        raw = annotations[FRACTION_ANNOTATION]
        try:
            fraction = float(raw)
        except ValueError:
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise r.fail(fraction_field, "a fraction of one GPU in (0, 1], such as '0.5'", raw)
        milli = max(1, round(fraction * MILLI))
    elif GPU_MEMORY_ANNOTATION in annotations:
        if gpu_memory is None:
            raise r.fail(
                memory_field,
                f"nodes labelled {GPU_MEMORY_LABEL} (MiB) to size the share against",
                annotations[GPU_MEMORY_ANNOTATION],
            )
        mib = _mib(r.quantity(memory_field, annotations[GPU_MEMORY_ANNOTATION]), round_up=True)
        if not 0 < mib <= gpu_memory:
            raise r.fail(memory_field, f"at most the smallest GPU's {gpu_memory} MiB", mib)
        milli = math.ceil(mib * MILLI / gpu_memory)
    if milli is None:
        return int(whole), MILLI if whole else 0
    if whole > 1:
        raise r.fail(fraction_field, f"no fraction with {whole} whole GPUs", whole)
    return 1, milli


NOTHING = Requirement("", "In", ())
"""A requirement no node meets (what an empty node-selector term means)."""
_INTEGER = re.compile(r"-?[0-9]+")


def _requirement(r: Reader, field: str, expr: object, kind: str) -> Requirement:
    if not isinstance(expr, Mapping) or expr.get("operator") not in OPERATORS:
        got = expr.get("operator") if isinstance(expr, Mapping) else expr
        raise r.fail(f"{field}.operator", " | ".join(OPERATORS), got)
    raw_values = expr.get("values") or []
    if not isinstance(raw_values, list):
        raise r.fail(f"{field}.values", "a list of strings", raw_values)
    values = tuple(str(v) for v in raw_values)
    op = str(expr["operator"])
    if op in {"Gt", "Lt"} and (len(values) != 1 or not _INTEGER.fullmatch(values[0])):
        raise r.fail(f"{field}.values", "one integer for Gt/Lt", list(values))
    key = expr.get("key")
    if not isinstance(key, str) or not key:
        raise r.fail(f"{field}.key", "a label key", key)
    if kind == "matchFields":
        if key != "metadata.name" or op not in {"In", "NotIn"}:
            raise r.fail(f"{field}", "metadata.name with In or NotIn (the only node field)", key)
        key = FIELD_NODE_NAME
    return Requirement(key, op, values)


def _guaranteed_whole_cpus(r: Reader) -> bool:
    """Guaranteed QoS (every container's CPU and memory limits set, requests equal to them)
    with whole CPUs: what the kubelet's static CPU manager pins."""
    containers = r.sequence("spec.containers")
    for container in containers:
        resources = container.get("resources") or {}
        limits = resources.get("limits") or {}
        requests = resources.get("requests") or {}
        for name in ("cpu", "memory"):
            if name not in limits:
                return False
            if name in requests and r.quantity("requests", requests[name]) != r.quantity(
                "limits", limits[name]
            ):
                return False
        cpu = r.quantity("limits.cpu", limits["cpu"])
        if cpu != int(cpu):
            return False
    return bool(containers)


def _mig_request(r: Reader, requests: dict[str, Decimal]) -> str | None:
    """The pod's MIG profile: one slice of one profile per pod."""
    asked = {
        profile: count
        for resource, count in requests.items()
        if (profile := _mig_profile(r, f"spec.containers[].resources.{resource}", resource))
        and count > 0
    }
    if not asked:
        return None
    if len(asked) > 1 or next(iter(asked.values())) != 1:
        raise r.fail("spec.containers[].resources", "one MIG slice per pod", asked)
    return next(iter(asked))


def _constraint(r: Reader) -> NodeConstraint | None:
    selector = tuple(
        Requirement(k, "In", (v,)) for k, v in sorted(r.strings("spec.nodeSelector").items())
    )
    path = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
    terms: list[tuple[Requirement, ...]] = []
    for i, term in enumerate(r.sequence(f"{path}.nodeSelectorTerms")):
        if not isinstance(term, Mapping):
            raise r.fail(f"{path}.nodeSelectorTerms[{i}]", "a node selector term", term)
        reqs: list[Requirement] = []
        for kind in ("matchExpressions", "matchFields"):
            exprs = term.get(kind) or []
            if not isinstance(exprs, list):
                raise r.fail(f"{path}.nodeSelectorTerms[{i}].{kind}", "a list", exprs)
            for j, expr in enumerate(exprs):
                reqs.append(
                    _requirement(r, f"{path}.nodeSelectorTerms[{i}].{kind}[{j}]", expr, kind)
                )
        # An empty term matches no node (Kubernetes); ORed with others it adds nothing.
        terms.append(tuple(reqs) if reqs else (NOTHING,))
    if terms:
        full_terms = tuple(selector + term for term in terms)
    else:
        full_terms = (selector,) if selector else ()
    tolerations = []
    for i, raw in enumerate(r.sequence("spec.tolerations")):
        if not isinstance(raw, Mapping):
            raise r.fail(f"spec.tolerations[{i}]", "a toleration", raw)
        operator = str(raw.get("operator", "Equal"))
        if operator not in {"Equal", "Exists"}:
            raise r.fail(f"spec.tolerations[{i}].operator", "Equal or Exists", operator)
        tolerations.append(
            Toleration(
                str(raw.get("key") or ""),
                operator,
                str(raw.get("value") or ""),
                str(raw.get("effect") or ""),
            )
        )
    if not full_terms and not tolerations:
        return None
    return NodeConstraint(full_terms, tuple(tolerations))


def _pod(
    r: Reader,
    classes: dict[str, tuple[int, bool, bool]],
    group_queues: dict[str, str],
    gpu_memory: int | None,
    node_gpus: dict[str, int],
) -> PodInfo | None:
    phase = r.string("status.phase", "Pending")
    if phase in {"Succeeded", "Failed"}:
        return None
    requests = _requests(r)
    num_gpu, gpu_milli = _gpu_request(r, requests, gpu_memory)
    mig = _mig_request(r, requests)
    if mig is not None and num_gpu:
        raise r.fail(
            f"spec.containers[].resources.{MIG_PREFIX}{mig}", "no whole GPUs with it", num_gpu
        )
    spec = PodSpec(
        r.key,
        _cpu_milli(requests.get("cpu", Decimal(0))),
        _mib(requests.get("memory", Decimal(0)), round_up=True),
        num_gpu,
        gpu_milli,
        None,
        _constraint(r),
        mig,
        _guaranteed_whole_cpus(r),
    )
    labels = r.strings("metadata.labels")
    annotations = r.strings("metadata.annotations")
    scheduler = r.string("spec.schedulerName", "default-scheduler")
    managed = scheduler == SCHEDULER_NAME
    group = f"{r.namespace}/{labels[POD_GROUP_LABEL]}" if POD_GROUP_LABEL in labels else ""
    queue = labels.get(QUEUE_LABEL) or group_queues.get(group) or DEFAULT_QUEUE
    priority, can_preempt = _priority(r, classes)
    node = r.string("spec.nodeName")
    if node is not None and node not in node_gpus:
        raise r.fail("spec.nodeName", "a Node of the snapshot", node)
    gpus: tuple[int, ...] = ()
    if node is not None and GPU_INDEX_ANNOTATION in annotations:
        raw = annotations[GPU_INDEX_ANNOTATION]
        try:
            gpus = tuple(int(g) for g in raw.split(","))
        except ValueError:
            gpus = (-1,)
        wanted = 1 if mig is not None else num_gpu
        if len(gpus) != wanted or any(not 0 <= g < node_gpus[node] for g in gpus):
            raise r.fail(
                f"metadata.annotations.{GPU_INDEX_ANNOTATION}",
                f"{wanted} GPU index(es) of node {node} (0..{node_gpus[node] - 1})",
                raw,
            )
    created = r.time("metadata.creationTimestamp") or 0.0
    return PodInfo(
        r.key,
        spec,
        queue if managed or QUEUE_LABEL in labels or group else "",
        group,
        priority,
        can_preempt,
        created,
        node,
        gpus,
        r.time("status.startTime") or created,
        managed,
        _pod_claims(r),
    )


def _pod_claims(r: Reader) -> tuple[str, ...]:
    """Keys of the pod's ResourceClaims (a template's claim is ``<pod>-<name>``)."""
    keys = []
    for i, ref in enumerate(r.sequence("spec.resourceClaims")):
        if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
            raise r.fail(f"spec.resourceClaims[{i}].name", "a claim reference name", ref)
        if isinstance(ref.get("resourceClaimName"), str):
            keys.append(f"{r.namespace}/{ref['resourceClaimName']}")
        elif isinstance(ref.get("resourceClaimTemplateName"), str):
            keys.append(f"{r.namespace}/{r.name}-{ref['name']}")
        else:
            raise r.fail(
                f"spec.resourceClaims[{i}]", "resourceClaimName or resourceClaimTemplateName", ref
            )
    return tuple(keys)


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


def _priority(r: Reader, classes: dict[str, tuple[int, bool, bool]]) -> tuple[int, bool]:
    name = r.string("spec.priorityClassName")
    can_preempt = r.string("spec.preemptionPolicy", "PreemptLowerPriority") != "Never"
    if name is not None:
        if name not in classes:
            raise r.fail("spec.priorityClassName", "a PriorityClass of the snapshot", name)
        value, class_preempts, _ = classes[name]
        return r.integer("spec.priority", value), can_preempt and class_preempts
    defaults = [c for c in classes.values() if c[2]]
    if defaults:
        return r.integer("spec.priority", defaults[0][0]), can_preempt and defaults[0][1]
    return r.integer("spec.priority", 0), can_preempt
