"""Queue admission: whether a job's queues may take what it asks for, before it is placed.

A job is admitted when every queue on its path stays within its ``limit`` with the job
counted, and — for non-preemptible work (priority at or above the configured threshold) —
within its ``quota`` counting non-preemptible work only (it runs only within quota, since it
is never a victim). Shares sized by GPU memory are admitted at their least share, and
capped so that the share they take on a smaller GPU still keeps within (:meth:`share_caps`).

Lending: a serving queue (``spec.serving``) lends the GPUs of its quota it does not use to
every other queue, as any queue's unused quota is, but keeps back what it is forecast to
need, ``min(quota, forecastGPUs) - in use``, as whole free nodes (:meth:`kept_nodes`): its
replicas need whole GPUs together, and free GPUs scattered over busy nodes serve none, so
jobs of other queues may not use those nodes (a filter: "node(s) kept free for serving queue
inference's forecast"). What the forecast did not foresee is taken back by reclaim,
elastic pods first (``room/reclaim.py``, ``room/victims.py``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.runtime import Exclusion
from gpufleet.model.arrays import MILLI
from gpufleet.scheduler.api.outcome import Why, WhyCode, why
from gpufleet.scheduler.state.fairshare import EPS

KEPT = "node(s) kept free for serving queue {queues}'s forecast"
"""The filter message of the nodes kept for serving queues' forecasts."""

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.arrays import FloatArray
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.state.ledger import Ledger


class QueueAdmission:
    """The admission rule over one ledger's queues (see the module doc)."""

    def __init__(self, ledger: Ledger, non_preemptible_priority: int) -> None:
        self.ledger = ledger
        self.non_preemptible_priority = non_preemptible_priority
        self.serving = tuple(
            q for q in ledger.tree.queues.values() if q.serving and q.forecast_gpus > 0
        )
        """The serving queues that keep nodes back from lending (none: nothing kept)."""

    def blocked(self, job: Job, request: FloatArray, freed: FloatArray | None = None) -> Why | None:
        """Why the job's queues cannot take ``request`` now (limit, quota), or None;
        ``freed``: preemptible work of the job's own queue counted as gone (limit only)."""
        tree, alloc, alloc_np = self.ledger.tree, self.ledger.alloc, self.ledger.alloc_np
        for q in tree.paths[job.queue]:
            spec = tree.queues[q]
            used = alloc[q] if freed is None else alloc[q] - freed
            over = used + request > spec.limit + EPS
            if over.any():
                return why(
                    WhyCode.QUEUE_LIMIT,
                    queue=q,
                    resource=int(np.flatnonzero(over)[0]),
                    limit=_values(spec.limit),
                    in_use=_values(used),
                    needs=_values(request),
                    over=tuple(bool(o) for o in over),
                )
        if job.priority >= self.non_preemptible_priority:
            for q in tree.paths[job.queue]:
                spec = tree.queues[q]
                mask = np.array(spec.quota_set)
                over = mask & (alloc_np[q] + request > spec.quota + EPS)
                if over.any():
                    return why(
                        WhyCode.QUOTA_NON_PREEMPTIBLE,
                        priority=job.priority,
                        queue=q,
                        quota=_values(spec.quota),
                        in_use=_values(alloc_np[q]),
                        needs=_values(request),
                        over=tuple(bool(o) for o in over),
                    )
        return None

    def kept_nodes(self, job: Job) -> Exclusion | None:
        """The whole free nodes the serving queues not on ``job``'s path keep for their
        forecasts (None: none): for each, the fewest whole free nodes, in the cluster's
        order, whose GPUs cover ``min(quota, forecast) - in use``; all of them where they
        cannot."""
        if not self.serving:
            return None
        ledger = self.ledger
        own = ledger.tree.paths[job.queue]
        need = [
            (q.name, min(float(q.quota[0]), q.forecast_gpus) - float(ledger.alloc[q.name][0]))
            for q in self.serving
            if q.name not in own
        ]
        need = [(name, gpus) for name, gpus in need if gpus > EPS]
        if not need:
            return None
        state = ledger.state
        free = np.flatnonzero((state.gpu_count > 0) & (state.gpu_whole_free == state.gpu_count))
        if free.size == 0:
            return None
        covered = np.cumsum(state.gpu_count[free])
        kept = np.zeros(state.size, dtype=np.bool_)
        taken = 0
        for _, gpus in need:  # each keeps the next free nodes, none twice
            upto = int(np.searchsorted(covered, (covered[taken - 1] if taken else 0) + gpus - EPS))
            kept[free[taken : upto + 1]] = True
            taken = min(free.size, upto + 1)
        names = ", ".join(name for name, _ in need)
        return Exclusion(kept, KEPT.format(queues=names))

    def share_caps(self, job: Job, pods: Sequence[PodInfo], request: FloatArray) -> dict[str, int]:
        """The most milli-GPU each share sized by GPU memory among ``pods`` may take.

        Admission judged ``request``, the job at its pods' ``demand`` (the least share each
        can take); on smaller GPUs a share is larger. What the limits of the job's queues
        (and, for non-preemptible work, their GPU quotas) leave beyond ``request`` is split
        evenly among those pods, so that the shares they take on their nodes keep within.
        """
        sized = [p for p in pods if p.spec.sized_by_memory]
        if not sized:
            return {}
        tree, alloc, alloc_np = self.ledger.tree, self.ledger.alloc, self.ledger.alloc_np
        room = np.inf
        for q in tree.paths[job.queue]:
            spec = tree.queues[q]
            room = min(room, spec.limit[0] - alloc[q][0] - request[0])
            if job.priority >= self.non_preemptible_priority and spec.quota_set[0]:
                room = min(room, spec.quota[0] - alloc_np[q][0] - request[0])
        if room == np.inf:
            return {}
        each = math.floor(max(room, 0.0) * MILLI / len(sized) + 1e-6)
        return {p.key: p.demand_milli + each for p in sized}


def _values(vector: FloatArray) -> tuple[float, ...]:
    """A resource vector as a reason's fact (GPUs, milli-CPU, MiB)."""
    return tuple(float(v) for v in vector)


def lending(ledger: Ledger) -> dict[str, tuple[float, float]]:
    """Per queue, the GPUs it lends and borrows (what ``kubectl get queues`` shows): a
    top-level queue borrows what it runs beyond its GPU quota; a serving one lends the part
    of its unused quota that the top-level queues' borrowing covers (with several serving
    queues, each counts the whole borrowing against its own unused quota)."""
    tree, alloc = ledger.tree, ledger.alloc
    roots = tree.children.get(None, ())
    borrowed = {q: max(0.0, float(alloc[q][0] - tree.queues[q].quota[0])) for q in roots}
    out: dict[str, tuple[float, float]] = {}
    for name, spec in tree.queues.items():
        lent = 0.0
        if spec.serving:
            unused = max(0.0, float(spec.quota[0] - alloc[name][0]))
            others = sum(b for q, b in borrowed.items() if q not in tree.paths[name])
            lent = min(unused, others)
        out[name] = (lent, borrowed.get(name, 0.0))
    return out
