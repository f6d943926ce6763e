"""An allocation as a FOCUS 1.2 cost and usage dataset: the rows, not yet a file.

FOCUS, the FinOps Foundation's open cost and usage specification, is the billing format that
cost tools read from every cloud; gpufleet's export makes a cluster one more provider of it.
:func:`focus_rows` turns an :class:`~gpufleet.cost.allocation.CostAllocation` into rows
(:func:`iter_focus_rows` streams them), and ``report/focus.py`` writes them as CSV. The
FinOps Foundation's ``focus-validator`` (2.2.1, its FOCUS 1.2 rules) checks what is written,
in ``tests/cost/test_focus.py``.

**What a row is.** One charge per *charge period* x *resource* x *component*, every one with
ChargeCategory ``Usage``:

* charge periods are hours of the clock the times are on (epoch seconds, so UTC hours), each
  ``[start, end)``, cut to the allocation's window: a window that starts or ends inside an
  hour has a shorter first or last period;
* a **workload row** is one run of a pod (ResourceType ``Pod``, ResourceId the pod as the
  runs name it, ``namespace/name``) and one component — GPU, vCPU or memory — in one period:
  the amount the allocation charged (``max(usage, request)``; GPUs as requested) x the hours
  the run held it inside the period;
* an **idle row** is one node (ResourceType ``Node``, ResourceId its name, ``x_Allocation``
  ``__idle__``) and one component in one period: the node's capacity x its hours in the period,
  less what its runs were charged there — OpenCost's unallocated ``__idle__``, per hour.
  Negative where runs were charged more than the node holds, as the allocation's idle is.

A row whose quantity is zero (a pod that asked for no GPU; a node with nothing idle) is left
out: FOCUS records usage-based charges only where the service was used. So the EffectiveCost
of the workload rows adds up to the allocation's workload, and of all rows to
:attr:`CostAllocation.total <gpufleet.cost.allocation.CostAllocation.total>`, to float rounding.

**Prices.** A price sheet gives one price per component and node type; gpufleet applies no
discount, commitment or negotiation to it, so ListCost, ContractedCost, BilledCost and
EffectiveCost are one figure, PricingQuantity x ListUnitPrice. The sheet's ``committed``
category is PricingCategory ``Committed``, but the commitment itself (CommitmentDiscountId and
its columns) is not known to a sheet and is not exported.

**Columns**: the page on ``gpufleet cost`` in the documentation lists each column and
what gpufleet writes in it (``docs/cost.md``, "FOCUS columns").

A node priced as a whole (``nodeHour``) has its component prices split by its shape, so one
SkuPriceId can carry different unit prices on nodes of different shapes matched by GPU product.

Pure: times stay epoch seconds until :func:`~gpufleet.cost.calendar.iso_utc` writes them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpufleet.cost.allocation import HOUR, IDLE, CostAllocation, overlap_hours
from gpufleet.cost.calendar import iso_utc, month_of
from gpufleet.cost.prices import FOCUS_CATEGORY, PriceSheet
from gpufleet.model.arrays import FloatArray, IntArray

FOCUS_VERSION = "1.2"
SERVICE_NAME = "Kubernetes GPU cluster"
PROVIDER = "gpufleet"
TAG_PREFIX = "gpufleet/"
IDLE_SNAP = 1e-12
"""An idle quantity within this fraction of the node's capacity-hours is float noise of a
full node (capacity less the sum of its runs), not idle capacity: it is taken as 0."""

Cell = str | float | None
Row = dict[str, Cell]


@dataclass(frozen=True, slots=True)
class Component:
    """How one column of the allocation's resource matrices is billed."""

    key: str
    meter: str
    unit: str
    per: str


COMPONENTS = (
    Component("gpu", "GPU", "GPU-Hours", "GPU-hour"),
    Component("cpu", "vCPU", "Core-Hours", "vCPU-hour"),
    Component("ram", "Memory", "GiB-Hours", "GiB-hour"),
)

