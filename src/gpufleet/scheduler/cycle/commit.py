"""What one cycle has decided so far, written down as it decides: the last step of a job's
walk (allocate → make room → commit).

:class:`Commit` owns the cycle's bindings and evictions in the order they were made, and
what they imply for the rest of the cycle: the pods bound in it (never victims of the same
cycle), and the nodes and GPUs its evictions free, so that a binding onto them is marked
*pipelined* (it waits for the victims to leave). Each decision is recorded on the ledger
(``ledger.py``) at once: a binding adds the pod there, an eviction or a finished pod removes
it, and either way the victim pool (``pool.py``) follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpufleet.scheduler.api.outcome import Binding, Eviction
from gpufleet.scheduler.api.transaction import Running

if TYPE_CHECKING:
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.room.protocols import Plan
    from gpufleet.scheduler.state.ledger import Ledger
    from gpufleet.scheduler.state.pool import VictimPool


class Commit:
    def __init__(self, ledger: Ledger, pool: VictimPool, now: float) -> None:
        self.ledger, self.pool, self.now = ledger, pool, now
        self.bindings: list[Binding] = []
        self.evictions: list[Eviction] = []
        self.bound_now: set[str] = set()
        """Pods bound (or moved) in this cycle: never victims of the same cycle."""
        self.evicted_nodes: set[int] = set()
        self.freed_gpus: set[tuple[int, int]] = set()

    def bind(self, pod: PodInfo, node: int, spec: PodSpec, gpus: tuple[int, ...]) -> None:
        """``pod`` runs on ``node`` from now (its capacity is reserved already)."""
        self.ledger.add(Running(pod.placed(pod.node, pod.gpus, self.now), node, gpus, spec))
        self.bound_now.add(pod.key)
        self.bindings.append(
            Binding(
                pod.key,
                self.ledger.state.names[node],
                gpus if spec.num_gpu or gpus else None,
                any((node, g) in self.freed_gpus for g in gpus)
                or (not gpus and node in self.evicted_nodes),
                self.ledger.book.pod_claims.get(pod.key),
                self._volumes(spec),
                self.ledger.state.gpu_sharing[node] if spec.advertised_gpus else "",
            )
        )

    def _volumes(self, spec: PodSpec) -> dict[str, str] | None:
        """The volume the placement gave each unbound claim of the pod (None: it has none)."""
        chosen = self.ledger.state.volumes.chosen
        found = {c: chosen[c][0] for c in spec.volumes if c in chosen}
        return found or None

    def evict(self, key: str, action: str, by: str, *, moved: bool = False) -> Running:
        """Pod ``key`` is evicted by ``action`` for ``by`` (a job, or its own gang) — to be
        bound again elsewhere if ``moved``: it is no victim any more, and what it frees
        makes the bindings onto it pipelined (the caller releases its capacity)."""
        running = self.drop(key)
        self.evicted_nodes.add(running.node)
        self.freed_gpus.update((running.node, g) for g in running.gpus)
        self.evictions.append(Eviction(key, action, by, moved))
        return running

    def apply(self, job_key: str, core: tuple[PodInfo, ...], plan: Plan) -> list[PodInfo]:
        """Carry out ``plan``, made for the job ``job_key``: its victims evicted, its pods
        and the moved ones bound; the pods bound, in order."""
        moving = {r.pod.key for r, _ in plan.moved}
        for victim in plan.victims:
            key = victim.pod.key
            self.evict(key, plan.action, job_key, moved=key in moving)
        bound = []
        for pod, (node, spec, gpus) in zip(core, plan.placements, strict=True):
            self.bind(pod, node, spec, gpus)
            bound.append(pod)
        for moved, (node, spec, gpus) in plan.moved:
            self.bind(moved.pod, node, spec, gpus)
            bound.append(moved.pod)
        return bound

    def drop(self, key: str) -> Running:
        """Pod ``key`` counts no more, in the ledger or as a possible victim."""
        running = self.ledger.remove(key)
        self.pool.discard(key)
        return running
