"""Read the Microsoft Philly trace (``philly.csv``): one job per row, as the replay needs it.

Columns: ``timestamp`` (submission, ``YYYY-MM-DD HH:MM:SS``), ``duration`` (seconds the job
ran), ``num_gpus``, ``gpu_time`` (ignored: duration x GPUs) and ``cluster`` (the virtual
cluster, which becomes the job's queue). A job of N GPUs is a gang of ceil(N/8) pods of
N/ceil(N/8) GPUs each (8-GPU servers, as in Philly). Jobs come sorted by submission time,
arrivals in seconds from the first one.

Every row is checked; the first bad value stops the load with an :class:`InputError` naming
the file, the line and the field.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError, reading
from gpufleet.load.shown import shown

if TYPE_CHECKING:
    from pathlib import Path

COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
GPUS_PER_SERVER = 8


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One job of a trace: when it arrives, how long it runs, its gang and its queue."""

    name: str
    arrival_s: float
    duration_s: float
    pods: int
    gpus_per_pod: int
    queue: str

    @property
    def gpus(self) -> int:
        return self.pods * self.gpus_per_pod


def gang_shape(gpus: int, per_server: int = GPUS_PER_SERVER) -> tuple[int, int]:
    """(pods, GPUs per pod) of a job of ``gpus`` GPUs on servers of ``per_server`` GPUs."""
    pods = max(1, math.ceil(gpus / per_server))
    return pods, math.ceil(gpus / pods)


def _rows(source: str, reader: csv.DictReader[str]) -> Iterator[tuple[int, dict[str, str]]]:
    """Each row with its line; a row the csv module refuses (a field over its 128 KiB
    limit, a NUL) is one error naming the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise InputError(source, f"not a CSV row: {exc}", line=reader.line_num) from None
        yield reader.line_num, row


def load_philly(path: Path) -> list[TraceJob]:
    """The jobs of a Philly trace CSV, in submission order."""
    source = str(path)
    with reading(path, "a CSV file"):
        text = path.read_text(encoding="utf-8")
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise InputError(
            source,
            f"missing column(s) {', '.join(missing)}; expected a header with {', '.join(COLUMNS)}",
            line=1,
        )
    rows = []
    for line, row in _rows(source, reader):
        try:
            stamp = dt.datetime.strptime(row["timestamp"], "%Y-%m-%d %H:%M:%S")  # noqa: DTZ007
        except (TypeError, ValueError):
            raise InputError(
                source,
                f"expected a time like 2017-10-09 07:01:55, got {shown(row['timestamp'])}",
                line=line,
                field="timestamp",
            ) from None
        duration = number(source, line, row, "duration")
        gpus = number(source, line, row, "num_gpus")
        if gpus != int(gpus) or gpus < 1:
            raise InputError(
                source,
                f"expected a whole number of GPUs >= 1, got {shown(row['num_gpus'])}",
                line=line,
                field="num_gpus",
            )
        queue = (row.get("cluster") or "").strip()
        if not queue:
            raise InputError(source, "expected a cluster name", line=line, field="cluster")
        rows.append((stamp, line, duration, int(gpus), queue))
    if not rows:
        raise InputError(source, "no jobs in the trace")
    rows.sort(key=lambda r: (r[0], r[1]))
    start = rows[0][0]
    jobs = []
    for stamp, line, duration, gpus, queue in rows:
        pods, per_pod = gang_shape(gpus)
        jobs.append(
            TraceJob(
                f"philly-{line:06d}",
                (stamp - start).total_seconds(),
                duration,
                pods,
                per_pod,
                queue,
            )
        )
    return jobs


NUMBER = re.compile(r"[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?|\.[0-9]+(?:[eE][+-]?[0-9]+)?")


def number(source: str, line: int, row: dict[str, str], field: str) -> float:
    """``field`` of ``row`` as a finite non-negative number (an error naming it otherwise)."""
    raw = row.get(field)
    text = (raw or "").strip()
    number = NUMBER.fullmatch(text) is not None  # float() takes "1_0", "٣" and "inf"
    value = float(text) if number else math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(
            source, f"expected a non-negative number, got {shown(raw)}", line=line, field=field
        )
    return value
