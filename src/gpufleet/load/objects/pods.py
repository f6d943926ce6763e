"""Read Pods from a snapshot: requests (limits where requests are absent, init containers),
GPUs whole, shared or as a MIG slice, placement constraints, priority, queue, gang, claims."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from decimal import Decimal

from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.placement import pod_volumes, read_placement, refusal, refused_fields
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import (
    DEFAULT_SCHEDULER,
    FRACTION_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_RESOURCE,
    MIG_PREFIX,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    SCHEDULER_NAME,
    cpu_milli,
    mib,
    mig_profile,
)
from gpufleet.model.arrays import MILLI
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import (
    FIELD_NODE_NAME,
    OPERATORS,
    NodeConstraint,
    Requirement,
    Toleration,
)
from gpufleet.model.workload import DEFAULT_QUEUE, PodInfo


def _requests(r: Reader) -> tuple[dict[str, Decimal], dict[str, str]]:
    """The pod's request per resource, as kube-scheduler counts it: the containers' sum,
    at least each init container's beside the sidecars started before it, sidecars added,
    pod-level requests instead where ``spec.resources`` sets them, ``spec.overhead`` added;
    and the field that first asks for each (for errors:
    ``spec.containers[1].resources.limits.nvidia.com/gpu``)."""
    fields: dict[str, str] = {}
    pod_level: dict[str, Decimal] = {}

    def container_requests(path: str) -> list[dict[str, Decimal]]:
        out = []
        for i, container in enumerate(r.sequence(path)):
            if not isinstance(container, Mapping):
                raise r.fail(f"{path}[{i}]", "a container", container)
            resources = container.get("resources") or {}
            if not isinstance(resources, Mapping):
                raise r.fail(f"{path}[{i}].resources", "a mapping", resources)
            merged: dict[str, Decimal] = {}
            own: dict[str, str] = {}
            for part in ("limits", "requests"):  # requests win; limits default them
                values = resources.get(part) or {}
                if not isinstance(values, Mapping):
                    raise r.fail(f"{path}[{i}].resources.{part}", "a mapping", values)
                for name, raw in values.items():
                    field = f"{path}[{i}].resources.{part}.{name}"
                    merged[str(name)] = r.quantity(field, raw)
                    own[str(name)] = field
            for name, field in own.items():
                fields.setdefault(name, field)
            out.append(merged)
        return out

    containers = container_requests("spec.containers")
    if not containers:
        raise r.fail("spec.containers", "at least one container", r.get("spec.containers"))
    total: dict[str, Decimal] = {}
    for c in containers:
        _add(total, c)
    # Init containers run one after another before the others, each beside the sidecars
    # (restartPolicy Always) started before it; sidecars keep running with the containers.
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    inits = r.sequence("spec.initContainers")
    for container, c in zip(inits, container_requests("spec.initContainers"), strict=True):
        if container.get("restartPolicy") == "Always":
            _add(total, c)
            _add(sidecars, c)
            running = dict(sidecars)
        else:
            running = dict(c)
            _add(running, sidecars)
        for name, q in running.items():
            init_peak[name] = max(init_peak.get(name, Decimal(0)), q)
    for name, q in init_peak.items():
        total[name] = max(total.get(name, Decimal(0)), q)
    for part in ("requests", "limits"):  # pod-level resources: requests default to limits
        for name, raw in r.mapping(f"spec.resources.{part}").items():
            if str(name) in POD_LEVEL and (part == "requests" or str(name) not in pod_level):
                pod_level[str(name)] = r.quantity(f"spec.resources.{part}.{name}", raw)
                fields.setdefault(str(name), f"spec.resources.{part}.{name}")
    total |= pod_level
    for name, raw in r.mapping("spec.overhead").items():
        total[str(name)] = total.get(str(name), Decimal(0)) + r.quantity(
            f"spec.overhead.{name}", raw
        )
    return total, fields


def _add(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, q in more.items():
        total[name] = total.get(name, Decimal(0)) + q


POD_LEVEL = frozenset({"cpu", "memory"})
"""Resources a pod's ``spec.resources`` may set (hugepages too, which gpufleet reads as
other resources of the containers)."""


GPUFLEET_ONLY = PodNames()
"""gpufleet's own names only (what the live scheduler reads)."""

