"""PlannedShareScore and GpuPlannedShare: put GPU shares together the way an offline
packing of the workload would.

Pods that ask for part of a GPU are placed online, one at a time, in arrival order. Best
fit (the tightest GPU that holds the share) is what online packing usually does, and on
the openb traces gpufleet's placement was already as good as best fit on one flat pool of
GPUs; what it leaves is the gap between online and offline packing. Offline, best-fit
decreasing puts shares together in complementary sets (a 650 with a 320, a 590 with a
370, two 470s, an 810 with a 160); online, a share that arrives before its complement
fills the gap a later, larger share needed (a 320 next to a 470 leaves 210 that no 350 or
650 can use).

The workload is known in advance as its typical pods (FGD's target workload, with their
frequencies). The plan: take the expected number of pods of every share size that fill the
cluster's GPUs (``frequency x GPUs x 1000 / mean milli-GPU per pod``), pack them offline
with best-fit decreasing, and remember which shares each packed GPU holds. A GPU whose
shares add up to ``used`` milli has a *planned partner* for a share ``s`` when some packed
GPU holds shares that add up to ``used`` and, besides them, one of size ``s``:

    planned[used, s] = exists packed GPU P, sub-multiset A of P with sum(A) = used and
                       s in P - A

``planned[0, s]`` holds for every size some packed GPU has: its shares arrive in any order,
so any of them may be the first on its GPU. (Opening GPUs only with the largest share of a
packed GPU measured alike: better on some workloads, worse on others.)

The score of a node for a share ``s`` is a tier:

    2  the node has a GPU with ``used > 0``, room for ``s`` and planned[used, s]
    1  else, planned[0, s] and the node has a fully free GPU
    0  otherwise (no planned place here: the other scores decide, as without a plan)

and inside the chosen node the share takes, in that order, the tightest GPU with a planned
partner, the first fully free GPU (when planned[0, s]), or the tightest GPU that holds it.
Pods that are not shares score 0 everywhere and take whole GPUs as the device plugin hands
them out; so do shares that pin whole CPUs (their NUMA zone decides the GPU). Shares of a
size the typical pods do not have are never planned, so an unseen workload falls back to
the other scores and best fit.

When pods name GPU models, each pool of models (:mod:`gpufleet.plugins.model_pools`: the
models that expect the same mix of pods) has its own plan, of the shares expected there:
typical pod ``k`` counts ``fraction[pool, k]`` of its pods. A node is scored, and its GPU
chosen, with its pool's plan. With no constraint the cluster is one pool and the plan the
one above.

The plan is stateless: it reads only the free milli-GPU of each GPU, so it holds when pods
are deleted, evicted or placed by someone else. It is built on first use, from the typical
pods and the cluster's GPUs per model (no file, seed or workload name is involved).
"""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass

import numpy as np

from gpufleet.framework.protocols import Handle
from gpufleet.model.arrays import MILLI, BoolArray, FloatArray, IntArray
from gpufleet.model.cluster import ClusterState
from gpufleet.model.fragmentation import TypicalPods
from gpufleet.model.packing import best_fit_decreasing
from gpufleet.model.pod import PodSpec
from gpufleet.plugins.gpu_pick import first_free_gpus, tightest_gpu
from gpufleet.plugins.model_pools import PoolCache, Pools

NAME = "PlannedShareScore"
GPU_CHOICE = "GpuPlannedShare"


@dataclass(frozen=True, slots=True)
class Args:
    """No options."""


