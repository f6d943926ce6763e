"""What the commands print with: warnings about the input, consoles for tables, progress bars.

Warnings go to stderr as kubectl prints them; tables to stdout (or stderr when stdout
carries JSON), as wide as a terminal, or ``PIPE_WIDTH`` columns when written to a pipe or
file; progress bars to stderr, gone when the work is done.
"""

from __future__ import annotations

import sys

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)

PIPE_WIDTH = 200
"""Columns of a table written to a pipe or file (rich would take 80 and cut every cell)."""


def warn(message: str) -> None:
    """A warning about the input, on stderr as kubectl prints them."""
    sys.stderr.write(f"Warning: {message}\n")


def make_console(*, stderr: bool = False) -> Console:
    """A console for tables: a terminal's width, else (a pipe, a file) ``PIPE_WIDTH``.

    Not a terminal, rich takes ``COLUMNS`` or 80 and cuts every cell of a wide table to
    "…"; a file has no width to fit, so the table gets room for its columns."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, width=max(PIPE_WIDTH, console.width))


def make_progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )
