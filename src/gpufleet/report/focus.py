"""Write FOCUS rows (``cost/focus.py``) as a CSV file: ``gpufleet cost --focus FILE.csv``.

One header row of FOCUS column ids, then one line per row. FOCUS's null is an empty field (as
the FinOps Foundation's validator and most CSV readers take it); strings are written as they
are, quoted only where CSV needs it; numbers in FOCUS's numeric format: the shortest decimal
that reads back as the same float, in ``mEn`` notation where Python would write an exponent,
never with a ``+`` sign (``1e-07`` becomes ``1E-7``, ``1e+16`` becomes ``1E16``).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from pathlib import Path

from gpufleet.cost.focus import FOCUS_COLUMNS, Cell
from gpufleet.report.files import atomic_path


def focus_number(x: float) -> str:
    """``x`` in FOCUS's numeric format (module docstring)."""
    if not math.isfinite(x):
        raise ValueError(f"a FOCUS number must be finite, got {x!r}")
    text = repr(float(x) + 0.0)  # + 0.0: no "-0.0"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa}E{int(exponent)}"


def focus_cell(value: Cell) -> str:
    """One field: empty for null, a number in FOCUS's format, a string as it is."""
    if value is None:
        return ""
    if isinstance(value, float | int):
        return focus_number(float(value))
    return value


def write_focus(
    rows: Iterable[Mapping[str, Cell]], path: Path, columns: Sequence[str] | None = None
) -> int:
    """Write ``rows`` to ``path`` as FOCUS CSV, in the order of ``columns`` (by default the
    first row's, or the FOCUS columns when there is none); the number of rows written."""
    it = iter(rows)
    first = next(it, None)
    if columns is None:
        columns = tuple(first) if first is not None else FOCUS_COLUMNS
    count = 0
    with atomic_path(path) as temporary, temporary.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in chain([first] if first is not None else [], it):
            writer.writerow([focus_cell(row[c]) for c in columns])
            count += 1
    return count
