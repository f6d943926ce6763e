"""Typed access to one Kubernetes object's fields; every failure names the object and field.

Shared by the snapshot readers (``load/objects/nodes.py``, ``load/objects/pods.py``,
``load/objects/devices.py`` and the others ``load/snapshot.py`` dispatches to): a
:class:`Reader` wraps one object as a mapping and turns each wrong or missing field into an
:class:`~gpufleet.load.errors.InputError` ("FILE: Kind name: field 'x.y': expected ...");
:func:`each` does the same for a structure no field check foresaw.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, TypeGuard, TypeVar

from lightkube.utils.quantity import parse_quantity

from gpufleet.load.errors import InputError
from gpufleet.load.shown import MAX_QUANTITY, shown
from gpufleet.model.workload import UNKNOWN_AGE

_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|h|m|s)")
PLAIN_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?|\.[0-9]+")
"""A number as Kubernetes and Go write one in text: ASCII digits, no sign, no ``_``."""
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MAX = 2**63 - 1
_DURATION_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}

Obj = Mapping[str, Any]

UID = "uid"
RESOURCE_VERSION = "resourceVersion"
"""The metadata fields that identify an object and its version (:meth:`Reader.identity`)."""

T = TypeVar("T")


def is_mapping(value: object) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a mapping: a dict (what JSON and YAML decode to) asked first, as
    the Mapping ABC's own check costs ten times more — on a pod's every field, at every
    watch event."""
    return type(value) is dict or isinstance(value, Mapping)


