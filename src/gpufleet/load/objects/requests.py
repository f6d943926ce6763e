"""A pod's resource requests as kube-scheduler counts them: containers, init containers
and sidecars, pod-level resources and overhead; its GPUs whole, as a share (a fraction, or
GPU memory) or as MIG slices; the extended resources it asks; whether the kubelet's static
CPU manager pins it. Each error names the field that asks."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from decimal import Decimal

from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import (
    FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
    GPU_RESOURCE,
    MIG_PREFIX,
    mib,
    mig_profile,
)
from gpufleet.model.arrays import MILLI


def pod_requests(r: Reader) -> tuple[dict[str, Decimal], dict[str, str]]:
    """The pod's request per resource, as kube-scheduler counts it: the containers' sum,
    at least each init container's beside the sidecars started before it, sidecars added,
    pod-level requests instead where ``spec.resources`` sets them, ``spec.overhead`` added;
    and the field that first asks for each (for errors:
    ``spec.containers[1].resources.limits.nvidia.com/gpu``)."""
    fields: dict[str, str] = {}
    pod_level: dict[str, Decimal] = {}

    def containerpod_requests(path: str) -> list[dict[str, Decimal]]:
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

    containers = containerpod_requests("spec.containers")
    if not containers:
        raise r.fail("spec.containers", "at least one container", r.get("spec.containers"))
    total: dict[str, Decimal] = {}
    for c in containers:
        add_requests(total, c)
    # Init containers run one after another before the others, each beside the sidecars
    # (restartPolicy Always) started before it; sidecars keep running with the containers.
    sidecars: dict[str, Decimal] = {}
    init_peak: dict[str, Decimal] = {}
    inits = r.sequence("spec.initContainers")
    for container, c in zip(inits, containerpod_requests("spec.initContainers"), strict=True):
        if container.get("restartPolicy") == "Always":
            add_requests(total, c)
            add_requests(sidecars, c)
            running = dict(sidecars)
        else:
            running = dict(c)
            add_requests(running, sidecars)
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


def add_requests(total: dict[str, Decimal], more: Mapping[str, Decimal]) -> None:
    for name, q in more.items():
        total[name] = total.get(name, Decimal(0)) + q


POD_LEVEL = frozenset({"cpu", "memory"})
"""Resources a pod's ``spec.resources`` may set (hugepages too, which gpufleet reads as
other resources of the containers)."""


POD_RESOURCES = frozenset({"cpu", "memory", GPU_RESOURCE})
"""Requests the pod model reads as such (MIG slices aside); the others are extended."""


def extended_requests(requests: dict[str, Decimal]) -> tuple[tuple[str, int], ...]:
    """The pod's other requests, in their base unit (a fraction of a byte rounds up)."""
    return tuple(
        (name, math.ceil(q))
        for name, q in sorted(requests.items())
        if q > 0 and name not in POD_RESOURCES and not name.startswith(MIG_PREFIX)
    )


MAX_GPU_MEMORY_MIB = 10**9
"""More GPU memory than any GPU has (the node label ``nvidia.com/gpu.memory`` has at most 9
digits of MiB): a typo."""


INTEGER = re.compile(r"-?[0-9]+")


def first_key(found: Mapping[str, str], keys: tuple[str, ...]) -> str | None:
    """The first of ``keys`` that ``found`` holds (a label or annotation, by precedence)."""
    return next((k for k in keys if k in found), None)


def gpu_request(
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
    fraction_key = first_key(annotations, (FRACTION_ANNOTATION, *names.fraction_annotations))
    memory_key = first_key(annotations, (GPU_MEMORY_ANNOTATION, *names.memory_mib_annotations))
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


def guaranteed_whole_cpus(r: Reader) -> bool:
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


def mig_request(
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
