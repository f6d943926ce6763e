"""Read a ServeGen serving load (``servegen/`` in the traces): the request rate of one
model over time, and the replicas it asks for.

ServeGen (Alibaba Bailian) publishes, per model, one CSV per client
(``chunk-<n>-trace.csv``), without a header: one row per 600-second window with its start
(seconds), the mean request rate (requests/s), the coefficient of variation of the
inter-arrival times, the arrival distribution's name and its two parameters. A model's
load is the sum of its clients' rates per window. A window in which every client reads 0
is a gap in the collection, not an idle service: it carries the previous window's load
forward (leading gaps take the first window measured). A window that no client's file
lists counts as such a gap too.

Replicas per window follow the issue's serving model: ``ceil(rate * headroom / mu)``, where
``mu`` is what one replica serves (requests/s); by default ``mu`` is set so that the
peak window needs exactly the whole serving pool (the rate's share of the peak, times the
pool, rounded up).

Every row is checked (the arrival distribution's name is free text; its numbers must be
numbers); the first bad value stops the load with an :class:`InputError` naming the file,
the line and the field. Window starts, rates and the client files are bounded
(:data:`MAX_WINDOWS`, :data:`MAX_RATE`, :data:`MAX_CLIENTS`), so a typo cannot ask for
unbounded memory or overflow; a model whose clients all read 0 has no load to carry and is
an error.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.load.errors import InputError
from gpufleet.load.shown import shown
from gpufleet.load.traces.openb import csv_rows
from gpufleet.load.traces.philly import number

if TYPE_CHECKING:
    from pathlib import Path

    from gpufleet.model.arrays import FloatArray, IntArray

COLUMNS = ("start", "rate", "cv", "distribution", "shape", "scale")
WINDOW_S = 600
"""The length of a ServeGen window, in seconds."""
MAX_WINDOWS = 1_000_000
"""At most this many windows (about 19 years): a start beyond it is a typo."""
MAX_CLIENTS = 100_000
"""At most this many client files per model."""
MAX_RATE = 1e9
"""At most this many requests/s per client and window: more is a typo, and would overflow."""
MAX_REPLICAS = 1 << 40
"""At most this many replicas per window (a ``mu`` far below the rates is a mistake)."""
CHUNK = re.compile(r"chunk-([0-9]+)-trace\.csv")
HEADROOM = 1.2
"""Replicas are sized for the rate times this factor."""


@dataclass(frozen=True, slots=True)
class ServingLoad:
    """One model's request rate per window, gaps carried forward."""

    model: str
    window_s: float
    rate: FloatArray
    """Requests/s in each window, from the first window of the trace."""
    clients: int
    gaps: int
    """Windows carried forward (every client read 0, or none listed it)."""

    def sized(self, pool: int, mu_factor: float = 1.0) -> IntArray:
        """Replicas per window with ``mu`` ``mu_factor`` times what makes the peak window
        need all ``pool`` replicas (1: :meth:`replicas`' default)."""
        if mu_factor == 1.0:
            return self.replicas(pool)
        return self.replicas(pool, mu=float(self.rate.max()) * HEADROOM / pool * mu_factor)

    def replicas(
        self, pool: int, *, mu: float | None = None, headroom: float = HEADROOM
    ) -> IntArray:
        """Replicas wanted per window: ``ceil(rate * headroom / mu)``; ``mu`` (requests/s
        per replica) defaults to what makes the peak window need all ``pool`` replicas."""
        if not isinstance(pool, int | np.integer) or pool < 1:
            raise ValueError(f"pool must be a whole number of replicas, at least 1, got {pool}")
        if not math.isfinite(headroom) or headroom <= 0:
            raise ValueError(f"headroom must be a positive factor, got {headroom}")
        if mu is None:  # the peak asks exactly the pool: rates as shares of the peak
            peak = float(self.rate.max(initial=0.0))
            share = self.rate / peak if peak > 0 else np.zeros_like(self.rate)
            wanted = np.ceil(share * pool - 1e-9)
        elif not math.isfinite(mu) or mu <= 0:
            raise ValueError(f"mu must be a positive number of requests/s per replica, got {mu}")
        else:
            wanted = np.ceil(self.rate * headroom / mu)
        if not np.all(np.isfinite(wanted)) or wanted.max(initial=0.0) > MAX_REPLICAS:
            raise ValueError(
                f"pool {pool} and mu {mu} ask for more than {MAX_REPLICAS:,} replicas in a window"
            )
        return np.maximum(wanted, 0).astype(np.int64)