class Reader:
    """Typed access to one object's fields; every failure names the object and field."""

    def __init__(self, source: str, obj: Obj) -> None:
        self.obj, self.source = obj, source
        meta = obj.get("metadata")
        self.meta: Obj = meta if isinstance(meta, Mapping) else {}
        name = self.meta.get("name")
        namespace = self.meta.get("namespace")
        self.name = str(name) if name is not None else "<unnamed>"
        self.key = f"{namespace or 'default'}/{self.name}"
        self.namespace = str(namespace or "default")
        self.where = f"{source}: {obj.get('kind')} {self.name}"
        if name is None or not isinstance(name, str) or not name:
            raise InputError(self.where, "expected a non-empty string", field="metadata.name")
        if namespace is not None and not isinstance(namespace, str):
            raise InputError(self.where, "expected a string", field="metadata.namespace")

    def fail(self, field: str, expected: str, got: object) -> InputError:
        return InputError(self.where, f"expected {expected}, got {shown(got)}", field=field)

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.obj
        for part in path.split("."):
            if node is None:
                return default
            if not is_mapping(node):
                raise self.fail(path, "a mapping", node)
            node = node.get(part)
        return default if node is None else node

    def mapping(self, path: str) -> Obj:
        value = self.get(path, {})
        if not is_mapping(value):
            raise self.fail(path, "a mapping", value)
        return value

    def strings(self, path: str) -> dict[str, str]:
        value = self.mapping(path)
        for key, item in value.items():
            if not isinstance(item, str | int | float | bool):
                raise self.fail(f"{path}.{key}", "a string", item)
        return {str(k): str(v) for k, v in value.items()}

    def sequence(self, path: str) -> list[Any]:
        value = self.get(path, [])
        if not isinstance(value, list):
            raise self.fail(path, "a list", value)
        return value

    def field_of_each(self, path: str, key: str, expected: str) -> list[str]:
        """The string ``key`` of every item of the list at ``path`` (``spec.levels`` ->
        each ``nodeLabel``); an item without one is an error naming it."""
        out = []
        for i, item in enumerate(self.sequence(path)):
            value = item.get(key) if isinstance(item, Mapping) else None
            if not isinstance(value, str) or not value:
                raise self.fail(f"{path}[{i}].{key}", expected, value or item)
            out.append(value)
        return out

    def integer(
        self, path: str, default: int, *, minimum: int | None = None, maximum: int = INT32_MAX
    ) -> int:
        """An integer field; Kubernetes' are int32 (``maximum`` unless said otherwise)."""
        value = self.get(path, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, "an integer", value)
        low = INT32_MIN if minimum is None else minimum
        if value < low:
            raise self.fail(path, f"an integer >= {low}", value)
        if value > maximum:
            raise self.fail(path, f"an integer <= {maximum}", value)
        return value

    def quantity(self, path: str, value: object) -> Decimal:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(path, "a quantity such as '500m', '4' or '80Gi'", value)
        text = str(value)
        parsed = _quantity(text) if len(text) <= QUANTITY_CACHED else _parsed(text)
        if parsed is None or parsed < 0:
            raise self.fail(path, "a non-negative quantity such as '500m', '4' or '80Gi'", value)
        if parsed >= MAX_QUANTITY:
            raise InputError(
                self.where,
                f"{value} is too large (expected a quantity below 2^52, about 4.5e15, "
                "in bytes, cores or devices)",
                field=path,
            )
        return parsed

    def count(self, path: str, value: object, what: str) -> int:
        """A quantity that counts whole things (GPUs, slices, pods) at ``path``."""
        parsed = self.quantity(path, value)
        if parsed != int(parsed):
            raise self.fail(path, f"a whole number of {what}", value)
        return int(parsed)

    def string(self, path: str, default: str | None = None) -> str | None:
        value = self.get(path, default)
        if value is not None and not isinstance(value, str):
            raise self.fail(path, "a string", value)
        return value

    def identity(self) -> tuple[str, str]:
        """``metadata.uid`` and ``metadata.resourceVersion``, the strings ``kubectl get -o
        yaml`` prints (empty where absent): which object this is, and which write of it."""
        uid = self.string(f"metadata.{UID}", "") or ""
        return uid, self.string(f"metadata.{RESOURCE_VERSION}", "") or ""

    def time(self, path: str) -> float | None:
        return self.time_of(path, self.get(path))

    def created(self) -> float:
        """``metadata.creationTimestamp``, or :data:`UNKNOWN_AGE` without one."""
        stamp = self.time("metadata.creationTimestamp")
        return UNKNOWN_AGE if stamp is None else stamp

    def time_of(self, path: str, value: object) -> float | None:
        if value is None:
            return None
        if isinstance(value, dt.datetime):
            stamp = value
        else:
            try:
                stamp = dt.datetime.fromisoformat(str(value))
            except ValueError:
                raise self.fail(
                    path, "an RFC 3339 time such as '2026-01-31T12:00:00Z'", value
                ) from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=dt.UTC)
        return stamp.timestamp()

    def duration(self, path: str) -> float:
        value = self.get(path)
        if value is None:
            return 0.0
        if isinstance(value, int | float) and not isinstance(value, bool):
            if not math.isfinite(value) or value < 0:
                raise self.fail(path, "a non-negative duration such as '90s' or 90", value)
            return float(value)
        seconds = duration_seconds(str(value))
        if seconds is None:
            raise self.fail(path, "a duration such as '90s', '10m' or '1h30m'", value)
        return seconds


def duration_seconds(text: str) -> float | None:
    """Seconds of a duration as Kubernetes and Go write it (``90s``, ``10m``, ``1h30m``,
    ``500ms``), or of a plain number of seconds (``90``, ``1.5``); None if it is neither."""
    plain = float(text) if PLAIN_NUMBER.fullmatch(text) else None  # no "1_0", no "٣"
    if plain is not None:
        return plain if math.isfinite(plain) and plain >= 0 else None
    parts = _DURATION.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    seconds = sum(float(n) * _DURATION_SECONDS[u] for n, u in parts)
    return seconds if math.isfinite(seconds) else None


def each(readers: list[Reader], read: Callable[[Reader], T]) -> list[T]:
    """``read`` every object; a structure no field check foresaw names its object."""
    out = []
    for r in readers:
        try:
            out.append(read(r))
        except InputError:
            raise
        except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
            raise InputError(r.where, f"unexpected structure: {exc}") from None
    return out


QUANTITY_CACHED = 32
"""Quantities this long at most are remembered once parsed (every pod repeats a few)."""


def _parsed(text: str) -> Decimal | None:
    try:
        return parse_quantity(text)
    except ValueError:
        return None


_quantity = functools.lru_cache(maxsize=1024)(_parsed)
