"""TaintToleration (filter): the pod tolerates every NoSchedule/NoExecute taint of the node.

kube-scheduler's filter of the same name; its message names the first untolerated taint,
``node(s) had untolerated taint {key: value}``. Evicting pods removes no taint, so a
rejection is unresolvable.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "TaintToleration"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class TaintToleration:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        labels = state.node_labels
        if not labels.blocking_taints:
            return FilterVerdict.pass_all(state.size)
        tolerations = pod.constraint.tolerations if pod.constraint else ()
        blocked = np.zeros(state.size, dtype=np.bool_)
        failures: list[tuple[str, BoolArray]] = []
        for taint in labels.blocking_taints:
            if any(t.tolerates(taint) for t in tolerations):
                continue
            tainted = labels.taint_mask(taint) & ~blocked
            if tainted.any():
                failures.append((f"node(s) had untolerated taint {taint}", tainted))
                blocked |= tainted
        return FilterVerdict(~blocked, tuple(failures), unresolvable=True)

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        labels = state.node_labels
        tolerations = pod.constraint.tolerations if pod.constraint else ()
        ok = None
        for taint in labels.blocking_taints:
            if not any(t.tolerates(taint) for t in tolerations):
                free = ~labels.taint_mask(taint)[rows]
                ok = free if ok is None else ok & free
        return ok


def new(args: Args, handle: Handle) -> TaintToleration:
    return TaintToleration()
