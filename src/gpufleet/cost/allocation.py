"""Cost allocation over a window, as OpenCost computes it.

The records are *runs*: one per pod (or container) and stretch of time it held a node, with
what it requested and, where known, what it used on average (:class:`Runs`). The assets are
the nodes, each with its capacity, component prices and the time it existed
(:class:`Nodes`). Over a window ``[start, end)``:

* a run is charged, per resource, ``max(average usage, average request)`` x its hours in the
  window — the request alone where no usage is known; GPUs as requested (a share of a GPU
  counts its fraction, a MIG slice its share of the GPU);
* its cost is those resource-hours x its node's component prices;
* a node's asset cost is its capacity x its hours in the window x its prices; what no run
  was charged for is idle (*unallocated*), per node and resource: ``__idle__``. Workload plus
  idle is the nodes' cost, per resource, per node and in all. Where runs were charged more than
  the node holds (usage above requests on a full node) a node's idle is negative, as
  OpenCost's is, so that the sum still holds;
* GPU time requested but not used (*reserved but idle*, from utilisation) is reported beside
  the allocation, never mixed into ``__idle__``.

:meth:`CostAllocation.aggregate` sums runs by any of their dimensions (pod, namespace, queue,
experiment, node, ...) into rows named as OpenCost's ``/allocation`` response names its
fields, with the idle row, or the idle shared over the rows by cost weight.

Vectorised: every figure is one numpy expression over runs or nodes; aggregation is a
``bincount`` over the group of each run.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpufleet.model.arrays import FloatArray, IntArray

HOUR = 3600.0
RESOURCES = ("gpu", "cpu", "ram")
"""The columns of every resource matrix: GPUs, CPU cores, GiB of memory."""
GPU, CPU, RAM = 0, 1, 2
IDLE = "__idle__"
"""The name of unallocated cost, as OpenCost names it."""
UNALLOCATED = "__unallocated__"
"""A run without the dimension aggregated by (a pod of no queue, no experiment label), as
OpenCost names it."""
GIB = 2.0**30


@dataclass(frozen=True, slots=True)
class Nodes:
    """The cluster's nodes: per node its capacity and prices (``N x 3``: GPUs, cores, GiB;
    $ per unit-hour) and when it existed (seconds; ``-inf``/``inf``: the whole window)."""

    names: tuple[str, ...]
    types: tuple[str, ...]
    """The price sheet's entry of each node."""
    categories: tuple[str, ...]
    capacity: FloatArray
    prices: FloatArray
    start: FloatArray
    end: FloatArray

    @classmethod
    def of(
        cls,
        names: Sequence[str],
        *,
        types: Sequence[str],
        categories: Sequence[str],
        capacity: Sequence[Sequence[float]] | FloatArray,
        prices: Sequence[Sequence[float]] | FloatArray,
        start: Sequence[float] | FloatArray | None = None,
        end: Sequence[float] | FloatArray | None = None,
    ) -> Nodes:
        n = len(names)
        return cls(
            tuple(names),
            tuple(types),
            tuple(categories),
            np.asarray(capacity, dtype=np.float64).reshape(n, 3),
            np.asarray(prices, dtype=np.float64).reshape(n, 3),
            np.full(n, -math.inf) if start is None else np.asarray(start, dtype=np.float64),
            np.full(n, math.inf) if end is None else np.asarray(end, dtype=np.float64),
        )


@dataclass(frozen=True, slots=True)
class Runs:
    """Pods' runs on nodes. Per run: its pod, node (a row of :class:`Nodes`), start and end
    (seconds; ``inf``: still running), requests and average usage (``R x 3``; NaN where usage
    is unknown), GPU-hours it held its GPUs idle (NaN: unknown) and its dimensions (per name,
    e.g. ``namespace``, ``queue``, ``experiment``, a value per run)."""

    pods: tuple[str, ...]
    node: IntArray
    start: FloatArray
    end: FloatArray
    request: FloatArray
    usage: FloatArray
    gpu_idle_hours: FloatArray
    dims: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        pods: Sequence[str],
        *,
        node: Sequence[int] | IntArray,
        start: Sequence[float] | FloatArray,
        end: Sequence[float] | FloatArray,
        request: Sequence[Sequence[float]] | FloatArray,
        usage: Sequence[Sequence[float]] | FloatArray | None = None,
        gpu_idle_hours: Sequence[float] | None = None,
        dims: Mapping[str, Sequence[str]] | None = None,
    ) -> Runs:
        r = len(pods)
        all_dims = {"pod": tuple(pods), **{k: tuple(v) for k, v in (dims or {}).items()}}
        for name, values in all_dims.items():
            if len(values) != r:
                raise ValueError(f"dimension {name} has {len(values)} values for {r} runs")
        return cls(
            tuple(pods),
            np.asarray(node, dtype=np.int64).reshape(r),
            np.asarray(start, dtype=np.float64).reshape(r),
            np.asarray(end, dtype=np.float64).reshape(r),
            np.asarray(request, dtype=np.float64).reshape(r, 3),
            np.full((r, 3), np.nan)
            if usage is None
            else np.asarray(usage, dtype=np.float64).reshape(r, 3),
            np.full(r, np.nan)
            if gpu_idle_hours is None
            else np.asarray(gpu_idle_hours, dtype=np.float64).reshape(r),
            all_dims,
        )


