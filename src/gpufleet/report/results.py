"""``results.json``: every run, in the schema documented in ``docs/simulate.md``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gpufleet.model.results import FillRun, ReplayRun


def results_json(runs: Sequence[FillRun] | Sequence[ReplayRun]) -> str:
    return json.dumps({"runs": [run.to_json() for run in runs]}, indent=1) + "\n"
