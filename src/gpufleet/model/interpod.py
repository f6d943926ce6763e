"""Where a pod may go by the pods already there: inter-pod (anti-)affinity, topology spread,
host ports — kube-scheduler's InterPodAffinity, PodTopologySpread and NodePorts, as values
and one index.

The pod side is :class:`PodPlacement`: a pod's namespace and labels (what other pods'
terms select it by) and its own required terms. The cluster side is :class:`PodIndex`,
kept in the :class:`~gpufleet.model.cluster.ClusterState` and changed by the same
``reserve``/``release`` that take capacity, so a cycle's own placements (a gang's pods one
after another) and a victim search's trial evictions are seen as they happen. It counts,
per node:

* pods per distinct *signature* — (namespace, labels); the pods of one Deployment share
  one — so that a term's selector is judged once per signature, not once per pod, and the
  matching pods per node are a sum of a few count rows;
* pods holding each distinct required anti-affinity term (existing pods' anti-affinity
  against an incoming pod);
* host ports in use per (protocol, port, host IP).

Counts per topology domain are the node counts summed by the domain ids of the term's
topology key (:meth:`~gpufleet.model.selectors.NodeLabels.label_ids`): one ``bincount``.
Pods without a :class:`PodPlacement` (a trace's) take no part and pay nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.selectors import Requirement
from gpufleet.model.values import EMPTY, frozen_map

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import BoolArray, IntArray
    from gpufleet.model.selectors import NodeLabels

WILDCARD_IP = "0.0.0.0"  # noqa: S104 (a host port's "every address", not a bind)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector`` over pod labels: requirements ANDed (``matchLabels`` as
    ``In``). ``nothing``: a null selector, which matches no pod; an empty one matches all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A required pod (anti-)affinity term: pods of ``namespaces`` (None: every namespace)
    matching ``selector``, counted per domain of ``topology_key``."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str

    def selects(self, namespace: str, labels: Mapping[str, str]) -> bool:
        return (self.namespaces is None or namespace in self.namespaces) and self.selector.matches(
            labels
        )


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    """A ``whenUnsatisfiable: DoNotSchedule`` topology spread constraint (``matchLabelKeys``
    folded into the selector when read)."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    """``nodeAffinityPolicy``: Honor (default) counts only nodes the pod's node selector and
    required node affinity allow; Ignore counts every node."""
    honor_taints: bool = False
    """``nodeTaintsPolicy``: Ignore (default) counts tainted nodes too; Honor leaves out the
    nodes whose taints the pod does not tolerate."""


@dataclass(frozen=True, slots=True)
class HostPort:
    protocol: str
    port: int
    ip: str = WILDCARD_IP

    def conflicts(self, other: HostPort) -> bool:
        """Kubernetes' rule: one protocol and port, and one address or either the wildcard."""
        return (
            self.protocol == other.protocol
            and self.port == other.port
            and (self.ip == other.ip or WILDCARD_IP in (self.ip, other.ip))
        )


