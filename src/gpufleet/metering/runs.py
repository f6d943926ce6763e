"""The run log: each stretch of time a pod held a node, with what it requested, from facts.

The cost layer charges *runs* (``cost/allocation.py``): a pod on a node from a start to an
end, with its GPUs (a share counts its fraction, a MIG slice its share of the GPU), CPU cores
and GiB of memory. A :class:`RunLog` records them from the same facts a
:class:`~gpufleet.metering.meter.Meter` is told — a pod starts (is bound), stops
(finished, or evicted) — so that what is costed is what was metered. The replay reports them
from its events; an edge watching a live cluster can from its watch.

Cheap: a fact appends to typed arrays or writes one slot (O(1)); the read-out is numpy
arrays over the runs, one copy of each column. No clock, no I/O.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass

import numpy as np

from gpufleet.model.arrays import BoolArray, FloatArray, IntArray

RUNNING, FINISHED, EVICTED = 0, 1, 2
"""How a run ended (:attr:`RunColumns.outcome`): it still runs, its pod finished or left,
or its pod was evicted (its work lost)."""
OUTCOMES = ("running", "finished", "evicted")


@dataclass(frozen=True, slots=True)
class RunColumns:
    """The runs logged, one row each, in the order they started: the pod, the node (the
    caller's index), start and end (``inf``: still running), GPUs, CPU cores and GiB the pod
    requested, the caller's ``owner`` index (the replay's job) and the run's outcome."""

    pods: tuple[str, ...]
    node: IntArray
    start: FloatArray
    end: FloatArray
    gpus: FloatArray
    cores: FloatArray
    gib: FloatArray
    owner: IntArray
    outcome: IntArray

    @property
    def request(self) -> FloatArray:
        """``R x 3``: GPUs, cores, GiB per run (the cost layer's resource order)."""
        return np.stack([self.gpus, self.cores, self.gib], axis=1)

    @property
    def evicted(self) -> BoolArray:
        evicted: BoolArray = self.outcome == EVICTED
        return evicted


class RunLog:
    """Records the runs of pods on nodes (module docstring)."""

    def __init__(self) -> None:
        self._open: dict[str, int] = {}
        """Running pods: their row."""
        self._pods: list[str] = []
        self._node = array("q")
        self._start = array("d")
        self._end = array("d")
        self._gpus = array("d")
        self._cores = array("d")
        self._gib = array("d")
        self._owner = array("q")
        self._outcome = array("q")

    def started(  # noqa: PLR0917 (one fact, its fields)
        self, pod: str, node: int, at: float, gpus: float, cores: float, gib: float, owner: int
    ) -> None:
        """Pod ``pod`` runs on node ``node`` from ``at`` on, holding ``gpus`` GPUs,
        ``cores`` CPU cores and ``gib`` GiB (its requests); ``owner`` is the caller's."""
        if pod in self._open:
            raise ValueError(f"pod {pod!r} started twice")
        self._open[pod] = len(self._pods)
        self._pods.append(pod)
        self._node.append(node)
        self._start.append(at)
        self._end.append(math.inf)
        self._gpus.append(gpus)
        self._cores.append(cores)
        self._gib.append(gib)
        self._owner.append(owner)
        self._outcome.append(RUNNING)

    def stopped(self, pod: str, at: float, *, evicted: bool = False) -> None:
        """Pod ``pod`` stops at ``at`` (evicted: its work is lost); a pod not running (one
        that was still waiting) had no run, and nothing is recorded."""
        row = self._open.pop(pod, None)
        if row is None:
            return
        if at < self._start[row]:
            raise ValueError(f"pod {pod!r} stopped at {at:g}, before it started")
        self._end[row] = at
        self._outcome[row] = EVICTED if evicted else FINISHED

    def __len__(self) -> int:
        return len(self._pods)

    def columns(self) -> RunColumns:
        """The runs so far, as arrays (copies: the log may go on)."""

        def floats(values: array[float]) -> FloatArray:
            return np.array(values, dtype=np.float64)

        def ints(values: array[int]) -> IntArray:
            return np.array(values, dtype=np.int64)

        return RunColumns(
            tuple(self._pods),
            ints(self._node),
            floats(self._start),
            floats(self._end),
            floats(self._gpus),
            floats(self._cores),
            floats(self._gib),
            ints(self._owner),
            ints(self._outcome),
        )