POD_RESOURCES = frozenset({"cpu", "memory", GPU_RESOURCE})
"""Requests the pod model reads as such (MIG slices aside); the others are extended."""


def _extended(requests: dict[str, Decimal]) -> tuple[tuple[str, int], ...]:
    """The pod's other requests, in their base unit (a fraction of a byte rounds up)."""
    return tuple(
        (name, math.ceil(q))
        for name, q in sorted(requests.items())
        if q > 0 and name not in POD_RESOURCES and not name.startswith(MIG_PREFIX)
    )


MAX_GPU_MEMORY_MIB = 10**9
"""More GPU memory than any GPU has (the node label ``nvidia.com/gpu.memory`` has at most 9
digits of MiB): a typo."""


def _first(found: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that ``found`` holds (a label or annotation, by precedence)."""
    return next((k for k in keys if k in found), None)


def _gpu_request(
    r: Reader, requests: dict[str, Decimal], fields: dict[str, str], names: PodNames
) -> tuple[int, int, int]:
    """(num_gpu, gpu_milli, gpu_memory_mib) of a pod: a share sized by GPU memory keeps its
    MiB, its milli-GPU 0 (they depend on the node it is judged against). Another
    vocabulary's share (KAI's ``gpu-fraction``, ``gpu-memory`` in MiB) counts where
    gpufleet's own annotations are absent."""
    whole = requests.get(GPU_RESOURCE, Decimal(0))
    if whole != int(whole):
        raise r.fail(fields[GPU_RESOURCE], "a whole number of GPUs", whole)
    annotations = r.strings("metadata.annotations")
    fraction_key = _first(annotations, (FRACTION_ANNOTATION, *names.fraction_annotations))
    memory_key = _first(annotations, (GPU_MEMORY_ANNOTATION, *names.memory_mib_annotations))
    fraction_field = f"metadata.annotations.{fraction_key}"
    memory_field = f"metadata.annotations.{memory_key}"
    milli = None
    if fraction_key is not None:
        raw = annotations[fraction_key]
        try:
            fraction = float(raw)
        except ValueError:
            fraction = -1.0
        if not 0 < fraction <= 1:
            raise r.fail(fraction_field, "a fraction of one GPU in (0, 1], such as '0.5'", raw)
        milli = max(1, round(fraction * MILLI))
    elif memory_key is not None:
        raw = annotations[memory_key]
        if memory_key == GPU_MEMORY_ANNOTATION:
            asked = mib(r.quantity(memory_field, raw), round_up=True)
        elif INTEGER.fullmatch(raw.strip()):
            asked = int(raw)
        else:
            raise r.fail(memory_field, "MiB of GPU memory of one GPU, such as '2000'", raw)
        if not 0 < asked < MAX_GPU_MEMORY_MIB:  # as the node label: at most 9 digits of MiB
            raise r.fail(memory_field, "GPU memory of one GPU, such as '20Gi'", raw)
        if whole > 1:
            raise r.fail(memory_field, f"no share of one GPU with {whole} whole GPUs", whole)
        return 1, 0, asked
    if milli is None:
        return int(whole), MILLI if whole else 0, 0
    if whole > 1:
        raise r.fail(fraction_field, f"no fraction with {whole} whole GPUs", whole)
    return 1, milli, 0


NOTHING = Requirement("", "In", ())
"""A requirement no node meets (what an empty node-selector term means)."""
INTEGER = re.compile(r"-?[0-9]+")


def node_requirement(r: Reader, field: str, expr: object, kind: str) -> Requirement:
    if not isinstance(expr, Mapping) or expr.get("operator") not in OPERATORS:
        got = expr.get("operator") if isinstance(expr, Mapping) else expr
        raise r.fail(f"{field}.operator", " | ".join(OPERATORS), got)
    raw_values = expr.get("values") or []
    if not isinstance(raw_values, list):
        raise r.fail(f"{field}.values", "a list of strings", raw_values)
    values = tuple(str(v) for v in raw_values)
    op = str(expr["operator"])
    if op in {"Gt", "Lt"} and (len(values) != 1 or not INTEGER.fullmatch(values[0])):
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


