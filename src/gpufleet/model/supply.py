"""What a cluster may buy: node types an autoscaler adds and removes.

A :class:`NodeOffer` is one NodePool's ``spec.autoscaling`` (``load/objects/node_pools.py``):
nodes like its template, between ``min_nodes`` and ``max_nodes`` of them, each up
``delay_s`` after it is asked for; a spot pool's nodes are interrupted at
``interruptions_per_hour`` each and a request for them is filled with probability
``availability``. Its nodes are named and labelled as the pool's own are: ``POOL-0000``, …,
with ``kubernetes.io/hostname`` and, per ``domains`` (widest first), one value of each
topology label per run of ``size`` consecutive node numbers. What a node costs comes from the
price sheet (``cost/autoscale.py``), not from here.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace

from gpufleet.model.node import NodeSpec

HOSTNAME_LABEL = "kubernetes.io/hostname"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
"""The well-known label that says whether a node is ``spot`` or ``on-demand`` capacity."""


def domain_value(pool: str, label: str, number: int, size: int) -> str:
    """The value of topology ``label`` on node ``number`` of ``pool`` (runs of ``size``)."""
    short = label.rpartition("/")[2] or label
    return f"{pool}-{short}-{number // size:02d}"


def node_name(pool: str, number: int, width: int = 4) -> str:
    return f"{pool}-{number:0{width}d}"


@dataclass(frozen=True, slots=True)
class NodeOffer:
    """Nodes of one type that a cluster may add (see the module docstring)."""

    pool: str
    template: NodeSpec
    domains: tuple[tuple[str, int], ...] = ()
    """Topology labels and their sizes in nodes, widest first."""
    min_nodes: int = 0
    max_nodes: int = 0
    delay_s: float = 300.0
    """From the request to the node being Ready."""
    spot: bool = False
    interruptions_per_hour: float = 0.0
    """Per node, while up (spot only)."""
    availability: float = 1.0
    """The chance that a request is filled (spot capacity may not be there)."""
    width: int = 4
    """Digits of the node numbers in their names."""

    @property
    def gpus(self) -> int:
        return self.template.gpus

    def owns(self, node: NodeSpec) -> bool:
        """Whether ``node`` is one of the pool's: it carries the template's labels."""
        return self.template.labels.items() <= node.labels.items()

    def node(self, number: int) -> NodeSpec:
        """Node ``number`` of the pool, named and labelled as the module docstring says."""
        name = node_name(self.pool, number, self.width)
        labels = {
            **self.template.labels,
            **{label: domain_value(self.pool, label, number, size) for label, size in self.domains},
            HOSTNAME_LABEL: name,
        }
        return replace(self.template, name=name, labels=labels)

    def domain_of(self, number: int) -> int:
        """The narrowest topology domain of node ``number`` (its run of nodes; 0 without)."""
        return number // self.domains[-1][1] if self.domains else 0

    def domain_size(self) -> int:
        """Nodes in the narrowest topology domain (0: the pool has none)."""
        return self.domains[-1][1] if self.domains else 0


PROVISIONED_FOR_LABEL = "gpufleet.io/provisioned-for"
"""On a node bought for one job: that job (:func:`provisioned_for`). Until the label goes,
no other job is placed there, so that the job starts whole once all its nodes are up."""
MAX_LABEL_VALUE = 63


def provisioned_for(key: str) -> str:
    """Job ``key`` (``namespace/name``) as a label value: ``namespace.name``, cut to 63
    characters with a digest of the whole where it is longer."""
    value = key.replace("/", ".")
    if len(value) <= MAX_LABEL_VALUE:
        return value
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{value[: MAX_LABEL_VALUE - 13].rstrip('.-_')}-{digest}"
