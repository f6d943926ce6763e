"""A session: one scheduling cycle over the cluster cache.

The cache (:mod:`gpufleet.scheduler.cache`) holds what lasts between cycles — objects,
the ledger of what runs, assumed bindings; a session holds what lasts one cycle — the
pending jobs in their order, the holds, the failure memo, the result — in its
:class:`~gpufleet.scheduler.cycle.Cycle`. With ``assume`` (a live scheduler, a replay) the
cycle works on the cache's own ledger, so each binding it decides holds its capacity from
the decision on, and its result is assumed in the cache when it ends; without it the cycle
works on a copy and leaves the cache as it was (a what-if over a live cache). The snapshot
edge, ``gpufleet schedule``, is: read the YAML, apply every object to an empty cache,
run one session (``schedule_snapshot`` in ``gpufleet/compose.py``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.workload import Snapshot
from gpufleet.scheduler.cache import ClusterCache
from gpufleet.scheduler.claims import ClaimBook
from gpufleet.scheduler.cycle import Cycle, CycleConfig
from gpufleet.scheduler.job import build_jobs
from gpufleet.scheduler.ledger import Ledger
from gpufleet.scheduler.pool import VictimPool

if TYPE_CHECKING:
    from gpufleet.scheduler.outcome import CycleResult


class Session:
    """One cycle over a cache: the cycle's per-run state lives here, not in the cache."""

    def __init__(
        self, cache: ClusterCache, config: CycleConfig, now: float, *, assume: bool = True
    ) -> None:
        self.cache, self.config, self.now, self.assume = cache, config, now, assume
        ledger, pool = cache.ledger(), cache.pool()
        if not assume:
            ledger, pool = _copies(cache)
        pending = cache.pending()
        topology = cache.objects["Topology"]
        levels = next(iter(topology.values())).levels if topology else ()  # type: ignore[union-attr]
        self.cycle: Cycle = Cycle(
            Snapshot((), tuple(pending), topology=levels),
            config,
            now,
            ledger=ledger,
            pool=pool,
            jobs=build_jobs(pending, ledger.groups, ledger.gang_running, ledger.state),
            framework=cache.framework(config.policy, ledger.state, np.random.default_rng(0)),
            components=cache.components,
        )

    def run(self) -> CycleResult:
        result = self.cycle.run()
        if self.assume:
            self.cache.assume(result, self.now)
        return result


def _copies(cache: ClusterCache) -> tuple[Ledger, VictimPool]:
    """An independent ledger and pool with the cache's content (for a session that does
    not assume)."""
    source = cache.ledger()
    snap = cache.snapshot()
    # Claims that assumed bindings allocated are in the book, not yet in the objects.
    snap = replace(snap, allocations={**snap.allocations, **source.book.allocations})
    ledger = Ledger(
        snap.nodes,
        sorted(snap.queues, key=lambda q: q.name),
        {g.key: g for g in snap.groups},
        ClaimBook(snap),
        cache.non_preemptible_priority,
    )
    names = source.state.names
    ledger.bind_all(
        [replace(r.pod, node=names[r.node], gpus=r.gpus) for r in source.running.values()]
    )
    pool = VictimPool(
        [r for r in ledger.running.values() if ledger.evictable(r.pod)],
        ledger.tree.queues,
        0.0,
        ledger.state.gpu_slots,
    )
    return ledger, pool
