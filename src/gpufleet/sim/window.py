"""A window of a trace: the jobs that arrive from ``since`` on, on a clock that starts there.

A replay of a window starts with an empty cluster: jobs that arrived before ``since`` are
left out, not carried in running. Times are shifted so that the replay's clock reads 0 at
``since``; ``until`` (trace time) becomes ``until - since`` on that clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from gpufleet.model.workload import ReplayJob


def trace_window(jobs: Sequence[ReplayJob], since: float) -> list[ReplayJob]:
    """The jobs arriving at or after ``since``, their arrivals counted from ``since``."""
    if since <= 0:
        return list(jobs)
    return [replace(j, arrival_s=j.arrival_s - since) for j in jobs if j.arrival_s >= since]
