"""A cluster's nodes as the cost layer's assets: each matched to its price sheet entry.

Every edge that costs a cluster — the replay, the what-if tool — has its nodes as
:class:`~gpufleet.model.cluster.NodeSpec` values; :func:`price_nodes` turns them into
:class:`~gpufleet.cost.allocation.Nodes`: capacity (GPUs, cores, GiB), the entry of the sheet
that matches each (:meth:`PriceSheet.type_of`, by instance type, then GPU product — a trace's
GPU model counts as one — then the sheet's default) and its component prices. A node no
entry matches is an error naming it: a cost that silently left a node out would look cheap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from gpufleet.cost.allocation import Nodes
from gpufleet.model.devices import mig_gpus
from gpufleet.model.pod import SHARED_GPU_RESOURCE
from gpufleet.model.values import EMPTY

if TYPE_CHECKING:
    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.cluster import NodeSpec


class UnpricedNodeError(ValueError):
    """A node that no entry of the sheet matches, and the sheet has no default."""


def price_nodes(
    specs: Sequence[NodeSpec], sheet: PriceSheet, device_gpus: Mapping[str, float] = EMPTY
) -> Nodes:
    """``specs`` priced under ``sheet`` (module docstring), existing over the whole window.
    A node's GPUs are those it publishes whole (its physical GPUs where the GPU operator
    advertises MIG slices or time-sliced replicas as ``nvidia.com/gpu``: they are what is
    bought, and a price sheet's ``gpuProduct`` matches the GPU without GFD's suffixes), the
    GPUs its static MIG slices count as
    (their compute slices out of 7, as a pod's slices are charged) and those its DRA devices
    count as (``device_gpus``, by node name). Once per cluster, not per cycle: one look-up
    per node."""
    types: list[str] = []
    categories: list[str] = []
    capacity: list[tuple[float, float, float]] = []
    prices: list[tuple[float, float, float]] = []
    for spec in specs:
        entry = sheet.type_of(spec.labels, spec.gpu_model)
        if entry is None:
            raise UnpricedNodeError(
                f"node {spec.name} (GPU {spec.gpu_model or 'none'}) matches no entry of price "
                f"sheet {sheet.name}, and the sheet has no default: add a nodeTypes entry for it "
                "(gpuProduct or instanceType) or a default"
            )
        cores, gib = spec.cpu_milli / 1000.0, spec.memory_mib / 1024.0
        static_mig = sum(mig_gpus(profile, n) for profile, n in spec.mig_slices.items())
        whole = spec.physical_gpus
        if whole is None:  # one GPU per advertised one (renamed replicas of no known count too)
            whole = spec.gpus + spec.extended.get(SHARED_GPU_RESOURCE, 0)
        gpus = whole + static_mig + device_gpus.get(spec.name, 0.0)
        split = entry.prices(gpus, cores, gib, sheet.base)
        types.append(entry.name)
        categories.append(entry.category)
        capacity.append((float(gpus), cores, gib))
        prices.append((split.gpu, split.cpu, split.ram))
    return Nodes.of(
        [s.name for s in specs],
        types=types,
        categories=categories,
        capacity=capacity,
        prices=prices,
    )
