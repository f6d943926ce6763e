"""Queues and gangs that more than one object may define, live.

With other schedulers' vocabularies read (``load/foreign.py``), a queue name can be defined by
gpufleet's own Queue, a KAI Queue, a Volcano Queue and an ElasticQuota at once, and a gang by
three kinds of PodGroup. A what-if refuses such a snapshot; a live scheduler cannot refuse its
cluster, so it reads the first definer in a fixed precedence — gpufleet's own, then
:data:`~gpufleet.kube.read.kinds.FOREIGN_LIVE`'s order — and the object store reports each other
one. When the object read goes away, the next one is read.

:class:`Definitions` keeps, per name, what each definer reads as; ``objects.py`` turns a
settled name into the cache's event and the losers into problems.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TypeAlias

from gpufleet.kube.read.kinds import FOREIGN_LIVE, becomes
from gpufleet.model.workload import GroupSpec, QueueSpec

Definer: TypeAlias = tuple[str, str]
"""An object that defines a queue or gang: its store kind and key."""
Defined: TypeAlias = QueueSpec | GroupSpec

_ORDER = {"Queue": 0, "PodGroup": 0} | {k.key: i + 1 for i, k in enumerate(FOREIGN_LIVE)}


def precedence(definer: Definer) -> tuple[int, str]:
    """Which of two objects defining one queue or gang is read: gpufleet's own first."""
    kind, key = definer
    return _ORDER[kind], key


@dataclass(frozen=True, slots=True)
class Settled:
    """A name as its definers leave it: the one read (None: none is left) and the others."""

    name: str
    read: Definer | None
    made: Defined | None
    others: tuple[Definer, ...]


class Definitions:
    """Per cache kind (``Queue``, ``PodGroup``) and name, what each definer reads as."""

    def __init__(self) -> None:
        self._by_name: dict[str, dict[str, dict[Definer, Defined]]] = defaultdict(dict)
        self._names: dict[Definer, str] = {}
        """Per definer, the name it defines."""

    def define(self, kind: str, key: str, made: Defined | None) -> list[Settled]:
        """Object ``key`` of store kind ``kind`` now defines ``made`` (None: nothing): the
        names it defined and defines, settled."""
        cache_kind = becomes(kind)
        names = set()
        before = self._names.pop((kind, key), None)
        if before is not None:
            self._by_name[cache_kind][before].pop((kind, key), None)
            names.add(before)
        if made is not None:
            name = made.name if isinstance(made, QueueSpec) else made.key
            self._by_name[cache_kind].setdefault(name, {})[kind, key] = made
            self._names[kind, key] = name
            names.add(name)
        return [self._settle(cache_kind, name) for name in sorted(names)]

    def _settle(self, cache_kind: str, name: str) -> Settled:
        defs = self._by_name[cache_kind].get(name) or {}
        if not defs:
            self._by_name[cache_kind].pop(name, None)
            return Settled(name, None, None, ())
        order = sorted(defs, key=precedence)
        return Settled(name, order[0], defs[order[0]], tuple(order[1:]))

    def definer(self, cache_kind: str, name: str) -> Definer | None:
        """The object queue or gang ``name`` is read from (None: none)."""
        defs = self._by_name[cache_kind].get(name)
        return min(defs, key=precedence) if defs else None

    def read_from(self, cache_kind: str, name: str) -> str | None:
        """The store kind of the object queue or gang ``name`` is read from (None: none)."""
        defs = self._by_name[cache_kind].get(name)
        return min(defs, key=precedence)[0] if defs else None
