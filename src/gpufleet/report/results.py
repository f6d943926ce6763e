"""``results.json``: every run, in the schema documented in ``docs/simulate.md``."""

from __future__ import annotations

import json
from collections.abc import Sequence

from gpufleet.model.results import FillRun, ReplayRun


def results_json(runs: Sequence[FillRun] | Sequence[ReplayRun]) -> str:
    return json.dumps({"runs": [run.to_json() for run in runs]}, indent=1) + "\n"


def timeless(doc: object) -> object:
    """A results document without the seconds its computation took (``elapsed_s``, at any
    depth): what two runs of the same input and seed must agree on."""
    if isinstance(doc, dict):
        return {k: timeless(v) for k, v in doc.items() if k != "elapsed_s"}
    if isinstance(doc, list):
        return [timeless(v) for v in doc]
    return doc
