"""Where the benchmarks find the traces: ``--traces DIR``, by default ``../shared/traces``
beside the repository (PROVENANCE.md there says where each file comes from).

A benchmark that reads a trace names the files it needs inside DIR; a missing one ends the
benchmark with one line on stderr and exit code 2, before anything runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from bench.docs import ROOT
from gpufleet.load.errors import InputError

TRACES = ROOT.parent / "shared" / "traces"
OPENB = "alibaba-gpu-v2023"
"""The folder of the openb CSVs and the FGD authors' results inside the traces."""
PHILLY = Path("philly") / "philly.csv"
POLLUX = Path("philly") / "pollux-osdi21"
"""The Pollux authors' workloads and results (``load/traces/pollux.py``)."""


def add_traces_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--traces",
        type=Path,
        default=TRACES,
        metavar="DIR",
        help=f"the traces directory (default: {TRACES})",
    )


def openb_dir(traces: Path) -> Path:
    """The openb folder of ``traces``; ``traces`` itself when it holds the openb CSVs."""
    inside = traces / OPENB
    return inside if inside.is_dir() or not traces.is_dir() else traces


def require(*paths: Path) -> None:
    """Exit 2 with one line naming the first of ``paths`` that does not exist."""
    for path in paths:
        if not path.exists():
            sys.stderr.write(
                f"bench: error: {path}: no such file or directory (the traces; give their "
                "directory with --traces DIR)\n"
            )
            raise SystemExit(2)


def unreadable(error: InputError) -> NoReturn:
    """Exit 2 with one line: a trace that exists but cannot be read (its error names the
    file and what was expected)."""
    sys.stderr.write(f"bench: error: {error}\n")
    raise SystemExit(2)
