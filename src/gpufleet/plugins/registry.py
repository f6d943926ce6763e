"""The catalogue: every plugin and every policy, registered in one place.

A placement policy (:data:`POLICIES`) is a :class:`~gpufleet.framework.profile.Profile`
over the plugins registered here. The six published policies are defined as in the FGD
paper's experiments (the openb-fill benchmark definition): the same filters for all,
exactly one score plugin, and each with its own GPU choice inside the node. ``gpufleet`` is
the project's own (see ``GPUFLEET_FGD_WEIGHT``). A replay policy (:data:`REPLAY_POLICIES`)
is one of these placements run in time, with the cycle's settings that make it behave like
a scheduler. The composition root (``compose.py``) hands these registrations to the core.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from gpufleet.framework.profile import Profile
from gpufleet.framework.registry import PluginFactory, Registry
from gpufleet.plugins import (
    best_fit,
    dot_product,
    fgd,
    gpu_choice,
    gpu_clustering,
    gpu_fit,
    gpu_packing,
    inter_pod_affinity,
    kube_default,
    mig_fit,
    model_reserve,
    node_affinity,
    node_ports,
    node_resources,
    node_volume_limits,
    numa_align,
    pod_topology_spread,
    random_score,
    share_plan,
    stranding,
    taint_toleration,
    volume_binding,
    volume_restrictions,
    volume_zone,
    whole_gpus,
)


def plugin_registry() -> Registry[PluginFactory]:
    registry: Registry[PluginFactory] = Registry("plugin")
    registry.register(node_resources.NAME, partial(node_resources.new, node_resources.Args()))
    registry.register(gpu_fit.NAME, partial(gpu_fit.new, gpu_fit.Args()))
    registry.register(node_affinity.NAME, partial(node_affinity.new, node_affinity.Args()))
    registry.register(mig_fit.NAME, partial(mig_fit.new, mig_fit.Args()))
    registry.register(numa_align.NAME, partial(numa_align.new, numa_align.Args()))
    registry.register(taint_toleration.NAME, partial(taint_toleration.new, taint_toleration.Args()))
    registry.register(node_ports.NAME, partial(node_ports.new, node_ports.Args()))
    for module in (volume_restrictions, node_volume_limits, volume_binding, volume_zone):
        registry.register(module.NAME, partial(module.new, module.Args()))
    registry.register(
        pod_topology_spread.NAME, partial(pod_topology_spread.new, pod_topology_spread.Args())
    )
    registry.register(
        inter_pod_affinity.NAME, partial(inter_pod_affinity.new, inter_pod_affinity.Args())
    )
    registry.register(gpu_choice.BEST_FIT, partial(gpu_choice.new_best_fit, gpu_choice.Args()))
    registry.register(gpu_choice.RANDOM, partial(gpu_choice.new_random, gpu_choice.Args()))
    registry.register(random_score.NAME, partial(random_score.new, random_score.Args()))
    registry.register(whole_gpus.NAME, partial(whole_gpus.new, whole_gpus.Args()))
    registry.register(dot_product.NAME, partial(dot_product.new, dot_product.Args()))
    registry.register(gpu_clustering.NAME, partial(gpu_clustering.new, gpu_clustering.Args()))
    registry.register(gpu_packing.NAME, partial(gpu_packing.new, gpu_packing.Args()))
    registry.register(best_fit.NAME, partial(best_fit.new, best_fit.Args()))
    registry.register(fgd.NAME, partial(fgd.new, fgd.Args()))
    registry.register(fgd.GPU_CHOICE, partial(fgd.new_gpu_choice, fgd.Args()))
    registry.register(stranding.NAME, partial(stranding.new, stranding.Args()))
    registry.register(model_reserve.NAME, partial(model_reserve.new, model_reserve.Args()))
    registry.register(share_plan.NAME, partial(share_plan.new, share_plan.Args()))
    registry.register(share_plan.GPU_CHOICE, partial(share_plan.new_gpu_choice, share_plan.Args()))
    registry.register(
        kube_default.LEAST_ALLOCATED,
        partial(kube_default.new_least_allocated, kube_default.Args()),
    )
    registry.register(
        kube_default.BALANCED_ALLOCATION,
        partial(kube_default.new_balanced_allocation, kube_default.Args()),
    )
    return registry


FIT_FILTERS = (
    node_affinity.NAME,
    taint_toleration.NAME,
    node_resources.NAME,
    gpu_fit.NAME,
    mig_fit.NAME,
    numa_align.NAME,
    node_ports.NAME,
    volume_restrictions.NAME,
    node_volume_limits.NAME,
    volume_binding.NAME,
    volume_zone.NAME,
    pod_topology_spread.NAME,
    inter_pod_affinity.NAME,
)
"""Every profile's filters: constraints (affinity, taints, GPU model), capacity, and the
pods already there (host ports, volumes, topology spread, inter-pod affinity) —
kube-scheduler's filters, each a plugin of the same name, in its order."""
_PUBLISHED_WEIGHT = 1000