def share_plan(typical: TypicalPods, gpus: int, fraction: FloatArray | None = None) -> BoolArray:
    """``planned[used, s]`` (``(1001, 1001)`` bool) for a cluster of ``gpus`` GPUs.

    ``fraction[k]`` is the part of typical pod ``k``'s pods the planned GPUs expect (a
    pool of GPU models, :mod:`gpufleet.plugins.model_pools`); all of them when None.
    """
    planned = np.zeros((MILLI + 1, MILLI + 1), dtype=np.bool_)
    mean = float((typical.prob * typical.num_gpu * typical.gpu_milli).sum())
    if gpus <= 0 or mean <= 0:
        return planned
    expected_pods = gpus * MILLI / mean
    prob = typical.prob if fraction is None else typical.prob * fraction
    share = (typical.num_gpu == 1) & (typical.gpu_milli < MILLI)
    frequency: Counter[int] = Counter()
    for size, p in zip(typical.gpu_milli[share].tolist(), prob[share].tolist(), strict=True):
        frequency[size] += p
    shares = [s for s, p in sorted(frequency.items()) for _ in range(round(p * expected_pods))]
    for packed, _ in best_fit_decreasing(shares):
        sizes = Counter(packed)
        for taken in itertools.product(*(range(n + 1) for n in sizes.values())):
            used = sum(t * s for t, s in zip(taken, sizes, strict=True))
            for s, t, n in zip(sizes, taken, sizes.values(), strict=True):
                if t < n:
                    planned[used, s] = True
    return planned


class SharePlan:
    """Both the score and the GPU choice, over one plan per pool of GPU models, built on
    first use."""

    def __init__(self, name: str, typical: TypicalPods) -> None:
        self.name = name
        self.typical = typical
        self._pools = PoolCache(typical)
        self._plans: tuple[Pools, BoolArray] | None = None

    def plan(self, state: ClusterState) -> tuple[Pools, BoolArray]:
        """The pools of ``state`` and ``planned[pool, used, s]``."""
        pools, changed = self._pools.get(state)
        if changed or self._plans is None:
            gpus = int(state.total_gpus)
            plans = np.stack(
                [share_plan(self.typical, gpus, pools.fraction[p]) for p in range(pools.size)]
            )
            self._plans = (pools, plans)
        return self._plans

    def score(self, state: ClusterState, pod: PodSpec, nodes: IntArray) -> FloatArray:
        if not _planned(pod):
            return np.zeros(nodes.size, dtype=np.float64)
        pools, plans = self.plan(state)
        planned = plans[:, :, pod.gpu_milli]  # (pools, used)
        pool = pools.of_nodes(state, nodes)
        free = state.gpu_free[nodes]
        present = state.gpu_present[nodes]
        fits = (free >= pod.gpu_milli) & (free < MILLI)
        partner = present & fits & planned[pool[:, None], MILLI - free]
        opens = planned[pool, 0] & (present & (free == MILLI)).any(axis=1)
        return np.where(partner.any(axis=1), 2.0, np.where(opens, 1.0, 0.0))

    def choose_gpus(self, state: ClusterState, pod: PodSpec, node: int) -> tuple[int, ...]:
        if not pod.is_gpu_share:
            return first_free_gpus(state, pod, node)
        if not _planned(pod):
            return (tightest_gpu(state, pod, node),)
        pools, plans = self.plan(state)
        planned = plans[int(pools.of_nodes(state, np.array([node]))[0]), :, pod.gpu_milli]
        free = state.node_gpu_free(node)
        partner = _partners(planned, free, pod.gpu_milli)
        if partner.any():
            return (int(np.argmin(np.where(partner, free, MILLI + 1))),)
        if planned[0] and (free == MILLI).any():
            return (int(np.flatnonzero(free == MILLI)[0]),)
        return (tightest_gpu(state, pod, node),)


def _partners(planned: BoolArray, free: IntArray, share: int) -> BoolArray:
    """Which GPUs of ``free`` (free milli) are planned partners of a ``share``: partly
    used, room for it, and ``planned`` (the plan's column for that size) at their use."""
    return (free >= share) & (free < MILLI) & planned[MILLI - free]


def _planned(pod: PodSpec) -> bool:
    """Whether the plan places ``pod``: a share that does not pin whole CPUs."""
    return pod.is_gpu_share and not pod.exclusive_cpu


def _typical(handle: Handle) -> TypicalPods:
    if handle.fragments is None:
        raise ValueError("the share plan needs the target workload (typical pods) in the handle")
    return handle.fragments.typical


def new(args: Args, handle: Handle) -> SharePlan:
    return SharePlan(NAME, _typical(handle))


def new_gpu_choice(args: Args, handle: Handle) -> SharePlan:
    return SharePlan(GPU_CHOICE, _typical(handle))
