"""What a cluster costs per hour with the pods it runs now.

The live scheduler's cost gauges and the what-if tool's cost of a cycle both start from the
scheduler's ledger: its running pods (:class:`~gpufleet.scheduler.api.transaction.Running`,
each on a node of the ledger's cluster, with the request it was placed with) and the
ledger's nodes priced in the same order (:func:`~gpufleet.cost.nodes.price_nodes`).
:func:`running_hourly` costs them for one hour as OpenCost would (requests, as nothing
here knows usage); :func:`hourly_cost` sums that up per queue, a parent with its children.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.cost.allocation import UNALLOCATED, Runs, hourly
from gpufleet.cost.summary import queue_costs, split
from gpufleet.model.costs import HourlyCost
from gpufleet.model.workload import request_vector

if TYPE_CHECKING:
    from gpufleet.cost.allocation import CostAllocation, Nodes
    from gpufleet.model.arrays import FloatArray
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.state.claims import ClaimBook


def running_hourly(
    running: Sequence[Running], nodes: Nodes, book: ClaimBook | None = None
) -> CostAllocation:
    """``running`` and ``nodes`` costed for one hour (the ``cost`` of a run is its rate),
    with dimensions ``queue`` (``__unallocated__`` for another scheduler's pod of no queue)
    and ``namespace``. ``nodes`` are the ledger's, in its order, priced with their DRA
    devices (``ClaimBook.gpus_by_node``); a pod's GPUs are those of its containers and of its
    ResourceClaims' devices (``book``'s allocations; a claim several running pods share is
    split evenly between them)."""
    request = np.array([request_vector(r.spec) for r in running]).reshape(len(running), 3)
    request[:, 0] += claim_gpus(running, book)
    request[:, 1] /= 1000.0  # milli-CPU to cores
    request[:, 2] /= 1024.0  # MiB to GiB
    runs = Runs.of(
        tuple(r.pod.key for r in running),
        node=[r.node for r in running],
        start=[0.0] * len(running),
        end=[0.0] * len(running),
        request=request,
        dims={
            "queue": tuple(r.pod.queue or UNALLOCATED for r in running),
            "namespace": tuple(r.pod.key.partition("/")[0] for r in running),
        },
    )
    return hourly(runs, nodes)


def hourly_cost(alloc: CostAllocation, parents: Mapping[str, str | None]) -> HourlyCost:
    """The figures of an hourly ``alloc``: the nodes, the running pods, the unallocated rest,
    per queue (``parents``: queue -> its parent, None at the top)."""
    return HourlyCost(
        cluster=split(alloc.asset.sum(axis=0)),
        allocated=split(alloc.cost.sum(axis=0)),
        idle=split(alloc.idle.sum(axis=0)),
        queues=queue_costs(alloc, parents),
    )


def claim_gpus(running: Sequence[Running], book: ClaimBook | None) -> FloatArray:
    """Per running pod, the GPUs its ResourceClaims' node-local devices count as (those its
    node is priced with; devices on no one node are priced nowhere, so charged to no one),
    each claim split evenly between the running pods that use it (0 without DRA)."""
    out = np.zeros(len(running))
    if book is None or not book.allocations:
        return out
    users = Counter(key for r in running for key in r.pod.claims)
    for i, r in enumerate(running):
        out[i] = sum(book.allocated_gpus(key, node_local=True) / users[key] for key in r.pod.claims)
    return out
