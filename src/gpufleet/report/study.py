"""A study's report: per setting, each metric's mean and standard deviation over its seeds;
the Pareto front of cost per finished job against the mean and the 95th-percentile wait;
the failed runs with their errors; as tables, JSON, CSV and a page.

Waits are over every job that arrived, one that never started at its wait so far (the
replay's ``all_waits``), so that a setting which starves jobs cannot look fast; ``never
started`` is shown beside them. Cost per finished job is what the cluster cost over the
replay divided by the jobs that finished: a setting that finishes fewer jobs pays for it.
A setting whose runs all failed has no figures and is on no front; its runs are listed.
"""

from __future__ import annotations

import csv
import html
import io
import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from gpufleet.report.html import page, table_html
from gpufleet.report.table import text_table

HOUR = 3600.0

Result = Mapping[str, Any]


def _hours(value: object) -> float | None:
    return None if not isinstance(value, int | float) else float(value) / HOUR


def _percent(value: object) -> float | None:
    return None if not isinstance(value, int | float) else 100.0 * float(value)


def _field(
    *path: str, scale: Callable[[object], float | None] | None = None
) -> Callable[[Result], float | None]:
    def read(result: Result) -> float | None:
        value: object = result
        for part in path:
            value = value.get(part) if isinstance(value, Mapping) else None
        if scale is not None:
            return scale(value)
        return (
            float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
        )

    return read


def _jobs(*under: str) -> tuple[tuple[str, Callable[[Result], float | None]], ...]:
    """The jobs' metrics every replay reports, read under ``under`` in its result."""
    return (
        ("jobs", _field(*under, "jobs")),
        ("finished", _field(*under, "finished_jobs")),
        ("never started", _field(*under, "never_started_jobs")),
        ("mean wait h", _field(*under, "all_waits", "mean_wait_s", scale=_hours)),
        ("p95 wait h", _field(*under, "all_waits", "p95_wait_s", scale=_hours)),
        ("mean JCT h", _field(*under, "mean_jct_s", scale=_hours)),
    )


METRICS: Mapping[str, tuple[tuple[str, Callable[[Result], float | None]], ...]] = {
    "fill": (
        ("unallocated GPU % at 100%", _field("unallocated_at_100")),
        ("failed pods", _field("failed_pods")),
        ("run s", _field("elapsed_s")),
    ),
    "replay": (
        *_jobs(),
        ("alloc %", _field("gpu_allocation_mean")),
        ("lost GPU-h", _field("lost_gpu_hours")),
        ("cost", _field("cost", "totalCost")),
        ("cost per finished job", _field("cost", "costPerFinishedJob")),
        ("run s", _field("elapsed_s")),
    ),
    "autoscale": (
        *_jobs("replay"),
        ("node-h", _field("node_hours")),
        ("idle %", _field("idle_share", scale=_percent)),
        ("scale-down evictions", _field("scale_down_evictions")),
        ("checkpoint moves", _field("checkpoint_moves")),
        ("spot interruptions", _field("interruptions")),
        ("cost", _field("spend")),
        ("cost per finished job", _field("spend_per_finished_job")),
        ("run s", _field("replay", "elapsed_s")),
    ),
    "balance": (
        *_jobs("training"),
        ("useful usage %", _field("useful_usage", scale=_percent)),
        ("short serving windows", _field("serving", "short_windows")),
        ("latency p99 s", _field("serving", "latency_p99_s")),
        ("jobs stopped", _field("jobs_stopped")),
        ("cost per M requests", _field("cost_per_million_requests")),
        ("cost per finished job", _field("cost_per_finished_job")),
        ("run s", _field("training", "elapsed_s")),
    ),
}
"""Each protocol's metrics, by the column they are shown under, read from a run's result
(an autoscaling run's cost is what its nodes cost: its spend; a lending run's cost per
finished job is the training pool's share of the cluster's cost)."""
PRICED = ("replay", "autoscale", "balance")
"""The protocols whose runs have a cost per finished job: each has the Pareto fronts."""
UNSEEDED = ("replay", "balance")
"""The protocols that draw no random numbers: one run per setting."""
COST, MEAN_WAIT, P95_WAIT = "cost per finished job", "mean wait h", "p95 wait h"
FRONTS = ((MEAN_WAIT, "front: mean wait"), (P95_WAIT, "front: p95 wait"))
"""The Pareto fronts drawn: cost per finished job against each wait."""


@dataclass(frozen=True, slots=True)
class RunRow:
    """One run as the report needs it: what it was, and its result or error."""

    experiment: str
    protocol: str
    inputs: str
    setting: str
    seed: int
    result: Result | None
    error: str | None
    cached: bool


