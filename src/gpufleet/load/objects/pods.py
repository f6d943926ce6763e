"""Read Pods from a snapshot: their requests (``requests.py``: GPUs whole, shared or as a MIG
slice), node constraints, placement, priority, queue, gang and claims."""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping
from dataclasses import replace
from decimal import Decimal

from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.placement import pod_volumes, read_placement, refusal, refused_fields
from gpufleet.load.objects.reader import Reader, duration_seconds
from gpufleet.load.objects.requests import (
    INTEGER,
    extended_requests,
    first_key,
    gpu_request,
    guaranteed_whole_cpus,
    mig_request,
    pod_requests,
)
from gpufleet.load.objects.vocabulary import (
    DEFAULT_SCHEDULER,
    GPU_INDEX_ANNOTATION,
    MIG_PREFIX,
    POD_GROUP_LABEL,
    QUEUE_LABEL,
    SCHEDULER_NAME,
    cpu_milli,
    mib,
)
from gpufleet.model.pod import PodSpec
from gpufleet.model.progress import NO_PROGRESS, Progress
from gpufleet.model.selectors import (
    FIELD_NODE_NAME,
    OPERATORS,
    NodeConstraint,
    Requirement,
    Toleration,
)
from gpufleet.model.workload import DEFAULT_QUEUE, PodInfo

GPUFLEET_ONLY = PodNames()
"""gpufleet's own names only (what the live scheduler reads)."""

NOTHING = Requirement("", "In", ())
"""A requirement no node meets (what an empty node-selector term means)."""


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
    key = first_key(annotations, names.group_annotations)
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
    requests, fields = pod_requests(r)
    num_gpu, gpu_milli, gpu_memory = gpu_request(r, requests, fields, names)
    mig_slices = mig_request(r, requests, fields)
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
        guaranteed_whole_cpus(r),
        mig_count,
        extended_requests(requests),
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
    priority, can_preempt = _priority(r, classes, first_key(labels, names.priority_labels))
    node, gpus = _held(r, spec, annotations, node_gpus)
    created = r.created()
    blocked = "" if node is not None else _blocked(r, group, group_queues, group_field, lost)
    uid, version = r.identity()
    owner, owner_kind = _controller(r)
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
        subgroup=labels.get(first_key(labels, names.subgroup_labels) or "", "") if group else "",
        progress=_progress(r, annotations),
        owner=owner,
        daemon=MIRROR_ANNOTATION in annotations or owner_kind == "DaemonSet",
    )


def _held(
    r: Reader, spec: PodSpec, annotations: Mapping[str, str], node_gpus: Mapping[str, int]
) -> tuple[str | None, tuple[int, ...]]:
    """The node pod ``r`` is bound to (None: pending), and the GPUs of it that its
    ``gpu-index`` annotation gives it (empty: none named)."""
    node = r.string("spec.nodeName")
    if node is not None and node not in node_gpus:
        raise r.fail("spec.nodeName", "a Node of the snapshot", node)
    if node is None or GPU_INDEX_ANNOTATION not in annotations:
        return node, ()
    raw = annotations[GPU_INDEX_ANNOTATION]
    try:
        gpus = tuple(int(g) for g in raw.split(","))
    except ValueError:
        gpus = (-1,)
    wanted = spec.mig_count if spec.mig_profile is not None else spec.num_gpu
    if len(gpus) != wanted or any(not 0 <= g < node_gpus[node] for g in gpus):
        raise r.fail(
            f"metadata.annotations.{GPU_INDEX_ANNOTATION}",
            f"{wanted} GPU index(es) of node {node} (0..{node_gpus[node] - 1})",
            raw,
        )
    return node, gpus


def read_bound(pending: PodInfo, r: Reader, node_gpus: Mapping[str, int]) -> PodInfo:
    """Pod ``r``, read as ``pending`` before a Binding wrote its node (``spec.nodeName``),
    its ``gpu-index`` annotation, its ``PodScheduled`` condition and a new
    ``resourceVersion`` — and nothing else (:func:`gpufleet.kube.read.bound.bound_alone`):
    what :func:`read_pod` reads of it now, without reading its spec again."""
    node, gpus = _held(r, pending.spec, r.strings("metadata.annotations"), node_gpus)
    if node is None:
        raise ValueError(f"pod {r.key} is not bound")
    return replace(pending, node=node, gpus=gpus, blocked="", resource_version=r.identity()[1])


MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
"""What the kubelet puts on the API's copy of a static pod."""


def _controller(r: Reader) -> tuple[str, str]:
    """The uid and the kind of the pod's controller (empty: none; a kind that is not a
    string reads as none)."""
    for i, ref in enumerate(r.sequence("metadata.ownerReferences")):
        if not isinstance(ref, dict):
            raise r.fail(f"metadata.ownerReferences[{i}]", "an owner reference", ref)
        if ref.get("controller") is True:
            uid = ref.get("uid")
            if not isinstance(uid, str) or not uid:
                raise r.fail(f"metadata.ownerReferences[{i}].uid", "the controller's uid", uid)
            kind = ref.get("kind")
            return uid, kind if isinstance(kind, str) else ""
    return "", ""


EXPECTED_DURATION = "gpufleet.io/expected-duration"
CHECKPOINT_INTERVAL = "gpufleet.io/checkpoint-interval"
LAST_CHECKPOINT = "gpufleet.io/last-checkpoint"
PROGRESS_ANNOTATIONS = (EXPECTED_DURATION, CHECKPOINT_INTERVAL, LAST_CHECKPOINT)


def _progress(r: Reader, annotations: Mapping[str, str]) -> Progress:
    """What the pod's annotations say of its run (``model/progress.py``)."""
    if not any(k in annotations for k in PROGRESS_ANNOTATIONS):
        return NO_PROGRESS

    def duration(key: str) -> float:
        raw = annotations.get(key)
        if raw is None:
            return 0.0
        seconds = duration_seconds(raw)
        if seconds is None:
            raise r.fail(f"metadata.annotations.{key}", "a duration such as '30m' or '2h'", raw)
        return seconds

    last = annotations.get(LAST_CHECKPOINT)
    return Progress(
        expected_duration_s=duration(EXPECTED_DURATION),
        checkpoint_interval_s=duration(CHECKPOINT_INTERVAL),
        last_checkpoint=r.time_of(f"metadata.annotations.{LAST_CHECKPOINT}", last),
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
    queue_key = first_key(labels, (QUEUE_LABEL, *names.queue_labels))
    queue_note = first_key(annotations, names.queue_annotations)
    own = (labels[queue_key] if queue_key else None) or (
        annotations[queue_note] if queue_note else None
    )
    if own:
        return own, ""
    local_key = first_key(labels, names.local_queue_labels)
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
