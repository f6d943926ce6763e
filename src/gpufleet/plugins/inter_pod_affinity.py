"""InterPodAffinity (filter): required pod affinity and anti-affinity, the pod's own and the
anti-affinity of the pods already running, as kube-scheduler's plugin of the same name.

For a pod with placement (:class:`~gpufleet.model.interpod.PodPlacement`), a node is
rejected when, counting pods per domain of each term's ``topologyKey``
(:class:`~gpufleet.model.interpod.PodIndex`, one ``bincount`` per term):

* an affinity term finds no pod that matches *all* the pod's affinity terms in the node's
  domain, or the node lacks the term's topology key — unless no such pod runs anywhere
  and the pod matches all its own terms (the first pod of a group that has affinity to
  itself), in which case any node with every topology key passes;
  ``node(s) didn't match pod affinity rules``, unresolvable by eviction;
* an anti-affinity term of the pod finds a matching pod in the node's domain
  (``node(s) didn't match pod anti-affinity rules``);
* a running pod's anti-affinity term selects this pod and that pod runs in the node's
  domain of the term's key (``node(s) didn't satisfy existing pods anti-affinity rules``).

A node without a term's topology key is out of that term's reach for anti-affinity (it
passes). Each node is given the first of these reasons it fails, in this order, as
kube-scheduler's Filter returns at the first. Evicting the pods in the way can clear an
anti-affinity rejection, so those are resolvable (the victim search sees the counts fall
as it tries evictions).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.interpod import PodPlacement, domain_counts
from gpufleet.model.pod import PodSpec

NAME = "InterPodAffinity"
AFFINITY = "node(s) didn't match pod affinity rules"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
MAX_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class InterPodAffinity:
    name = NAME
    needs = ("placement",)

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        placement = pod.placement
        index = state.pod_index
        if placement is None or (
            not placement.affinity and not placement.anti_affinity and not index.anti
        ):
            return FilterVerdict.pass_all(state.size)
        checks = (
            (AFFINITY, _affinity(state, placement) if placement.affinity else None),
            (ANTI_AFFINITY, _anti(state, placement) if placement.anti_affinity else None),
            (EXISTING_ANTI_AFFINITY, _existing_anti(state, placement)),
        )
        return FilterVerdict.first_failing(
            state.size,
            ((message, failing) for message, failing in checks if failing is not None),
            lambda message: message == AFFINITY,
        )

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        """kube-scheduler's InterPodAffinity score: per node, the weights of the pod's
        preferred terms (anti-affinity negative) times the pods they select in the node's
        domain, plus the weights of running pods' preferred terms (and their required
        affinity, at 1) that select this pod, times those pods in the domain; normalized to
        0..100 over ``nodes`` (the least 0, the most 100; all 0 when equal)."""
        placement = pod.placement
        index = state.pod_index
        if placement is None or (not placement.preferred and not index.weighted):
            return np.zeros(nodes.size, dtype=np.float64)
        labels = state.node_labels
        total = np.zeros(state.size, dtype=np.float64)
        for weighted in placement.preferred:
            term = weighted.term
            matching = index.matching(term)
            total += weighted.weight * domain_counts(labels, term.topology_key, matching)[0]
        for holders, weighted in index.weighing(placement):
            if holders.any():
                near = domain_counts(labels, weighted.term.topology_key, holders)[0]
                total += weighted.weight * near
        raw = total[nodes]
        if not raw.size:
            return np.zeros(0, dtype=np.float64)
        low, high = float(raw.min()), float(raw.max())
        if high == low:
            return np.zeros(nodes.size, dtype=np.float64)
        out: FloatArray = np.floor(MAX_SCORE * (raw - low) / (high - low))
        return out


def _existing_anti(state: ClusterState, pod: PodPlacement) -> BoolArray | None:
    """Nodes in the domain of a running pod whose anti-affinity selects ``pod``."""
    out = None
    for holders, term in state.pod_index.anti_selecting(pod):
        if not holders.any():
            continue
        near, _ = domain_counts(state.node_labels, term.topology_key, holders)
        hit = near > 0
        out = hit if out is None else out | hit
    return out


def _anti(state: ClusterState, pod: PodPlacement) -> BoolArray:
    """Nodes in a domain where a pod that one of ``pod``'s anti-affinity terms selects runs."""
    out = np.zeros(state.size, dtype=np.bool_)
    for term in pod.anti_affinity:
        near, _ = domain_counts(
            state.node_labels,
            term.topology_key,
            state.pod_index.matching(term),
        )
        out |= near > 0
    return out


def _affinity(state: ClusterState, pod: PodPlacement) -> BoolArray:
    """Nodes that fail ``pod``'s affinity terms (kube-scheduler's satisfyPodAffinity)."""
    matching = state.pod_index.matching_all(pod.affinity)
    every_key = np.ones(state.size, dtype=np.bool_)
    found = np.ones(state.size, dtype=np.bool_)
    anywhere = 0
    for term in pod.affinity:
        near, has = domain_counts(state.node_labels, term.topology_key, matching)
        every_key &= has
        found &= near > 0
        anywhere += int(matching[has].sum())
    namespaces = state.pod_index.namespace_labels
    if anywhere == 0 and all(
        t.selects(pod.namespace, pod.labels, namespaces) for t in pod.affinity
    ):
        return ~every_key  # the first pod of a group with affinity to itself
    return ~(every_key & found)


def new(args: Args, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity()
