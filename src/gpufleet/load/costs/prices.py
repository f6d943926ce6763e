"""Read a price sheet (``kind: PriceSheet``, ``gpufleet.io/v1alpha1``) into
:class:`~gpufleet.cost.prices.PriceSheet`.

::

    apiVersion: gpufleet.io/v1alpha1
    kind: PriceSheet
    metadata:
      name: example
    spec:
      title: Example list prices, 2026-11-01
      currency: USD
      base: {gpuHour: 0.95, vcpuHour: 0.031611, ramGiBHour: 0.004237}   # optional
      default: {category: on-demand, prices: {gpuHour: 2.0, vcpuHour: 0.03, ramGiBHour: 0.004}}
      nodeTypes:
      - name: h100-on-demand
        gpuProduct: NVIDIA-H100-80GB-HBM3      # or instanceType: p5.48xlarge
        category: on-demand                     # on-demand, spot or committed
        prices: {gpuHour: 2.99, vcpuHour: 0.03, ramGiBHour: 0.004}
      - name: a100-spot
        instanceType: a2-ultragpu-8g
        category: spot
        nodeHour: 16.5                          # split in the ratios of base

Every fault is one :class:`~gpufleet.load.errors.InputError` naming the file, the entry and
the field: a price that is negative or not a number, a node type matched twice (once as
spot and once otherwise is allowed: ``cost/prices.py``), a category not in the list, an entry
with both ``prices`` and ``nodeHour`` or neither.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpufleet.cost.prices import (
    CATEGORIES,
    GPU_PRODUCT_LABEL,
    INSTANCE_TYPE_LABEL,
    OPENCOST_BASE,
    NodeType,
    PriceSheet,
    UnitPrices,
)
from gpufleet.load.errors import InputError
from gpufleet.load.objects.documents import own_kind, own_kind_file
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.load.objects.schema import ANY, Schema

API_VERSION = "gpufleet.io/v1alpha1"
KIND = "PriceSheet"
DEFAULT_SHEET = Path(__file__).parents[2] / "data" / "prices.yaml"
"""The sheet that ships with the package: illustrative list prices, dated in its title."""

_PRICES = {"gpuHour": ANY, "vcpuHour": ANY, "ramGiBHour": ANY}
_ENTRY = {
    "name": ANY,
    "gpuProduct": ANY,
    "instanceType": ANY,
    "category": ANY,
    "prices": _PRICES,
    "nodeHour": ANY,
}
SCHEMA: Schema = {
    "apiVersion": ANY,
    "kind": ANY,
    "metadata": ANY,
    "spec": {
        "title": ANY,
        "currency": ANY,
        "base": _PRICES,
        "default": {k: v for k, v in _ENTRY.items() if k not in {"gpuProduct", "instanceType"}},
        "nodeTypes": [_ENTRY],
    },
}
_MATCHES = {"gpuProduct": GPU_PRODUCT_LABEL, "instanceType": INSTANCE_TYPE_LABEL}


def load_price_sheet(path: Path = DEFAULT_SHEET) -> PriceSheet:
    """The sheet in ``path`` (the bundled one by default)."""
    return _sheet(own_kind_file(path, API_VERSION, KIND, SCHEMA))


def read_price_sheet(obj: Obj, source: str) -> PriceSheet:
    """A sheet from its object; ``source`` names it in errors."""
    return _sheet(own_kind(obj, source, API_VERSION, KIND, SCHEMA))


def _sheet(r: Reader) -> PriceSheet:
    currency = r.string("spec.currency")
    if currency is None or len(currency) != 3 or not currency.isalpha() or not currency.isupper():
        raise r.fail("spec.currency", "an ISO 4217 currency code such as USD", currency)
    title = r.string("spec.title")
    if not title:
        raise r.fail("spec.title", "whose prices these are and of when", title)
    base = OPENCOST_BASE
    spec = r.mapping("spec")
    if spec.get("base") is not None:
        base = _components(r, spec["base"], "spec.base")
        if base.gpu + base.cpu + base.ram <= 0:
            raise r.fail("spec.base", "at least one price above 0", spec["base"])
    default = None
    if spec.get("default") is not None:
        default = _entry(r, r.mapping("spec.default"), "spec.default", "default", None)
    types = _node_types(r)
    return PriceSheet(r.name, currency, title, types, base, default)


def _node_types(r: Reader) -> tuple[NodeType, ...]:
    """``spec.nodeTypes``: each entry named once, each node type matched once."""
    types: list[NodeType] = []
    seen: dict[tuple[str, str, bool], str] = {}
    names: set[str] = set()
    for i, raw in enumerate(r.sequence("spec.nodeTypes")):
        field = f"spec.nodeTypes[{i}]"
        if not isinstance(raw, dict):
            raise r.fail(field, "a node type (a mapping)", raw)
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            raise r.fail(f"{field}.name", "the entry's name, a non-empty string", name)
        if name in names:
            raise r.fail(f"{field}.name", "a name no other entry has", name)
        names.add(name)
        given = [key for key in _MATCHES if raw.get(key) is not None]
        if len(given) != 1:
            raise InputError(
                f"{r.where} entry {name}",
                "expected exactly one of gpuProduct and instanceType",
                field=field,
            )
        value = raw[given[0]]
        if not isinstance(value, str) or not value:
            raise r.fail(f"{field}.{given[0]}", "a label value, a non-empty string", value)
        match = (_MATCHES[given[0]], value)
        key = (*match, raw.get("category") == "spot")
        if key in seen:
            raise InputError(
                f"{r.where} entry {name}",
                f"{given[0]} {value} is matched twice: entry {seen[key]} matches it too",
                field=f"{field}.{given[0]}",
            )
        seen[key] = name
        types.append(_entry(r, raw, field, name, match))
    return tuple(types)


def _entry(r: Reader, raw: Obj, field: str, name: str, match: tuple[str, str] | None) -> NodeType:
    """One entry; its faults name the entry too."""
    try:
        return _read_entry(r, raw, field, name, match)
    except InputError as error:
        raise InputError(f"{r.where} entry {name}", error.problem, field=error.field) from None


def _read_entry(
    r: Reader, raw: Obj, field: str, name: str, match: tuple[str, str] | None
) -> NodeType:
    category = raw.get("category")
    if category not in CATEGORIES:
        raise r.fail(f"{field}.category", f"one of {', '.join(CATEGORIES)}", category)
    has_prices, has_node = raw.get("prices") is not None, raw.get("nodeHour") is not None
    if has_prices == has_node:
        raise InputError(
            r.where, "expected exactly one of prices and nodeHour", field=f"{field}.prices"
        )
    if has_prices:
        return NodeType(
            name, match, category, components=_components(r, raw["prices"], f"{field}.prices")
        )
    return NodeType(name, match, category, per_node=_price(r, raw["nodeHour"], f"{field}.nodeHour"))


def _components(r: Reader, raw: object, field: str) -> UnitPrices:
    if not isinstance(raw, dict):
        raise r.fail(field, "a mapping of gpuHour, vcpuHour and ramGiBHour", raw)
    gpu, cpu, ram = (
        _price(r, raw.get(key, 0.0), f"{field}.{key}")
        for key in ("gpuHour", "vcpuHour", "ramGiBHour")
    )
    return UnitPrices(gpu, cpu, ram)


def _price(r: Reader, raw: object, field: str) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise r.fail(field, "a price, a number", raw)
    if not 0 <= raw <= MAX_PRICE:
        raise r.fail(field, f"a price from 0 to {MAX_PRICE:,} per hour", raw)
    return float(raw)


MAX_PRICE = 1_000_000
"""The most one GPU, vCPU or GiB of memory may cost per hour: more is a typo, and costs
summed over a cluster and a window must stay finite numbers (JSON has no Infinity)."""
