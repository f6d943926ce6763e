"""A profile's plugins, instantiated and run in kube-scheduler's order.

:class:`Framework` runs filters (narrowing a boolean mask over all nodes; the nodes each
filter rejected are counted per reason only when no node is left), sums weighted scores over
the remaining nodes, selects the best node and asks the GPU chooser for GPUs. Among equally
scored nodes the one of lowest tie rank wins — as in the FGD authors' simulator, whose
kube-scheduler picks the smallest node name — so equal nodes are filled one after another
rather than evenly. It holds no cluster state of its own.

A pod whose share of a GPU is sized by GPU memory takes a different share on GPUs of
different memory. Plugins never see it so: the framework splits the nodes by their GPU
memory (:func:`memory_groups`; the nodes of one GPU model have one size, so there are few)
and runs the filters, and the scores, once per size on the nodes of that size with the pod
sized for it (:meth:`PodSpec.sized_for`) — every plugin judges a plain share, and a filter
still returns one mask over all nodes. Nodes whose GPU memory is unknown or too small are
rejected by ``GpuMemory``, with a reason of their own.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import (
    CountingFilter,
    FilterPlugin,
    FilterVerdict,
    GpuChooser,
    Handle,
    Plugin,
    RowFilter,
    ScorePlugin,
)
from gpufleet.framework.registry import PluginFactory
from gpufleet.framework.status import Code, Reason, Status
from gpufleet.model.arrays import BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec
from gpufleet.model.values import ArrayValue

P = TypeVar("P")


class ProfileError(ValueError):
    """A profile names a plugin that does not implement the extension point it is used at."""


@dataclass(frozen=True, slots=True, eq=False)
class FilterResult(ArrayValue):
    """Feasible node indexes, or a non-success status saying why there are none (compared
    and hashed by value, :class:`ArrayValue`)."""

    nodes: IntArray
    status: Status


@dataclass(frozen=True, slots=True)
class GpuMemory:
    """The nodes whose GPUs can hold a share sized by GPU memory, as a filter of its own."""

    name: str = "GpuMemory"


GPU_MEMORY = GpuMemory()

Verdicts = list[tuple[Plugin, FilterVerdict, BoolArray]]
"""Filter verdicts with the nodes still in when each filter ran."""


def memory_text(mib: int) -> str:
    """A quantity as Kubernetes writes it: ``20Gi``, else ``1500Mi``."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def memory_groups(
    state: ClusterState, pod: PodSpec
) -> tuple[FilterVerdict, list[tuple[PodSpec, BoolArray]]]:
    """For a share sized by GPU memory: the ``GpuMemory`` verdict (nodes with GPUs of at
    least that memory pass; no eviction changes a node's GPUs, so a rejection is
    unresolvable) and, per GPU memory size of the nodes that pass, smallest first, the pod
    sized for it with the nodes of that size."""
    memory = state.gpu_memory
    fits = memory >= pod.gpu_memory_mib  # 0 (unknown, or no GPUs) never does
    gpus = state.gpu_count > 0
    failures = tuple(
        (message, failing)
        for message, failing in (
            ("Insufficient nvidia.com/gpu", ~gpus),
            (
                "node(s) didn't have label nvidia.com/gpu.memory to size the Pod's share of "
                "GPU memory",
                gpus & (memory == 0),
            ),
            (
                f"node(s) had GPUs with less than the Pod's {memory_text(pod.gpu_memory_mib)} "
                "of GPU memory",
                gpus & (memory > 0) & ~fits,
            ),
        )
        if failing.any()
    )
    verdict = FilterVerdict(fits, failures, unresolvable=True, everything=not failures)
    groups = []
    for size in np.unique(memory[fits]).tolist():
        spec = pod.sized_for(size)
        assert spec is not None
        groups.append((spec, memory == size))
    return verdict, groups


