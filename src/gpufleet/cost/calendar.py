"""Epoch seconds as calendar dates (UTC, the proleptic Gregorian calendar), by integer
arithmetic: the pure core reads no clock and imports no ``datetime``, and FOCUS writes its
times and billing months as dates (``cost/focus.py``)."""

from __future__ import annotations

import math

DAY = 86400


def civil_from_days(days: int) -> tuple[int, int, int]:
    """Year, month and day of the ``days``-th day after 1970-01-01 (proleptic Gregorian):
    counted in 400-year eras of 146,097 days, each year starting on 1 March so that the leap
    day falls last."""
    z = days + 719468  # days since 0000-03-01
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153  # months since March
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def days_from_civil(year: int, month: int, day: int) -> int:
    """The inverse of :func:`civil_from_days`."""
    y = year - (month <= 2)
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (month - 3 if month > 2 else month + 9) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def iso_utc(t: float) -> str:
    """Epoch seconds as FOCUS writes a moment: ``YYYY-MM-DDTHH:mm:ssZ``, UTC, the fraction of
    a second dropped."""
    days, seconds = divmod(math.floor(t), DAY)
    year, month, day = civil_from_days(days)
    hh, rest = divmod(seconds, 3600)
    mm, ss = divmod(rest, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hh:02d}:{mm:02d}:{ss:02d}Z"


def month_of(t: float) -> tuple[float, float]:
    """The calendar month (UTC) holding epoch second ``t``: its start and the next's."""
    year, month, _ = civil_from_days(math.floor(t) // DAY)
    nxt = (year + 1, 1) if month == 12 else (year, month + 1)
    return (
        float(days_from_civil(year, month, 1) * DAY),
        float(days_from_civil(*nxt, 1) * DAY),
    )
