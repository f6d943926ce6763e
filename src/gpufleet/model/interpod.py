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

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from gpufleet.model.selectors import Requirement
from gpufleet.model.values import EMPTY, frozen_map

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.arrays import BoolArray, IntArray
    from gpufleet.model.selectors import NodeLabels

T = TypeVar("T", "PodTerm", "WeightedTerm")
K = TypeVar("K", tuple[str, "PodTerm"], "HostPort", tuple[str, "WeightedTerm"])

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
NamespaceLabels = Mapping[str, Mapping[str, str]]
"""Per namespace, its labels (the Namespace objects')."""

WILDCARD_IP = "0.0.0.0"  # noqa: S104 (a host port's "every address", not a bind)


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A ``metav1.LabelSelector`` over pod labels: requirements ANDed (``matchLabels`` as
    ``In``). ``nothing``: a null selector, which matches no pod; an empty one matches all."""

    requirements: tuple[Requirement, ...] = ()
    nothing: bool = False

    def matches(self, labels: Mapping[str, str]) -> bool:
        return not self.nothing and all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """``{}``: every pod (not a null selector, which is no pod)."""
        return not self.nothing and not self.requirements


@dataclass(frozen=True, slots=True)
class PodTerm:
    """A required pod (anti-)affinity term: pods of ``namespaces`` (None: every namespace)
    matching ``selector``, counted per domain of ``topology_key``."""

    selector: LabelSelector
    namespaces: frozenset[str] | None
    topology_key: str
    namespace_selector: LabelSelector | None = None
    """Namespaces selected by their labels, beside ``namespaces`` (None: none so)."""

    def selects(
        self, namespace: str, labels: Mapping[str, str], namespaces: NamespaceLabels = EMPTY
    ) -> bool:
        """Whether a pod of ``namespace`` with ``labels`` is one this term counts;
        ``namespaces``: each namespace's labels (for ``namespace_selector``)."""
        return self.in_namespace(namespace, namespaces) and self.selector.matches(labels)

    def in_namespace(self, namespace: str, namespaces: NamespaceLabels = EMPTY) -> bool:
        if self.namespaces is None or namespace in self.namespaces:
            return True
        chosen = self.namespace_selector
        if chosen is None:
            return False
        # The API server labels every namespace with its name.
        labels = {**namespaces.get(namespace, EMPTY), NAMESPACE_NAME_LABEL: namespace}
        return chosen.matches(labels)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    """A preferred pod affinity term (``weight`` 1..100) or anti-affinity term (negative
    weight); a required affinity term of a running pod counts as weight 1 for the pods it
    selects (kube-scheduler's ``hardPodAffinityWeight``)."""

    term: PodTerm
    weight: int


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
    preferred: tuple[WeightedTerm, ...] = ()
    """Preferred pod affinity (positive weights) and anti-affinity (negative): scored."""
    spread_soft: tuple[SpreadConstraint, ...] = ()
    """``whenUnsatisfiable: ScheduleAnyway`` constraints: scored."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", frozen_map(self.labels))

    @property
    def constrained(self) -> bool:
        """Whether the pod has a term of its own (else only others' terms bind it)."""
        return bool(
            self.affinity
            or self.anti_affinity
            or self.spread
            or self.host_ports
            or self.preferred
            or self.spread_soft
        )

    @property
    def weighted(self) -> tuple[WeightedTerm, ...]:
        """What this pod, running, weighs for the pods its terms select: its preferred
        terms, and its required affinity terms at weight 1."""
        return self.preferred + tuple(WeightedTerm(t, 1) for t in self.affinity)

    @property
    def signature(self) -> tuple[str, Mapping[str, str]]:
        return self.namespace, self.labels


class Signatures:
    """Distinct (namespace, labels) of pods, each with an id, in the order first seen: shared
    by an index and all its copies (it only grows), so an id means one signature in all of
    them and a caller may keep ids (the victim pool's)."""

    __slots__ = ("ids", "items")

    def __init__(self) -> None:
        self.items: list[tuple[str, Mapping[str, str]]] = []
        self.ids: dict[tuple[str, Mapping[str, str]], int] = {}

    def __len__(self) -> int:
        return len(self.items)

    def id(self, signature: tuple[str, Mapping[str, str]]) -> int:
        sid = self.ids.get(signature)
        if sid is None:
            sid = self.ids[signature] = len(self.items)
            self.items.append(signature)
        return sid


class PodIndex:
    """Per node, the pods by signature, the holders of each required anti-affinity term
    and the host ports in use (see the module doc). Changed by :meth:`add`/:meth:`remove`;
    :meth:`copy` for a what-if state.

    A copy shares every count row with its original until either changes it (copy on
    write), so copying costs one pointer per row; :meth:`forget` takes many pods out of a
    copy at once without touching a row — they are kept aside and subtracted where a count
    is read — which is how the victim search's "every candidate gone" state is made.
    """

    __slots__ = (
        "_gone_nodes",
        "_gone_sids",
        "_matches",
        "_owned",
        "_selecting",
        "_weighing",
        "anti",
        "namespace_labels",
        "ports",
        "rows",
        "signatures",
        "size",
        "weighted",
    )

    def __init__(self, size: int) -> None:
        self.size = size
        self.namespace_labels: NamespaceLabels = EMPTY
        """Per namespace, its labels: what a term's namespace selector reads (the caches
        below assume they do not change; a ledger is built anew when they do)."""
        self.signatures = Signatures()
        self.rows: dict[int, dict[int, int]] = {}
        """Per signature id: its pods per node, for the nodes that have some (sparse: the
        pods of a StatefulSet or an indexed Job each have a signature of their own, and a
        dense row per signature would cost pods x nodes)."""
        self.anti: dict[tuple[str, PodTerm], IntArray] = {}
        """Per (holder's namespace, term): pods holding the term on each node."""
        self.ports: dict[HostPort, IntArray] = {}
        """Per host port: pods holding it on each node."""
        self.weighted: dict[tuple[str, WeightedTerm], IntArray] = {}
        """Per (holder's namespace, weighted term): pods holding it on each node (the
        InterPodAffinity score of the pods it selects)."""
        self._weighing: dict[
            tuple[str, Mapping[str, str]], tuple[int, list[tuple[str, WeightedTerm]]]
        ] = {}
        self._owned: set[int | tuple[str, PodTerm] | HostPort | tuple[str, WeightedTerm]]
        self._owned = set()
        """The rows this index may change in place (the others it shares with a copy)."""
        self._gone_nodes: IntArray = np.zeros(0, dtype=np.int64)
        self._gone_sids: IntArray = np.zeros(0, dtype=np.int64)
        """Pods counted in ``rows`` that :meth:`forget` took out: node and signature."""
        self._matches: dict[object, tuple[int, list[int]]] = {}
        """Per selector-and-namespaces: (signatures judged, the ids that match)."""
        self._selecting: dict[tuple[str, Mapping[str, str]], tuple[int, list[tuple[str, PodTerm]]]]
        self._selecting = {}
        """Per signature: (anti-affinity terms judged, those that select it), in the order
        of ``anti`` (whose keys are never removed)."""

    @property
    def empty(self) -> bool:
        return not self.rows

    def _count(self, sid: int, node: int, sign: int) -> None:
        """Pods of signature ``sid`` on ``node`` change by ``sign`` (a row at zero goes)."""
        row = self.rows.get(sid)
        if row is None:
            row = self.rows[sid] = {}
            self._owned.add(sid)
        elif sid not in self._owned:
            row = self.rows[sid] = dict(row)
            self._owned.add(sid)
        count = row.get(node, 0) + sign
        if count:
            row[node] = count
        else:
            del row[node]
            if not row:
                del self.rows[sid]

    def _row(self, table: dict[K, IntArray], key: K) -> IntArray:
        row = table.get(key)
        if row is None:
            row = table[key] = np.zeros(self.size, dtype=np.int32)
            self._owned.add(key)
        elif key not in self._owned:
            row = table[key] = row.copy()
            self._owned.add(key)
        return row

    def add(self, node: int, pod: PodPlacement, sign: int = 1) -> None:
        """Count ``pod`` on ``node`` (``sign`` -1: no longer)."""
        self._count(self.signatures.id(pod.signature), node, sign)
        for term in pod.anti_affinity:
            self._row(self.anti, (pod.namespace, term))[node] += sign
        for port in pod.host_ports:
            self._row(self.ports, port)[node] += sign
        for weighted in pod.weighted:
            self._row(self.weighted, (pod.namespace, weighted))[node] += sign

    def remove(self, node: int, pod: PodPlacement) -> None:
        self.add(node, pod, -1)

    def forget(
        self, nodes: IntArray, sids: IntArray, holders: Sequence[tuple[int, PodPlacement]]
    ) -> None:
        """Take out pods counted here: one of signature ``sids[i]`` on each ``nodes[i]``, of
        which ``holders`` (node, pod) are those with terms of their own or host ports."""
        self._gone_nodes = np.concatenate((self._gone_nodes, nodes))
        self._gone_sids = np.concatenate((self._gone_sids, sids))
        for node, pod in holders:
            for term in pod.anti_affinity:
                self._row(self.anti, (pod.namespace, term))[node] -= 1
            for port in pod.host_ports:
                self._row(self.ports, port)[node] -= 1
            for weighted in pod.weighted:
                self._row(self.weighted, (pod.namespace, weighted))[node] -= 1

    def matching(self, term: PodTerm) -> IntArray:
        """Pods on each node that ``term`` selects (its namespaces and label selector)."""
        return self._on_nodes(self._selected(term))

    def matching_all(self, terms: tuple[PodTerm, ...]) -> IntArray:
        """Pods on each node that every one of ``terms`` selects."""
        ids = set(self._selected(terms[0]))
        for term in terms[1:]:
            ids &= set(self._selected(term))
        return self._on_nodes(sorted(ids))

    def _selected(self, term: PodTerm) -> list[int]:
        """The signatures ``term`` selects, judged once each (the topology key aside)."""
        key = (term.namespaces, term.namespace_selector, term.selector)
        judged, ids = self._matches.get(key, (0, []))
        if judged < len(self.signatures):
            items = self.signatures.items
            ids = ids + [
                s
                for s in range(judged, len(self.signatures))
                if term.selects(items[s][0], items[s][1], self.namespace_labels)
            ]
            self._matches[key] = (len(self.signatures), ids)
        return ids

    def _on_nodes(self, ids: list[int]) -> IntArray:
        nodes: list[int] = []
        counts: list[int] = []
        for sid in ids:
            row = self.rows.get(sid)
            if row:
                nodes.extend(row)
                counts.extend(row.values())
        out: IntArray = np.bincount(
            np.array(nodes, dtype=np.int64),
            weights=np.array(counts, dtype=np.int64),
            minlength=self.size,
        ).astype(np.int64)
        if ids and self._gone_sids.size:
            gone = np.isin(self._gone_sids, ids)
            if gone.any():
                out -= np.bincount(self._gone_nodes[gone], minlength=self.size)
        return out

    def anti_selecting(self, pod: PodPlacement) -> list[tuple[IntArray, PodTerm]]:
        """Running pods' anti-affinity terms that select ``pod``, each with its holders per
        node (judged once per signature and term)."""
        return self._terms_selecting(self.anti, self._selecting, pod, lambda term: term)

    def weighing(self, pod: PodPlacement) -> list[tuple[IntArray, WeightedTerm]]:
        """Running pods' weighted terms that select ``pod``, each with its holders per node
        (judged once per signature and term)."""
        return self._terms_selecting(
            self.weighted, self._weighing, pod, lambda weighted: weighted.term
        )

    def _terms_selecting(
        self,
        table: dict[tuple[str, T], IntArray],
        judged_by_signature: dict[tuple[str, Mapping[str, str]], tuple[int, list[tuple[str, T]]]],
        pod: PodPlacement,
        term_of: Callable[[T], PodTerm],
    ) -> list[tuple[IntArray, T]]:
        """The entries of ``table`` (keyed by holder's namespace and term) whose term selects
        ``pod``; its keys are never removed, so each signature's answer is extended with
        the keys added since it was last asked (``judged_by_signature``)."""
        keys = list(table)
        judged, found = judged_by_signature.get(pod.signature, (0, []))
        if judged < len(keys):
            found = found + [
                k
                for k in keys[judged:]
                if term_of(k[1]).selects(pod.namespace, pod.labels, self.namespace_labels)
            ]
            judged_by_signature[pod.signature] = (len(keys), found)
        return [(table[k], k[1]) for k in found]

    def ports_in_use(self, port: HostPort) -> IntArray:
        """Pods on each node holding a host port that conflicts with ``port``."""
        used = np.zeros(self.size, dtype=np.int64)
        for held, on in self.ports.items():
            if held.conflicts(port):
                used += on
        return used

    @property
    def movable(self) -> bool:
        """Whether :meth:`moved` may carry this index (no pods forgotten: not a what-if
        copy)."""
        return not self._gone_sids.size

    def moved(self, to: IntArray, size: int) -> PodIndex:
        """This index on a cluster of ``size`` nodes where node ``i`` is node ``to[i]``
        (-1: gone, with no pod counted on it); every row is new (nothing shared)."""
        assert self.movable
        other = PodIndex(size)
        other.signatures = self.signatures
        other.namespace_labels = self.namespace_labels
        other.rows = {
            sid: {int(to[node]): count for node, count in row.items()}
            for sid, row in self.rows.items()
        }
        other.anti = _moved(self.anti, to, size)
        other.ports = _moved(self.ports, to, size)
        other.weighted = _moved(self.weighted, to, size)
        other._owned = {*other.rows, *other.anti, *other.ports, *other.weighted}
        other._weighing = dict(self._weighing)
        other._matches = dict(self._matches)
        other._selecting = dict(self._selecting)
        return other

    def copy(self) -> PodIndex:
        """An independent index that shares every row until one of the two changes it."""
        other = PodIndex(self.size)
        other.signatures = self.signatures
        other.namespace_labels = self.namespace_labels
        other.rows = dict(self.rows)
        other.anti = dict(self.anti)
        other.ports = dict(self.ports)
        other.weighted = dict(self.weighted)
        other._weighing = dict(self._weighing)
        other._gone_nodes, other._gone_sids = self._gone_nodes, self._gone_sids
        other._matches = dict(self._matches)
        other._selecting = dict(self._selecting)
        self._owned = set()  # the rows are shared now: the next change copies
        return other


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


def _moved(table: dict[K, IntArray], to: IntArray, size: int) -> dict[K, IntArray]:
    """Per-node rows of ``table`` on a cluster of ``size`` nodes where node ``i`` is node
    ``to[i]`` (-1: gone)."""
    kept = np.flatnonzero(to >= 0)
    out: dict[K, IntArray] = {}
    for key, row in table.items():
        moved = np.zeros(size, dtype=row.dtype)
        moved[to[kept]] = row[kept]
        out[key] = moved
    return out
