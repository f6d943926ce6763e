"""Making room for a job that does not fit: consolidate, reclaim, preempt.

All three are one search with different rules for who may be a victim:

* **preempt** — pods of the job's own queue with lower priority;
* **reclaim** — pods of other queues, by the rule of Volcano's proportion plugin: victims
  are judged one by one, and a pod (or a gang taken whole) is reclaimable while its queue's
  allocation — before removing it, after the victims already taken — is above the queue's
  fair share, for the queue and every ancestor the job's queue does not share. The victim
  may be larger than the queue's excess and take the queue below its share (one 8-GPU job
  of a queue whose share is 4 is reclaimable). The job's own queue (and each of its
  ancestors the victim's queue does not share) must be within its fair share with the job
  allocated. A queue at or below its fair share is never a victim, so a queue that reclaim
  took below its share cannot take back from one within its share: nothing oscillates;
* **consolidate** — any preemptible pod outside a gang, which is moved: it must be bound
  again elsewhere in the same cycle. Tried only when the job fits the cluster's total free
  capacity (gang members are not moved: that would break the gang).

Victims are always preemptible (below the non-preemptible priority) and past their queue's
min runtime for preempt and reclaim. A pod of a gang that has no pods to spare beyond
``minMember`` is evicted with its whole gang (a broken gang is worth nothing).

For each pod of the job's core, in turn: if it fits, it is placed; otherwise every node on
which it would fit once all eligible victims were gone is tried: victims are taken
cheapest first (lowest priority, elastic pods beyond a gang's ``minMember`` before any job
is stopped, whole-GPU pods before pods sharing a GPU, least work lost
— GPUs times the time since the last checkpoint, plus the restart time —, newest, smallest
unit) until the pod fits, then each is reprieved, most expensive first, if
the pod still fits without evicting it. The node whose victims have the lowest priority
wins, then one that only shrinks elastic gangs over one that stops a job, then the
one where the least work is lost (one 20-day-old job without checkpoints
costs more than two 5-minute-old ones), then the fewest broken GPU shares,
then the fewest victims.
Everything happens in one transaction, so a job that cannot be completed leaves no
evictions behind.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from gpufleet.framework.status import Code, Status
from gpufleet.model.progress import work_at_risk
from gpufleet.scheduler.api.outcome import Note, NoteCode, note
from gpufleet.scheduler.api.transaction import Transaction
from gpufleet.scheduler.placement.place import choose_gpus, on_node, place
from gpufleet.scheduler.room.protocols import Plan, always, moving

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from gpufleet.framework.runtime import Exclusion
    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.transaction import Running
    from gpufleet.scheduler.room.protocols import Candidates, Means, RoomAction, Slot, Unit

MAX_NODES_TRIED = 16
"""Candidate nodes evaluated per pod (those with the fewest eligible victims first)."""


class VictimSearch:
    def __init__(self, means: Means, job: Job, held: Exclusion | None) -> None:
        self.means, self.job, self.held = means, job, held
        """``held``: the nodes no victim may be sought on, nor placement made."""
        self.ledger, self.placer = means.ledger, means.placer
        self.state = means.ledger.state
        self.framework = means.placer.framework
        self.pool = means.pool
        self.pod: PodInfo | None = None
        """The pod of the job whose room is being made (its claims must fit too)."""
        self._claim_gpus: dict[str, float] = {}
        """Per running pod, the GPUs of its claims, read before the search evicts anything
        (an evicted pod's claims are released: they would read as their upper bound)."""

    def run(self, action: RoomAction, request: FloatArray) -> tuple[Plan | None, Note]:
        """Make room for the job's core with ``action``'s victims: a plan, and a note."""
        mask, why, accept = self.candidates(action, request)
        if mask is None:
            assert why is not None, "an action without candidates says why"
            return None, why
        if action.relocate and self._bound(action, mask) < len(self.job.core):
            return None, note(NoteCode.NO_ROOM)
        plan = self._search(action.name, mask, accept, relocate=action.relocate)
        return plan, note(NoteCode.FOUND if plan else NoteCode.NOT_FOUND)

    def hopeless(self, action: RoomAction, request: FloatArray) -> Note | None:
        """Why ``action`` cannot make room for the job even if it evicted every pod it may
        (None: a search may succeed). Exclusion nodes only take room away, so what is hopeless
        here is hopeless in every topology domain the job's searches are confined to."""
        mask, why, _ = self.candidates(action, request)
        if mask is None:
            return why
        return note(NoteCode.NO_ROOM) if self._bound(action, mask) < len(self.job.core) else None

    def candidates(self, action: RoomAction, request: FloatArray) -> Candidates:
        """The pods ``action`` may evict for the job (None, and why not, when there are
        none), and the rule that accepts each unit of victims."""
        if action.needs_preemption and not self.job.can_preempt:
            return None, note(NoteCode.PREEMPTION_NEVER), always
        return action.candidates(self, request)

    def _bound(self, action: RoomAction, mask: BoolArray) -> float:
        """At most how many of the job's core pods fit once every pod of ``mask`` is gone."""
        freed = action.freed(self, mask)
        return self.placer.fit.slots(self.job.core, freed, self.held)

    # -- the search ---------------------------------------------------------------------

    def unit(self, r: Running, taken: list[Running]) -> Unit:
        """``r`` alone, or its whole gang when the gang has no pods to spare."""
        group = self.ledger.groups.get(r.pod.gang)
        if group is None or group.min_member <= 1:
            return (r,)
        gone = {t.pod.key for t in taken}
        left = [k for k in self.ledger.gang_running[r.pod.gang] if k not in gone]
        if len(left) > group.min_member:
            return (r,)
        return tuple(self.ledger.running[k] for k in sorted(left))

    def cost(self, unit: Unit, taken: Sequence[Running] = ()) -> tuple[object, ...]:
        return (
            max(r.pod.priority for r in unit),
            self.stops_job(unit, taken),
            any(r.spec.is_gpu_share for r in unit),
            self.lost_work(list(unit)),
            -max(r.pod.started or 0.0 for r in unit),
            len(unit),
            unit[0].pod.key,
        )

    def stops_job(self, victims: Sequence[Running], taken: Sequence[Running] = ()) -> bool:
        """Whether evicting ``victims``, the pods ``taken`` gone already, stops a job of
        theirs: a gang (a pod of no PodGroup is one) left with fewer running pods than its
        ``minMember`` (at least 1). Otherwise they only shrink elastic gangs, which run on
        (KAI's semi-preemptible pods beyond ``minMember``, taken before any job is stopped)."""
        gone: dict[str, int] = {}
        for v in victims:
            gone[v.pod.gang] = gone.get(v.pod.gang, 0) + 1
        for t in taken:
            if t.pod.gang in gone:
                gone[t.pod.gang] += 1
        for gang, count in gone.items():
            group = self.ledger.groups.get(gang)
            least = max(group.min_member if group is not None else 1, 1)
            if len(self.ledger.gang_running.get(gang, ())) - count < least:
                return True
        return False

    def lost_work(self, victims: list[Running]) -> float:
        """GPU-seconds the victims' eviction throws away: their GPUs, with their share of
        the devices of their ResourceClaims, times the time since their last checkpoint
        plus the restart time (``model/progress.py``)."""
        now, restart = self.means.round.now, self.means.restart_s
        return sum(
            (v.spec.gpu_equivalent + self._claimed(v))
            * work_at_risk(v.pod.progress, v.pod.started, now, restart)
            for v in victims
            if v.pod.started is not None
        )

    def _claimed(self, r: Running) -> float:
        """The GPUs of ``r``'s claims, each shared evenly by the running pods that use it."""
        if not r.pod.claims:
            return 0.0
        known = self._claim_gpus.get(r.pod.key)
        if known is None:
            book = self.ledger.book
            known = self._claim_gpus[r.pod.key] = sum(
                book.most_gpus(k) / max(1, self.ledger.claim_consumers(k)) for k in r.pod.claims
            )
        return known

    def fits(self, spec: PodSpec, node: int) -> bool:
        """``spec`` fits ``node`` now by every filter of the profile (the rule placement
        applies), and the pod's ResourceClaims can be allocated there."""
        if not self.framework.fits(self.state, spec, node):
            return False
        return self.pod is None or not self.pod.claims or self.placer.claims_fit(self.pod, node)

    def evict(self, txn: Transaction, running: Running) -> None:
        """Take a victim's capacity and the devices of the claims only it uses."""
        txn.release(running)
        self.ledger.book.release(running.pod, self.ledger.running.values(), txn)

    def _reprieve(self, txn: Transaction, running: Running) -> None:
        txn.restore(running)
        self.ledger.book.retake(running.pod, txn)

    def _search(
        self,
        action: str,
        mask: BoolArray,
        accept: Callable[[Unit, list[Running]], bool],
        *,
        relocate: bool,
    ) -> Plan | None:
        txn = Transaction(self.state)
        victims: list[Running] = []
        placements: list[Slot] = []
        moved: list[tuple[Running, Slot]] = []
        for pod in self.job.core:
            self.pod = pod
            outcome = place(
                self.framework, self.state, pod.spec, self.placer.for_claims(pod, self.held)
            )
            if not isinstance(outcome, Status):
                txn.reserve(outcome.node, outcome.pod, outcome.gpus)
                placements.append((outcome.node, outcome.pod, outcome.gpus))
                if pod.claims:
                    self.ledger.book.take(pod, self.state.names[outcome.node], txn)
                continue
            if outcome.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                txn.rollback()
                return None
            spec = self.framework.prepare(pod.spec)
            best = self._best_node(spec, txn, victims, mask, accept, relocate=relocate)
            if best is None:
                txn.rollback()
                return None
            node, chosen = best
            for r in chosen:
                self.evict(txn, r)
                victims.append(r)
            spec = on_node(self.state, spec, node)
            gpus = choose_gpus(self.framework, self.state, spec, node)
            txn.reserve(node, spec, gpus)
            placements.append((node, spec, gpus))
            if pod.claims:
                self.ledger.book.take(pod, self.state.names[node], txn)
            if relocate:
                for r in chosen:
                    out = place(self.framework, self.state, moving(r), self.held)
                    assert not isinstance(out, Status), "relocation was checked"
                    txn.reserve(out.node, out.pod, out.gpus)
                    moved.append((r, (out.node, out.pod, out.gpus)))
        return Plan(action, tuple(victims), tuple(placements), tuple(moved))

    def _best_node(
        self,
        spec: PodSpec,
        txn: Transaction,
        taken: list[Running],
        mask: BoolArray,
        accept: Callable[[Unit, list[Running]], bool],
        *,
        relocate: bool,
    ) -> tuple[int, list[Running]] | None:
        """The node where the cheapest victims (least work lost) make room for ``spec``."""
        pool = self.pool
        left = pool.without(mask, [r.pod.key for r in taken])
        if not left.any():
            return None
        freed = pool.freed(self.state, left)
        held = self.held if self.pod is None else self.placer.capped(self.pod, self.held)
        possible = np.zeros(self.state.size, dtype=np.bool_)
        possible[self.framework.run_filters(freed, spec, held).nodes] = True
        counts = np.bincount(pool.node[left], minlength=self.state.size)
        nodes = np.flatnonzero(possible & (counts > 0))
        nodes = nodes[np.lexsort((nodes, counts[nodes]))][:MAX_NODES_TRIED]
        if nodes.size == 0:
            return None
        gone = {r.pod.key for r in taken} | self.means.round.bound_now

        def eligible(key: str) -> bool:
            i = pool.index.get(key)
            return i is not None and bool(left[i]) and key not in gone

        by_node: dict[int, list[Running]] = {int(n): [] for n in nodes}
        for r in pool.on_nodes(left, nodes):
            if eligible(r.pod.key):
                by_node[r.node].append(r)
        best: tuple[tuple[object, ...], int, list[Running]] | None = None
        for node, pods in by_node.items():
            tried = self._try_node(
                spec,
                node,
                pods,
                txn,
                taken=taken,
                eligible=eligible,
                accept=accept,
                relocate=relocate,
                beat=None if best is None else best[0],
            )
            if tried is not None and (best is None or tried[0] < best[0]):
                best = (tried[0], node, tried[1])
        return None if best is None else (best[1], best[2])

    def _try_node(
        self,
        spec: PodSpec,
        node: int,
        pods: list[Running],
        txn: Transaction,
        *,
        taken: list[Running],
        eligible: Callable[[str], bool],
        accept: Callable[[Unit, list[Running]], bool],
        relocate: bool,
        beat: tuple[object, ...] | None = None,
    ) -> tuple[tuple[object, ...], list[Running]] | None:
        """The cheapest victims on ``node`` that let ``spec`` fit (state unchanged).

        A pod whose gang has no pod to spare brings its whole gang, and every member must be
        an eligible victim itself; spares are counted against everything chosen so far. A
        node whose score does not ``beat`` the best so far is not checked for relocation.
        """
        spec = on_node(self.state, spec, node)
        mark = txn.mark()
        chosen: list[Unit] = []
        fitted = False
        for r in sorted(pods, key=lambda r: self.cost(self.unit(r, taken), taken)):
            flat = [v for u in chosen for v in u]
            if any(v.pod.key == r.pod.key for v in flat):
                continue
            unit = self.unit(r, taken + flat)
            if not all(eligible(m.pod.key) for m in unit) or not accept(unit, taken + flat):
                continue
            for m in unit:
                self.evict(txn, m)
            chosen.append(unit)
            if self.fits(spec, node):
                fitted = True
                break
        if not fitted:
            txn.rollback(mark)
            return None
        for unit in sorted(chosen[:-1], key=self.cost, reverse=True):
            gang = unit[0].pod.gang
            if any(u is not unit and u[0].pod.gang == gang for u in chosen):
                continue  # reprieving part of a gang could leave it below minMember
            inner = txn.mark()
            for m in unit:
                self._reprieve(txn, m)
            if self.fits(spec, node):
                chosen.remove(unit)
            else:
                txn.rollback(inner)
        flat = [v for u in chosen for v in u]
        score = (
            max(v.pod.priority for v in flat),
            self.stops_job(flat, taken),
            self.lost_work(flat),
            sum(v.spec.is_gpu_share for v in flat),
            len(flat),
            node,
        )
        ok = (beat is None or score < beat) and (
            not relocate or self._relocatable(spec, node, flat, txn)
        )
        txn.rollback(mark)
        return (score, flat) if ok else None

    def _relocatable(
        self, spec: PodSpec, node: int, moved: list[Running], txn: Transaction
    ) -> bool:
        """With the pod on ``node``, can every moved pod be bound elsewhere?"""
        txn.reserve(node, spec, choose_gpus(self.framework, self.state, spec, node))
        for r in moved:
            out = place(self.framework, self.state, moving(r), self.held)
            if isinstance(out, Status):
                return False
            txn.reserve(out.node, out.pod, out.gpus)
        return True