PREFERENCE_WEIGHT = 2
"""kube-scheduler's default profile weighs the InterPodAffinity and PodTopologySpread
scores (0..100, pods' preferences) twice its resource scores (0..100, weight 1). Each
policy here keeps that ratio against its own main score: ``2 x`` the weight of one point of
it (kube-default's resource scores 1, a published policy's 1000, gpufleet's FGD 10)."""


WHOLE_GPU_WEIGHT = 1_000_000
"""gpufleet's policies put a pod asking whole GPUs on whole physical GPUs before MIG slices
or time-sliced replicas advertised as ``nvidia.com/gpu`` (:mod:`gpufleet.plugins.whole_gpus`):
one point of that score outweighs any sum of the others (each policy's scores add up to well
under 10**6 a point). kube-default, stock kube-scheduler, has no such score."""


def _preferences(point: int, *, whole: bool = True) -> tuple[tuple[str, int], ...]:
    """The preference scores for a policy whose main score weighs ``point`` per point, and
    (``whole``) whole GPUs before divided ones."""
    weight = PREFERENCE_WEIGHT * point
    pods = ((inter_pod_affinity.NAME, weight), (pod_topology_spread.NAME, weight))
    return (*pods, (whole_gpus.NAME, WHOLE_GPU_WEIGHT)) if whole else pods


GPUFLEET_FGD_WEIGHT = 10
"""gpufleet's policy: ``10 x FGD score + StrandedGpuScore``.

FGD's score is an integer 0..100 (a truncated sigmoid of the fragment reduction in GPUs), so
one FGD point weighs 10 milli-GPU of stranding: a placement FGD ranks higher wins unless
the other strands noticeably less GPU behind exhausted CPU or memory, and among nodes FGD
ranks equal — most of them, late in a fill — the one that strands the least wins. The weight
was chosen by measurement on four openb workloads: with FGD strictly first (weight 1000)
the stranding term only breaks ties and most of the gain on multi-GPU workloads is lost;
weights 1 and 10 measured alike.
"""

GPUFLEET_PLAN_WEIGHT = 300
"""gpufleet's share plan (:mod:`gpufleet.plugins.share_plan`, tiers 0, 1, 2) on top.

One tier weighs 300: 30 FGD points or 300 milli-GPU of stranding. A share goes where the
workload's offline packing would put it unless FGD and stranding disagree strongly. Chosen
by measurement on seven openb workloads (seeds 42-43): 300 and 10,000 (the plan always
first) within 0.4 points of unallocated GPU; the plan's GPU choice without its score kept
less than half of the gain."""


GPUFLEET_RESERVE_WEIGHT = 1
"""gpufleet's reserve for pods that name GPU models (:mod:`gpufleet.plugins.model_reserve`).

Its score is milli-GPU eaten into a model's reserve, like the stranding score's milli-GPU."""


