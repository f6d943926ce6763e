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

Work is bounded as the API server bounds it: an expression longer than 10 KiB
(``CELSelectorExpressionMaxLength``) is refused, and an evaluation stops with
:class:`CostLimitError` once it has spent ``RUNTIME_COST_LIMIT`` units
(``CELSelectorExpressionMaxCost``: 1,000,000) — one per step of the interpreter, and for the
string functions one per 10 characters they read or make, charged before a string is built,
so that neither nested macros over ``split`` lists nor chained ``replace`` calls can take
unbounded time or memory. A step of cel-python's tree interpreter is finer than one of
cel-go's cost units (an operation is several steps), so an expression is cut off here at a
tenth or so of what Kubernetes allows; a selector a driver or user writes spends hundreds.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import celpy
from celpy import celtypes
from celpy.evaluation import Evaluator

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


RUNTIME_COST_LIMIT = 1_000_000
"""Units one evaluation may spend (module docstring)."""
MAX_EXPRESSION_LENGTH = 10 * 1024
"""Kubernetes' ``CELSelectorExpressionMaxLength``."""
CHARACTERS_PER_UNIT = 10
"""cel-go charges string traversal at 0.1 unit per character."""


class SelectorError(Exception):
    """A selector that does not compile or cannot be evaluated."""


class CostLimitError(SelectorError):
    """An evaluation that spent more than ``RUNTIME_COST_LIMIT``."""


class _Budget:
    __slots__ = ("left",)

    def __init__(self, limit: int) -> None:
        self.left = limit

    def charge(self, units: int) -> None:
        self.left -= units
        if self.left < 0:
            raise CostLimitError(
                f"the evaluation exceeded the cost limit of {RUNTIME_COST_LIMIT:,} units"
            )


_BUDGET: ContextVar[_Budget | None] = ContextVar("cel_budget", default=None)


def _charge_characters(count: int) -> None:
    """Charge the evaluation under way for ``count`` characters read or made."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.charge(1 + count // CHARACTERS_PER_UNIT)


class _Metered(Evaluator):
    """cel-python's interpreter, charging one unit per tree node it evaluates; a macro's
    body is evaluated by a sub-evaluator, which charges the same budget."""

    def __init__(self, ast: Any, activation: Any, budget: _Budget) -> None:
        super().__init__(ast, activation)
        self.budget = budget

    def sub_evaluator(self, ast: Any) -> Evaluator:
        return _Metered(ast, self.activation, self.budget)

    def _visit_tree(self, tree: Any) -> Any:  # lark's one entry for every node
        self.budget.charge(1)
        return super()._visit_tree(tree)


class _MeteredRunner(celpy.InterpretedRunner):
    def evaluate(self, context: Any) -> Any:
        budget = _Budget(RUNTIME_COST_LIMIT)
        token = _BUDGET.set(budget)
        try:
            return _Metered(self.ast, self.new_activation(), budget).evaluate(context)
        finally:
            _BUDGET.reset(token)


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
    text = str(value)
    _charge_characters(len(text))
    return celtypes.StringType(text)


def _replace(text: Any, old: Any, new: Any, count: Any = -1) -> celtypes.StringType:
    value, before, after, limit = str(text), str(old), str(new), int(count)
    found = value.count(before) if before else len(value) + 1
    if limit >= 0:
        found = min(found, limit)
    _charge_characters(len(value) + found * len(after))  # before the string is made
    return celtypes.StringType(value.replace(before, after, limit))


def _split(text: Any, sep: Any, limit: Any = -1) -> celtypes.ListType:
    value, separator, most = str(text), str(sep), int(limit)
    _charge_characters(2 * len(value))
    if most == 0:
        return celtypes.ListType([])
    if separator:
        parts = value.split(separator) if most < 0 else value.split(separator, most - 1)
    else:  # CEL's split("") splits into characters, the last part keeping the rest
        parts = list(value)
        if 0 < most < len(parts):
            parts = [*parts[: most - 1], value[most - 1 :]]
    return celtypes.ListType([celtypes.StringType(p) for p in parts])


def _join(items: Any, sep: Any = "") -> celtypes.StringType:
    parts = [str(i) for i in items]
    separator = str(sep)
    _charge_characters(sum(map(len, parts)) + len(separator) * max(len(parts) - 1, 0))
    return celtypes.StringType(separator.join(parts))


def _substring(text: Any, start: Any, end: Any = None) -> celtypes.StringType:
    value = str(text)
    return _str(value[int(start) : len(value) if end is None else int(end)])


STRING_FUNCTIONS: dict[str, Any] = {
    "lowerAscii": lambda t: _str(str(t).lower()),
    "upperAscii": lambda t: _str(str(t).upper()),
    "trim": lambda t: _str(str(t).strip()),
    "replace": _replace,
    "split": _split,
    "join": _join,
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
    return celpy.Environment(runner_class=_MeteredRunner)


_DRIVER_IS = re.compile(r'\s*device\.driver\s*==\s*"([^"\\]+)"\s*')
"""The most common selector (a DeviceClass's), evaluated without the interpreter."""


@dataclass(eq=False, slots=True)
class Selector:
    expression: str
    program: Any
    driver: str | None = None
    """Set when the expression is exactly ``device.driver == "<driver>"``."""
    too_costly: str = ""
    """Set once an evaluation ran out of budget: the expression is refused thereafter, at no
    cost, rather than spending the whole budget again on every device and every cycle."""

    def matches(self, device: Device) -> bool:
        """Whether the device satisfies the expression (errors raise :class:`SelectorError`)."""
        if self.driver is not None:
            return device.driver == self.driver
        if self.too_costly:
            raise CostLimitError(self.too_costly)
        try:
            result = self.program.evaluate(activation(device))
        except CostLimitError as exc:
            self.too_costly = f"{_quoted(self.expression)}: {exc}"
            raise CostLimitError(self.too_costly) from None
        except Exception as exc:  # noqa: BLE001 (celpy raises many types; all mean "broken")
            raise SelectorError(f"{_quoted(self.expression)}: {_clipped(exc)}") from None
        if isinstance(result, Exception) or not isinstance(result, celtypes.BoolType | bool):
            raise SelectorError(
                f"{_quoted(self.expression)} did not evaluate to a bool ({_clipped(result)})"
            )
        return bool(result)


SHOWN = 100
"""Characters of an expression, or of what it made, an error message shows."""


def _quoted(expression: str) -> str:
    return repr(expression if len(expression) <= SHOWN else f"{expression[:SHOWN]}...")


def _clipped(what: object) -> str:
    text = str(what)
    return text if len(text) <= SHOWN else f"{text[:SHOWN]}..."


@lru_cache(maxsize=COMPILED_SELECTORS)
def compile_selector(expression: str) -> Selector:
    """The compiled selector (cached: see ``COMPILED_SELECTORS``)."""
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise SelectorError(
            f"{_quoted(expression)}: longer than {MAX_EXPRESSION_LENGTH} characters "
            f"({len(expression)})"
        )
    try:
        ast = _env().compile(expression)
        program = _env().program(ast, functions=FUNCTIONS)
    except Exception as exc:  # noqa: BLE001 (parse and type errors come as several types)
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise SelectorError(f"{_quoted(expression)}: {_clipped(first)}") from None
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
