"""Where a pod may go by node labels and taints: nodeSelector, required node affinity, taints.

Kubernetes semantics, evaluated as boolean masks over all nodes:

* a :class:`NodeConstraint` holds the pod's required node-affinity terms (ORed; each term a
  tuple of :class:`Requirement` ANDed, with the pod's ``nodeSelector`` folded into every
  term as ``In`` requirements) and its tolerations;
* :class:`NodeLabels` is the cluster side: per-node labels and taints, with one cached mask
  per distinct requirement or taint, since a cluster's pods share a handful of them.

Only ``NoSchedule`` and ``NoExecute`` taints keep pods off a node (``PreferNoSchedule`` is a
preference, which gpufleet does not score).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import BoolArray, IntArray

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
"""Node-selector operators of ``v1 NodeSelectorRequirement``."""

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")

FIELD_NODE_NAME = "metadata.name"
"""The one node field a ``matchFields`` requirement may name; matched against node names."""


@dataclass(frozen=True, slots=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "In":
            return value is not None and value in self.values
        if self.operator == "NotIn":
            return value is None or value not in self.values
        if self.operator == "Exists":
            return value is not None
        if self.operator == "DoesNotExist":
            return value is None
        return _compare(value, self.operator, self.values[0])


def _compare(value: str | None, operator: str, bound: str) -> bool:
    try:
        number = int(value) if value is not None else None
    except ValueError:
        return False
    if number is None:
        return False
    return number > int(bound) if operator == "Gt" else number < int(bound)


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}}}"


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def fields(self) -> dict[str, str]:
        """The fields a manifest shows: those set, in the API's order."""
        pairs = (("key", self.key), ("operator", self.operator), ("value", self.value))
        return {k: v for k, v in (*pairs, ("effect", self.effect)) if v}

    def tolerates(self, taint: Taint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class NodeConstraint:
    """A pod's hard placement constraints by node labels and taints."""

    terms: tuple[tuple[Requirement, ...], ...] = ()
    """Required node-affinity terms, ORed; empty: any node."""
    tolerations: tuple[Toleration, ...] = ()

    @property
    def has_terms(self) -> bool:
        return bool(self.terms)


class NodeLabels:
    """Labels and taints of every node, with cached masks (shared by state copies: a
    node's labels change in place, :meth:`set_node`, as the cluster cache learns of it)."""

    __slots__ = (
        "_ids", "_masks", "_taint_masks", "blocking_taints", "labels", "names", "taints",
    )  # fmt: skip

    def __init__(
        self,
        labels: Sequence[Mapping[str, str]],
        taints: Sequence[tuple[Taint, ...]],
        names: Sequence[str] = (),
    ) -> None:
        self.labels = list(labels)
        self.names = tuple(names)
        self.taints = list(taints)
        self._masks: dict[Requirement, BoolArray] = {}
        self._taint_masks: dict[Taint, BoolArray] = {}
        self._ids: dict[str, tuple[IntArray, tuple[str, ...]]] = {}
        seen = {t for node in self.taints for t in node if t.effect in BLOCKING_EFFECTS}
        self.blocking_taints = tuple(sorted(seen, key=lambda t: (t.key, t.value, t.effect)))
        """Distinct NoSchedule/NoExecute taints of the cluster."""

    def set_node(self, row: int, labels: Mapping[str, str], taints: tuple[Taint, ...]) -> None:
        """Node ``row``'s labels and taints changed: its entry of each cached mask is judged
        again (a new array where it changes, so that a mask already handed out stays as
        it was); the others are untouched."""
        old, old_taints = self.labels[row], self.taints[row]
        self.labels[row] = labels
        self.taints[row] = taints
        fields = {FIELD_NODE_NAME: self.names[row]} if self.names else {}
        for r, mask in self._masks.items():
            value = r.matches(fields if r.key == FIELD_NODE_NAME else labels)
            self._masks[r] = _with_row(mask, row, value)
        for t, mask in self._taint_masks.items():
            self._taint_masks[t] = _with_row(mask, row, t in taints)
        for key in [k for k in self._ids if old.get(k) != labels.get(k)]:
            del self._ids[key]  # that label's domains are counted again when next asked
        if taints != old_taints:
            seen = {t for node in self.taints for t in node if t.effect in BLOCKING_EFFECTS}
            self.blocking_taints = tuple(sorted(seen, key=lambda t: (t.key, t.value, t.effect)))

    def requirement_mask(self, requirement: Requirement) -> BoolArray:
        mask = self._masks.get(requirement)
        if mask is None:
            fields: Sequence[Mapping[str, str]] = self.labels
            if requirement.key == FIELD_NODE_NAME:
                fields = [{FIELD_NODE_NAME: name} for name in self.names]
            mask = np.fromiter(
                (requirement.matches(labels) for labels in fields),
                dtype=np.bool_,
                count=len(self.labels),
            )
            mask.setflags(write=False)
            self._masks[requirement] = mask
        return mask

    def affinity_mask(self, constraint: NodeConstraint) -> BoolArray:
        """Nodes that satisfy at least one of the constraint's terms."""
        mask = np.zeros(len(self.labels), dtype=np.bool_)
        for term in constraint.terms:
            term_mask = np.ones(len(self.labels), dtype=np.bool_)
            for requirement in term:
                term_mask &= self.requirement_mask(requirement)
            mask |= term_mask
        return mask

    def taint_mask(self, taint: Taint) -> BoolArray:
        mask = self._taint_masks.get(taint)
        if mask is None:
            mask = np.fromiter(
                (taint in taints for taints in self.taints), dtype=np.bool_, count=len(self.taints)
            )
            mask.setflags(write=False)
            self._taint_masks[taint] = mask
        return mask

    def label_values(self, key: str) -> tuple[str | None, ...]:
        return tuple(labels.get(key) for labels in self.labels)

    def label_ids(self, key: str) -> tuple[IntArray, tuple[str, ...]]:
        """The distinct values of label ``key`` (sorted) and per node the index of its
        value among them (-1: the node lacks the label)."""
        known = self._ids.get(key)
        if known is None:
            values = self.label_values(key)
            names = tuple(sorted({v for v in values if v is not None}))
            index = {name: i for i, name in enumerate(names)}
            ids = np.array([index[v] if v is not None else -1 for v in values], dtype=np.int64)
            ids.setflags(write=False)
            known = self._ids[key] = (ids, names)
        return known


def _with_row(mask: BoolArray, row: int, value: bool) -> BoolArray:
    """``mask`` with entry ``row`` set to ``value`` (a new read-only array if it changes)."""
    if bool(mask[row]) == value:
        return mask
    out = mask.copy()
    out[row] = value
    out.setflags(write=False)
    return out
