"""Read Nodes, and the NUMA zones of their NodeResourceTopology, into NodeSpecs.

A Node's allocatable cpu, memory, GPUs, MIG slices, extended resources and pods; its
labels (the GPU product, memory per GPU, dynamic MIG, and what one advertised GPU is under
the GPU operator's MIG single strategy, time-slicing or MPS: load/objects/gpu_operator.py) and
taints (``spec.unschedulable`` acting as ``node.kubernetes.io/unschedulable``). A
NodeResourceTopology adds which zone each GPU is in, each zone's CPU and whether the kubelet
keeps a pod in one zone; one that does not account for every GPU gives no zones rather than
a guess.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from decimal import Decimal

from gpufleet.load.objects.gpu_operator import MAX_ADVERTISED, gpu_devices
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import (
    GPU_MEMORY_LABEL,
    GPU_PRODUCT_LABEL,
    GPU_RESOURCE,
    INTEGER,
    MIG_DYNAMIC_LABEL,
    cpu_milli,
    mib,
    mig_profile,
)
from gpufleet.model.cluster import MAX_GPUS_PER_NODE, NodeSpec
from gpufleet.model.mig import table_for
from gpufleet.model.pod import SHARED_GPU_RESOURCE
from gpufleet.model.selectors import Taint

SINGLE_NUMA_POLICIES = frozenset(
    {"single-numa-node", "SingleNUMANodeContainerLevel", "SingleNUMANodePodLevel"}
)

KUBELET_MAX_PODS = 110
"""A node's allocatable ``pods`` where the snapshot does not say: the kubelet's default."""
NODE_RESOURCES = frozenset({"cpu", "memory", "pods", GPU_RESOURCE})
"""Allocatable resources the node model reads as such; the others are extended."""


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


def read_node(r: Reader) -> NodeSpec:
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
    devices = gpu_devices(r, labels, gpus or extended.get(SHARED_GPU_RESOURCE, 0))
    cap = MAX_GPUS_PER_NODE if devices.unit == 1 else MAX_ADVERTISED
    if gpus > cap:
        what = "GPUs" if devices.unit == 1 else "MIG slices or replicas"
        raise r.fail(gpu_field, f"at most {cap} {what} on one node", allocatable[GPU_RESOURCE])
    product = devices.product
    dynamic = (
        labels.get(MIG_DYNAMIC_LABEL) == "true" and not slices and gpus > 0 and devices.unit == 1
    )
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
        gpu_unit=float(devices.unit),
        gpu_sharing=devices.kind,
        physical_gpus=devices.physical,
        gpu_one_per_pod=devices.one_per_pod,
    )


def read_numa(r: Reader) -> tuple[str, tuple[tuple[int, ...], tuple[int, ...], bool]]:
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


def with_numa(
    node: NodeSpec, numa: tuple[tuple[int, ...], tuple[int, ...], bool] | None
) -> NodeSpec:
    if numa is None:
        return node
    gpu_zones, zone_cpu, single = numa
    if len(gpu_zones) != node.gpus:
        gpu_zones = ()  # the topology does not account for every GPU: do not guess
    return replace(node, gpu_zones=gpu_zones, zone_cpu_milli=zone_cpu, single_numa=single)


def _gpu_memory(r: Reader, labels: Mapping[str, str]) -> int | None:
    """MiB of each of the node's GPUs (label ``nvidia.com/gpu.memory``), None without it or
    where it is 0 (what GFD writes for a node whose MIG configuration is invalid)."""
    raw = labels.get(GPU_MEMORY_LABEL)
    if raw is None:
        return None
    if not INTEGER.fullmatch(raw) or int(raw) < 0 or len(raw) > 9:
        raise r.fail(f"metadata.labels.{GPU_MEMORY_LABEL}", "MiB as an integer >= 0", raw)
    return int(raw) or None
