"""A price sheet: what a node costs, per component and per hour.

A sheet (``kind: PriceSheet``, read by ``load/costs/prices.py``) has one entry per node type. A node
is matched by its ``node.kubernetes.io/instance-type`` label first (the more specific: a cloud
instance type fixes the GPUs, CPUs and memory), then by its GPU product
(``nvidia.com/gpu.product``, as GPU feature discovery labels it; the traces' GPU model), then
by the sheet's ``default`` entry, if it has one.

An entry prices a node in one of two ways:

* **components** — $ per GPU-hour, per vCPU-hour and per GiB-hour;
* **node** — $ per node-hour. The components are then derived as OpenCost's specification
  says (Appendix A): the sheet's base component prices (``ratios``) are scaled by one factor
  so that the node's GPUs, vCPUs and GiB at those prices add up to the node's price. The
  ratio between the components stays that of the base prices.

Each entry has a pricing category (``on-demand``, ``spot``, ``committed``) and the sheet one
currency. One instance type (or GPU product) may have two entries, a spot one and another:
a node labelled ``karpenter.sh/capacity-type: spot`` takes the spot entry, any other node
the other; where there is only one, every node of the type takes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from gpufleet.model.supply import CAPACITY_TYPE_LABEL

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"

GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
CATEGORIES = ("on-demand", "spot", "committed")
"""Pricing categories; FOCUS names them Standard, Dynamic and Committed."""
FOCUS_CATEGORY = {"on-demand": "Standard", "spot": "Dynamic", "committed": "Committed"}


@dataclass(frozen=True, slots=True)
class UnitPrices:
    """$ per unit-hour of each component: a GPU, a vCPU, a GiB of memory."""

    gpu: float
    cpu: float
    ram: float


OPENCOST_BASE = UnitPrices(gpu=0.95, cpu=0.031611, ram=0.004237)
"""OpenCost's default component prices (its ``default.json``): the base ratios of a sheet that
gives none, used only to split a node price."""


@dataclass(frozen=True, slots=True)
class NodeType:
    """One entry of a sheet. ``match`` is ``(label, value)``; ``per_node`` the node's price
    per hour when the entry gives one (then ``components`` is None until split)."""

    name: str
    match: tuple[str, str] | None
    category: str
    components: UnitPrices | None = None
    per_node: float | None = None

    def prices(self, gpus: float, cpus: float, ram_gib: float, base: UnitPrices) -> UnitPrices:
        """The component prices of a node of this type with ``gpus``, ``cpus`` and
        ``ram_gib`` (a node price split in the ratios of ``base``)."""
        if self.components is not None:
            return self.components
        assert self.per_node is not None
        weight = gpus * base.gpu + cpus * base.cpu + ram_gib * base.ram
        if weight <= 0:
            return UnitPrices(0.0, 0.0, 0.0)
        scale = self.per_node / weight
        return UnitPrices(base.gpu * scale, base.cpu * scale, base.ram * scale)


@dataclass(frozen=True, slots=True)
class PriceSheet:
    """Node types and their prices (module docstring). ``title`` says whose prices and of
    when, for every report to print."""

    name: str
    currency: str
    title: str
    types: tuple[NodeType, ...]
    base: UnitPrices = OPENCOST_BASE
    default: NodeType | None = None

    def type_of(self, labels: Mapping[str, str], model: str | None = None) -> NodeType | None:
        """The entry of a node with ``labels`` (and GPU ``model``, a trace's), if any."""
        spot = labels.get(CAPACITY_TYPE_LABEL) == "spot"
        by_match: dict[tuple[str, str], NodeType] = {}
        for entry in self.types:  # the entry of the node's capacity type wins
            if entry.match is not None and (
                entry.match not in by_match or (entry.category == "spot") == spot
            ):
                by_match[entry.match] = entry
        instance = labels.get(INSTANCE_TYPE_LABEL)
        if instance is not None and (INSTANCE_TYPE_LABEL, instance) in by_match:
            return by_match[INSTANCE_TYPE_LABEL, instance]
        for product in (labels.get(GPU_PRODUCT_LABEL), model):
            if product is not None and (GPU_PRODUCT_LABEL, product) in by_match:
                return by_match[GPU_PRODUCT_LABEL, product]
        return self.default