@dataclass(frozen=True, slots=True)
class PodPlacement:
    """A pod as other pods' terms see it (namespace, labels) and its own required terms."""

    namespace: str
    labels: Mapping[str, str] = EMPTY
    affinity: tuple[PodTerm, ...] = ()
    anti_affinity: tuple[PodTerm, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    host_ports: tuple[HostPort, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", frozen_map(self.labels))

    @property
    def constrained(self) -> bool:
        """Whether the pod has a term of its own (else only others' anti-affinity binds it)."""
        return bool(self.affinity or self.anti_affinity or self.spread or self.host_ports)

    @property
    def signature(self) -> tuple[str, Mapping[str, str]]:
        return self.namespace, self.labels


@dataclass(slots=True)
class PodIndex:
    """Per node, the pods by signature, the holders of each required anti-affinity term
    and the host ports in use (see the module doc). Changed by :meth:`add`/:meth:`remove`;
    :meth:`copy` for a what-if state."""

    size: int
    signatures: list[tuple[str, Mapping[str, str]]] = field(default_factory=list)
    _ids: dict[tuple[str, Mapping[str, str]], int] = field(default_factory=dict)
    counts: IntArray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int32))
    """``(S, N)``: pods of signature ``s`` on node ``n`` (rows beyond ``len(signatures)``
    are spare)."""
    anti: dict[tuple[str, PodTerm], IntArray] = field(default_factory=dict)
    """Per (holder's namespace, term): pods holding the term on each node."""
    ports: dict[HostPort, IntArray] = field(default_factory=dict)
    _matches: dict[object, tuple[int, list[int]]] = field(default_factory=dict)
    """Per selector-and-namespaces: (signatures judged, the ids that match)."""

    def __post_init__(self) -> None:
        if self.counts.shape[1] != self.size:
            self.counts = np.zeros((4, self.size), dtype=np.int32)

    @property
    def empty(self) -> bool:
        return not self.signatures

    def add(self, node: int, pod: PodPlacement, sign: int = 1) -> None:
        """Count ``pod`` on ``node`` (``sign`` -1: no longer)."""
        sid = self._ids.get(pod.signature)
        if sid is None:
            sid = self._ids[pod.signature] = len(self.signatures)
            self.signatures.append(pod.signature)
            if sid >= self.counts.shape[0]:
                grown = np.zeros((2 * self.counts.shape[0], self.size), dtype=np.int32)
                grown[:sid] = self.counts[:sid]
                self.counts = grown
        self.counts[sid, node] += sign
        for term in pod.anti_affinity:
            held = self.anti.get((pod.namespace, term))
            if held is None:
                held = self.anti[(pod.namespace, term)] = np.zeros(self.size, dtype=np.int32)
            held[node] += sign
        for port in pod.host_ports:
            used = self.ports.get(port)
            if used is None:
                used = self.ports[port] = np.zeros(self.size, dtype=np.int32)
            used[node] += sign

    def remove(self, node: int, pod: PodPlacement) -> None:
        self.add(node, pod, -1)

    def remove_many(self, nodes: Sequence[int], pods: Sequence[PodPlacement]) -> None:
        """Uncount each of ``pods`` on its node of ``nodes`` (all counted before): one
        scatter for the signatures, a loop only over the pods with anti-affinity or ports."""
        if not pods:
            return
        ids = np.fromiter((self._ids[p.signature] for p in pods), dtype=np.int64, count=len(pods))
        np.subtract.at(self.counts, (ids, np.asarray(nodes, dtype=np.int64)), 1)
        for node, pod in zip(nodes, pods, strict=True):
            if pod.anti_affinity or pod.host_ports:
                for term in pod.anti_affinity:
                    self.anti[(pod.namespace, term)][node] -= 1
                for port in pod.host_ports:
                    self.ports[port][node] -= 1

    def matching(self, namespaces: frozenset[str] | None, selector: LabelSelector) -> IntArray:
        """Pods on each node in ``namespaces`` (None: any) whose labels ``selector`` matches."""
        return self._on_nodes(self._selected(namespaces, selector))

    def matching_all(self, terms: tuple[PodTerm, ...]) -> IntArray:
        """Pods on each node that every one of ``terms`` selects."""
        ids = set(self._selected(terms[0].namespaces, terms[0].selector))
        for term in terms[1:]:
            ids &= set(self._selected(term.namespaces, term.selector))
        return self._on_nodes(sorted(ids))

    def _selected(self, namespaces: frozenset[str] | None, selector: LabelSelector) -> list[int]:
        """The signatures a selector in ``namespaces`` matches, judged once each."""
        key = (namespaces, selector)
        judged, ids = self._matches.get(key, (0, []))
        if judged < len(self.signatures):
            ids = ids + [
                s
                for s in range(judged, len(self.signatures))
                if (namespaces is None or self.signatures[s][0] in namespaces)
                and selector.matches(self.signatures[s][1])
            ]
            self._matches[key] = (len(self.signatures), ids)
        return ids

    def _on_nodes(self, ids: list[int]) -> IntArray:
        if not ids:
            return np.zeros(self.size, dtype=np.int64)
        out: IntArray = (
            self.counts[ids[0]].astype(np.int64)
            if len(ids) == 1
            else self.counts[ids].sum(axis=0, dtype=np.int64)
        )
        return out

    def ports_in_use(self, port: HostPort) -> IntArray:
        """Pods on each node holding a host port that conflicts with ``port``."""
        used = np.zeros(self.size, dtype=np.int64)
        for held, on in self.ports.items():
            if held.conflicts(port):
                used += on
        return used

    def copy(self) -> PodIndex:
        return PodIndex(
            self.size,
            list(self.signatures),
            dict(self._ids),
            self.counts.copy(),
            {k: v.copy() for k, v in self.anti.items()},
            {k: v.copy() for k, v in self.ports.items()},
            dict(self._matches),
        )


def domain_counts(labels: NodeLabels, key: str, per_node: IntArray) -> tuple[IntArray, BoolArray]:
    """Per node, the sum of ``per_node`` over the nodes of its domain of label ``key`` (0
    where the node lacks the label), and which nodes have the label."""
    ids, names = labels.label_ids(key)
    has = ids >= 0
    if not names:
        return np.zeros(ids.size, dtype=np.int64), has
    per_domain = np.bincount(ids[has], weights=per_node[has], minlength=len(names))
    out = np.zeros(ids.size, dtype=np.int64)
    out[has] = per_domain[ids[has]]
    return out, has