class Framework:
    """The plugins of one profile, ready to judge pods."""

    def __init__(
        self, profile: Profile, factories: Mapping[str, PluginFactory], handle: Handle
    ) -> None:
        self.profile = profile
        self.tie_rank = handle.tie_rank
        instances = {
            name: factories[name](handle)
            for name in {*profile.filters, *(n for n, _ in profile.scores), profile.gpu_chooser}
        }
        # mypy cannot pass a Protocol as a type[...] value (python/mypy#4717); the runtime
        # isinstance check in _expect is what matters here.
        self.filters = [
            _expect(instances[n], FilterPlugin, n, "filter")  # type: ignore[type-abstract]
            for n in profile.filters
        ]
        self.scores = [
            (_expect(instances[n], ScorePlugin, n, "score"), float(w))  # type: ignore[type-abstract]
            for n, w in profile.scores
        ]
        self._one_node = [
            (f, f.fits_rows if isinstance(f, RowFilter) else None) for f in self.filters
        ]
        self._for_pod: dict[
            tuple[bool, bool, bool], tuple[list[FilterPlugin], list[OneNode], list[Weighted]]
        ] = {}
        """Per kind of pod (:func:`pod_kind`): the filters, one-node checks and scores that
        apply to it (a plugin that ``needs`` pod fields the pod lacks is left out)."""
        self._counting = [f for f in self.filters if isinstance(f, CountingFilter)]
        self._remembered: dict[Hashable, _Remembered] = {}
        """The node-local scores given so far in this cycle, per pod shape and state
        (:meth:`run_scores`)."""
        self.chooser = _expect(
            instances[profile.gpu_chooser],
            GpuChooser,  # type: ignore[type-abstract]
            profile.gpu_chooser,
            "gpu choice",
        )

    def _plugins(self, pod: PodSpec) -> tuple[list[FilterPlugin], list[OneNode], list[Weighted]]:
        """The filters, one-node checks and scores that apply to ``pod``."""
        kind = pod_kind(pod)
        known = self._for_pod.get(kind)
        if known is None:
            known = self._for_pod[kind] = (
                [f for f in self.filters if _applies(f, kind)],
                [(f, rows) for f, rows in self._one_node if _applies(f, kind)],
                [(s, w) for s, w in self.scores if _applies(s, kind)],
            )
        return known

    def prepare(self, pod: PodSpec) -> PodSpec:
        """The pod as this profile places it (whole GPUs under device-plugin semantics)."""
        return pod.as_whole_gpus() if self.profile.whole_gpus_only else pod

    def run_filters(
        self, state: ClusterState, pod: PodSpec, held: Exclusion | None = None
    ) -> FilterResult:
        """Feasible nodes for ``pod``; ``held`` nodes are off limits (reserved by the cycle)."""
        if pod.sized_by_memory:
            memory, groups = memory_groups(state, pod)
            alive = np.zeros(state.size, dtype=np.bool_)
            verdicts: Verdicts = []
            if not memory.everything:
                verdicts.append((GPU_MEMORY, memory, np.ones(state.size, dtype=np.bool_)))
            for spec, members in groups:
                fits, more = self._filter(state, spec, held, members)
                alive |= fits
                verdicts.extend(more)
        else:
            alive, verdicts = self._filter(state, pod, held, None)
        nodes = np.flatnonzero(alive)
        if nodes.size:
            return FilterResult(nodes, Status(Code.SUCCESS, total_nodes=state.size))
        return FilterResult(nodes, _unschedulable(verdicts, state.size))

    def _filter(
        self, state: ClusterState, pod: PodSpec, held: Exclusion | None, within: BoolArray | None
    ) -> tuple[BoolArray, Verdicts]:
        """The nodes (of ``within``, None: all) that pass every filter, and each filter's
        verdict with the nodes still in when it ran."""
        alive = np.ones(state.size, dtype=np.bool_) if within is None else within
        verdicts: Verdicts = []
        if held is not None:
            verdicts.append((held, held.filter(state, pod), alive))
            alive = alive & ~held.mask
        for plugin in self._plugins(pod)[0]:
            verdict = plugin.filter(state, pod)
            if verdict.everything:
                continue
            verdicts.append((plugin, verdict, alive))
            alive = alive & verdict.feasible
        return alive, verdicts

    def fits(self, state: ClusterState, pod: PodSpec, node: int) -> bool:
        """Whether ``pod`` fits ``node`` as the state is now, by every filter of the profile:
        the rule :meth:`run_filters` applies to all nodes, asked of one (the victim search
        asks it after each eviction it tries). A :class:`RowFilter` judges the node's row
        alone; any other filter is run on every node and read at this one. Exclusion nodes are
        the caller's to leave out; a share sized by GPU memory is sized for the node."""
        if pod.sized_by_memory:
            sized = pod.sized_for(int(state.gpu_memory[node]))
            if sized is None:
                return False
            pod = sized
        rows = slice(node, node + 1)
        for plugin, fits_rows in self._plugins(pod)[1]:
            if fits_rows is not None:
                ok = fits_rows(state, pod, rows)
                if ok is not None and not ok[0]:
                    return False
            elif not plugin.filter(state, pod).feasible[node]:
                return False
        return True

    def count(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> IntArray:
        """How many pods of ``pod``'s plain spec each of ``nodes`` holds: the least count of
        the profile's :class:`CountingFilter` plugins (the nodes are ones the other filters
        let through), in an array of its own. A node over-committed by running pods (past a
        resource it lost) holds none, not fewer than none: a gang's sum over nodes would
        lose another node's room to it."""
        counts: IntArray | None = None
        for plugin in self._counting:
            room = plugin.count(state, pod, nodes)
            counts = room if counts is None else np.minimum(counts, room, out=counts)
        if counts is None:
            return np.full(nodes.size, np.iinfo(np.int64).max, dtype=np.int64)
        return np.maximum(counts, 0)

    def node_reasons(self, state: ClusterState, pod: PodSpec) -> list[tuple[str, ...]]:
        """Per node, every reason each filter rejects it for (empty: it fits) — for explain."""
        reasons: list[list[str]] = [[] for _ in range(state.size)]
        judged: list[tuple[PodSpec, BoolArray | None]] = [(pod, None)]
        if pod.sized_by_memory:
            memory, groups = memory_groups(state, pod)
            judged = [*groups]
            for message, failing in memory.failures:
                for node in np.flatnonzero(failing):
                    reasons[node].append(message)
        for spec, within in judged:
            for plugin in self.filters:
                for message, failing in plugin.filter(state, spec).failures:
                    mine = failing if within is None else failing & within
                    for node in np.flatnonzero(mine):
                        reasons[node].append(message)
        return [tuple(r) for r in reasons]

    def run_scores(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        """The weighted score of each of ``nodes`` (feasible for ``pod``); a share sized by
        GPU memory is scored on the nodes of each GPU memory size with its share there by
        the scores of its resources, and on all of them at once by those that judge its
        placement (``needs``: a preference normalized over every candidate, as the pod's
        GPU share does not change it)."""
        total = np.zeros(nodes.size, dtype=np.float64)
        scores = self._plugins(pod)[2]
        if pod.sized_by_memory:
            memory = state.gpu_memory[nodes]
            for size in np.unique(memory).tolist():
                spec = pod.sized_for(size)
                assert spec is not None, "GpuMemory let only nodes with enough memory through"
                part = memory == size
                for plugin, weight in scores:
                    if not getattr(plugin, "needs", ()):
                        total[part] += weight * plugin.score(state, spec, nodes[part])
            scores = [(p, w) for p, w in scores if getattr(p, "needs", ())]
        remembered = None if pod.sized_by_memory else self._remembered_for(state, pod, scores)
        if remembered is not None:
            stale = nodes[remembered.seen[nodes] != state.generation[nodes]]
            if stale.size:
                for i, values in remembered.weighted.items():
                    plugin, weight = scores[i]
                    scored = _by_key(plugin, state, pod, stale, remembered.by_key.setdefault(i, {}))
                    values[stale] = weight * scored
                remembered.seen[stale] = state.generation[stale]
        for i, (plugin, weight) in enumerate(scores):
            if remembered is not None and i in remembered.weighted:
                total += remembered.weighted[i][nodes]
            else:
                total += weight * plugin.score(state, pod, nodes)
        return total

    def forget_scores(self) -> None:
        """Drop the scores kept so far (a cycle starts: what the last one kept, for states
        and pod shapes it may not see again, is memory)."""
        self._remembered.clear()

    def _remembered_for(
        self, state: ClusterState, pod: PodSpec, scores: list[Weighted]
    ) -> _Remembered | None:
        """Where the node-local scores of pods shaped like ``pod`` are kept for ``state``
        (None: none of its scores is node-local, or its shape cannot be a key).

        A plugin that declares ``node_local`` scores a node from the pod's resources and
        that node's row alone, with what is fixed for the state (its nodes' models and GPU
        counts, which never change for a ``uid``) or for the framework (FGD's typical pods);
        it reads no labels, terms or volumes of the pod. So a node's score for a pod of the
        same shape stays right until the node's generation moves: a backlog of like pods
        costs one score of the node each placement changed, not one of every node per pod.
        The weighted scores are kept per plugin and summed in the profile's order, as
        without them, so that the totals are the same to the last bit."""
        local = [i for i, (plugin, _) in enumerate(scores) if getattr(plugin, "node_local", False)]
        if not local:
            return None
        try:
            # what no node-local score reads is left out of the shape: the name, the labels
            # and terms (placement) and the claims a pod mounts (volumes), so that pods of
            # an indexed Job or a StatefulSet share one; which plugins apply is pod_kind's
            shape = dataclasses.replace(pod, name="", placement=None, volumes=())
            key = (state.uid, pod_kind(pod), shape)
            remembered = self._remembered.get(key)
        except TypeError:  # a field that cannot be hashed
            return None
        if remembered is None:
            if len(self._remembered) >= REMEMBERED_SHAPES:
                del self._remembered[next(iter(self._remembered))]
            remembered = self._remembered[key] = _Remembered(
                np.full(state.size, -1, dtype=np.int64),
                {i: np.zeros(state.size, dtype=np.float64) for i in local},
            )
        return remembered

    def select_host(self, nodes: IntArray, totals: FloatArray) -> int:
        """The best-scored node; among equals, the one of lowest tie rank."""
        best = nodes[totals == totals.max()]
        if best.size == 1 or self.tie_rank is None:
            return int(best[0])
        return int(best[np.argmin(self.tie_rank[best])])


@dataclass(frozen=True, slots=True, eq=False)
class Exclusion(ArrayValue):
    """Nodes a placement may not use, as a filter with its own reason: reserved for a
    starving job, outside a gang's topology domain, unable to allocate the pod's claims, or where a
    share would be over its cap (compared and hashed by value, :class:`ArrayValue`)."""

    mask: BoolArray
    message: str
    name: str = "Reservation"
    reasons: tuple[tuple[str, BoolArray], ...] = field(default=(), compare=False)
    """Where the nodes are kept off for different reasons: each reason and its nodes (they
    cover ``mask``, none twice); empty: ``message`` for all of them."""

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:  # noqa: ARG002 (the filter protocol)
        return FilterVerdict(~self.mask, self.reasons or ((self.message, self.mask),))

    def joined(self, other: Exclusion) -> Exclusion:
        """These nodes and ``other``'s, each node kept off for its own reason (this one's
        where both keep it)."""
        mine = self.reasons or ((self.message, self.mask),)
        theirs = other.reasons or ((other.message, other.mask),)
        rest = tuple((m, n & ~self.mask) for m, n in theirs)
        return Exclusion(
            self.mask | other.mask,
            self.message,
            self.name,
            (*mine, *(r for r in rest if r[1].any())),
        )


def _unschedulable(verdicts: Verdicts, total_nodes: int) -> Status:
    """Why no node is left: per filter and reason, the nodes it rejected that were still in
    (a reason given for several groups of nodes is counted once, over all of them)."""
    counts: dict[tuple[str, str], int] = {}
    pod_level: set[tuple[str, str]] = set()
    unresolvable = True
    emptied_by = ""
    for plugin, verdict, alive in verdicts:
        rejected = alive & ~verdict.feasible
        if not rejected.any():
            continue
        if not emptied_by and not (alive & verdict.feasible).any():
            emptied_by = plugin.name
        unresolvable = unresolvable and verdict.unresolvable
        for message, failing in verdict.failures:
            key = (plugin.name, message)
            counts[key] = counts.get(key, 0) + int(np.count_nonzero(rejected & failing))
            if verdict.pod_level:
                pod_level.add(key)
    reasons = tuple(
        Reason(plugin, message, n, (plugin, message) in pod_level)
        for (plugin, message), n in counts.items()
    )
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, reasons, plugin=emptied_by, total_nodes=total_nodes)


OneNode = tuple[FilterPlugin, "Callable[[ClusterState, PodSpec, slice], BoolArray | None] | None"]
Weighted = tuple[ScorePlugin, float]

REMEMBERED_SHAPES = 32
"""Pod shapes whose node-local scores a cycle keeps (each an ``(N,)`` array per plugin)."""


@dataclass(slots=True)
class _Remembered:
    """Node-local scores of one pod shape on one state: the node's generation when each was
    given (-1: never), and each node-local plugin's weighted score by its position; and of
    each plugin that keys nodes (:class:`~gpufleet.framework.protocols.NodeKeyed`), its
    score by node key."""

    seen: IntArray
    weighted: dict[int, FloatArray]
    by_key: dict[int, dict[Hashable, float]] = field(default_factory=dict)


FEW_STALE = 16
"""At most this many nodes to score again are scored by key: a key is read in Python (a
few microseconds), where one numpy pass over a few nodes costs tens — but over thousands
(a cycle's first pod) the pass is cheaper."""


def _by_key(
    plugin: ScorePlugin,
    state: ClusterState,
    pod: PodSpec,
    nodes: IntArray,
    known: dict[Hashable, float],
) -> FloatArray:
    """``plugin``'s scores of ``nodes``: for a few nodes of a plugin that keys them, each
    key scored once per pod shape and state, ``known`` holding those scored so far (a
    placement leaves its node like many others: in a cluster of one node type, its new row
    was most often seen before)."""
    key_of = getattr(plugin, "node_key", None)
    if key_of is None or nodes.size > FEW_STALE:
        return plugin.score(state, pod, nodes)
    keys = [key_of(state, node) for node in nodes.tolist()]
    missing = [j for j, key in enumerate(keys) if key not in known]
    if missing:
        scored = plugin.score(state, pod, nodes[missing]).tolist()
        for j, value in zip(missing, scored, strict=True):
            known[keys[j]] = value
    return np.array([known[key] for key in keys], dtype=np.float64)


NEEDS = ("placement", "volumes", "advertised_gpus")
"""The pod fields a plugin may say it ``needs`` (:class:`~gpufleet.framework.protocols.Gated`)."""


def pod_kind(pod: PodSpec) -> tuple[bool, bool, bool]:
    """Which of :data:`NEEDS` ``pod`` has."""
    return pod.placement is not None, bool(pod.volumes), pod.advertised_gpus > 0


def _applies(plugin: object, kind: tuple[bool, bool, bool]) -> bool:
    """Whether ``plugin`` judges a pod of ``kind``: it needs nothing, or a field it has."""
    needs = getattr(plugin, "needs", ())
    return not needs or any(has for name, has in zip(NEEDS, kind, strict=True) if name in needs)


def _expect(plugin: object, protocol: type[P], name: str, point: str) -> P:
    if not isinstance(plugin, protocol):
        raise ProfileError(f"plugin {name!r} cannot be used as a {point} plugin")
    return plugin
