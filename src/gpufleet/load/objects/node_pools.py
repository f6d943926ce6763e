"""Read NodePools (``gpufleet.io``) into Node readers, and the levels of the cluster's topology.

A NodePool is ``spec.count`` nodes made from ``spec.template``, named ``POOL-000``, …,
labelled ``kubernetes.io/hostname`` and, per ``spec.domains`` (widest first), a value of
each topology label shared by each run of ``size`` consecutive nodes. The template is
checked once, as a Node, and its errors name the pool. The topology's levels are those of
the one ``Topology`` object, else the pools' domain labels and then the hostname.
"""

from __future__ import annotations

from collections.abc import Mapping

from gpufleet.load.errors import InputError
from gpufleet.load.objects.nodes import read_node
from gpufleet.load.objects.reader import RESOURCE_VERSION, UID, Reader

HOSTNAME_LABEL = "kubernetes.io/hostname"
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


def read_node_pool(r: Reader) -> tuple[tuple[str, ...], list[Reader]]:
    """A NodePool: its domain labels (widest first) and its nodes, as Node readers."""
    count = r.integer("spec.count", 0, minimum=1)
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
    width = max(3, len(str(count - 1)))
    nodes = []
    for i in range(count):
        name = f"{r.name}-{i:0{width}d}"
        own = {label: f"{r.name}-{_short(label)}-{i // size:02d}" for label, size in domains}
        node = {
            **template,
            "kind": "Node",
            "metadata": {**meta, "name": name, "labels": {**labels, **own, HOSTNAME_LABEL: name}},
        }
        nodes.append(Reader(r.source, node))
    try:
        read_node(nodes[0])  # every node is the template: check it once, naming the pool
    except InputError as exc:
        field = "spec.template" + (f".{exc.field}" if exc.field else "")
        raise InputError(r.where, exc.problem, field=field) from None
    return tuple(label for label, _ in domains), nodes


def _short(label: str) -> str:
    """``topology.gpufleet.io/rack`` -> ``rack``."""
    return label.rpartition("/")[2] or label


def pool_levels(pools: list[tuple[tuple[str, ...], list[Reader]]]) -> tuple[str, ...]:
    levels = list(dict.fromkeys(label for labels, _ in pools for label in labels))
    return (*levels, HOSTNAME_LABEL) if levels else ()