@dataclass(frozen=True, slots=True)
class Stat:
    """A metric over a setting's runs: mean and sample standard deviation (None: fewer
    than two runs); ``whole``: every value was a whole number (a count)."""

    mean: float | None
    sd: float | None
    whole: bool = False

    @classmethod
    def of(cls, values: Sequence[float]) -> Stat:
        return cls(
            statistics.fmean(values) if values else None,
            statistics.stdev(values) if len(values) > 1 else None,
            all(float(v).is_integer() for v in values),
        )

    def text(self) -> str:
        if self.mean is None:
            return "-"
        digits = 2 if abs(self.mean) < 100 and not (self.whole and self.sd is None) else 0
        mean = f"{self.mean:,.{digits}f}"
        return mean if self.sd is None else f"{mean} ± {self.sd:,.{digits}f}"

    def to_json(self) -> dict[str, float | None]:
        return {"mean": _round(self.mean), "sd": _round(self.sd)}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 6)


@dataclass(frozen=True, slots=True)
class SettingSummary:
    """The runs of one setting on one set of inputs, over their seeds."""

    experiment: str
    protocol: str
    inputs: str
    setting: str
    runs: int
    failed: int
    metrics: Mapping[str, Stat]
    fronts: tuple[str, ...] = ()
    """The fronts (:data:`FRONTS` labels) this setting is on."""

    def to_json(self) -> dict[str, object]:
        return {
            "experiment": self.experiment,
            "protocol": self.protocol,
            "inputs": self.inputs,
            "setting": self.setting,
            "runs": self.runs,
            "failed": self.failed,
            "metrics": {k: v.to_json() for k, v in self.metrics.items()},
            "pareto": {label: label in self.fronts for _, label in FRONTS}
            if self.protocol in PRICED
            else {},
        }


def summarise(rows: Sequence[RunRow]) -> list[SettingSummary]:
    """One summary per experiment, inputs and setting, in the order they first appear;
    then each replay group's Pareto fronts marked."""
    groups: dict[tuple[str, str, str], list[RunRow]] = {}
    for row in rows:
        groups.setdefault((row.experiment, row.inputs, row.setting), []).append(row)
    out = []
    for (experiment, inputs, setting), members in groups.items():
        protocol = members[0].protocol
        done = [m.result for m in members if m.result is not None]
        stats = {}
        for name, read in METRICS[protocol]:
            stats[name] = Stat.of([v for v in (read(r) for r in done) if v is not None])
        out.append(
            SettingSummary(
                experiment, protocol, inputs, setting, len(members), len(members) - len(done), stats
            )
        )
    return _mark_fronts(out)


def pareto(points: Sequence[tuple[float, float]]) -> list[bool]:
    """Which points no other point dominates (at most as large in both, smaller in one)."""
    return [
        not any(o[0] <= p[0] and o[1] <= p[1] and (o[0] < p[0] or o[1] < p[1]) for o in points)
        for p in points
    ]


def _mark_fronts(summaries: list[SettingSummary]) -> list[SettingSummary]:
    by_inputs: dict[tuple[str, str], list[int]] = {}
    for k, s in enumerate(summaries):
        if s.protocol in PRICED:
            by_inputs.setdefault((s.experiment, s.inputs), []).append(k)
    fronts: dict[int, list[str]] = {}
    for members in by_inputs.values():
        for wait, label in FRONTS:
            known = [
                k
                for k in members
                if summaries[k].metrics[COST].mean is not None
                and summaries[k].metrics[wait].mean is not None
            ]
            points = [
                (summaries[k].metrics[COST].mean or 0.0, summaries[k].metrics[wait].mean or 0.0)
                for k in known
            ]
            for k, on in zip(known, pareto(points), strict=True):
                if on:
                    fronts.setdefault(k, []).append(label)
    return [
        SettingSummary(
            s.experiment,
            s.protocol,
            s.inputs,
            s.setting,
            s.runs,
            s.failed,
            s.metrics,
            tuple(fronts.get(k, ())),
        )
        for k, s in enumerate(summaries)
    ]


def groups(summaries: Sequence[SettingSummary]) -> dict[tuple[str, str], list[SettingSummary]]:
    """The settings by experiment and inputs: one table and one plot each."""
    out: dict[tuple[str, str], list[SettingSummary]] = {}
    for s in summaries:
        out.setdefault((s.experiment, s.inputs), []).append(s)
    return out


def _columns(protocol: str) -> list[str]:
    columns = ["setting", "runs", *(name for name, _ in METRICS[protocol])]
    if protocol in PRICED:
        columns += [label for _, label in FRONTS]
    return columns


def _cells(s: SettingSummary) -> list[str]:
    runs = f"{s.runs}" if not s.failed else f"{s.runs} ({s.failed} failed)"
    cells = [s.setting, runs, *(s.metrics[name].text() for name, _ in METRICS[s.protocol])]
    if s.protocol in PRICED:
        cells += ["yes" if label in s.fronts else "" for _, label in FRONTS]
    return cells


