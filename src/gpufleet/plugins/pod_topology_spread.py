"""PodTopologySpread (filter): ``whenUnsatisfiable: DoNotSchedule`` constraints, as
kube-scheduler's plugin of the same name.

For each constraint, the pods of the pod's namespace that its selector matches are counted
per domain of its ``topologyKey`` over the *eligible* nodes: those with every constraint's
topology key, and — ``nodeAffinityPolicy: Honor`` (the default) — allowed by the pod's node
selector and required node affinity, and — ``nodeTaintsPolicy: Honor`` — whose
NoSchedule/NoExecute taints the pod tolerates. A node is rejected when

    count(domain of node) + self - min(count over eligible domains) > maxSkew

where ``self`` is 1 if the pod matches the selector itself, and the minimum is 0 while
fewer than ``minDomains`` domains are eligible. An empty selector (``{}``) counts no pod,
as kube-scheduler's does. A node without the topology key is
rejected as unresolvable (``node(s) didn't match pod topology spread constraints (missing
required label)``); a skew rejection may be cleared by evictions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.interpod import PodTerm, SpreadConstraint, domain_counts
from gpufleet.model.pod import PodSpec

NAME = "PodTopologySpread"
SKEW = "node(s) didn't match pod topology spread constraints"
MISSING_LABEL = f"{SKEW} (missing required label)"
MAX_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class PodTopologySpread:
    name = NAME
    needs = ("placement",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        placement = pod.placement
        if placement is None or not placement.spread:
            return FilterVerdict.pass_all(state.size)
        labels = state.node_labels
        has_keys = np.ones(state.size, dtype=np.bool_)
        for c in placement.spread:
            has_keys &= labels.label_ids(c.topology_key)[0] >= 0
        skewed = np.zeros(state.size, dtype=np.bool_)
        namespace = frozenset((placement.namespace,))
        for c in placement.spread:
            eligible = has_keys & _included(state, pod, c)
            ids, names = labels.label_ids(c.topology_key)
            if not names:
                continue  # no node has the key: every node fails it (missing label)
            # An empty selector counts no pod (kube-scheduler's countPodsMatchSelector).
            matching = (
                np.zeros(state.size, dtype=np.int64)
                if c.selector.empty
                else state.pod_index.matching(PodTerm(c.selector, namespace, c.topology_key))
            )
            per_domain = np.bincount(
                ids[eligible], weights=matching[eligible], minlength=len(names)
            ).astype(np.int64)
            present = np.zeros(len(names), dtype=np.bool_)
            present[ids[eligible]] = True
            domains = int(present.sum())
            least = int(per_domain[present].min()) if domains >= c.min_domains and domains else 0
            own = 1 if c.selector.matches(placement.labels) else 0
            at_node = np.where(has_keys, per_domain[np.maximum(ids, 0)], 0)
            at_node = np.where(present[np.maximum(ids, 0)], at_node, 0)
            skewed |= has_keys & (at_node + own - least > c.max_skew)
        failures = tuple(
            (message, mask)
            for message, mask in ((MISSING_LABEL, ~has_keys), (SKEW, skewed))
            if mask.any()
        )
        if not failures:
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict(has_keys & ~skewed, failures, unresolvable=not skewed.any())

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        """kube-scheduler's PodTopologySpread score over ``ScheduleAnyway`` constraints:
        per node ``sum_c count_c(domain) * log(domains_c + 2) + maxSkew_c - 1`` (pods the
        constraint selects in the node's domain, ``domains_c`` the constraint's domains
        among ``nodes``), rounded, then inverted to 0..100: ``100 * (max + min - s) /
        max`` (100 everywhere when max is 0); a node without a constraint's key scores 0."""
        placement = pod.placement
        if placement is None or not placement.spread_soft:
            return np.zeros(nodes.size, dtype=np.float64)
        labels = state.node_labels
        namespace = frozenset((placement.namespace,))
        keyed = np.ones(nodes.size, dtype=np.bool_)
        for c in placement.spread_soft:
            keyed &= labels.label_ids(c.topology_key)[0][nodes] >= 0
        if not keyed.any():
            return np.zeros(nodes.size, dtype=np.float64)
        every_key = np.ones(state.size, dtype=np.bool_)
        for c in placement.spread_soft:
            every_key &= labels.label_ids(c.topology_key)[0] >= 0
        total = np.zeros(nodes.size, dtype=np.float64)
        for c in placement.spread_soft:
            ids = labels.label_ids(c.topology_key)[0]
            matching = (
                np.zeros(state.size, dtype=np.int64)
                if c.selector.empty
                else state.pod_index.matching(PodTerm(c.selector, namespace, c.topology_key))
            )
            # Pods count on every node with the keys that the inclusion policies admit,
            # feasible or not; the feasible nodes say which domains there are.
            counted = every_key & _included(state, pod, c)
            near, _ = domain_counts(labels, c.topology_key, np.where(counted, matching, 0))
            domains = np.unique(ids[nodes[keyed]]).size
            total += near[nodes] * np.log(domains + 2) + c.max_skew - 1
        total = np.round(total)
        low, high = float(total[keyed].min()), float(total[keyed].max())
        if high == 0:
            return np.where(keyed, MAX_SCORE, 0.0)
        out: FloatArray = np.where(keyed, np.floor(MAX_SCORE * (high + low - total) / high), 0.0)
        return out


def _included(state: ClusterState, pod: PodSpec, c: SpreadConstraint) -> BoolArray:
    """The nodes whose pods ``c`` counts by its inclusion policies: those the pod's node
    affinity allows (``nodeAffinityPolicy: Honor``) and whose NoSchedule/NoExecute taints it
    tolerates (``nodeTaintsPolicy: Honor``)."""
    labels = state.node_labels
    ok = np.ones(state.size, dtype=np.bool_)
    if c.honor_node_affinity and pod.constraint is not None and pod.constraint.has_terms:
        ok &= labels.affinity_mask(pod.constraint)
    if c.honor_taints:
        tolerations = pod.constraint.tolerations if pod.constraint else ()
        for taint in labels.blocking_taints:
            if not any(t.tolerates(taint) for t in tolerations):
                ok &= ~labels.taint_mask(taint)
    return ok


def new(args: Args, handle: Handle) -> PodTopologySpread:
    return PodTopologySpread()
