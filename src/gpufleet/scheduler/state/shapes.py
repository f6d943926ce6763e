"""The workload a policy measures fragmentation against, and the plugins built for it.

FGD's score and gpufleet's share plan weigh a node's state against the *typical pods* of
the workload. A replay knows its workload (the trace's jobs) and fixes it; a cache of a
live cluster counts its pods' requests as they come and go. The policy's
:class:`~gpufleet.framework.runtime.Framework` is kept while that workload is the same, so
that its per-node caches (FGD's fragment terms) refresh only the nodes that changed.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Protocol

from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.fragmentation import FragmentIndex, typical_pods

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    import numpy as np

    from gpufleet.framework.profile import Profile
    from gpufleet.framework.registry import PluginFactory, Registry
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo


class Policies(Protocol):
    """What a framework is built from: the placement plugins and the policies that profile
    them (the edges' :class:`~gpufleet.scheduler.cycle.components.Components` has both)."""

    @property
    def plugins(self) -> Registry[PluginFactory]: ...
    @property
    def policies(self) -> Registry[Profile]: ...


def make_framework(
    parts: Policies, policy: str, workload: Sequence[PodSpec], rng: np.random.Generator
) -> Framework:
    """The plugins of ``policy``, FGD's fragmentation measured against ``workload``."""
    handle = Handle(rng, FragmentIndex(typical_pods(workload)), None)
    return Framework(parts.policies[policy], parts.plugins, handle)


class WorkloadShapes:
    """Pods' requests counted (or a fixed workload), and the frameworks built for them."""

    def __init__(self, fixed: Sequence[PodSpec] | None) -> None:
        self.fixed = tuple(fixed) if fixed is not None else None
        self._counts: Counter[Hashable] = Counter()
        """Every pod's request (name aside), counted."""
        self._exemplar: dict[Hashable, PodSpec] = {}
        """A pod spec of each request counted."""
        self._frameworks: dict[Hashable, Framework] = {}
        self.version = 0
        """Bumped whenever :meth:`framework` may answer otherwise than it did: the counted
        workload changed, or another framework was built."""

    def count(self, old: PodInfo | None, new: PodInfo | None) -> None:
        """A pod was ``old`` and is ``new`` (None: absent)."""
        if self.fixed is not None:
            return  # the workload does not follow the pods
        if old is not None and new is not None and old.spec is new.spec:
            return  # counted already
        self.version += 1
        if old is not None:
            self._counts[old.spec.request_key] -= 1
        if new is not None:
            self._counts[new.spec.request_key] += 1
            self._exemplar.setdefault(new.spec.request_key, new.spec)

    def specs(self) -> list[PodSpec]:
        """The workload: the fixed one, else one spec per counted pod (in a stable order)."""
        if self.fixed is not None:
            return list(self.fixed)
        counted = sorted((repr(k), n, self._exemplar[k]) for k, n in self._counts.items() if n)
        return [spec for _, n, spec in counted for _ in range(n)]

    def framework(
        self, components: Policies, policy: str, state: ClusterState, rng: np.random.Generator
    ) -> Framework | None:
        """The policy's plugins for the workload as it is (None: no pods, nothing to place);
        a share sized by GPU memory counts at its least share on ``state``."""
        shapes = None
        if self.fixed is None:
            shapes = frozenset((k, n) for k, n in self._counts.items() if n)
        key: Hashable = (policy, shapes)
        known = self._frameworks.get(key)
        if known is None:
            workload = [state.demand(spec) for spec in self.specs()]
            if not workload:
                return None
            self._frameworks.clear()  # one at a time: the workload it measured is gone
            self.version += 1
            known = self._frameworks[key] = make_framework(components, policy, workload, rng)
        return known
