"""Metering: what the GPUs did over time and what jobs lived through, from facts.

This module owns every measure over time, so that every edge measures the same way: the
GPU-seconds pods held (in all and per queue), the time-weighted allocation, the timeline of
GPUs held per queue and GPUs asked for by waiting pods, each queue's fair share integrated
over time, the GPU time evictions threw away (lost: the work since the last checkpoint,
and the restart time paid after) in all and per evicting action, preemptions, and per job
its wait (arrival to first start) and completion time (arrival to finish).

A :class:`Meter` is driven by facts, never by a caller's internals: a pod waits, starts
(is bound), stops (finished, deleted or evicted); a job arrives, starts a run (all its pods
are bound), stops (finished, or evicted). The replay (``sim/replay.py``) reports them from
its events; an edge watching a live cluster can report them from its bind and delete
events, and the cost layer reads the same figures. Time is a float ``at`` passed in, which never
goes back; between two times at which facts arrive nothing changes, so the first fact at
a later time closes the interval since the last (:meth:`Meter.advance` closes one without
a fact). No clock, no I/O.

Cost: a fact is O(1); closing an interval is O(Q) for Q queues; the read-outs are
vectorised over the closed intervals and the jobs.
"""

from __future__ import annotations

import math
from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.results import SIZE_CLASSES, ActionTally, QueueUsage, SizeWaits, Timeline
from gpufleet.scheduler.state.fairshare import QueueTree, fair_shares

if TYPE_CHECKING:
    from collections.abc import Sequence

    from gpufleet.model.arrays import BoolArray, FloatArray
    from gpufleet.model.workload import QueueSpec

HOUR = 3600.0

OVERCOMMIT_SLACK = 1e-6
"""GPUs held may exceed the capacity by this much (float sums of shares) before it is a bug."""


@dataclass(frozen=True, slots=True)
class Reading:
    """The figures of a metered span, as :class:`~gpufleet.model.results.ReplayRun` holds
    them (its docstring defines each)."""

    jobs: int
    finished_jobs: int
    running_jobs: int
    pending_jobs: int
    mean_wait_s: float | None
    p50_wait_s: float | None
    p95_wait_s: float | None
    mean_jct_s: float | None
    gpu_allocation_mean: float
    allocation_window_s: float
    preemptions: int
    lost_gpu_hours: float
    gpu_hours: float
    capacity_gpu_hours: float
    queues: tuple[QueueUsage, ...]
    wait_quantiles_s: tuple[float, ...]
    timeline: Timeline
    never_started_jobs: int
    sizes: tuple[SizeWaits, ...]
    all_waits: SizeWaits
    actions: tuple[ActionTally, ...]