FOCUS_COLUMNS = (
    "BilledCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodEnd",
    "BillingPeriodStart",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargeFrequency",
    "ChargePeriodEnd",
    "ChargePeriodStart",
    "ConsumedQuantity",
    "ConsumedUnit",
    "ContractedCost",
    "EffectiveCost",
    "InvoiceId",
    "InvoiceIssuerName",
    "ListCost",
    "ListUnitPrice",
    "PricingCategory",
    "PricingQuantity",
    "PricingUnit",
    "ProviderName",
    "PublisherName",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ServiceCategory",
    "ServiceName",
    "ServiceSubcategory",
    "SkuId",
    "SkuMeter",
    "SkuPriceDetails",
    "SkuPriceId",
    "Tags",
)
"""The FOCUS columns of every export: the 21 that FOCUS 1.2 makes mandatory, the conditional
ones that apply to a cluster priced by a sheet, and the recommended ChargeFrequency, InvoiceId
and ServiceSubcategory."""

_FIXED_X = ("x_Allocation", "x_Component", "x_Node", "x_NodeType")
_EFFICIENCY_X = ("x_GpuEfficiency", "x_CpuEfficiency", "x_RamEfficiency")


def x_column(dimension: str) -> str:
    """The ``x_`` column of a dimension of the runs: ``team-name`` -> ``x_TeamName``."""
    parts = "".join(c if c.isascii() and c.isalnum() else " " for c in dimension).split()
    return "x_" + "".join(p[0].upper() + p[1:] for p in parts)


def _dimensions(allocation: CostAllocation) -> list[tuple[str, str]]:
    """``(dimension, column)`` for every dimension of the runs but ``pod`` and the run's node
    and node type (a replay records them as dimensions: ``x_Node`` and ``x_NodeType`` hold them
    already, from the nodes)."""
    taken = set(FOCUS_COLUMNS) | set(_FIXED_X) | set(_EFFICIENCY_X)
    out = []
    for name in allocation.runs.dims:
        column = x_column(name)
        if name == "pod" or column in {"x_Node", "x_NodeType"}:
            continue
        if column == "x_" or column in taken:
            raise ValueError(f"dimension {name!r} has no column of its own (it would be {column})")
        taken.add(column)
        out.append((name, column))
    return out


def focus_columns(allocation: CostAllocation) -> tuple[str, ...]:
    """The columns of :func:`focus_rows` for ``allocation``, in order."""
    dims = tuple(column for _, column in _dimensions(allocation))
    return FOCUS_COLUMNS + _FIXED_X + dims + _EFFICIENCY_X


def focus_rows(allocation: CostAllocation, sheet: PriceSheet, **options: Any) -> list[Row]:
    """The FOCUS rows of ``allocation`` priced by ``sheet`` (module docstring), each a mapping
    of :func:`focus_columns` to a string, a float or None (null); ``options`` as
    :func:`iter_focus_rows` takes them, which streams the same rows."""
    return list(iter_focus_rows(allocation, sheet, **options))


