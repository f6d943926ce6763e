"""The fill protocol of the FGD paper: place a workload pod by pod, never delete.

Per seed (the openb-fill benchmark definition, "Exact procedure"):

1. sort the pods by name and shuffle them;
2. tune the workload to ``inflate`` x the cluster's GPU capacity: below it, append copies
   (``<name>-tuned-<i>``) of pods drawn uniformly from the name-sorted list until the next
   one would overshoot — judged, as in the authors' simulator, by its per-GPU milli; above
   it, remove uniformly drawn pods until the total is at most the target;
3. place each pod once, in that order, with one scheduling cycle; a pod that fits nowhere
   fails, but its request still counts as arrived;
4. score ties go to the node of lowest rank in a random node order drawn per seed (the
   authors' kube-scheduler picks the smallest node name, and names carry a random prefix);
5. after every pod log arrived and allocated GPU milli and the fragment amount, and turn the
   logs into curves over arrived workload 0..130%.

The typical pods that define fragmentation are those of the workload before tuning.
Randomness: the seed spawns one generator for the order (and tie ranks) and one for the
policy's own choices, so that every policy sees the same pods in the same order for a seed.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence

import numpy as np

from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import Handle
from gpufleet.framework.runtime import Framework
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.fragmentation import FragmentIndex, typical_pods
from gpufleet.model.pod import PodSpec
from gpufleet.model.results import FillRun
from gpufleet.plugins.registry import PLUGINS
from gpufleet.scheduler.placement.place import Placement, commit, place
from gpufleet.sim.curves import discretise

Progress = Callable[[int], None]
PROGRESS_EVERY = 256
MAX_FILL_PODS = 200_000
"""The most pods one fill places by default (about 20 times what the largest openb workload
needs at its default inflate; the command line's ``GPUFLEET_MAX_FILL_PODS`` overrides it). A
workload of tiny GPU shares (a thousandth of a GPU each) would otherwise need millions to
fill a cluster."""


class FillTooLargeError(Exception):
    """A fill that would place more pods than its limit."""


def _too_many(
    count: int, pods: Sequence[PodSpec], capacity_milli: int, inflate: float
) -> FillTooLargeError:
    mean = sum(p.total_gpu_milli for p in pods) / len(pods) / 1000
    return FillTooLargeError(
        f"filling to {inflate:g} x the cluster's {capacity_milli / 1000:,.0f} GPUs takes more "
        f"than {count:,} pods of this workload (its pods ask {mean:.3g} GPU on average); set "
        "GPUFLEET_MAX_FILL_PODS to place more",
    )


def check_size(
    pods: Sequence[PodSpec], inflate: float, capacity_milli: int, limit: int = MAX_FILL_PODS
) -> None:
    """Raise :class:`FillTooLargeError` when tuning ``pods`` to ``inflate`` x capacity is
    expected to take more than ``limit`` pods (a uniform draw adds the workload's mean GPU
    milli per pod)."""
    total = sum(p.total_gpu_milli for p in pods)
    target = inflate * capacity_milli
    if inflate > 0 and 0 < total < target and len(pods) * target / total > limit:
        raise _too_many(limit, pods, capacity_milli, inflate)


def tune(
    pods: Sequence[PodSpec],
    inflate: float,
    capacity_milli: int,
    rng: np.random.Generator,
    limit: int = MAX_FILL_PODS,
) -> list[PodSpec]:
    """The arrival order of one fill run: shuffled, then tuned to ``inflate`` x capacity."""
    by_name = sorted(pods, key=lambda p: p.name)
    order = [by_name[i] for i in rng.permutation(len(by_name))]
    total = sum(p.total_gpu_milli for p in order)
    target = inflate * capacity_milli
    if inflate <= 0 or total == 0:
        return order
    check_size(pods, inflate, capacity_milli, limit)
    if total < target:
        tuned = 0
        while True:
            if len(order) >= limit:
                raise _too_many(limit, pods, capacity_milli, inflate)
            pod = by_name[int(rng.integers(len(by_name)))]
            if total + pod.gpu_milli > target:
                break
            total += pod.total_gpu_milli
            order.append(dataclasses.replace(pod, name=f"{pod.name}-tuned-{tuned}"))
            tuned += 1
    while total > target:
        pod = order.pop(int(rng.integers(len(order))))
        total -= pod.total_gpu_milli
    return order


def run_fill(
    nodes: Sequence[NodeSpec],
    pods: Sequence[PodSpec],
    profile: Profile,
    *,
    workload: str,
    seed: int,
    inflate: float = 1.3,
    progress: Progress | None = None,
    max_pods: int = MAX_FILL_PODS,
) -> FillRun:
    """One fill run of ``pods`` on ``nodes`` under ``profile``, of at most ``max_pods``
    arrivals (:class:`FillTooLargeError` beyond)."""
    started = time.perf_counter()
    order_seed, policy_seed = np.random.SeedSequence(seed).spawn(2)
    state = ClusterState(nodes)
    capacity = state.total_gpu_milli
    order_rng = np.random.default_rng(order_seed)
    arrivals = tune(pods, inflate, capacity, order_rng, max_pods)
    tie_rank = order_rng.permutation(state.size)
    fragments = FragmentIndex(typical_pods(pods))
    framework = Framework(
        profile, PLUGINS, Handle(np.random.default_rng(policy_seed), fragments, tie_rank)
    )

    events = len(arrivals) + 1
    arrived = np.zeros(events, dtype=np.float64)
    allocated = np.zeros(events, dtype=np.float64)
    fragment = np.zeros(events, dtype=np.float64)
    idle = np.zeros(events, dtype=np.float64)
    fragments.sync(state)
    fragment[0], idle[0] = fragments.total, fragments.total_idle
    arrived_milli = allocated_milli = failed = 0
    for i, pod in enumerate(arrivals, start=1):
        arrived_milli += pod.total_gpu_milli
        outcome = place(framework, state, pod)
        if isinstance(outcome, Placement):
            commit(state, outcome)
            allocated_milli += pod.total_gpu_milli
        else:
            failed += 1
        fragments.sync(state)
        arrived[i], allocated[i] = arrived_milli, allocated_milli
        fragment[i], idle[i] = fragments.total, fragments.total_idle
        if progress is not None and i % PROGRESS_EVERY == 0:
            progress(i)
    if progress is not None:
        progress(len(arrivals))

    gpus = state.total_gpus  # percent as the authors compute it: milli / GPUs / 10
    arrived_pct = arrived / gpus / 10.0
    with np.errstate(invalid="ignore", divide="ignore"):
        frag_ratio = np.where(idle > 0, fragment / idle * 100.0, np.nan)
    return FillRun(
        workload=workload,
        policy=profile.name,
        seed=seed,
        allocation_curve=discretise(arrived_pct, allocated / gpus / 10.0),
        frag_ratio_curve=discretise(arrived_pct, frag_ratio),
        failed_pods=failed,
        pods=len(arrivals),
        elapsed_s=time.perf_counter() - started,
    )
