"""What a pod's run is worth: how long it is expected to run, when it last saved its work,
and how often the scheduler has moved it.

A job's owner says the first two with pod annotations (``load/objects/pods.py``):

* ``gpufleet.io/expected-duration`` — how long a run is expected to take (a duration). The
  reservation of a starving job lets other jobs use its nodes only if they are expected to
  end before it needs them (``scheduler/queues/holds.py``);
* ``gpufleet.io/checkpoint-interval`` — how often the job saves its work (a duration),
  counted from the start of each run;
* ``gpufleet.io/last-checkpoint`` — when it last did (an RFC 3339 time), as the job itself
  reports it.

An evicted run loses the work done since its last checkpoint, and the job pays its restart
time again (:func:`work_at_risk`). The replay models the same facts (``sim/replay.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Progress:
    """A pod's run, as its owner declares it and the scheduler has treated it."""

    expected_duration_s: float = 0.0
    """How long a run is expected to take; 0: not said (the cycle's default applies)."""
    checkpoint_interval_s: float = 0.0
    """How often the run saves its work, from its start; 0: it never does."""
    last_checkpoint: float | None = None
    """When the run last saved its work, as the job reports it (None: not reported)."""
    moves: int = 0
    """How many times consolidation has moved the job."""
    moved_at: float | None = None
    """When consolidation last moved it."""

    def moved(self, at: float) -> Progress:
        """The same run after one more move, at ``at``."""
        return Progress(
            self.expected_duration_s,
            self.checkpoint_interval_s,
            self.last_checkpoint,
            self.moves + 1,
            at,
        )


NO_PROGRESS = Progress()
"""Nothing declared and never moved."""


def last_saved(progress: Progress, started: float, now: float) -> float:
    """When a run that started at ``started`` last saved its work, as of ``now``: its last
    checkpoint by the interval or as reported, else its start (nothing saved)."""
    last = started
    interval = progress.checkpoint_interval_s
    if interval > 0 and now > started:
        last = started + math.floor((now - started) / interval) * interval
    reported = progress.last_checkpoint
    if reported is not None and last < reported <= now:
        last = reported
    return last


def move_after_checkpoint(started: float, interval: float, earliest: float) -> float:
    """When a run that started at ``started`` and saves every ``interval`` may move at no
    loss, not before ``earliest``: one second after its first checkpoint from then."""
    return started + math.ceil((earliest - started) / interval) * interval + 1.0


def work_at_risk(progress: Progress, started: float | None, now: float, restart_s: float) -> float:
    """Seconds of a run an eviction at ``now`` throws away: the time since its last
    checkpoint (:func:`last_saved`), plus the ``restart_s`` the job pays to start again.
    A pod not running, or starting after ``now``, loses nothing."""
    if started is None or started > now:
        return 0.0
    return max(0.0, now - last_saved(progress, started, now)) + restart_s