def load_model(directory: Path) -> ServingLoad:
    """The serving load of the model whose client CSVs are in ``directory``."""
    source = str(directory)
    if not directory.is_dir():
        raise InputError(source, "expected a directory of chunk-<n>-trace.csv files")
    numbered: dict[int, Path] = {}
    try:
        for path in directory.iterdir():
            match = CHUNK.fullmatch(path.name)
            if match is None:
                continue
            client = int(match.group(1))
            if client in numbered:
                raise InputError(
                    source,
                    f"has two files for client {client}: {numbered[client].name}, {path.name}",
                )
            numbered[client] = path
            if len(numbered) > MAX_CLIENTS:
                raise InputError(source, f"has over {MAX_CLIENTS:,} client files")
    except OSError as exc:
        raise InputError(source, f"cannot be read ({exc.strerror})") from None
    files = [numbered[client] for client in sorted(numbered)]
    if not files:
        raise InputError(source, "has no chunk-<n>-trace.csv files")
    total = np.zeros(0, dtype=np.float64)
    for path in files:
        rates = _client(path)
        if rates.size > total.size:
            total = np.pad(total, (0, rates.size - total.size))
        total[: rates.size] += rates
    if not np.any(total > 0):
        raise InputError(source, "has no window with requests: every client reads 0")
    rate, gaps = _carried(total)
    return ServingLoad(directory.name, float(WINDOW_S), rate, len(files), gaps)


def _client(path: Path) -> FloatArray:
    """One client's rate per window (0 where its file lists none)."""
    source = str(path)
    rates: dict[int, float] = {}
    for line, row in csv_rows(path, COLUMNS, header=False):
        if None in row:
            raise InputError(
                source, f"has more than the {len(COLUMNS)} columns {', '.join(COLUMNS)}", line=line
            )
        start = number(source, line, row, "start")
        window = int(start // WINDOW_S)
        if start != window * WINDOW_S or window >= MAX_WINDOWS:
            raise InputError(
                source,
                f"expected a window start that is a multiple of {WINDOW_S} s below "
                f"{MAX_WINDOWS * WINDOW_S:,} s, got {shown(row['start'])}",
                line=line,
                field="start",
            )
        if window in rates:
            raise InputError(source, f"lists window {int(start)} s twice", line=line, field="start")
        rate = number(source, line, row, "rate")
        if rate > MAX_RATE:
            raise InputError(
                source,
                f"expected at most {MAX_RATE:g} requests/s, got {shown(row['rate'])}",
                line=line,
                field="rate",
            )
        for field in ("cv", "shape", "scale"):  # not used, but a row is read whole
            number(source, line, row, field)
        rates[window] = rate
    out = np.zeros(max(rates, default=-1) + 1, dtype=np.float64)
    for window, value in rates.items():
        out[window] = value
    return out


def _carried(total: FloatArray) -> tuple[FloatArray, int]:
    """``total`` (some window of it measured) with each gap (0) holding the load of the
    window before it (leading gaps that of the first window measured), and how many windows
    were gaps."""
    measured = total > 0
    gaps = int(total.size - np.count_nonzero(measured))
    last = np.where(measured, np.arange(total.size), 0)
    np.maximum.accumulate(last, out=last)
    first = int(np.argmax(measured))
    last[:first] = first
    return total[last], gaps
