"""Checks of the commands' option values: seeds, positive numbers, durations.

Each failure is typer's ``BadParameter``: click prints the usage and the message, exit code 2.
"""

from __future__ import annotations

import math

import typer

from gpufleet.load.objects.reader import duration_seconds
from gpufleet.sim.batch import seed_range


def parse_seeds(text: str) -> list[int]:
    """``"42"`` -> [42]; ``"42-51"`` -> [42, ..., 51]."""
    try:
        return seed_range(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def duration(text: str) -> float:
    """A duration option, in seconds: ``60``, ``60s``, ``15m``, ``1h30m`` (as the
    configuration file and Kubernetes write them). A number is returned as it is, for the
    option's own range check to judge."""
    try:
        return float(text)
    except ValueError:
        pass
    seconds = duration_seconds(text)
    if seconds is None:
        raise typer.BadParameter(
            f"expected seconds or a duration such as '90s', '10m' or '1h30m', got {text!r}"
        )
    return seconds


def positive(value: float, option: str) -> float:
    if not 0 < value < math.inf:
        raise typer.BadParameter(f"{option} must be a positive number, got {value}")
    return value