class Meter:
    """Meters a cluster of ``capacity`` GPUs shared by ``queues`` from time 0 on.

    ``sample_every`` seconds the timeline samples the GPUs each queue holds and the GPUs
    waiting pods ask for; with ``max_samples``, once it holds that many samples every other
    one is dropped and the step doubles, so a run that lasts far longer than foreseen (a
    replay draining long after its last arrival) keeps an even timeline of at most
    ``max_samples`` points at a cost that grows with the log of its length. The mean
    allocation is averaged from 0 to ``average_until`` (or to the end of the reading, if
    earlier).
    """

    def __init__(
        self,
        queues: Sequence[QueueSpec],
        capacity: float,
        *,
        sample_every: float,
        average_until: float = math.inf,
        max_samples: int | None = None,
    ) -> None:
        if not sample_every > 0:
            raise ValueError(f"sample_every must be > 0, got {sample_every:g}")
        if max_samples is not None and (max_samples < 2 or max_samples % 2):
            raise ValueError(f"max_samples must be even and at least 2, got {max_samples}")
        self.max_samples = max_samples
        self.queues = tuple(q.name for q in queues)
        self.capacity = capacity
        self.average_until = average_until
        self.now = 0.0
        """The end of the last closed interval: facts may come at this time or later."""
        self._tree = QueueTree.of(queues)
        self._queue = {name: j for j, name in enumerate(self.queues)}
        self._held = [0.0] * len(self.queues)
        """Per queue: GPUs its running pods hold now."""
        self._waiting = [0.0] * len(self.queues)
        """Per queue: GPUs its waiting pods ask for now."""
        self._running: dict[str, tuple[int, float, float]] = {}
        """Running pods: queue, GPUs, start."""
        self._queued: dict[str, tuple[int, float]] = {}
        """Waiting pods: queue, GPUs."""

        self.gpu_seconds = 0.0
        """GPU-seconds held by pods, in all."""
        self._averaged_gpu_seconds = 0.0
        """GPU-seconds held before ``average_until``."""
        self.lost_gpu_seconds = 0.0
        """GPU-seconds of pods that were evicted: the work they did is lost."""
        self.preemptions = 0
        """Runs of jobs ended by an eviction."""
        self._actions: dict[str, list[float]] = {}
        """Per evicting action: runs it ended, GPU-seconds lost, jobs it made room for that
        started, and the GPU-seconds those had waited."""
        self._spans = array("d")
        """The closed intervals' lengths."""
        self._span_held = array("d")
        """Per interval, per queue: the GPUs its pods held."""
        self._span_waiting = array("d")
        """Per interval, per queue: the GPUs its waiting pods asked for."""

        self._step = sample_every
        self._next_sample = 0.0
        self._sample_times: list[float] = []
        self._samples: list[list[float]] = [[] for _ in self.queues]
        self._pending: list[float] = []

        self._jobs: dict[str, int] = {}
        """Job key to its row in the per-job arrays, in order of arrival."""
        self._job_queue = array("q")
        self._job_gpus = array("d")
        self._arrival = array("d")
        self._first_start = array("d")
        self._start = array("d")
        """The start of the job's current run; NaN while it has none."""
        self._finish = array("d")

    # -- the clock ----------------------------------------------------------------------

    def advance(self, at: float) -> None:
        """Close the interval from the last time to ``at``, in which nothing changed."""
        dt = at - self.now
        if dt < 0:
            raise ValueError(f"time went back: {at:g} after {self.now:g}")
        if dt == 0:
            return
        held, waiting = self._held, self._waiting
        total = sum(held)
        if total > self.capacity + OVERCOMMIT_SLACK:
            raise ValueError(f"{total:g} GPUs held on a cluster of {self.capacity:g}")
        self.gpu_seconds += total * dt
        until = self.average_until
        self._averaged_gpu_seconds += total * max(0.0, min(at, until) - min(self.now, until))
        while self._next_sample < at:
            self._sample_times.append(self._next_sample)
            for j, samples in enumerate(self._samples):
                samples.append(round(held[j], 3))
            self._pending.append(round(sum(waiting), 3))
            self._next_sample += self._step
            if len(self._sample_times) == self.max_samples:
                self._thin()
        self._spans.append(dt)
        self._span_held.extend(held)
        self._span_waiting.extend(waiting)
        self.now = at

    # -- pods ---------------------------------------------------------------------------

    def queued(self, pod: str, queue: str, gpus: float, at: float) -> None:
        """Pod ``pod`` of ``queue`` waits for ``gpus`` GPUs from ``at`` on."""
        self.advance(at)
        if pod in self._queued or pod in self._running:
            raise ValueError(f"pod {pod!r} is queued or running already")
        j = self._index(queue)
        self._queued[pod] = (j, gpus)
        self._waiting[j] += gpus

    def started(self, pod: str, queue: str, gpus: float, at: float) -> None:
        """Pod ``pod`` of ``queue`` holds ``gpus`` GPUs from ``at`` on (it was bound); it
        no longer waits, if it did."""
        self.advance(at)
        if pod in self._running:
            raise ValueError(f"pod {pod!r} started twice")
        j = self._index(queue)
        self._running[pod] = (j, gpus, at)
        self._held[j] += gpus
        wait = self._queued.pop(pod, None)
        if wait is not None:
            self._waiting[wait[0]] -= wait[1]

    def stopped(
        self,
        pod: str,
        at: float,
        *,
        evicted: bool = False,
        lost_s: float | None = None,
        action: str = "",
    ) -> None:
        """Pod ``pod`` is gone at ``at``: a running pod frees its GPUs; a waiting one no
        longer asks. Of a running pod's time, ``lost_s`` seconds were lost (by default, its
        whole run if ``evicted``, else nothing): the work since its last checkpoint, the
        restart time it paid; ``action`` is the evicting action they are charged to."""
        self.advance(at)
        run = self._running.pop(pod, None)
        if run is not None:
            j, gpus, start = run
            self._held[j] -= gpus
            lost = (at - start if evicted else 0.0) if lost_s is None else lost_s
            if lost > 0:
                self.lost_gpu_seconds += gpus * lost
                if action:
                    self._action(action)[1] += gpus * lost
            return
        wait = self._queued.pop(pod, None)
        if wait is None:
            raise ValueError(f"pod {pod!r} stopped, but it was neither running nor queued")
        self._waiting[wait[0]] -= wait[1]

    def _action(self, action: str) -> list[float]:
        tally = self._actions.get(action)
        if tally is None:
            tally = self._actions[action] = [0.0, 0.0, 0.0, 0.0]
        return tally

    def made_room(self, action: str, job: str, at: float) -> None:
        """``action`` evicted pods so that ``job`` could start, and it did at ``at``."""
        i = self._job(job)
        tally = self._action(action)
        tally[2] += 1
        tally[3] += self._job_gpus[i] * max(0.0, at - self._arrival[i])

    def __contains__(self, pod: object) -> bool:
        """Whether ``pod`` is running or queued."""
        return pod in self._running or pod in self._queued

    # -- jobs ---------------------------------------------------------------------------

    def arrived(self, job: str, queue: str, at: float, *, gpus: float) -> None:
        """Job ``job`` of ``queue``, of ``gpus`` GPUs in all, arrives at ``at``."""
        self.advance(at)
        if job in self._jobs:
            raise ValueError(f"job {job!r} arrived twice")
        self._jobs[job] = len(self._arrival)
        self._job_queue.append(self._index(queue))
        self._job_gpus.append(gpus)
        self._arrival.append(at)
        self._first_start.append(math.nan)
        self._start.append(math.nan)
        self._finish.append(math.nan)

    def job_started(self, job: str, at: float) -> None:
        """A run of ``job`` starts at ``at``: all its pods are bound."""
        self.advance(at)
        i = self._job(job)
        if not math.isnan(self._start[i]):
            raise ValueError(f"job {job!r} started while it runs")
        self._start[i] = at
        if math.isnan(self._first_start[i]):
            self._first_start[i] = at

    def job_stopped(self, job: str, at: float, *, evicted: bool = False, action: str = "") -> None:
        """``job`` finishes at ``at``, or, ``evicted`` (by ``action``), loses its run (a
        preemption) and waits again (even if not all its pods had started)."""
        self.advance(at)
        i = self._job(job)
        if evicted:
            self.preemptions += 1
            if action:
                self._action(action)[0] += 1
        elif math.isnan(self._start[i]):
            raise ValueError(f"job {job!r} finished without running")
        else:
            self._finish[i] = at
        self._start[i] = math.nan

    # -- read-outs ----------------------------------------------------------------------

    def queue_gpu_seconds(self) -> dict[str, float]:
        """Per queue: the GPU-seconds its pods held."""
        held = self._span_matrix(self._span_held)
        return dict(zip(self.queues, (self._span_lengths() @ held).tolist(), strict=True))

    def _thin(self) -> None:
        """Keep every other sample (those at even multiples of the step) and double the
        step; the next sample stays where it was due, an even multiple too."""
        self._sample_times = self._sample_times[::2]
        self._samples = [samples[::2] for samples in self._samples]
        self._pending = self._pending[::2]
        self._step *= 2

    def timeline(self) -> Timeline:
        """The samples so far: GPUs held per queue, GPUs asked for by waiting pods."""
        return Timeline(
            tuple(self._sample_times),
            {q: tuple(v) for q, v in zip(self.queues, self._samples, strict=True)},
            tuple(self._pending),
        )

    def reading(self, end: float) -> Reading:
        """The figures from 0 to ``end`` (which closes the interval to ``end``)."""
        self.advance(end)
        held_s, fair_s = self._usage()
        arrival = np.frombuffer(self._arrival, dtype=np.float64)
        first_start = np.frombuffer(self._first_start, dtype=np.float64)
        finish = np.frombuffer(self._finish, dtype=np.float64)
        started = ~np.isnan(first_start)
        finished = ~np.isnan(finish)
        waits = first_start[started] - arrival[started]
        jcts = finish[finished] - arrival[finished]
        running = int(np.count_nonzero(~np.isnan(np.frombuffer(self._start, dtype=np.float64))))
        jobs_of = np.bincount(
            np.frombuffer(self._job_queue, dtype=np.int64), minlength=len(self.queues)
        )
        mean_wait, p50_wait, p95_wait = _mean_p50_p95(waits)
        sizes = self._size_waits(arrival, first_start, started, end)
        so_far = self._waits_so_far(arrival, first_start, started, end)
        every = SizeWaits(
            "all", int(so_far.size), int(np.count_nonzero(~started)), *_mean_p50_p95(so_far)
        )
        window, window_gpu_s = min(self.average_until, end), self._averaged_gpu_seconds
        if window <= 0:  # nothing to average before the window ends: the whole span
            window, window_gpu_s = end, self.gpu_seconds
        return Reading(
            jobs=arrival.size,
            finished_jobs=int(np.count_nonzero(finished)),
            running_jobs=running,
            pending_jobs=arrival.size - int(np.count_nonzero(finished)) - running,
            mean_wait_s=mean_wait,
            p50_wait_s=p50_wait,
            p95_wait_s=p95_wait,
            mean_jct_s=float(jcts.mean()) if jcts.size else None,
            gpu_allocation_mean=(
                100.0 * window_gpu_s / (self.capacity * window) if self.capacity * window else 0.0
            ),
            allocation_window_s=window,
            preemptions=self.preemptions,
            lost_gpu_hours=self.lost_gpu_seconds / HOUR,
            gpu_hours=self.gpu_seconds / HOUR,
            capacity_gpu_hours=self.capacity * end / HOUR,
            queues=tuple(
                QueueUsage(q, int(jobs_of[j]), float(held_s[j]) / HOUR, float(fair_s[j]) / HOUR)
                for j, q in enumerate(self.queues)
            ),
            wait_quantiles_s=tuple(
                float(w) for w in (np.percentile(waits, np.arange(101)) if waits.size else ())
            ),
            timeline=self.timeline(),
            never_started_jobs=int(np.count_nonzero(~started)),
            sizes=sizes,
            all_waits=every,
            actions=tuple(
                ActionTally(name, int(t[0]), t[1] / HOUR, int(t[2]), t[3] / HOUR)
                for name, t in sorted(self._actions.items())
            ),
        )

    def _size_waits(
        self, arrival: FloatArray, first_start: FloatArray, started: BoolArray, end: float
    ) -> tuple[SizeWaits, ...]:
        """The waits per job-size class, a job that never started waiting until ``end``."""
        waits = self._waits_so_far(arrival, first_start, started, end)
        gpus = np.frombuffer(self._job_gpus, dtype=np.float64)
        out, smaller = [], -math.inf
        for size, largest in SIZE_CLASSES:
            mine = (gpus > smaller) & (gpus <= largest)
            w = waits[mine]
            never = int(np.count_nonzero(mine & ~started))
            out.append(SizeWaits(size, int(w.size), never, *_mean_p50_p95(w)))
            smaller = largest
        return tuple(out)

    @staticmethod
    def _waits_so_far(
        arrival: FloatArray, first_start: FloatArray, started: BoolArray, end: float
    ) -> FloatArray:
        """Every job's wait: to its first start, or (never started) until ``end``."""
        waits: FloatArray = np.where(started, first_start, np.maximum(end, arrival)) - arrival
        return waits

    # -- internals ----------------------------------------------------------------------

    def _index(self, queue: str) -> int:
        j = self._queue.get(queue)
        if j is None:
            raise ValueError(f"unknown queue {queue!r}; the meter has {list(self.queues)}")
        return j

    def _job(self, job: str) -> int:
        i = self._jobs.get(job)
        if i is None:
            raise ValueError(f"job {job!r} never arrived")
        if not math.isnan(self._finish[i]):
            raise ValueError(f"job {job!r} has finished already")
        return i

    def _span_lengths(self) -> FloatArray:
        return np.frombuffer(self._spans, dtype=np.float64)

    def _span_matrix(self, values: array[float]) -> FloatArray:
        return np.frombuffer(values, dtype=np.float64).reshape(len(self._spans), len(self.queues))

    def _usage(self) -> tuple[FloatArray, FloatArray]:
        """Per queue: the GPU-seconds it held, and its fair share's, over the intervals.

        The fair shares of every interval are divided at once, one column each."""
        spans = self._span_lengths()
        if not spans.size:
            return np.zeros(len(self.queues)), np.zeros(len(self.queues))
        held = self._span_matrix(self._span_held)
        demand = held + self._span_matrix(self._span_waiting)
        fair = fair_shares(
            self._tree,
            {q: demand[:, j] for j, q in enumerate(self.queues)},
            np.full(spans.size, self.capacity),
            resource=0,
        )
        shares = np.stack([fair.get(q, np.zeros(spans.size)) for q in self.queues], axis=1)
        return spans @ held, spans @ shares


def _mean_p50_p95(values: FloatArray) -> tuple[float | None, float | None, float | None]:
    """The mean, median and 95th percentile of ``values`` (None each: there are none)."""
    if not values.size:
        return None, None, None
    p50, p95 = np.percentile(values, [50, 95])
    return float(values.mean()), float(p50), float(p95)