def _mig_request(
    r: Reader, requests: dict[str, Decimal], fields: dict[str, str]
) -> tuple[str, int] | None:
    """The pod's MIG slices: their profile and count (summed over its containers, as the
    device plugin's mixed strategy counts ``nvidia.com/mig-<profile>``)."""
    asked = {
        profile: count
        for resource, count in requests.items()
        if (profile := mig_profile(r, fields.get(resource, "spec.containers"), resource))
        and count > 0
    }
    if not asked:
        return None
    if len(asked) > 1:
        first = min(fields.get(f"{MIG_PREFIX}{p}", "spec.containers") for p in asked)
        raise r.fail(
            first,
            "MIG slices of one profile per pod (gpufleet places one profile per pod)",
            {f"{MIG_PREFIX}{p}": n for p, n in sorted(asked.items())},
        )
    ((profile, count),) = asked.items()
    if count != int(count):
        raise r.fail(fields[f"{MIG_PREFIX}{profile}"], "a whole number of slices", count)
    return profile, int(count)


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
                    node_requirement(r, f"{path}.nodeSelectorTerms[{i}].{kind}[{j}]", expr, kind)
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


def _group_of(
    r: Reader, labels: Mapping[str, str], annotations: Mapping[str, str], names: PodNames
) -> tuple[str, str]:
    """The gang (``namespace/podgroup``) pod ``r`` names, and where it names it: the label,
    then the annotations of the vocabularies read (empty: none)."""
    if POD_GROUP_LABEL in labels:
        return f"{r.namespace}/{labels[POD_GROUP_LABEL]}", f"label {POD_GROUP_LABEL}"
    key = _first(annotations, names.group_annotations)
    if key is not None:
        return f"{r.namespace}/{annotations[key]}", f"annotation {key}"
    return "", ""


def succeeded_in(r: Reader, names: PodNames = GPUFLEET_ONLY) -> str:
    """The gang of pod ``r`` if the pod succeeded (empty: it did not, or names none)."""
    if r.string("status.phase", "Pending") != "Succeeded":
        return ""
    labels, annotations = r.strings("metadata.labels"), r.strings("metadata.annotations")
    return _group_of(r, labels, annotations, names)[0]


