"""How a cycle runs: its policy, its actions and its thresholds, as the edges set them."""

from __future__ import annotations

from dataclasses import dataclass

from gpufleet.model.workload import NON_PREEMPTIBLE_PRIORITY
from gpufleet.scheduler.queues.holds import DEFAULT_EXPECTED_S


@dataclass(frozen=True, slots=True)
class CycleConfig:
    policy: str = "gpufleet"
    non_preemptible_priority: int = NON_PREEMPTIBLE_PRIORITY
    stale_grace_s: float = 60.0
    starvation_after_s: float = 1800.0
    """A job waiting this long that does not fit reserves nodes (``queues/holds.py``)."""
    expected_duration_s: float = DEFAULT_EXPECTED_S
    """How long a run is expected to take when its pod does not say
    (``gpufleet.io/expected-duration``): what backfill onto reserved nodes is judged by."""
    restart_s: float = 0.0
    """What a job pays to start again after an eviction, counted in the work it loses."""
    actions: tuple[str, ...] = ("consolidate", "reclaim", "consolidate-serving", "preempt")
    """The actions that make room, in the order they are tried (names of the registry)."""
    watch: frozenset[str] = frozenset()
    """Pods whose per-node filter reasons the result should carry (for explain)."""
    strict_fifo: bool = False
    """A queue's first job that cannot be placed blocks the jobs behind it (Kueue's
    StrictFIFO); by default they may pass it."""
    records: bool = True
    """Report what explain and the schedule output show besides the decisions: a record
    of every job tried (its queue's fair share and allocation, the outcome, the notes)
    and every queue's fair share. A replay reads only bindings and evictions."""