def overlap_hours(start: FloatArray, end: FloatArray, window: tuple[float, float]) -> FloatArray:
    """Hours of each ``[start, end)`` inside ``window``."""
    lo, hi = window
    hours: FloatArray = np.maximum(np.minimum(end, hi) - np.maximum(start, lo), 0.0) / HOUR
    return hours


@dataclass(frozen=True, slots=True)
class CostAllocation:
    """Runs and nodes costed over ``window`` (module docstring). Per run: ``hours`` in the
    window, ``charged`` (``R x 3``: the average amount charged), ``amount_hours`` and
    ``cost``; per node: ``node_hours``, ``asset`` (``N x 3``: what it cost) and ``idle``."""

    window: tuple[float, float]
    runs: Runs
    nodes: Nodes
    hours: FloatArray
    charged: FloatArray
    amount_hours: FloatArray
    cost: FloatArray
    node_hours: FloatArray
    asset: FloatArray
    idle: FloatArray

    @property
    def workload_by_node(self) -> FloatArray:
        """``N x 3``: the cost of the runs on each node."""
        n = len(self.nodes.names)
        return np.stack(
            [np.bincount(self.runs.node, self.cost[:, k], minlength=n) for k in range(3)], axis=1
        )

    def idle_rows(self) -> list[dict[str, Any]]:
        """Per node: its cost, what runs were charged and the idle rest, per resource."""
        workload = self.workload_by_node
        rows = []
        for i, name in enumerate(self.nodes.names):
            rows.append(
                {
                    "node": name,
                    "nodeType": self.nodes.types[i],
                    "category": self.nodes.categories[i],
                    "hours": float(self.node_hours[i]),
                    **{f"{r}Cost": float(self.asset[i, k]) for k, r in enumerate(RESOURCES)},
                    **{f"{r}IdleCost": float(self.idle[i, k]) for k, r in enumerate(RESOURCES)},
                    "workloadCost": float(workload[i].sum()),
                    "idleCost": float(self.idle[i].sum()),
                    "totalCost": float(self.asset[i].sum()),
                }
            )
        return rows

    def aggregate(self, by: str, *, share_idle: bool = False) -> list[dict[str, Any]]:
        """Rows of the runs grouped by dimension ``by`` (``pod``, ``namespace``, ``queue``,
        ``node``, ...), largest cost first, then the ``__idle__`` row — or, with
        ``share_idle``, the idle cost of each resource shared over the rows in proportion to
        their cost of that resource (a resource no row was charged for keeps its idle row).
        Fields as OpenCost's ``/allocation`` names them."""
        if by == "node":
            values = np.array(self.nodes.names, dtype=object)[self.runs.node]
        elif by in self.runs.dims:
            values = np.array(self.runs.dims[by], dtype=object)
        else:
            known = ", ".join(sorted({"node", *self.runs.dims}))
            raise ValueError(f"no dimension {by!r} (known: {known})")
        names, group = np.unique(values.astype(str), return_inverse=True)
        g = len(names)

        def total(x: FloatArray) -> FloatArray:
            return np.bincount(group, x, minlength=g).astype(np.float64)

        cost = np.stack([total(self.cost[:, k]) for k in range(3)], axis=1)
        idle = self.idle.sum(axis=0)
        shared = np.zeros_like(cost)
        if share_idle:
            spent = cost.sum(axis=0)
            can = spent > 0
            shared[:, can] = cost[:, can] / spent[can] * idle[can]
            idle = np.where(can, 0.0, idle)
        amount_hours = np.stack([total(self.amount_hours[:, k]) for k in range(3)], axis=1)
        request_hours = np.stack(
            [total(self.runs.request[:, k] * self.hours) for k in range(3)], axis=1
        )
        known_usage = ~np.isnan(self.runs.usage)
        usage_hours = np.stack(
            [
                total(np.where(known_usage[:, k], self.runs.usage[:, k], 0.0) * self.hours)
                for k in range(3)
            ],
            axis=1,
        )
        usage_known = np.stack(
            [total((known_usage[:, k] & (self.hours > 0)).astype(float)) for k in range(3)],
            axis=1,
        )
        runs_in = total((self.hours > 0).astype(float))
        idle_known = ~np.isnan(self.runs.gpu_idle_hours)
        gpu_idle = total(np.where(idle_known, self.runs.gpu_idle_hours, 0.0))
        gpu_idle_cost = total(
            np.where(idle_known, self.runs.gpu_idle_hours, 0.0)
            * self.nodes.prices[self.runs.node, GPU]
        )
        gpu_idle_known = total(idle_known.astype(float)) == runs_in
        first = np.full(g, math.inf)
        last = np.full(g, -math.inf)
        lo, hi = self.window
        inside = self.hours > 0
        np.minimum.at(first, group[inside], np.maximum(self.runs.start[inside], lo))
        np.maximum.at(last, group[inside], np.minimum(self.runs.end[inside], hi))
        window_h = (hi - lo) / HOUR
        rows = []
        for j, name in enumerate(names):
            if runs_in[j] == 0:
                continue

            def efficiency(k: int, j: int = j) -> float | None:
                if usage_known[j, k] < runs_in[j] or request_hours[j, k] <= 0:
                    return None
                return float(usage_hours[j, k] / request_hours[j, k])

            row: dict[str, Any] = {
                "name": str(name),
                "start": float(first[j]),
                "end": float(last[j]),
                "minutes": float((last[j] - first[j]) / 60.0),
                "cpuCoreRequestAverage": float(request_hours[j, CPU] / window_h),
                "cpuCoreHours": float(amount_hours[j, CPU]),
                "cpuCost": float(cost[j, CPU]),
                "cpuEfficiency": efficiency(CPU),
                "gpuCount": float(request_hours[j, GPU] / window_h),
                "gpuHours": float(amount_hours[j, GPU]),
                "gpuCost": float(cost[j, GPU]),
                "gpuEfficiency": efficiency(GPU),
                "gpuIdleHours": float(gpu_idle[j]) if gpu_idle_known[j] else None,
                "gpuIdleCost": float(gpu_idle_cost[j]) if gpu_idle_known[j] else None,
                "ramByteRequestAverage": float(request_hours[j, RAM] / window_h * GIB),
                "ramByteHours": float(amount_hours[j, RAM] * GIB),
                "ramCost": float(cost[j, RAM]),
                "ramEfficiency": efficiency(RAM),
                "sharedCost": float(shared[j].sum()),
                "totalCost": float(cost[j].sum() + shared[j].sum()),
            }
            rows.append(row)
        rows.sort(key=lambda r: (-r["totalCost"], r["name"]))
        if np.any(idle != 0):
            rows.append(
                {
                    "name": IDLE,
                    "start": lo,
                    "end": hi,
                    "minutes": (hi - lo) / 60.0,
                    "cpuCost": float(idle[CPU]),
                    "gpuCost": float(idle[GPU]),
                    "ramCost": float(idle[RAM]),
                    "sharedCost": 0.0,
                    "totalCost": float(idle.sum()),
                }
            )
        return rows

    @property
    def total(self) -> float:
        """What the nodes cost over the window: workload plus idle."""
        return float(self.asset.sum())


