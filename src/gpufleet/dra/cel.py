"""CEL device selectors in Kubernetes' environment, over the cel-python library.

A DeviceClass or a request selects devices with expressions such as::

    device.driver == "gpu.nvidia.com" &&
    device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100") &&
    device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0

The environment, as Kubernetes defines it (resource.k8s.io, structured parameters):
``device.driver``; ``device.attributes[domain].name`` where an unqualified attribute name
belongs to the driver's domain; ``device.capacity[domain].name`` as a quantity;
``quantity("80Gi")`` with ``compareTo``, ``isGreaterThan``, ``isLessThan``, ``asInteger``
and ``asApproximateFloat``; ``semver("1.2.3")`` (version attributes are semvers) with
``compareTo``, ``isGreaterThan``, ``isLessThan``, ``major``, ``minor``, ``patch``; CEL's
string functions and Kubernetes' string library (``lowerAscii``, ``upperAscii``, ``trim``,
``replace``, ``split``, ``join``, ``indexOf``, ``lastIndexOf``, ``substring``, ``charAt``).
Each expression is compiled once while it is in use (the caches are bounded: a long run
that meets ever new expressions or devices must not grow without end); a broken one raises
:class:`SelectorError`, which the allocator turns into a failure of the claims that use it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import celpy
from celpy import celtypes

if TYPE_CHECKING:
    from gpufleet.model.devices import Device

_QUANTITY = re.compile(r"([+-]?\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?([a-zA-Z]*)")
_SUFFIX = {
    "": Decimal(1),
    "m": Decimal("0.001"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
COMPILED_SELECTORS = 512
"""Compiled selectors kept, the least recently used dropped first. A compiled expression holds
cel-python's tree, tens of kilobytes; a cluster's DeviceClasses, requests and gang constraints
use a few dozen distinct expressions, so this keeps all of them and bounds the cache to tens of
megabytes whatever a process reads."""

DEVICE_MAPS = 4096
"""``device.attributes`` and ``device.capacity`` maps kept, one per distinct set of values
(about a kilobyte and a half each), the least recently used dropped first: a few thousand
devices. A dropped map is rebuilt when needed, at a small part of the cost of evaluating a
selector on it."""

_SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?"
)


class SelectorError(Exception):
    """A selector that does not compile or cannot be evaluated."""


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes quantity ("500m", "80Gi", "1e3") as a decimal."""
    match = _QUANTITY.fullmatch(text.strip())
    if match is None or match.group(3) not in _SUFFIX:
        raise SelectorError(f"not a quantity: {text!r}")
    try:
        value = Decimal(match.group(1)) * Decimal(10) ** int(match.group(2) or 0)
    except InvalidOperation:
        raise SelectorError(f"not a quantity: {text!r}") from None
    return value * _SUFFIX[match.group(3)]


class Quantity(celtypes.StringType):
    """A quantity in CEL: compared by value, not by text ("80Gi" == "81920Mi")."""

    @property
    def value(self) -> Decimal:
        return parse_quantity(str(self))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Quantity):
            return self.value == other.value
        return super().__eq__(other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.value)


class _Domains(celtypes.MapType):
    """``device.attributes`` / ``device.capacity``: an unknown domain is an empty map, as in
    Kubernetes, so that ``"x" in device.attributes["other.domain"]`` is simply false."""

    def __getitem__(self, key: Any) -> Any:
        try:
            return super().__getitem__(key)
        except KeyError:
            return celtypes.MapType({})


class Semver(celtypes.StringType):
    """A semantic version in CEL."""

    @property
    def parts(self) -> tuple[int, int, int, tuple[tuple[int, object], ...]]:
        match = _SEMVER.fullmatch(str(self))
        if match is None:
            raise SelectorError(f"not a semantic version: {self!s}")
        pre = match.group(4)
        # A release sorts after its pre-releases (semver 2.0 precedence).
        tail: tuple[tuple[int, object], ...] = (
            ((1, ""),)
            if pre is None
            else tuple((0, int(p)) if p.isdigit() else (0, p) for p in pre.split("."))
        )
        return int(match.group(1)), int(match.group(2)), int(match.group(3)), tail


def _order(a: Any, b: Any) -> int:
    if isinstance(a, Quantity) and isinstance(b, Quantity):
        x: Any = a.value
        y: Any = b.value
    elif isinstance(a, Semver) and isinstance(b, Semver):
        x, y = a.parts, b.parts
    else:
        raise SelectorError(f"cannot compare {type(a).__name__} with {type(b).__name__}")
    return int(x > y) - int(x < y)


def _semver(text: Any) -> Semver:
    version = Semver(str(text))
    _ = version.parts  # validates
    return version


def _quantity(text: Any) -> Quantity:
    parse_quantity(str(text))  # validates
    return Quantity(str(text))


def _str(value: Any) -> celtypes.StringType:
    return celtypes.StringType(str(value))


def _replace(text: Any, old: Any, new: Any, count: Any = -1) -> celtypes.StringType:
    return _str(str(text).replace(str(old), str(new), int(count)))