def iter_focus_rows(
    allocation: CostAllocation,
    sheet: PriceSheet,
    *,
    billing_account_id: str,
    billing_account_name: str | None = None,
    provider: str = PROVIDER,
    publisher: str | None = None,
    invoice_issuer: str | None = None,
    invoice_id: str | None = None,
    service_name: str = SERVICE_NAME,
    categories: Sequence[str] | None = None,
) -> Iterator[Row]:
    """:func:`focus_rows` one at a time, in charge period order: in each period the workload
    rows (by run, then component), then the idle rows (by node, then component)."""
    if not billing_account_id:
        raise ValueError("a FOCUS export needs a billing account id")
    lo, hi = allocation.window
    if not (float(lo).is_integer() and float(hi).is_integer()):
        raise ValueError(
            f"FOCUS writes times to the second: the window [{lo!r}, {hi!r}) must start and end"
            " on whole seconds"
        )
    nodes, runs = allocation.nodes, allocation.runs
    cats = tuple(nodes.categories if categories is None else categories)
    if len(cats) != len(nodes.names):
        raise ValueError(f"{len(cats)} pricing categories for {len(nodes.names)} nodes")
    for category in cats:
        if category not in FOCUS_CATEGORY:
            raise ValueError(f"pricing category {category!r} is not one of {list(FOCUS_CATEGORY)}")
    dims = _dimensions(allocation)
    common: Row = {
        "BillingAccountId": billing_account_id,
        "BillingAccountName": billing_account_name or billing_account_id,
        "BillingCurrency": sheet.currency,
        "ChargeCategory": "Usage",
        "ChargeClass": None,
        "ChargeFrequency": "Usage-Based",
        "InvoiceId": invoice_id,
        "InvoiceIssuerName": invoice_issuer or provider,
        "ProviderName": provider,
        "PublisherName": publisher or provider,
        "ServiceCategory": "Compute",
        "ServiceName": service_name,
        "ServiceSubcategory": "Containers",
        "SkuPriceDetails": None,
    }
    template: Row = {**dict.fromkeys(focus_columns(allocation)), **common}
    priced = _priced(allocation, sheet, cats)  # per node and component: what its rows share
    starts, ends = charge_periods(allocation.window)
    seg_run, seg_period, seg_hours = _segments(allocation, starts, ends)
    held = allocation.charged[seg_run] * seg_hours[:, None]  # resource-hours, S x 3
    idle = _idle(allocation, starts, ends, seg_run=seg_run, seg_period=seg_period, held=held)
    prices = nodes.prices.tolist()
    first_of = np.searchsorted(seg_period, np.arange(len(starts) + 1)).tolist()
    pods = {r: _pod(allocation, r, dims) for r in np.unique(seg_run).tolist()}
    idle_of = [_idle_resource(name, dims) for name in nodes.names]

    def row(when: Row, i: int, k: int, quantity: float, *, what: str, resource: Row) -> Row:
        """A copy of the template, so that every row has the columns in their order."""
        out = template.copy()
        out.update(when)
        out.update(priced[i][k][0])
        out.update(resource)
        cost = quantity * prices[i][k]
        out["BilledCost"] = out["ContractedCost"] = out["EffectiveCost"] = out["ListCost"] = cost
        out["ConsumedQuantity"] = out["PricingQuantity"] = quantity
        out["ChargeDescription"] = what + priced[i][k][1]
        return out

    for period, (start, end) in enumerate(zip(starts.tolist(), ends.tolist(), strict=True)):
        month = month_of(start)
        when: Row = {
            "BillingPeriodEnd": iso_utc(month[1]),
            "BillingPeriodStart": iso_utc(month[0]),
            "ChargePeriodEnd": iso_utc(end),
            "ChargePeriodStart": iso_utc(start),
        }
        for s in range(first_of[period], first_of[period + 1]):
            r = int(seg_run[s])
            i, pod = int(runs.node[r]), runs.pods[r]
            for k, comp in enumerate(COMPONENTS):
                quantity = float(held[s, k])
                if quantity != 0:
                    yield row(
                        when, i, k, quantity, what=f"{comp.meter} of pod {pod}", resource=pods[r]
                    )
        for i in range(len(nodes.names)):
            for k, comp in enumerate(COMPONENTS):
                quantity = float(idle[i, period, k])
                if quantity != 0:
                    yield row(
                        when, i, k, quantity, what=f"Unallocated {comp.meter}", resource=idle_of[i]
                    )


def _priced(
    allocation: CostAllocation, sheet: PriceSheet, categories: Sequence[str]
) -> list[list[tuple[Row, str]]]:
    """Per node and component: the columns its rows share, and the end of their
    ChargeDescription (where and at what price)."""
    nodes = allocation.nodes
    skus = _skus(sheet, nodes.types)
    out = []
    for i, name in enumerate(nodes.names):
        per = []
        for k, comp in enumerate(COMPONENTS):
            price = float(nodes.prices[i, k])
            sku_id, sku_price_id = skus[i][k]
            shared: Row = {
                "ConsumedUnit": comp.unit,
                "ListUnitPrice": price,
                "PricingCategory": FOCUS_CATEGORY[categories[i]],
                "PricingUnit": comp.unit,
                "SkuId": sku_id,
                "SkuMeter": comp.meter,
                "SkuPriceId": sku_price_id,
                "x_Component": comp.key,
                "x_Node": name,
                "x_NodeType": nodes.types[i],
            }
            where = (
                f" on node {name} ({nodes.types[i]}, {categories[i]})"
                f" at {price:g} {sheet.currency} per {comp.per}"
            )
            per.append((shared, where))
        out.append(per)
    return out


