"""Read a replay's cost records back: its runs and nodes, to cost again by any dimension.

A replay's report directory holds ``results.json`` (per run its policy, seed and, under
``cost``, the window it was costed over and the price sheet's name), ``cost-runs.csv`` (the
runs of every policy and seed) and ``cost-nodes.csv`` (the nodes with the prices they were
costed at; ``report/cost_files.py`` writes both). :func:`load_cost_runs` reads the runs of
one policy and seed into :class:`~gpufleet.cost.allocation.Runs` — with the dimensions
``queue``, ``job``, ``experiment`` (a replay's experiment is its job: its PodGroup),
``outcome`` and ``nodeType`` — and the nodes into :class:`~gpufleet.cost.allocation.Nodes`,
so that ``allocate(runs, nodes, window)`` gives the replay's allocation again.

Every fault is one :class:`~gpufleet.load.errors.InputError` naming the file, the line and
the column: a missing file, a header without a column, a number that is not one, a node
the nodes file does not have, a run that ends before it starts, a directory whose runs
need ``policy`` or ``seed`` to choose one.
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import NamedTuple

import numpy as np

from gpufleet.cost.allocation import Nodes, Runs
from gpufleet.load.errors import InputError, reading
from gpufleet.load.shown import shown
from gpufleet.metering.runs import OUTCOMES
from gpufleet.model.arrays import FloatArray
from gpufleet.model.costs import NODE_COLUMNS, NODES_FILE, RUN_COLUMNS, RUNS_FILE

RESULTS_FILE = "results.json"


class CostRecords(NamedTuple):
    """One replay run's records: what ``allocate`` needs, and the sheet they were priced by."""

    runs: Runs
    nodes: Nodes
    window: tuple[float, float]
    sheet: str


def load_cost_runs(
    directory: Path, *, policy: str | None = None, seed: int | None = None
) -> CostRecords:
    """The runs and nodes of the replay in ``directory`` (module docstring) of ``policy``
    and ``seed``; either may be left out where the directory has one run that matches."""
    policy, seed, window, sheet = _choose(directory / RESULTS_FILE, policy, seed)
    nodes = _nodes(directory / NODES_FILE)
    runs = _runs(directory / RUNS_FILE, policy, seed, nodes)
    return CostRecords(runs, nodes, window, sheet)


def _choose(
    path: Path, policy: str | None, seed: int | None
) -> tuple[str, int, tuple[float, float], str]:
    """The policy, seed, window and sheet of the one costed run that matches."""
    source = str(path)
    with reading(path, "a replay's results.json"):
        text = path.read_text(encoding="utf-8")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(source, f"is not JSON ({error.msg})", line=error.lineno) from None
    except RecursionError:
        raise InputError(source, "is not a results document (nested too deeply)") from None
    runs = document.get("runs") if isinstance(document, dict) else None
    if not isinstance(runs, list):
        raise InputError(source, "expected a results document with a list of runs", field="runs")
    costed = [r for r in runs if isinstance(r, dict) and isinstance(r.get("cost"), dict)]
    if not costed:
        raise InputError(
            source, "holds no costed replay run (gpufleet simulate --protocol replay writes them)"
        )
    chosen = [
        r for r in costed if policy in {None, r.get("policy")} and seed in {None, r.get("seed")}
    ]
    if len(chosen) != 1:
        have = ", ".join(f"{r.get('policy')} seed {r.get('seed')}" for r in costed)
        problem = "no costed run matches" if not chosen else "more than one costed run matches"
        raise InputError(source, f"{problem}; choose a policy and a seed among: {have}")
    run = chosen[0]
    cost = run["cost"]
    window, sheet = cost.get("window_s"), cost.get("sheet")
    if not (
        isinstance(window, list)
        and len(window) == 2
        and all(isinstance(t, int | float) and not isinstance(t, bool) for t in window)
        and window[1] > window[0]
    ):
        raise InputError(
            source,
            "expected [start, end] in seconds, the end after the start",
            field="cost.window_s",
        )
    if not isinstance(sheet, dict) or not isinstance(sheet.get("name"), str):
        raise InputError(source, "expected the price sheet's name", field="cost.sheet.name")
    return (
        str(run.get("policy")),
        int(run.get("seed", 0)),
        (float(window[0]), float(window[1])),
        sheet["name"],
    )