def read_pod(
    r: Reader,
    classes: dict[str, tuple[int, bool, bool]],
    group_queues: dict[str, str],
    node_gpus: dict[str, int],
    *,
    schedulers: Collection[str] = (SCHEDULER_NAME,),
    names: PodNames = GPUFLEET_ONLY,
    namespace_queues: Mapping[str, str] | None = None,
    local_queues: Mapping[str, str] | None = None,
) -> PodInfo | None:
    """A pod, or None for one that has finished. Its queue, gang, share of a GPU and
    priority class are read in gpufleet's names first, then in ``names`` (the other
    vocabularies read: :mod:`gpufleet.load.foreign`). ``namespace_queues``: per namespace,
    the queue its pods belong to where they name none themselves (an ElasticQuota's).
    ``local_queues``: per ``namespace/name`` of a Kueue LocalQueue, its ClusterQueue, the
    queue of the pods that name the LocalQueue and no queue of their own; a pod naming a
    LocalQueue that does not exist belongs to no queue, and waits for it if pending."""
    phase = r.string("status.phase", "Pending")
    if phase in {"Succeeded", "Failed"}:
        return None
    requests, fields = _requests(r)
    num_gpu, gpu_milli, gpu_memory = _gpu_request(r, requests, fields, names)
    mig_slices = _mig_request(r, requests, fields)
    mig, mig_count = mig_slices if mig_slices is not None else (None, 1)
    if mig is not None and num_gpu:
        raise r.fail(fields[f"{MIG_PREFIX}{mig}"], "no whole GPUs with it", num_gpu)
    spec = PodSpec(
        r.key,
        cpu_milli(requests.get("cpu", Decimal(0))),
        mib(requests.get("memory", Decimal(0)), round_up=True),
        num_gpu,
        gpu_milli,
        None,
        _constraint(r),
        mig,
        _guaranteed_whole_cpus(r),
        mig_count,
        _extended(requests),
        gpu_memory,
        volumes=pod_volumes(r),
        placement=read_placement(r, r.strings("metadata.labels")),
    )
    labels = r.strings("metadata.labels")
    annotations = r.strings("metadata.annotations")
    scheduler = r.string("spec.schedulerName", DEFAULT_SCHEDULER)
    managed = scheduler in schedulers
    group, group_field = _group_of(r, labels, annotations, names)
    named, lost = _named_queue(
        r.namespace,
        labels,
        annotations,
        names,
        namespace_queues=namespace_queues or {},
        local_queues=local_queues or {},
    )
    # A pod of a LocalQueue that does not exist has no queue: Kueue admitted it (if it
    # runs) to a ClusterQueue gpufleet cannot know.
    queue = "" if lost else named or group_queues.get(group) or DEFAULT_QUEUE
    priority, can_preempt = _priority(r, classes, _first(labels, names.priority_labels))
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
        wanted = mig_count if mig is not None else num_gpu
        if len(gpus) != wanted or any(not 0 <= g < node_gpus[node] for g in gpus):
            raise r.fail(
                f"metadata.annotations.{GPU_INDEX_ANNOTATION}",
                f"{wanted} GPU index(es) of node {node} (0..{node_gpus[node] - 1})",
                raw,
            )
    created = r.created()
    blocked = "" if node is not None else _blocked(r, group, group_queues, group_field, lost)
    uid, version = r.identity()
    return PodInfo(
        r.key,
        spec,
        queue if managed or named or group else "",
        group,
        priority,
        can_preempt,
        created,
        node,
        gpus,
        _started(r, created),
        managed,
        _pod_claims(r),
        blocked,
        uid=uid,
        resource_version=version,
        subgroup=labels.get(_first(labels, names.subgroup_labels) or "", "") if group else "",
    )


def _named_queue(
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    names: PodNames,
    *,
    namespace_queues: Mapping[str, str],
    local_queues: Mapping[str, str],
) -> tuple[str | None, str]:
    """The queue a pod names itself (a queue label or annotation, else the ClusterQueue of
    the Kueue LocalQueue it names) or by its namespace (an ElasticQuota's), None if none;
    and, where the LocalQueue it names does not exist, that LocalQueue and its label."""
    queue_key = _first(labels, (QUEUE_LABEL, *names.queue_labels))
    queue_note = _first(annotations, names.queue_annotations)
    own = (labels[queue_key] if queue_key else None) or (
        annotations[queue_note] if queue_note else None
    )
    if own:
        return own, ""
    local_key = _first(labels, names.local_queue_labels)
    if local_key and labels[local_key]:
        local = f"{namespace}/{labels[local_key]}"
        if local not in local_queues:
            return None, f"LocalQueue {local} (label {local_key})"
        return local_queues[local], ""
    return namespace_queues.get(namespace), ""


def _blocked(
    r: Reader, group: str, groups: Mapping[str, str], group_field: str, local_queue: str = ""
) -> str:
    """Why a pending pod may not be scheduled at all (empty: it may), as kube-scheduler, the
    coscheduling plugin and Kueue decide it: scheduling gates hold it back (reason
    ``SchedulingGated``), a pod being deleted is never placed, a pod of a PodGroup that does
    not exist waits for it, and so does a pod of a ``local_queue`` that does not exist (Kueue
    leaves its workload inadmissible), and so does a pod that sets a field gpufleet does not
    place by (:data:`gpufleet.load.objects.pod_fields.REFUSED`)."""
    gates = r.field_of_each("spec.schedulingGates", "name", "a scheduling gate name")
    if gates:
        names = ", ".join(gates)
        return f"SchedulingGated: scheduling is blocked by the pod's scheduling gates ({names})"
    if r.get("metadata.deletionTimestamp") is not None:
        r.time("metadata.deletionTimestamp")  # a bad time is still an error
        return "the pod is being deleted (metadata.deletionTimestamp is set): it is not scheduled"
    if group and group not in groups:
        return (
            f"PodGroup {group} ({group_field}) does not exist: the pod waits for it to be created"
        )
    if local_queue:
        return f"{local_queue} does not exist: the pod waits for it to be created"
    refused = refused_fields(r)
    return refusal(refused) if refused else ""