def _pod(allocation: CostAllocation, r: int, dims: Sequence[tuple[str, str]]) -> Row:
    """The columns of run ``r``'s rows that say whose they are."""
    runs, nodes = allocation.runs, allocation.nodes
    pod = runs.pods[r]
    tags = {TAG_PREFIX + name: runs.dims[name][r] for name, _ in dims}
    tags[TAG_PREFIX + "node"] = nodes.names[int(runs.node[r])]
    efficiency = [
        None if math.isnan(u) or q <= 0 else u / q
        for u, q in zip(runs.usage[r].tolist(), runs.request[r].tolist(), strict=True)
    ]
    return {
        "ResourceId": pod,
        "ResourceName": pod.rsplit("/", 1)[-1],
        "ResourceType": "Pod",
        "Tags": _json(tags),
        "x_Allocation": pod,
        **{column: runs.dims[name][r] for name, column in dims},
        **dict(zip(_EFFICIENCY_X, efficiency, strict=True)),
    }


def _idle_resource(node: str, dims: Sequence[tuple[str, str]]) -> Row:
    """The columns of a node's idle rows that say whose they are."""
    return {
        "ResourceId": node,
        "ResourceName": node,
        "ResourceType": "Node",
        "Tags": _json({TAG_PREFIX + "node": node}),
        "x_Allocation": IDLE,
        **{column: None for _, column in dims},
        **dict.fromkeys(_EFFICIENCY_X),
    }


def charge_periods(window: tuple[float, float]) -> tuple[FloatArray, FloatArray]:
    """The starts and ends of the hours of the clock that ``window`` covers, the first and
    the last cut to the window."""
    lo, hi = window
    edges = np.arange(math.floor(lo / HOUR), math.ceil(hi / HOUR) + 1, dtype=np.float64) * HOUR
    edges[0], edges[-1] = lo, hi
    return edges[:-1], edges[1:]


def _segments(
    allocation: CostAllocation, starts: FloatArray, ends: FloatArray
) -> tuple[IntArray, IntArray, FloatArray]:
    """Each run's stretches inside the charge periods: run, period and hours, in period
    order, then run order."""
    runs = allocation.runs
    inside = np.flatnonzero(allocation.hours > 0)
    lo, hi = allocation.window
    first = np.searchsorted(starts, np.maximum(runs.start[inside], lo), side="right") - 1
    last = np.searchsorted(starts, np.minimum(runs.end[inside], hi), side="left") - 1
    count = last - first + 1
    seg_run = np.repeat(inside, count)
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    seg_period = np.repeat(first, count) + offset
    order = np.lexsort((seg_run, seg_period))
    seg_run, seg_period = seg_run[order], seg_period[order]
    hours = (
        np.minimum(runs.end[seg_run], ends[seg_period])
        - np.maximum(runs.start[seg_run], starts[seg_period])
    ) / HOUR
    keep = hours > 0
    return seg_run[keep], seg_period[keep], hours[keep]


def _idle(
    allocation: CostAllocation,
    starts: FloatArray,
    ends: FloatArray,
    *,
    seg_run: IntArray,
    seg_period: IntArray,
    held: FloatArray,
) -> FloatArray:
    """``N x P x 3``: per node, period and component, its capacity-hours less what its runs
    held (:data:`IDLE_SNAP`)."""
    nodes = allocation.nodes
    workload = np.zeros((len(nodes.names), len(starts), 3))
    np.add.at(workload, (allocation.runs.node[seg_run], seg_period), held)
    node_hours = np.stack(
        [
            overlap_hours(nodes.start, nodes.end, (s, e))
            for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
        ],
        axis=-1,
    ).reshape(len(nodes.names), len(starts))
    capacity = nodes.capacity[:, None, :] * node_hours[:, :, None]
    idle: FloatArray = capacity - workload
    idle[np.abs(idle) <= IDLE_SNAP * capacity] = 0.0
    return idle


def _skus(sheet: PriceSheet, types: Sequence[str]) -> list[list[tuple[str, str]]]:
    """Per node and component, its SkuId and SkuPriceId (module docstring)."""
    entries = {t.name: t for t in sheet.types}
    if sheet.default is not None:
        entries.setdefault(sheet.default.name, sheet.default)
    out = []
    for name in types:
        entry = entries.get(name)
        hardware = entry.match[1] if entry is not None and entry.match is not None else name
        out.append(
            [(f"{hardware}/{c.meter}", f"{sheet.name}/{name}/{c.meter}") for c in COMPONENTS]
        )
    return out


def _json(tags: dict[str, str]) -> str:
    return json.dumps(tags, sort_keys=True, separators=(",", ":"))