def _rows(
    path: Path, columns: tuple[str, ...]
) -> tuple[list[tuple[int, list[str]]], dict[str, int]]:
    """The rows of a CSV file whose header has ``columns``, with their line numbers, and
    each column's index."""
    source = str(path)
    with reading(path, "a CSV file"), path.open(newline="", encoding="utf-8") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise InputError(source, f"is empty, expected the header {','.join(columns)}", line=1)
    header = rows[0]
    for column in columns:
        if column not in header:
            raise InputError(source, "the header has no such column", line=1, field=column)
    for n, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise InputError(source, f"expected {len(header)} values, got {len(row)}", line=n)
    return list(enumerate(rows[1:], start=2)), {c: header.index(c) for c in columns}


def _floats(
    path: Path, rows: list[tuple[int, list[str]]], at: dict[str, int], columns: tuple[str, ...]
) -> FloatArray:
    """``len(rows) x len(columns)``: the numbers of ``columns``."""
    values = np.empty((len(rows), len(columns)))
    for j, column in enumerate(columns):
        k = at[column]
        for i, (n, row) in enumerate(rows):
            try:
                values[i, j] = float(row[k])
            except ValueError:
                raise InputError(
                    str(path), f"expected a number, got {shown(row[k])}", line=n, field=column
                ) from None
            if math.isnan(values[i, j]):
                raise InputError(str(path), "expected a number, got nan", line=n, field=column)
    return values


def _nodes(path: Path) -> Nodes:
    rows, at = _rows(path, NODE_COLUMNS)
    numbers = _floats(path, rows, at, NODE_COLUMNS[3:])
    return Nodes.of(
        [row[at["node"]] for _, row in rows],
        types=[row[at["nodeType"]] for _, row in rows],
        categories=[row[at["category"]] for _, row in rows],
        capacity=numbers[:, 0:3],
        prices=numbers[:, 3:6],
        start=numbers[:, 6],
        end=numbers[:, 7],
    )


def _runs(path: Path, policy: str, seed: int, nodes: Nodes) -> Runs:
    source = str(path)
    every, at = _rows(path, RUN_COLUMNS)
    rows = [
        (n, row) for n, row in every if row[at["policy"]] == policy and row[at["seed"]] == str(seed)
    ]
    index = {name: k for k, name in enumerate(nodes.names)}
    node: list[int] = []
    for n, row in rows:
        k = index.get(row[at["node"]])
        if k is None:
            raise InputError(
                source,
                f"node {shown(row[at['node']])} is not in {NODES_FILE}",
                line=n,
                field="node",
            )
        if row[at["outcome"]] not in OUTCOMES:
            raise InputError(
                source,
                f"expected one of {', '.join(OUTCOMES)}, got {shown(row[at['outcome']])}",
                line=n,
                field="outcome",
            )
        node.append(k)
    numbers = _floats(path, rows, at, ("start", "end", "gpus", "cpuCores", "ramGiB"))
    for (n, _), start, end in zip(rows, numbers[:, 0], numbers[:, 1], strict=True):
        if not end >= start:
            raise InputError(
                source, f"the run ends ({end:g}) before it starts ({start:g})", line=n, field="end"
            )
    jobs = [row[at["job"]] for _, row in rows]
    return Runs.of(
        [row[at["pod"]] for _, row in rows],
        node=node,
        start=numbers[:, 0],
        end=numbers[:, 1],
        request=numbers[:, 2:5],
        dims={
            "queue": [row[at["queue"]] for _, row in rows],
            "job": jobs,
            "experiment": jobs,
            "outcome": [row[at["outcome"]] for _, row in rows],
            "nodeType": [nodes.types[k] for k in node],
        },
    )
