"""Name -> plugin factory, refusing duplicates (kube-scheduler ``runtime.Registry``).

The registrations themselves are listed in one place, :mod:`gpufleet.plugins.registry`;
nothing selects a policy by comparing name strings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from gpufleet.framework.protocols import Handle, Plugin

PluginFactory = Callable[[Handle], Plugin]

T = TypeVar("T")


class DuplicateNameError(ValueError):
    """A name was registered twice."""


class UnknownNameError(KeyError):
    """A name that nothing registered."""

    def __init__(self, kind: str, name: str, known: Iterator[str]) -> None:
        super().__init__(name)
        self.kind, self.name, self.known = kind, name, sorted(known)

    def __str__(self) -> str:
        return f"unknown {self.kind} {self.name!r}; known: {', '.join(self.known)}"


class Registry(Mapping[str, T]):
    """An ordered name -> value map that can only grow, one name at a time."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def register(self, name: str, value: T) -> None:
        if name in self._items:
            raise DuplicateNameError(f"{self.kind} {name!r} is already registered")
        self._items[name] = value

    def __getitem__(self, name: str) -> T:
        try:
            return self._items[name]
        except KeyError:
            raise UnknownNameError(self.kind, name, iter(self._items)) from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)
