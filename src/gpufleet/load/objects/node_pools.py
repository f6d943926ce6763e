"""Read NodePools (``gpufleet.io``) into Node readers, and the levels of the cluster's topology.

A NodePool is ``spec.count`` nodes made from ``spec.template``, named ``POOL-000``, …,
labelled ``kubernetes.io/hostname`` and, per ``spec.domains`` (widest first), a value of
each topology label shared by each run of ``size`` consecutive nodes. The template is
checked once, as a Node, and its errors name the pool. The topology's levels are those of
the one ``Topology`` object, else the pools' domain labels and then the hostname.

A pool with ``spec.autoscaling`` is also a node type the cluster may buy
(:class:`~gpufleet.model.supply.NodeOffer`): ``maxNodes`` (required, at least ``count``),
``minNodes`` (default 0, at most ``count``), ``provisioningDelay`` (default 5m), and for spot
capacity (template label ``karpenter.sh/capacity-type: spot``) ``interruptionsPerHour`` per
node (default :data:`SPOT_INTERRUPTIONS_PER_HOUR`) and ``availability`` (default 1). Its
``count`` may then be 0: the nodes it has now.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError
from gpufleet.load.objects.nodes import read_node
from gpufleet.load.objects.reader import RESOURCE_VERSION, UID, Reader
from gpufleet.model.supply import CAPACITY_TYPE_LABEL, HOSTNAME_LABEL, NodeOffer, domain_value

if TYPE_CHECKING:
    from gpufleet.model.node import NodeSpec

MAX_POOL_NODES = 100_000
"""A NodePool larger than this is a typo, not a cluster."""
MAX_DOMAINS = 8
"""More nested topology domains than this is a typo; the bound also keeps the CRD's rules
over the domains cheap for the API server (``crds.py``)."""


def read_topology(r: Reader) -> tuple[str, ...]:
    levels = r.field_of_each("spec.levels", "nodeLabel", "a node-label key")
    if not levels:
        raise r.fail("spec.levels", "at least one level (nodeLabel), widest first", None)
    if len(set(levels)) != len(levels):
        raise r.fail("spec.levels", "distinct node labels", levels)
    return tuple(levels)


SPOT_INTERRUPTIONS_PER_HOUR = 0.01
"""A spot node's interruptions per hour when its pool does not say: the rate of AWS's
"<5%" interruption-frequency band for a month of uptime, the band most GPU instance types
sit in on the Spot Instance Advisor (7 interruptions per 720 hours is about 1%)."""
DEFAULT_DELAY_S = 300.0
"""A GPU node's time from request to Ready when the pool does not say (they join in 4 to 6
minutes: driver, toolkit and device plugin come up after the VM)."""

Pool = tuple[tuple[str, ...], list[Reader], NodeOffer | None]
"""A NodePool read: its domain labels (widest first), its nodes as Node readers, and the
node type it offers to an autoscaler, if any."""


def read_node_pool(r: Reader) -> Pool:
    """A NodePool (see the module docstring)."""
    autoscaling = r.get("spec.autoscaling")
    count = r.integer("spec.count", 0, minimum=0 if autoscaling is not None else 1)
    if count > MAX_POOL_NODES:
        raise r.fail("spec.count", f"at most {MAX_POOL_NODES:,} nodes", count)
    template = r.mapping("spec.template")
    if not template:
        raise r.fail("spec.template", "a Node (metadata.labels, status.allocatable)", None)
    domains: list[tuple[str, int]] = []
    raw_domains = r.sequence("spec.domains")
    if len(raw_domains) > MAX_DOMAINS:
        raise r.fail("spec.domains", f"at most {MAX_DOMAINS} domains", len(raw_domains))
    for i, raw in enumerate(raw_domains):
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
    most = count if autoscaling is None else _most(r, count)
    width = max(3, len(str(max(count, most) - 1)))
    nodes = []
    for i in range(count):
        name = f"{r.name}-{i:0{width}d}"
        own = {label: domain_value(r.name, label, i, size) for label, size in domains}
        node = {
            **template,
            "kind": "Node",
            "metadata": {**meta, "name": name, "labels": {**labels, **own, HOSTNAME_LABEL: name}},
        }
        nodes.append(Reader(r.source, node))
    probe = Reader(
        r.source,
        {**template, "kind": "Node", "metadata": {**meta, "name": r.name, "labels": labels}},
    )
    try:
        spec = read_node(probe)  # every node is the template: check it once, naming the pool
    except InputError as exc:
        field = "spec.template" + (f".{exc.field}" if exc.field else "")
        raise InputError(r.where, exc.problem, field=field) from None
    offer = None
    if autoscaling is not None:
        offer = _offer(r, spec, tuple(domains), count, most, width)
    return tuple(label for label, _ in domains), nodes, offer


def _most(r: Reader, count: int) -> int:
    if not isinstance(r.get("spec.autoscaling"), Mapping):
        raise r.fail("spec.autoscaling", "a mapping (maxNodes, minNodes, provisioningDelay)", None)
    if r.get("spec.autoscaling.maxNodes") is None:
        raise r.fail("spec.autoscaling.maxNodes", "the most nodes the pool may have", None)
    most = r.integer("spec.autoscaling.maxNodes", 0, minimum=max(count, 1))
    if most > MAX_POOL_NODES:
        raise r.fail("spec.autoscaling.maxNodes", f"at most {MAX_POOL_NODES:,} nodes", most)
    return most


def _offer(  # noqa: PLR0917 (the pool's parts, read once by the caller)
    r: Reader,
    spec: NodeSpec,
    domains: tuple[tuple[str, int], ...],
    count: int,
    most: int,
    width: int,
) -> NodeOffer:
    """The node type a pool's ``spec.autoscaling`` offers (module docstring)."""
    field = "spec.autoscaling"
    least = r.integer(f"{field}.minNodes", 0, minimum=0, maximum=count)
    delay = (
        r.duration(f"{field}.provisioningDelay")
        if r.get(f"{field}.provisioningDelay") is not None
        else DEFAULT_DELAY_S
    )
    spot = spec.labels.get(CAPACITY_TYPE_LABEL) == "spot"
    rate = _fraction(r, f"{field}.interruptionsPerHour", SPOT_INTERRUPTIONS_PER_HOUR, spot)
    availability = _fraction(r, f"{field}.availability", 1.0, spot)
    if availability <= 0:
        raise r.fail(f"{field}.availability", "a chance above 0, at most 1", availability)
    return NodeOffer(
        r.name,
        spec,
        domains,
        min_nodes=least,
        max_nodes=most,
        delay_s=delay,
        spot=spot,
        interruptions_per_hour=rate if spot else 0.0,
        availability=availability if spot else 1.0,
        width=width,
    )


def _fraction(r: Reader, path: str, default: float, spot: bool) -> float:
    """A number from 0 to 1 at ``path``, said only of spot pools."""
    value = r.get(path)
    if value is None:
        return default
    if not spot:
        raise r.fail(
            path,
            f"nothing on a pool whose template is not labelled {CAPACITY_TYPE_LABEL}: spot",
            value,
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise r.fail(path, "a number from 0 to 1", value)
    if not 0 <= value <= 1:
        raise r.fail(path, "a number from 0 to 1", value)
    return float(value)


def pool_levels(pools: list[Pool]) -> tuple[str, ...]:
    levels = list(dict.fromkeys(label for labels, _, _ in pools for label in labels))
    return (*levels, HOSTNAME_LABEL) if levels else ()
