"""NumaAlign (filter): a pod that pins CPUs gets its GPUs and CPUs from one NUMA zone.

On nodes whose kubelet runs the topology manager's ``single-numa-node`` policy, a
Guaranteed pod with whole CPUs (pinned by the static CPU manager) is admitted only if one
NUMA zone has both its GPUs and its CPUs; elsewhere the kubelet would reject it
(TopologyAffinityError) after the scheduler bound it. Zones come from the node's
NodeResourceTopology. Other pods and other nodes pass; the GPU choice still prefers one
zone for every multi-GPU pod (:func:`gpufleet.plugins.gpu_pick.first_free_gpus`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.framework.protocols import FilterVerdict, Handle, Rows
from gpufleet.model.arrays import BoolArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.pod import PodSpec

NAME = "NumaAlign"
MESSAGE = "node(s) cannot fit the pod's GPUs and pinned CPUs in one NUMA node"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


class NumaAlign:
    name = NAME

    def filter(self, state: ClusterState, pod: PodSpec) -> FilterVerdict:
        ok = self.fits_rows(state, pod, slice(None))
        if ok is None:
            return FilterVerdict.pass_all(state.size)
        return FilterVerdict(ok, ((MESSAGE, ~ok),))

    def fits_rows(self, state: ClusterState, pod: PodSpec, rows: Rows) -> BoolArray | None:
        if not (pod.exclusive_cpu and pod.num_gpu):
            return None
        single = state.single_numa[rows]
        if not single.any():
            return None
        return ~single | state.numa_aligned(pod, rows)


def new(args: Args, handle: Handle) -> NumaAlign:
    return NumaAlign()