def policy_registry() -> Registry[Profile]:
    policies: Registry[Profile] = Registry("policy")
    for profile in (
        Profile(
            "kube-default",
            FIT_FILTERS,
            (
                (kube_default.LEAST_ALLOCATED, 1),
                (kube_default.BALANCED_ALLOCATION, 1),
                *_preferences(1, whole=False),
            ),
            gpu_choice.BEST_FIT,
            whole_gpus_only=True,
            description="stock kube-scheduler scoring; GPUs only whole (device plugin)",
        ),
        Profile(
            "random",
            FIT_FILTERS,
            ((random_score.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            gpu_choice.RANDOM,
            description="a uniformly random feasible node and GPU",
        ),
        Profile(
            "dot-product",
            FIT_FILTERS,
            ((dot_product.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            gpu_choice.BEST_FIT,
            description="Tetris dot product of free and requested CPU/GPU",
        ),
        Profile(
            "gpu-clustering",
            FIT_FILTERS,
            ((gpu_clustering.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            gpu_choice.BEST_FIT,
            description="GPU pods of one kind together",
        ),
        Profile(
            "gpu-packing",
            FIT_FILTERS,
            ((gpu_packing.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            gpu_choice.BEST_FIT,
            description="used GPUs first, then used nodes, then free nodes",
        ),
        Profile(
            "best-fit",
            FIT_FILTERS,
            ((best_fit.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            gpu_choice.BEST_FIT,
            description="least CPU and GPU left over",
        ),
        Profile(
            "fgd",
            FIT_FILTERS,
            ((fgd.NAME, _PUBLISHED_WEIGHT), *_preferences(_PUBLISHED_WEIGHT)),
            fgd.GPU_CHOICE,
            description="fragmentation gradient descent (USENIX ATC '23)",
        ),
        Profile(
            "gpufleet",
            FIT_FILTERS,
            (
                (share_plan.NAME, GPUFLEET_PLAN_WEIGHT),
                (fgd.NAME, GPUFLEET_FGD_WEIGHT),
                (stranding.NAME, 1),
                (model_reserve.NAME, GPUFLEET_RESERVE_WEIGHT),
                *_preferences(GPUFLEET_FGD_WEIGHT),
            ),
            share_plan.GPU_CHOICE,
            description=(
                "shares where an offline packing of the workload puts them, then FGD's "
                "fragment gradient and the least GPU stranded behind CPU/memory"
            ),
        ),
    ):
        policies.register(profile.name, profile)
    return policies


@dataclass(frozen=True, slots=True)
class ReplayPolicy:
    """How the one cycle is configured to behave like a scheduler over time."""

    name: str
    placement: str
    """Placement policy (a name of :data:`POLICIES`)."""
    gangs: bool
    """Place a job's pods all or nothing (else one at a time)."""
    tenant_queues: bool
    """One queue per tenant with fair shares (else one queue for everyone)."""
    actions: tuple[str, ...] = ()
    strict_fifo: bool = False
    starvation_after_s: float = math.inf
    topology: bool = False
    """Gangs prefer one domain of the cluster's widest topology level."""
    reads_checkpoints: bool = True
    """Pods say when they checkpoint (``gpufleet.io/checkpoint-interval``), so the cycle's
    victims are judged by the work since their last checkpoint; else by their whole run."""


REPLAY_PARAMETERS: Mapping[str, str] = {
    "actions": "actions",
    "reserveAfter": "starvation_after_s",
    "topology": "topology",
    "readsCheckpoints": "reads_checkpoints",
}
"""The parameters of a replay policy that a study or ``simulate --param`` may set, by the
name they are written with (``docs/sweep.md``): the evicting actions in order (``actions``,
names of the cycle's actions; none: no evictions), how long a job waits before nodes are
reserved for it (``reserveAfter``, seconds; infinite: never), whether gangs prefer one
domain of the widest topology level (``topology``), whether victims are judged by the work
since their last checkpoint (``readsCheckpoints``)."""


def tuned(policy: ReplayPolicy, parameters: Mapping[str, object], name: str) -> ReplayPolicy:
    """``policy`` with ``parameters`` (:data:`REPLAY_PARAMETERS`, values already checked)
    set, called ``name``."""
    unknown = sorted(set(parameters) - set(REPLAY_PARAMETERS))
    if unknown:
        raise ValueError(f"unknown replay parameter {unknown[0]!r}")
    fields: dict[str, Any] = {REPLAY_PARAMETERS[k]: v for k, v in parameters.items()}
    return replace(policy, name=name, **fields)


RESERVE_AFTER_S = 86_400.0
"""gpufleet's replay reserves nodes for the jobs waiting longer than this: on Philly, a
day keeps every job size's p95 wait under kube-default's at the least cost in mean wait
(thresholds from 30 minutes to a day measured, docs/benchmarks.md)."""


def replay_registry(placements: Registry[Profile]) -> Registry[ReplayPolicy]:
    """The replay's policies, configurations of the one cycle rather than code paths:

    * ``kube-default`` — kube-scheduler: pods placed one at a time, no gangs (a job may hold
      some of its GPUs while the rest of it waits), whole GPUs, one queue, no preemption;
    * ``fifo-gang`` — gangs all-or-nothing, one queue in strict first-come-first-served
      order (Kueue's StrictFIFO), best-fit placement, no preemption;
    * ``gang-backfill`` — the baseline a user would pick first: one queue per tenant served
      in gpufleet's fair-share order, gangs all-or-nothing, every job that fits started
      (greedy backfill), best-fit placement, no reservations and no evictions;
    * ``gpufleet`` — one queue per tenant served in fair-share order, gangs with topology
      preference, backfill, consolidation (of pods that lose at most 30 minutes of work,
      ``scheduler/room/consolidate.py``), preemption, and reservations with backfill for the
      jobs that have waited over a day, the oldest first (``scheduler/queues/holds.py``),
      so that no job size starves. No reclaim, as measured on Philly (docs/benchmarks.md):
      a reclaimed job reruns from its last checkpoint, none in that trace, and over the
      full trace reclaim threw away 366,624 GPU-hours (a fifth of the cluster's time)
      while the mean wait tripled.

    Each names a placement policy of ``placements`` (an unknown one fails here).
    """
    policies: Registry[ReplayPolicy] = Registry("replay policy")
    for policy in (
        ReplayPolicy("kube-default", "kube-default", gangs=False, tenant_queues=False),
        ReplayPolicy("fifo-gang", "best-fit", gangs=True, tenant_queues=False, strict_fifo=True),
        ReplayPolicy("gang-backfill", "best-fit", gangs=True, tenant_queues=True),
        ReplayPolicy(
            "gpufleet",
            "gpufleet",
            gangs=True,
            tenant_queues=True,
            actions=("consolidate", "preempt"),
            starvation_after_s=RESERVE_AFTER_S,
            topology=True,
        ),
    ):
        if policy.placement not in placements:
            raise ValueError(f"replay policy {policy.name}: unknown placement {policy.placement!r}")
        policies.register(policy.name, policy)
    return policies


PLUGINS = plugin_registry()
POLICIES = policy_registry()
REPLAY_POLICIES = replay_registry(POLICIES)
