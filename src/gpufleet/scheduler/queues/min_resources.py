"""A PodGroup's ``minResources``: a gang is not tried until the resources it names are there.

A PodGroup may say what its gang needs to start, as a resource list
(:attr:`~gpufleet.model.workload.GroupSpec.min_resources`). Before the cycle places such a
gang it asks two things, each of only the resources the PodGroup names:

* **the cluster** (scheduler-plugins' coscheduling, PreFilter): do the nodes' free resources,
  summed, hold them? What the gang's own running pods hold counts as free, since the list
  is the whole gang's. Every node counts, as the plugin sums every node it lists; placement
  judges the rest (taints, affinity, whether the pods fit on the nodes one by one);
* **the queues** (Volcano's enqueue, its proportion plugin): for a PodGroup whose
  vocabulary asks it (``min_resources_in_queue``), does each queue on its path have that
  much room under its limit? The gang's own running pods are not counted against it.

A gang that fails either is not tried at all — no placement, no eviction on its behalf:
coscheduling answers UnschedulableAndUnresolvable, so that kube-scheduler does not preempt
for it, and Volcano's preempt and reclaim pass over a PodGroup its enqueue left pending.

The free resources are one sum over the nodes' free vectors, kept until the cluster state
next changes (:attr:`~gpufleet.model.rows.NodeRows.changes`): a cycle that binds nothing
sums once, however many gangs it judges.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.arrays import MILLI
from gpufleet.model.workload import request_vector, vector
from gpufleet.scheduler.api.outcome import Why, WhyCode, why
from gpufleet.scheduler.state.fairshare import EPS

if TYPE_CHECKING:
    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.workload import GroupSpec
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.state.ledger import Ledger


def free_resources(ledger: Ledger) -> FloatArray:
    """The cluster's free GPUs (a partly used GPU by its free part), milli-CPU and MiB:
    ``sum(gpu_idle) / 1000, sum(cpu_free), sum(memory_free)`` over every node."""
    state = ledger.state
    return vector(
        float(state.gpu_idle.sum()) / MILLI,
        float(state.cpu_free.sum()),
        float(state.memory_free.sum()),
    )


def short_of(need: FloatArray, have: FloatArray) -> BoolArray:
    """Per resource: asked for (``need > 0``) and more than ``have``."""
    return (need > 0) & (need > have + EPS)


class MinResources:
    """Judges gangs by their PodGroups' ``minResources`` over one ledger (module doc)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self._free = vector()
        self._version: tuple[int, int] | None = None

    def free(self) -> FloatArray:
        """:func:`free_resources`, summed again only after the state changed."""
        state = self.ledger.state
        version = (state.uid, state.changes)
        if version != self._version:
            self._free, self._version = free_resources(self.ledger), version
        return self._free

    def _group(self, job: Job) -> GroupSpec | None:
        group = self.ledger.groups.get(job.key)
        return group if group is not None and group.min_resources is not None else None

    def _own(self, job: Job) -> FloatArray:
        """What the gang's running pods hold (counted as theirs to start with)."""
        running = self.ledger.running
        total = vector()
        for key in self.ledger.gang_running.get(job.key, ()):
            total += request_vector(running[key].spec)
        return total

    def cluster_short(self, job: Job) -> Why | None:
        """Why the cluster cannot hold ``job``'s minResources now (None: it can, or its
        PodGroup names none)."""
        group = self._group(job)
        if group is None:
            return None
        need = np.array(group.min_resources, dtype=np.float64)
        have = self.free() + self._own(job)
        over = short_of(need, have)
        if not over.any():
            return None
        return why(
            WhyCode.MIN_RESOURCES,
            gang=job.key,
            min_resources=_values(need),
            free=_values(have),
            over=tuple(bool(o) for o in over),
        )

    def queue_short(self, job: Job) -> Why | None:
        """Why a queue on ``job``'s path has no room for its minResources under its limit
        (None: each has, or its PodGroup does not ask it to be judged so)."""
        group = self._group(job)
        if group is None or not group.min_resources_in_queue:
            return None
        need = np.array(group.min_resources, dtype=np.float64)
        own = self._own(job)
        tree, alloc = self.ledger.tree, self.ledger.alloc
        for q in tree.paths[job.queue]:
            limit = tree.queues[q].limit
            in_use = alloc[q] - own
            over = short_of(need, limit - in_use)
            if over.any():
                return why(
                    WhyCode.MIN_RESOURCES_QUEUE,
                    gang=job.key,
                    queue=q,
                    min_resources=_values(need),
                    limit=_values(limit),
                    in_use=_values(in_use),
                    over=tuple(bool(o) for o in over),
                )
        return None


def _values(values: FloatArray) -> tuple[float, ...]:
    """A resource vector as a reason's fact (GPUs, milli-CPU, MiB)."""
    return tuple(float(v) for v in values)
