"""What a bound pod holds: what it was bound with, whatever its annotations say later.

The API server validates a pod's requests, not gpufleet's GPU annotations, and a pod may be
bound by another scheduler or before gpufleet ran. Once read bound to its node, a pod keeps
counting what it was read with (a later change is reported, not trusted); one that cannot be
read, another scheduler's, or one whose share annotation would hold less than its containers
ask of the device plugin is read by its container requests alone, each share of a GPU a whole
GPU — never nothing, which would give its GPUs out again.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import replace
from decimal import Decimal

from lightkube.utils.quantity import parse_quantity

from gpufleet.kube.read.translated import SOURCE, Problem, bound_to, meta, problem
from gpufleet.load.errors import InputError
from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.pods import PROGRESS_ANNOTATIONS
from gpufleet.load.objects.reader import Obj, Reader, is_mapping
from gpufleet.load.objects.vocabulary import (
    FRACTION_ANNOTATION,
    GPU_INDEX_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_RESOURCE,
)
from gpufleet.model.arrays import MILLI
from gpufleet.model.interpod import PodPlacement
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import PodInfo

CHANGED_AFTER_BIND = (
    "its GPU annotations or requests changed after it was bound: gpufleet keeps counting what "
    "it was bound with"
)

NVIDIA_DEVICES = "nvidia.com/"
"""The prefix of the device plugin's resources: whole GPUs, MIG slices, shared replicas."""

ReadPod = Callable[[Reader], object]
"""How the store reads a pod (its reader, with what pods look up in other objects)."""


def holding(
    raw: Obj,
    made: PodInfo | None,
    before: object,
    problems: list[Problem],
    *,
    read: ReadPod,
    names: PodNames,
) -> PodInfo | None:
    """What bound pod ``raw`` holds, read as ``made`` now (None: it cannot be read) and as
    ``before`` at the store's last event (None: never): once bound, what it was bound with
    (a change is reported), with its labels as they are now."""
    if made is not None and not made.managed:
        made = requests_alone(raw, read, names) or made  # another scheduler's pod
    held = isinstance(before, PodInfo) and before.bound and before.node == bound_to(raw)
    if held and isinstance(before, PodInfo) and before.uid == str(meta(raw).get("uid", "")):
        if made is None:
            return before
        if (made.spec, made.gpus) != (before.spec, before.gpus):
            # it holds what it was bound with; its labels are read as they are now (a
            # running pod may be relabelled, and other pods' affinity and spread read them).
            # Its own terms stay as bound: the API server merged their matchLabelKeys into
            # their selectors at its creation, from the labels it had then
            kept = replace(before.spec, placement=_relabelled(before.spec, made.spec))
            if (kept, before.gpus) != (replace(made.spec, placement=kept.placement), made.gpus):
                problems.append(problem("Pod", raw, CHANGED_AFTER_BIND))
            return replace(made, spec=kept, gpus=before.gpus)
        return made
    if made is not None and holds_its_requests(made, raw):
        return made
    # One that cannot be read, or would hold less than its containers ask (the device
    # plugin gave it whole devices; a share annotation beside them frees nothing).
    return requests_alone(raw, read, names) or made


def _relabelled(bound: PodSpec, now: PodSpec) -> PodPlacement | None:
    """The placement ``bound`` was bound with, with the labels ``now`` has."""
    if bound.placement is None or now.placement is None:
        return bound.placement if now.placement is None else now.placement
    return replace(bound.placement, labels=now.placement.labels)


BOUND_BY_BINDING = {
    "metadata": ("resourceVersion", "managedFields"),
    "spec": ("nodeName",),
    "status": ("conditions",),
}
"""What a Binding writes of a pod (with gpufleet's ``gpu-index`` annotation), besides the
fields every write changes: no translation of a pending pod reads its conditions."""


WRITTEN_BY_STATUS = {
    "metadata": ("resourceVersion", "managedFields"),
    "status": ("conditions",),
}
"""What a write of a pod's conditions changes: the kubelet's (``Ready``,
``ContainersReady``… of a running pod: a real cluster's commonest pod event), a
scheduler's (``PodScheduled`` false while it waits), a controller's."""


def bound_alone(before: Obj, after: Obj) -> bool:
    """Whether pod ``after`` is pending pod ``before`` with a Binding applied and nothing
    else changed: its node set, and no field a pod's translation reads changed but the
    ``gpu-index`` annotation (:func:`gpufleet.load.objects.pods.read_bound`)."""
    if not bound_to(after) or bound_to(before):
        return False
    return _same(
        _less(before, BOUND_BY_BINDING, GPU_INDEX_ANNOTATION),
        _less(after, BOUND_BY_BINDING, GPU_INDEX_ANNOTATION),
    )


def conditions_alone(before: Obj, after: Obj) -> bool:
    """Whether pod ``after`` is pod ``before`` with its conditions written and nothing else
    changed (:data:`WRITTEN_BY_STATUS`; its node too): no translation of a pod reads them,
    so what was read of it stands."""
    if bound_to(after) != bound_to(before):
        return False
    return _same(_less(before, WRITTEN_BY_STATUS), _less(after, WRITTEN_BY_STATUS))