def _split(text: Any, sep: Any, limit: Any = -1) -> celtypes.ListType:
    parts = (
        str(text).split(str(sep)) if int(limit) < 0 else str(text).split(str(sep), int(limit) - 1)
    )
    return celtypes.ListType([_str(p) for p in parts])


def _substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    value = str(text)
    return _str(value[int(start) : len(value) if end is None else int(end)])


STRING_FUNCTIONS: dict[str, Any] = {
    "lowerAscii": lambda t: _str(str(t).lower()),
    "upperAscii": lambda t: _str(str(t).upper()),
    "trim": lambda t: _str(str(t).strip()),
    "replace": _replace,
    "split": _split,
    "join": lambda items, sep="": _str(str(sep).join(str(i) for i in items)),
    "indexOf": lambda t, s: celtypes.IntType(str(t).find(str(s))),
    "lastIndexOf": lambda t, s: celtypes.IntType(str(t).rfind(str(s))),
    "substring": _substring,
    "charAt": lambda t, i: _str(str(t)[int(i)] if int(i) < len(str(t)) else ""),
}
"""Kubernetes' CEL string library (the ext strings functions) on top of CEL's own."""

FUNCTIONS: dict[str, Any] = {
    **STRING_FUNCTIONS,
    "quantity": _quantity,
    "semver": _semver,
    "isSemver": lambda text: celtypes.BoolType(_SEMVER.fullmatch(str(text)) is not None),
    "compareTo": lambda a, b: celtypes.IntType(_order(a, b)),
    "isGreaterThan": lambda a, b: celtypes.BoolType(_order(a, b) > 0),
    "isLessThan": lambda a, b: celtypes.BoolType(_order(a, b) < 0),
    "asInteger": lambda q: celtypes.IntType(int(q.value)),
    "asApproximateFloat": lambda q: celtypes.DoubleType(float(q.value)),
    "major": lambda v: celtypes.IntType(v.parts[0]),
    "minor": lambda v: celtypes.IntType(v.parts[1]),
    "patch": lambda v: celtypes.IntType(v.parts[2]),
}


@lru_cache(maxsize=1)
def _env() -> celpy.Environment:
    """The CEL environment, built on first use: building its parser takes a third of a
    second that a snapshot without selectors should not pay."""
    return celpy.Environment()


_DRIVER_IS = re.compile(r'\s*device\.driver\s*==\s*"([^"\\]+)"\s*')
"""The most common selector (a DeviceClass's), evaluated without the interpreter."""


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    program: Any
    driver: str | None = None
    """Set when the expression is exactly ``device.driver == "<driver>"``."""

    def matches(self, device: Device) -> bool:
        """Whether the device satisfies the expression (errors raise :class:`SelectorError`)."""
        if self.driver is not None:
            return device.driver == self.driver
        try:
            result = self.program.evaluate(activation(device))
        except Exception as exc:  # noqa: BLE001 (celpy raises many types; all mean "broken")
            raise SelectorError(f"{self.expression!r}: {exc}") from None
        if isinstance(result, Exception) or not isinstance(result, celtypes.BoolType | bool):
            raise SelectorError(f"{self.expression!r} did not evaluate to a bool ({result!r})")
        return bool(result)


@lru_cache(maxsize=COMPILED_SELECTORS)
def compile_selector(expression: str) -> Selector:
    """The compiled selector (cached: see ``COMPILED_SELECTORS``)."""
    try:
        ast = _env().compile(expression)
        program = _env().program(ast, functions=FUNCTIONS)
    except Exception as exc:  # noqa: BLE001 (parse and type errors come as several types)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SelectorError(f"{expression!r}: {first}") from None
    simple = _DRIVER_IS.fullmatch(expression)
    return Selector(expression, program, simple.group(1) if simple else None)


def _value(value: object) -> Any:
    if isinstance(value, bool):
        return celtypes.BoolType(value)
    if isinstance(value, int):
        return celtypes.IntType(value)
    if isinstance(value, Semver):
        return value
    return celtypes.StringType(str(value))


@lru_cache(maxsize=DEVICE_MAPS)
def _domain_map(items: tuple[tuple[str, object], ...], driver: str, quantities: bool) -> Any:
    domains: dict[str, dict[str, Any]] = {}
    for name, value in items:
        domain, _, short = name.rpartition("/")
        converted = Quantity(str(value)) if quantities else _value(value)
        domains.setdefault(domain or driver, {})[short] = converted
    return _Domains(
        {
            celtypes.StringType(d): celtypes.MapType(
                {celtypes.StringType(k): v for k, v in fields.items()}
            )
            for d, fields in domains.items()
        }
    )


def activation(device: Device) -> dict[str, Any]:
    """The ``device`` variable of a selector."""
    return {
        "device": celtypes.MapType(
            {
                celtypes.StringType("driver"): celtypes.StringType(device.driver),
                celtypes.StringType("attributes"): _domain_map(
                    tuple(sorted(device.attributes.items())), device.driver, False
                ),
                celtypes.StringType("capacity"): _domain_map(
                    tuple(sorted((k, str(v)) for k, v in device.capacity.items())),
                    device.driver,
                    True,
                ),
            }
        )
    }