def _title(experiment: str, protocol: str, inputs: str) -> str:
    spread = "one run per setting" if protocol in UNSEEDED else "mean ± sd over seeds"
    return f"{experiment} ({protocol}): {inputs} — {spread}"


def tables(summaries: Sequence[SettingSummary], rows: Sequence[RunRow]) -> list[Table]:
    """One table per experiment and inputs, then the failed runs (if any)."""
    out = [
        text_table(
            _title(e, members[0].protocol, i),
            _columns(members[0].protocol),
            [_cells(s) for s in members],
        )
        for (e, i), members in groups(summaries).items()
    ]
    failed = failed_rows(rows)
    if failed:
        out.append(text_table("Failed runs", FAILED_COLUMNS, failed))
    return out


FAILED_COLUMNS = ("experiment", "inputs", "setting", "seed", "error")


def failed_rows(rows: Sequence[RunRow]) -> list[tuple[str, ...]]:
    return [
        (r.experiment, r.inputs, r.setting, str(r.seed), r.error or "")
        for r in rows
        if r.result is None
    ]


def study_json(
    header: Mapping[str, object],
    runs: Sequence[Mapping[str, object]],
    summaries: Sequence[SettingSummary],
) -> str:
    """The study's JSON document: ``header``, every run, every setting's summary."""
    doc = {**header, "runs": list(runs), "summary": [s.to_json() for s in summaries]}
    return json.dumps(doc, indent=2, allow_nan=False) + "\n"


def metrics_of(protocol: str, result: Result | None) -> dict[str, float | None]:
    """A run's metrics (:data:`METRICS`), None each for a failed run."""
    return {name: None if result is None else read(result) for name, read in METRICS[protocol]}


def runs_csv(rows: Sequence[RunRow]) -> str:
    """One line per run: what it was, its status and every metric of either protocol."""
    names = list(dict.fromkeys(n for m in METRICS.values() for n, _ in m))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        ["experiment", "protocol", "inputs", "setting", "seed", "status", "cached", *names, "error"]
    )
    for r in rows:
        values = metrics_of(r.protocol, r.result)
        writer.writerow(
            [
                r.experiment,
                r.protocol,
                r.inputs,
                r.setting,
                r.seed,
                "ok" if r.result is not None else "failed",
                str(r.cached).lower(),
                *(_csv_number(values.get(n)) for n in names),
                r.error or "",
            ]
        )
    return buffer.getvalue()


def summary_csv(summaries: Sequence[SettingSummary]) -> str:
    """One line per setting: each metric's mean and sd, and the fronts it is on."""
    names = list(dict.fromkeys(n for m in METRICS.values() for n, _ in m))
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    header = ["experiment", "protocol", "inputs", "setting", "runs", "failed"]
    header += [f"{n} {part}" for n in names for part in ("mean", "sd")]
    writer.writerow([*header, *(label for _, label in FRONTS)])
    for s in summaries:
        cells: list[object] = [s.experiment, s.protocol, s.inputs, s.setting, s.runs, s.failed]
        for n in names:
            stat = s.metrics.get(n, Stat(None, None))
            cells += [_csv_number(stat.mean), _csv_number(stat.sd)]
        cells += [
            str(label in s.fronts).lower() if s.protocol in PRICED else "" for _, label in FRONTS
        ]
        writer.writerow(cells)
    return buffer.getvalue()


def _csv_number(value: float | None) -> str:
    return "" if value is None or not math.isfinite(value) else f"{value:.6g}"


def study_html(
    title: str,
    subtitle: str,
    summaries: Sequence[SettingSummary],
    rows: Sequence[RunRow],
    images: Mapping[tuple[str, str], str],
) -> str:
    """``index.html``: each experiment's table and plot, then the failed runs."""
    parts = []
    for (e, i), members in groups(summaries).items():
        protocol = members[0].protocol
        parts.append(f"<h2>{_escape(_title(e, protocol, i))}</h2>")
        parts.append(table_html(_columns(protocol), [_cells(s) for s in members]))
        if (e, i) in images:
            parts.append(f'<img src="{_escape(images[e, i])}" alt="{_escape(e)}">')
    failed = failed_rows(rows)
    if failed:
        parts += ["<h2>Failed runs</h2>", table_html(FAILED_COLUMNS, failed)]
    parts.append(
        '<p class="note">Waits count every job that arrived, one that never started at its '
        "wait so far. Cost per finished job: the cluster's cost over the replay, over the "
        'jobs that finished. Every run is in <a href="results.json">results.json</a>, '
        '<a href="runs.csv">runs.csv</a> and <a href="summary.csv">summary.csv</a>.</p>'
    )
    return page(title, subtitle, "\n".join(parts))


def _escape(text: str) -> str:
    return html.escape(text, quote=True)
