"""One small protocol per extension point (kube-scheduler's framework, in Python).

A plugin has a name and implements only the protocols it needs:

* :class:`FilterPlugin` — which nodes can hold the pod: one boolean mask over all nodes,
  with the masks of nodes failing each reason, so that the framework can tell the user why.
  A filter judges each node on that node's own row of the state (kube-scheduler's Filter
  sees one NodeInfo); what spans nodes — gangs, topology domains — is the cycle's.
* :class:`RowFilter` — a filter that can also judge a few rows without the reasons: the
  same rule, evaluated where the victim search asks "does it fit this node now?" after
  each eviction it tries. A filter without it is run on every node and read at the one.
* :class:`CountingFilter` — a filter of capacity that can say how many pods of one plain
  spec each node holds: slot counting takes the least count over them.
* :class:`ScorePlugin` — how good each candidate node is: a float array, higher is better.
* :class:`GpuChooser` — which GPUs of the chosen node the pod takes.

Plugins judge the :class:`~gpufleet.model.cluster.ClusterState` they are handed and keep no
view of their own, so what-if evaluation and simulation reuse them unchanged. A plugin that
needs randomness or the target workload gets it from the :class:`Handle` at construction.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from gpufleet.model.values import ArrayValue

if TYPE_CHECKING:
    from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.fragmentation import FragmentIndex
    from gpufleet.model.pod import PodSpec


@dataclass(frozen=True, slots=True, eq=False)
class FilterVerdict(ArrayValue):
    """``feasible`` nodes, and for each reason the nodes that fail it (they may overlap).

    Verdicts compare and hash by their masks' values (:class:`ArrayValue`); a mask must not
    change once it is in a verdict (they are not copied: verdicts are made per pod and
    filter)."""

    feasible: BoolArray
    failures: tuple[tuple[str, BoolArray], ...] = ()
    unresolvable: bool = False
    """True when no eviction could make a rejected node feasible (e.g. a GPU model mismatch)."""
    everything: bool = False
    """Every node passes (the filter does not apply to this pod); the framework skips it."""
    pod_level: bool = False
    """The pod is rejected whatever the node (a claim that does not exist): kube-scheduler's
    PreFilter rejection, whose message is given once, without a count of nodes."""

    @staticmethod
    def first_failing(
        size: int,
        checks: Iterable[tuple[str, BoolArray]],
        unresolvable: Callable[[str], bool],
    ) -> FilterVerdict:
        """The verdict of checks run in order, each node rejected for the first it fails
        (``checks``: a message and the nodes failing it), as kube-scheduler's Filter returns
        at its first failure; unresolvable when every message given is."""
        failures: list[tuple[str, BoolArray]] = []
        rejected = np.zeros(size, dtype=np.bool_)
        for message, failing in checks:
            mine = failing & ~rejected
            if mine.any():
                failures.append((message, mine))
                rejected |= mine
        if not failures:
            return FilterVerdict.pass_all(size)
        return FilterVerdict(~rejected, tuple(failures), all(unresolvable(m) for m, _ in failures))

    @staticmethod
    def reject_pod(size: int, message: str, *, unresolvable: bool = True) -> FilterVerdict:
        """No node, for ``message`` about the pod itself (see ``pod_level``)."""
        every = np.ones(size, dtype=np.bool_)
        return FilterVerdict(~every, ((message, every),), unresolvable, pod_level=True)

    @staticmethod
    def pass_all(size: int) -> FilterVerdict:
        """The verdict of a filter that does not apply to the pod (cached per cluster size)."""
        verdict = _PASS_ALL.get(size)
        if verdict is None:
            ones = np.ones(size, dtype=np.bool_)
            ones.setflags(write=False)
            verdict = _PASS_ALL[size] = FilterVerdict(ones, everything=True)
        return verdict


_PASS_ALL: dict[int, FilterVerdict] = {}


@runtime_checkable
class Plugin(Protocol):
    @property
    def name(self) -> str: ...


class Gated(Protocol):
    """A plugin that judges a pod by some of its fields only: ``needs`` names them
    (``placement``, ``volumes``). A pod that has none of them passes every node of such a
    filter and scores 0 everywhere on such a score, so the framework skips the plugin for
    it (the fill of a trace's pods, which carry neither, pays nothing for inter-pod and
    volume rules)."""

    needs: tuple[str, ...]


class NodeKeyed(Protocol):
    """A node-local score plugin (``node_local``) that can name everything its score of
    a node reads of that node's row: two nodes of one state with equal keys score the
    same for a pod (``Framework.run_scores`` then scores a key once per pod shape)."""

    def node_key(self, state: ClusterState, node: int) -> Hashable: ...


@runtime_checkable
class FilterPlugin(Plugin, Protocol):
    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict: ...


Rows = slice
"""A run of node indexes (``slice(node, node + 1)`` for one node): arrays indexed by it are
views, so judging one node copies nothing."""


@runtime_checkable
class RowFilter(FilterPlugin, Protocol):
    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        """Which nodes of ``rows`` pass: exactly ``filter(state, pod).feasible[rows]``;
        None when every node passes (the filter does not apply to the pod)."""
        ...


@runtime_checkable
class CountingFilter(FilterPlugin, Protocol):
    def count(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        """How many pods of ``pod``'s plain spec (whole GPUs or none, no MIG slice, no
        pinned CPUs) each of ``nodes`` holds by this filter's resources: at least 1 exactly
        where the filter passes."""
        ...


@runtime_checkable
class ScorePlugin(Plugin, Protocol):
    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        """Scores for ``nodes`` (indexes of feasible nodes), higher is better."""
        ...


@runtime_checkable
class GpuChooser(Plugin, Protocol):
    def choose_gpus(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        """GPU indexes on ``node`` for ``pod``; the node is known to fit."""
        ...


@dataclass(frozen=True, slots=True, eq=False)
class Handle(ArrayValue):
    """What the framework gives plugins: seeded randomness, the target workload, tie order.

    ``tie_rank`` orders nodes for breaking score ties: among equally scored nodes the one
    with the lowest rank wins (kube-scheduler as patched in the FGD authors' simulator picks
    the lexicographically smallest name, and their names carry a per-seed random prefix).
    None means node index order. ``fragments`` is the fragment index over the workload's
    typical pods (FGD's target workload); it is shared so that the FGD score and the
    simulator's fragmentation report refresh each changed node once.

    Two handles are equal when they share the generator and the fragment index (objects
    with state, compared by identity) and their tie ranks are equal.
    """

    rng: np.random.Generator
    fragments: FragmentIndex | None = None
    tie_rank: IntArray | None = None