def allocate(runs: Runs, nodes: Nodes, window: tuple[float, float]) -> CostAllocation:
    """Cost ``runs`` on ``nodes`` over ``window`` (module docstring)."""
    lo, hi = window
    if not hi > lo:
        raise ValueError(f"the window must end after it starts, got [{lo:g}, {hi:g})")
    hours = overlap_hours(runs.start, runs.end, window)
    charged = runs.request.copy()
    usage = runs.usage
    for k in (CPU, RAM):  # GPUs are charged as requested
        known = ~np.isnan(usage[:, k])
        charged[known, k] = np.maximum(usage[known, k], runs.request[known, k])
    amount_hours = charged * hours[:, None]
    cost = amount_hours * nodes.prices[runs.node]
    node_hours = overlap_hours(nodes.start, nodes.end, window)
    asset = nodes.capacity * node_hours[:, None] * nodes.prices
    n = len(nodes.names)
    workload = np.stack([np.bincount(runs.node, cost[:, k], minlength=n) for k in range(3)], 1)
    return CostAllocation(
        window, runs, nodes, hours, charged, amount_hours, cost, node_hours, asset, asset - workload
    )


def hourly(runs: Runs, nodes: Nodes) -> CostAllocation:
    """What ``nodes`` and ``runs`` cost per hour as they are now: every run and node held for
    one whole hour (the ``cost`` of a run is its rate in $ per hour)."""
    always = np.full(len(runs.pods), -math.inf), np.full(len(runs.pods), math.inf)
    now = Runs(
        runs.pods, runs.node, *always, runs.request, runs.usage, runs.gpu_idle_hours, runs.dims
    )
    whole = Nodes(
        nodes.names,
        nodes.types,
        nodes.categories,
        nodes.capacity,
        nodes.prices,
        np.full(len(nodes.names), -math.inf),
        np.full(len(nodes.names), math.inf),
    )
    return allocate(now, whole, (0.0, HOUR))