def _pod_claims(r: Reader) -> tuple[str, ...]:
    """Keys of the pod's ResourceClaims. A template's claim is the one the resourceclaim
    controller made for the pod and named in ``status.resourceClaimStatuses``; before it
    did, ``<pod>-<name>`` (the claim a snapshot makes from the template)."""
    generated = generated_claims(r)
    keys = []
    for i, ref in enumerate(r.sequence("spec.resourceClaims")):
        if not isinstance(ref, Mapping) or not isinstance(ref.get("name"), str):
            raise r.fail(f"spec.resourceClaims[{i}].name", "a claim reference name", ref)
        if isinstance(ref.get("resourceClaimName"), str):
            keys.append(f"{r.namespace}/{ref['resourceClaimName']}")
        elif isinstance(ref.get("resourceClaimTemplateName"), str):
            name = generated.get(ref["name"]) or f"{r.name}-{ref['name']}"
            keys.append(f"{r.namespace}/{name}")
        else:
            raise r.fail(
                f"spec.resourceClaims[{i}]", "resourceClaimName or resourceClaimTemplateName", ref
            )
    return tuple(keys)


def _priority(
    r: Reader, classes: dict[str, tuple[int, bool, bool]], label: str | None = None
) -> tuple[int, bool]:
    """The pod's priority and whether it may preempt; ``label`` is another vocabulary's
    label that names a priority class (KAI's ``priorityClassName``), read where the spec
    names none."""
    field = "spec.priorityClassName"
    name = r.string(field)
    if name is None and label is not None:
        field = f"metadata.labels.{label}"
        name = r.strings("metadata.labels")[label]
    can_preempt = r.string("spec.preemptionPolicy", "PreemptLowerPriority") != "Never"
    if name is not None:
        if name not in classes:
            if r.get("spec.priority") is not None:  # the admission controller resolved it
                return r.integer("spec.priority", 0), can_preempt
            raise r.fail(field, "a PriorityClass of the snapshot (or spec.priority)", name)
        value, class_preempts, _ = classes[name]
        return r.integer("spec.priority", value), can_preempt and class_preempts
    defaults = [c for c in classes.values() if c[2]]
    if defaults:
        return r.integer("spec.priority", defaults[0][0]), can_preempt and defaults[0][1]
    return r.integer("spec.priority", 0), can_preempt


def generated_claims(r: Reader) -> dict[str, str]:
    """Per claim reference of the pod, the ResourceClaim the resourceclaim controller made
    from its template (``status.resourceClaimStatuses``; an entry without a claim name
    needs no claim, and is left out)."""
    out = {}
    for i, entry in enumerate(r.sequence("status.resourceClaimStatuses")):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise r.fail(f"status.resourceClaimStatuses[{i}].name", "a claim reference name", entry)
        claim = entry.get("resourceClaimName")
        if claim is not None and not isinstance(claim, str):
            raise r.fail(f"status.resourceClaimStatuses[{i}].resourceClaimName", "a name", claim)
        if claim:
            out[entry["name"]] = claim
    return out


def _started(r: Reader, created: float) -> float:
    """When a bound pod started: ``status.startTime``, else its creation; with neither
    (a hand-written snapshot) the epoch, as before — the most work a move would lose, so
    consolidation never judges such a pod's eviction cheap."""
    started = r.time("status.startTime")
    if started is not None:
        return started
    return created if math.isfinite(created) else 0.0
