"""The names gpufleet reads in a snapshot: resources, labels and annotations, and the unit
conversions every reader shares."""

from __future__ import annotations

import math
import re
from decimal import Decimal

from gpufleet.load.objects.reader import Reader

SCHEDULER_NAME = "gpufleet"
DEFAULT_SCHEDULER = "default-scheduler"
"""``spec.schedulerName`` of a pod that names none."""
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
MIG_DYNAMIC_LABEL = "gpufleet.io/mig-dynamic"
"""``"true"`` on a node whose GPUs gpufleet may partition: someone (NVIDIA's MIG manager,
told by the ``nvidia.com/mig.config`` label) applies the layouts it asks for. GPU feature
discovery labels every MIG-capable node ``nvidia.com/mig.capable: "true"``, with MIG on or
off, so that label alone never lets gpufleet repartition."""
MIG_PROFILE = re.compile(r"[1-7]g\.[0-9]+gb(\+me)?")
TOPOLOGY_REQUIRED = "gpufleet.io/topology-required"
TOPOLOGY_PREFERRED = "gpufleet.io/topology-preferred"
DEVICE_MATCH = "gpufleet.io/device-match-attribute"
MIB = 1 << 20

INTEGER = re.compile(r"-?[0-9]+")


def cpu_milli(q: Decimal) -> int:
    return math.ceil(q * 1000)


def mib(q: Decimal, *, round_up: bool) -> int:
    value = q / MIB
    return math.ceil(value) if round_up else math.floor(value)


LIST_RESOURCES = (GPU_RESOURCE, "cpu", "memory")
"""The resources gpufleet reads of a resource list (``nvidia.com/gpu: 4, cpu: 8``) other
schedulers give their queues, in gpufleet's order."""


def resource_list(r: Reader, path: str) -> dict[str, float]:
    """The :data:`LIST_RESOURCES` of the resource list at ``path`` (absent: none), in
    gpufleet's units: GPUs, millicores, MiB (rounded down)."""
    listed = r.mapping(path)
    return {
        res: in_units(res, r.quantity(f"{path}.{res}", listed[res]))
        for res in LIST_RESOURCES
        if res in listed
    }


def in_units(resource: str, q: Decimal) -> float:
    """A quantity of one of :data:`LIST_RESOURCES` in gpufleet's units: GPUs, millicores
    (rounded up, as a pod's request), MiB (rounded down: a queue is never given more than
    written)."""
    if resource == "cpu":
        return float(cpu_milli(q))
    if resource == "memory":
        return float(mib(q, round_up=False))
    return float(q)


def mig_profile(r: Reader, field: str, resource: str) -> str | None:
    """``3g.40gb`` for ``nvidia.com/mig-3g.40gb``; None for other resources."""
    if not resource.startswith(MIG_PREFIX):
        return None
    profile = resource.removeprefix(MIG_PREFIX)
    if not MIG_PROFILE.fullmatch(profile):
        raise r.fail(field, "a MIG profile such as nvidia.com/mig-3g.40gb", resource)
    return profile
