"""Making room for a job that does not fit: the profile's actions, in order, with a memo of
their failures.

Each action (``scheduler/room/``) is a rule for who may be a victim; the search is the
one :class:`~gpufleet.scheduler.room.victims.VictimSearch`. Where the search looks is the
topology rule's (``rules.py``): gpufleet's looks for a gang with a topology annotation
inside the largest domains of its level (and anywhere, if the level is only preferred), for
others anywhere off the held nodes.

A search that failed for a job of the same shape fails again as long as its action's
*epoch* has not changed (:meth:`~gpufleet.scheduler.room.victims.RoomAction.epoch`): later
bindings only take capacity, and pods bound in this cycle are never victims. So the many
identical jobs of a saturated cluster cost one search, not one each (KAI skips such jobs
alike). An action that could not make room even by evicting every pod it may is not
searched for at all (:meth:`~gpufleet.scheduler.room.victims.VictimSearch.hopeless`) — in no
topology domain.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.model.values import frozen_map
from gpufleet.scheduler.api.outcome import SEARCH_CODES, NoteCode
from gpufleet.scheduler.room.victims import VictimSearch

if TYPE_CHECKING:
    from collections.abc import Hashable, Sequence

    from gpufleet.framework.runtime import Exclusion
    from gpufleet.model.arrays import FloatArray
    from gpufleet.scheduler.api.job import Job
    from gpufleet.scheduler.api.outcome import Note
    from gpufleet.scheduler.placement.rules import TopologyRule
    from gpufleet.scheduler.room.protocols import Means, Plan, RoomAction


class Room:
    """The actions a cycle may take to make room, and what they failed at."""

    def __init__(self, actions: Sequence[RoomAction], topology: TopologyRule) -> None:
        self.actions = tuple(actions)
        self.topology = topology
        self.failures: dict[tuple[str, Hashable], tuple[Hashable, Note]] = {}
        """Searches that failed, by action and shape, with the epoch they failed in and
        what they found (its action set)."""

    @property
    def watches_fair_share(self) -> bool:
        """Whether an action's failures end when a queue goes above its fair share."""
        return any(a.fair_share_bound for a in self.actions)

    def start_cycle(self) -> None:
        """A cycle starts: failures are remembered within one cycle only. Across cycles a
        failure could outlive what it depended on without its epoch seeing it: a pod bound
        that no action may evict (a job with pod affinity needs it beside it), a queue's
        share caps, an older job of the same shape whose wait earns a move."""
        self.failures = {}

    def make(
        self, means: Means, job: Job, request: FloatArray, notes: list[Note], held: Exclusion | None
    ) -> Plan | None:
        """The first action that makes room for ``job`` off ``held``, or None (notes say
        why not)."""
        actions = self.possible(means, job, request, notes, held)
        if not actions:
            return None
        scopes = self.topology.room_scopes(
            means.ledger.state, means.ledger.groups.get(job.key), held
        )
        for (domain, anywhere), inside in scopes:
            tried: list[Note] = []
            plan = self._within(means, job, request, tried, actions=actions, held=inside)
            notes.extend(replace(n, domain=domain, anywhere=anywhere) for n in tried)
            if plan is not None:
                return plan
        return None

    def possible(
        self, means: Means, job: Job, request: FloatArray, notes: list[Note], held: Exclusion | None
    ) -> list[RoomAction]:
        """The actions that might make room for ``job`` (the others' reasons go to notes)."""
        search = VictimSearch(means, job, held)
        out: list[RoomAction] = []
        for action in self.actions:
            shape = self._shape(job, action, held)
            note = self._failure(means, action, shape)
            if note is None and (found := search.hopeless(action, request)) is not None:
                note = as_action(action, found)
                self.failures[action.name, shape] = (action.epoch(means), note)
            if note is None:
                out.append(action)
            elif note.code is not NoteCode.NOT_SERVING:  # not its kind of job: nothing to say
                notes.append(note)
        return out

    def _within(
        self,
        means: Means,
        job: Job,
        request: FloatArray,
        notes: list[Note],
        *,
        actions: list[RoomAction],
        held: Exclusion | None,
    ) -> Plan | None:
        search = VictimSearch(means, job, held)
        for action in actions:
            shape = self._shape(job, action, held)
            known = self._failure(means, action, shape)
            if known is not None:
                notes.append(known)
                continue
            plan, found = search.run(action, request)
            note = as_action(action, found)
            notes.append(note)
            if plan is not None:
                return plan
            self.failures[action.name, shape] = (action.epoch(means), note)
        return None

    @staticmethod
    def _shape(job: Job, action: RoomAction, held: Exclusion | None) -> Hashable:
        """What ``action``'s search for ``job`` depends on besides the epoch."""
        return (
            action.scope(job),
            tuple(p.spec.request_key for p in job.core),
            tuple(k for p in job.core for k in p.claims),
            None if held is None else held.mask.tobytes(),
        )

    def _failure(self, means: Means, action: RoomAction, shape: Hashable) -> Note | None:
        """Why ``action`` failed for a job of ``shape`` in this epoch, if it did."""
        known = self.failures.get((action.name, shape))
        return known[1] if known is not None and known[0] == action.epoch(means) else None


def as_action(action: RoomAction, found: Note) -> Note:
    """``found`` as ``action``'s: its name and, for the search's own outcomes, its words for
    its victims."""
    if found.code not in SEARCH_CODES:
        return replace(found, action=action.name)
    facts = frozen_map({**found.facts, "victims": action.victims, "moves": action.relocate})
    return replace(found, action=action.name, facts=facts)
