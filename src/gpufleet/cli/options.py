"""Checks of ``simulate``'s option values, shared by its protocols: seeds, positive numbers.

Each failure is typer's ``BadParameter``: click prints the usage and the message, exit code 2.
"""

from __future__ import annotations

import math

import typer

from gpufleet.sim.batch import seed_range


def parse_seeds(text: str) -> list[int]:
    """``"42"`` -> [42]; ``"42-51"`` -> [42, ..., 51]."""
    try:
        return seed_range(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def positive(value: float, option: str) -> float:
    if not 0 < value < math.inf:
        raise typer.BadParameter(f"{option} must be a positive number, got {value}")
    return value