def _same(before: dict[str, object], after: dict[str, object]) -> bool:
    """Equal, and of the same JSON types throughout: Python's ``==`` holds ``1``, ``1.0``
    and ``true`` equal, where a read refuses some of them (a priority of ``true``); their
    ``repr`` tells them apart (a different key order reads as a change: read whole)."""
    return before == after and repr(before) == repr(after)


def _less(
    obj: Obj, written: Mapping[str, tuple[str, ...]], annotation: str = ""
) -> dict[str, object]:
    """``obj`` less the ``written`` fields of each part and its ``annotation`` (if named);
    an absent part or annotations map reads as an empty one."""
    out: dict[str, object] = dict(obj)
    for part, fields in written.items():
        value = obj.get(part)
        if value is None:
            value = {}
        if is_mapping(value):
            value = {k: v for k, v in value.items() if k not in fields}
        out[part] = value
    metadata = out["metadata"]  # a dict of its own where it was a mapping
    if annotation and isinstance(metadata, dict):
        notes = metadata.get("annotations")
        notes = {} if notes is None else notes
        if is_mapping(notes):
            metadata["annotations"] = {k: v for k, v in notes.items() if k != annotation}
    return out


def requests_alone(raw: Obj, read: ReadPod, names: PodNames) -> PodInfo | None:
    """The bound pod ``raw`` read by its container requests alone (another scheduler's
    pods count so; None: not even they can be read, its problem says why)."""
    try:
        conservative = read(Reader(SOURCE, requests_only(raw, names)))
    except (InputError, TypeError, ValueError, AttributeError, KeyError, ArithmeticError):
        return None
    return conservative if isinstance(conservative, PodInfo) else None


def whole_gpus(obj: Obj, prefix: str = GPU_RESOURCE) -> Decimal:
    """The most of a resource named ``prefix`` (``nvidia.com/gpu``; or every NVIDIA device:
    whole GPUs, MIG slices, replicas) any one container of ``obj`` requests or is limited to
    (quantities parsed; an unreadable one counts 0: the pod's own read says why)."""
    spec = obj.get("spec")
    containers = spec.get("containers") if is_mapping(spec) else None
    most = Decimal(0)
    for container in containers if isinstance(containers, list) else []:
        resources = container.get("resources") if is_mapping(container) else None
        for part in ("requests", "limits"):
            listed = resources.get(part) if is_mapping(resources) else None
            for name, value in listed.items() if is_mapping(listed) else ():
                if not str(name).startswith(prefix) or isinstance(value, bool):
                    continue
                if isinstance(value, str | int):
                    with contextlib.suppress(ValueError, ArithmeticError):
                        most = max(most, parse_quantity(str(value)) or Decimal(0))
    return most


def holds_its_requests(made: PodInfo, raw: Obj) -> bool:
    """Whether ``made`` holds at least the whole GPUs its containers ask: a share
    annotation beside ``nvidia.com/gpu`` does not free what the device plugin gave — unless
    gpufleet bound the pod as a share itself (its ``gpu-index``, written in the Binding,
    is the record of what it gave)."""
    whole = whole_gpus(raw)
    if not whole:
        return True
    annotations = meta(raw).get("annotations")
    if made.managed and isinstance(annotations, Mapping) and GPU_INDEX_ANNOTATION in annotations:
        return True
    try:
        return made.spec.total_gpu_milli >= whole * MILLI
    except ValueError:  # a share sized by memory: no milli-GPU of its own
        return False


def requests_only(obj: Obj, names: PodNames) -> Obj:
    """``obj`` without the annotations that share GPUs or name them (gpufleet's, and those
    of the vocabularies read) or say what its run is worth, and without its owners, a
    share counted as one whole GPU of its first container where no container asks for GPUs
    itself."""
    metadata = dict(meta(obj))
    metadata.pop("ownerReferences", None)  # who recreates it changes nothing it holds
    notes = dict(metadata.get("annotations") or {})
    shares: tuple[str, ...] = (FRACTION_ANNOTATION, GPU_MEMORY_ANNOTATION)
    shares += names.fraction_annotations + names.memory_mib_annotations
    shared = any(a in notes for a in shares)
    for name in (*shares, GPU_INDEX_ANNOTATION, *PROGRESS_ANNOTATIONS):
        notes.pop(name, None)  # a job's own bad checkpoint note must not hide what it holds
    metadata["annotations"] = notes
    out = {**obj, "metadata": metadata}
    if shared:
        spec = dict(obj.get("spec") or {})
        containers = [dict(c) for c in spec.get("containers") or []]
        if containers and not whole_gpus(obj, NVIDIA_DEVICES):  # one asking devices holds them
            resources = dict(containers[0].get("resources") or {})
            for part in ("requests", "limits"):
                listed = dict(resources.get(part) or {})
                if part == "limits" or listed:
                    listed[GPU_RESOURCE] = "1"
                resources[part] = listed
            containers[0]["resources"] = resources
            spec["containers"] = containers
            out["spec"] = spec
    return out
