"""A profile's plugins, instantiated and run in kube-scheduler's order.

:class:`Framework` runs filters (narrowing a boolean mask over all nodes; the nodes each
filter rejected are counted per reason only when no node is left), sums weighted scores over
the remaining nodes, selects the best node and asks the GPU chooser for GPUs. Among equally
scored nodes the one of lowest tie rank wins — as in the FGD authors' simulator, whose
kube-scheduler picks the smallest node name — so equal nodes are filled one after another
rather than evenly. It holds no cluster state of its own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import (
    FilterPlugin,
    FilterVerdict,
    GpuChooser,
    Handle,
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
        self.chooser = _expect(
            instances[profile.gpu_chooser],
            GpuChooser,  # type: ignore[type-abstract]
            profile.gpu_chooser,
            "gpu choice",
        )

    def prepare(self, pod: PodSpec) -> PodSpec:
        """The pod as this profile places it (whole GPUs under device-plugin semantics)."""
        return pod.as_whole_gpus() if self.profile.whole_gpus_only else pod

    def run_filters(
        self, state: ClusterState, pod: PodSpec, held: Held | None = None
    ) -> FilterResult:
        """Feasible nodes for ``pod``; ``held`` nodes are off limits (reserved by the cycle)."""
        alive = np.ones(state.size, dtype=np.bool_)
        verdicts: list[tuple[FilterPlugin | Held, FilterVerdict, BoolArray]] = []
        if held is not None:
            verdicts.append((held, held.filter(state, pod), alive))
            alive = ~held.mask
        for plugin in self.filters:
            verdict = plugin.filter(state, pod)
            if verdict.everything:
                continue
            verdicts.append((plugin, verdict, alive))
            alive = alive & verdict.feasible
        nodes = np.flatnonzero(alive)
        if nodes.size:
            return FilterResult(nodes, Status(Code.SUCCESS, total_nodes=state.size))
        return FilterResult(nodes, _unschedulable(verdicts, state.size))

    def node_reasons(self, state: ClusterState, pod: PodSpec) -> list[tuple[str, ...]]:
        """Per node, every reason each filter rejects it for (empty: it fits) — for explain."""
        reasons: list[list[str]] = [[] for _ in range(state.size)]
        for plugin in self.filters:
            for message, failing in plugin.filter(state, pod).failures:
                for node in np.flatnonzero(failing):
                    reasons[node].append(message)
        return [tuple(r) for r in reasons]

    def run_scores(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        total = np.zeros(nodes.size, dtype=np.float64)
        for plugin, weight in self.scores:
            total += weight * plugin.score(state, pod, nodes)
        return total

    def select_host(self, nodes: IntArray, totals: FloatArray) -> int:
        """The best-scored node; among equals, the one of lowest tie rank."""
        best = nodes[totals == totals.max()]
        if best.size == 1 or self.tie_rank is None:
            return int(best[0])
        return int(best[np.argmin(self.tie_rank[best])])


@dataclass(frozen=True, slots=True, eq=False)
class Held(ArrayValue):
    """Nodes the cycle holds back (for a starving job), as a filter with its own reason
    (compared and hashed by value, :class:`ArrayValue`)."""

    mask: BoolArray
    message: str
    name: str = "Reservation"

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:  # noqa: ARG002 (the filter protocol)
        return FilterVerdict(~self.mask, ((self.message, self.mask),))


def _unschedulable(
    verdicts: list[tuple[FilterPlugin | Held, FilterVerdict, BoolArray]], total_nodes: int
) -> Status:
    """Why no node is left: per filter and reason, the nodes it rejected that were still in."""
    reasons: list[Reason] = []
    unresolvable = True
    emptied_by = ""
    for plugin, verdict, alive in verdicts:
        rejected = alive & ~verdict.feasible
        if not rejected.any():
            continue
        if not emptied_by and not (alive & verdict.feasible).any():
            emptied_by = plugin.name
        unresolvable = unresolvable and verdict.unresolvable
        reasons.extend(
            Reason(plugin.name, message, int(np.count_nonzero(rejected & failing)))
            for message, failing in verdict.failures
        )
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE
    return Status(code, tuple(reasons), plugin=emptied_by, total_nodes=total_nodes)


def _expect(plugin: object, protocol: type[P], name: str, point: str) -> P:
    if not isinstance(plugin, protocol):
        raise ProfileError(f"plugin {name!r} cannot be used as a {point} plugin")
    return plugin
