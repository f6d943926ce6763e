"""Value semantics for the model's frozen dataclasses: ``==`` by value, ``hash`` that works.

A cache fed by cluster events stores these values, compares the old one with the new one
on every update and keys dictionaries by them, so every frozen dataclass of ``model/`` and
``framework/`` must compare by value and hash. Two helpers make that true for the fields
that would not:

* :class:`FrozenMap` — a dict that cannot change and hashes by its items, for the fields
  that were dicts (node labels, MIG slices, device attributes). A dataclass stores a copy
  of what it is given (:func:`frozen_map`), so a caller's dict may change afterwards without
  changing the value.
* :class:`ArrayValue` — for a dataclass with numpy array fields (declared ``eq=False``):
  ``==`` compares the arrays element by element (shape included, dtype aside, as
  ``numpy.array_equal`` does) and ``hash`` hashes their items. The arrays must not change
  once the value is built; the types that are not on the hot path make theirs read-only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import fields
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar, cast

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

K = TypeVar("K")
V = TypeVar("V")
S = TypeVar("S", bound=np.generic)


class FrozenMap(dict[K, V]):
    """A dict that cannot change, and so hashes (by its items, computed once; its values
    must be hashable).

    A subclass of dict, so that reading it (``get``, ``[]``, ``in``, iteration) costs what
    reading a dict costs: device attributes and node labels are read in the allocator's and
    the filters' loops. Every method that would change it raises ``TypeError``.
    """

    __slots__ = ("_hash",)

    def __init__(self, items: Mapping[K, V] | Iterable[tuple[K, V]] = (), /) -> None:
        super().__init__(items)
        self._hash: int | None = None

    def __hash__(self) -> int:  # type: ignore[override]  # dict is unhashable; this is not
        if self._hash is None:
            self._hash = hash(frozenset(self.items()))
        return self._hash

    def _refuse(self, *_args: object, **_kwargs: object) -> NoReturn:
        raise TypeError(f"a {type(self).__name__} cannot be changed")

    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[FrozenMap[K, V]], tuple[dict[K, V]]]:
        return (FrozenMap, (dict(self),))

    def __repr__(self) -> str:
        return f"FrozenMap({dict.__repr__(self)})"


EMPTY: FrozenMap[Any, Any] = FrozenMap()
"""The empty map, the default of every map field."""


def frozen_map(items: Mapping[K, V]) -> FrozenMap[K, V]:
    """``items`` as a :class:`FrozenMap`: itself if it is one, else a frozen copy."""
    return items if isinstance(items, FrozenMap) else FrozenMap(items)


def read_only(array: npt.NDArray[S]) -> npt.NDArray[S]:
    """A read-only copy of ``array``, so that the value holding it keeps its hash whatever
    the caller does with the original."""
    out = array.copy()
    out.setflags(write=False)
    return out


def array_key(value: object) -> object:
    """``value`` with every numpy array in it (also in tuples) as (shape, items): equal
    exactly when ``numpy.array_equal`` says so, and hashable."""
    if isinstance(value, np.ndarray):
        return (value.shape, tuple(value.ravel().tolist()))
    if isinstance(value, tuple):
        return tuple(array_key(item) for item in value)
    return value


class ArrayValue:
    """Mixin for a frozen dataclass (``eq=False``) with numpy array fields: ``==`` and
    ``hash`` over its compared fields, arrays by their items (:func:`array_key`)."""

    __slots__ = ()

    def _value_key(self) -> tuple[object, ...]:
        value = cast("DataclassInstance", self)
        return tuple(array_key(getattr(self, f.name)) for f in fields(value) if f.compare)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ArrayValue) or other.__class__ is not self.__class__:
            return NotImplemented
        return self is other or self._value_key() == other._value_key()

    def __hash__(self) -> int:
        return hash(self._value_key())
