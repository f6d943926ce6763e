"""Read the Pollux workloads (OSDI '21, ``philly/pollux-osdi21`` in the traces): jobs sampled
from the Philly trace by the Pollux authors, as the replay needs them.

A workload CSV has one job per row: ``name``, ``time`` (submission, seconds from the
workload's start), ``application`` (the model trained: cifar10, imagenet, ncf, ...),
``num_replicas`` (its GPUs) and ``batch_size``. It gives no run time: the Pollux simulator
computes one from throughput measurements that are not in the traces. What the traces do
have is each job's completion time under the authors' Tiresias runs (``results-jobload/
tiresias-<load>/summary.json``, 32 runs of the eight workloads at four loads), where a job
keeps the GPUs and batch size it asked for. A job of one application, GPU count and batch
size does the same work in every workload, so its **run time** here is the shortest
completion time any job of the same three had in those runs: one that never waited and was
placed well. (Each combination has 33 to 2,538 such jobs; the longer completions include
the wait.)

The cluster is the one the authors simulated: 16 nodes of 4 GPUs. A job of N GPUs is a gang
of ceil(N/4) pods of ceil(N/ceil(N/4)) GPUs each (Philly's rule, ``philly.gang_shape``: a
job of 5 GPUs runs as 2 pods of 3), in one queue (the workloads have no tenant). Every row
and result is checked: a bad value stops the load with an :class:`InputError` naming the
file and the line and field (a workload) or the key (a summary), and a job whose
combination has no run time names the file and the job.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError, reading
from gpufleet.load.shown import shown
from gpufleet.load.traces.openb import csv_rows
from gpufleet.load.traces.philly import TraceJob, gang_shape, number

if TYPE_CHECKING:
    from pathlib import Path

COLUMNS = ("name", "time", "application", "num_replicas", "batch_size")
WORKLOAD_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
"""A workload of the results: the stem of its CSV beside the others (no path)."""
GPUS_PER_SERVER = 4
"""The GPUs of each of the simulated cluster's 16 nodes."""
LOADS = ("0.5", "1.0", "1.5", "2.0")
"""The relative job loads of the authors' runs: ``workloads-<load>`` (``workloads`` for 1.0)
with ``results-jobload/tiresias-<load>``."""


@dataclass(frozen=True, slots=True)
class PolluxJob:
    """One row of a workload."""

    name: str
    arrival_s: float
    application: str
    gpus: int
    batch_size: int

    @property
    def kind(self) -> tuple[str, int, int]:
        """What fixes its run time: (application, GPUs, batch size)."""
        return self.application, self.gpus, self.batch_size


def load_workload(path: Path) -> list[PolluxJob]:
    """The jobs of a Pollux workload CSV, in submission order."""
    source = str(path)
    jobs = []
    seen: set[str] = set()
    for line, row in csv_rows(path, COLUMNS):
        name = (row.get("name") or "").strip()
        if not name:
            raise InputError(source, "expected a job name", line=line, field="name")
        if name in seen:
            raise InputError(source, f"job {name} appears twice", line=line, field="name")
        seen.add(name)
        application = (row.get("application") or "").strip()
        if not application:
            raise InputError(source, "expected an application", line=line, field="application")
        jobs.append(
            PolluxJob(
                name,
                number(source, line, row, "time"),
                application,
                _whole(source, line, row, "num_replicas"),
                _whole(source, line, row, "batch_size"),
            )
        )
    if not jobs:
        raise InputError(source, "no jobs in the workload")
    return sorted(jobs, key=lambda j: j.arrival_s)


def run_times(root: Path) -> dict[tuple[str, int, int], float]:
    """Per (application, GPUs, batch size), the shortest completion time of such a job in
    the Tiresias runs under ``root`` (the ``pollux-osdi21`` folder)."""
    best: dict[tuple[str, int, int], float] = {}
    for load in LOADS:
        workloads = root / ("workloads" if load == "1.0" else f"workloads-{load}")
        summary = root / "results-jobload" / f"tiresias-{load}" / "summary.json"
        with reading(summary, "a JSON file"):
            text = summary.read_text(encoding="utf-8")
        try:
            completions = json.loads(text)["jcts"]
        except (ValueError, KeyError, TypeError, RecursionError):
            raise InputError(
                str(summary), "expected a JSON object with jcts: {workload: {job: seconds}}"
            ) from None
        if not isinstance(completions, dict):
            raise InputError(str(summary), "jcts: expected {workload: {job: seconds}}")
        for workload, jcts in sorted(completions.items()):
            if not WORKLOAD_NAME.fullmatch(workload):
                raise InputError(
                    str(summary), f"jcts: expected workload names like workload-1, got {workload!r}"
                )
            kinds = {j.name: j.kind for j in load_workload(workloads / f"{workload}.csv")}
            if not isinstance(jcts, dict):
                raise InputError(str(summary), f"jcts.{workload}: expected {{job: seconds}}")
            for job, raw in jcts.items():
                kind = kinds.get(job)
                if kind is None:
                    raise InputError(
                        str(summary), f"jcts.{workload}.{job}: no such job in {workload}.csv"
                    )
                best[kind] = min(best.get(kind, math.inf), _seconds(summary, workload, job, raw))
    return best


def _seconds(summary: Path, workload: str, job: str, raw: object) -> float:
    """A completion time of ``summary``: a number of seconds above 0."""
    where = f"jcts.{workload}.{job}"
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise InputError(str(summary), f"{where}: expected seconds, got {raw!r}")
    try:
        seconds = float(raw)
    except OverflowError:  # an integer of hundreds of digits
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise InputError(str(summary), f"{where}: expected seconds > 0")
    return seconds


def trace_jobs(
    path: Path,
    times: dict[tuple[str, int, int], float],
    *,
    prefix: str = "",
    offset_s: float = 0.0,
    queue: str = "default",
) -> list[TraceJob]:
    """The jobs of workload ``path`` as trace jobs with their run times, named
    ``prefix + name``, arriving ``offset_s`` later than the workload says."""
    jobs = []
    for job in load_workload(path):
        duration = times.get(job.kind)
        if duration is None:
            application, gpus, batch = job.kind
            raise InputError(
                str(path),
                f"job {job.name}: no run time known for {application} on {gpus} GPU(s) with "
                f"batch size {batch}",
            )
        pods, per_pod = gang_shape(job.gpus, GPUS_PER_SERVER)
        jobs.append(
            TraceJob(prefix + job.name, offset_s + job.arrival_s, duration, pods, per_pod, queue)
        )
    return jobs


def _whole(source: str, line: int, row: dict[str, str], field: str) -> int:
    value = number(source, line, row, field)
    if value != int(value) or value < 1:
        raise InputError(
            source,
            f"expected a whole number >= 1, got {shown(row.get(field))}",
            line=line,
            field=field,
        )
    return int(value)
