"""Starvation holds: nodes kept free for a job that has waited too long.

A job that has waited past the starvation threshold and still does not fit holds, until it
is tried again, the nodes that could run its pods (those with the most idle GPU), so that
later, smaller jobs cannot keep overtaking it: a job asking for fewer GPUs than a starving
one may not use the nodes held for it. ``version`` changes only when the held nodes do, so
that the failures remembered under the old holds are judged again.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.scheduler.api.job import job_gpus

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from gpufleet.model.arrays import BoolArray, IntArray
    from gpufleet.model.cluster import ClusterState
    from gpufleet.model.pod import PodSpec
    from gpufleet.scheduler.api.job import Job

REASON = "node(s) were held for a starving job"


class Holds:
    """Per starving job: the nodes held for it, and its GPUs."""

    def __init__(self) -> None:
        self.held: dict[str, tuple[BoolArray, float]] = {}
        self.version = 0

    def against(self, job: Job) -> Exclusion | None:
        """The nodes held for starving jobs that ask for more GPUs than ``job``."""
        if not self.held:
            return None
        gpus = job_gpus(job)
        masks = [mask for mask, held_gpus in self.held.values() if held_gpus > gpus]
        if not masks:
            return None
        return Exclusion(np.logical_or.reduce(masks), REASON)

    @contextmanager
    def trying(self, job: Job) -> Iterator[None]:
        """While ``job`` is tried its old hold is dropped (it is made anew if it still
        starves); the holds count as changed only if it holds other nodes after."""
        before = self.held.pop(job.key, None)
        try:
            yield
        finally:
            after = self.held.get(job.key)
            if _changed(before, after):
                self.version += 1

    def hold(
        self, job: Job, state: ClusterState, static_nodes: Callable[[PodSpec], IntArray]
    ) -> list[str]:
        """Hold nodes that could run the starving job's pods; their names."""
        taken = [m for m, _ in self.held.values()]
        mask = np.logical_or.reduce(taken) if taken else np.zeros(state.size, dtype=np.bool_)
        mine = np.zeros(state.size, dtype=np.bool_)
        names = []
        for pod in job.core:
            possible = static_nodes(pod.spec)
            possible = possible[~mask[possible]]
            if possible.size == 0:
                continue
            node = int(possible[np.argmax(state.gpu_idle[possible])])
            mask[node] = mine[node] = True
            names.append(state.names[node])
        if names:
            self.held[job.key] = (mine, job_gpus(job))
        return names


def _changed(before: tuple[BoolArray, float] | None, after: tuple[BoolArray, float] | None) -> bool:
    if before is None or after is None:
        return before is not after
    return not np.array_equal(before[0], after[0])
