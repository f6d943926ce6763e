"""The summary table of a simulation, as a rich table for the terminal."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text

from gpufleet.report.summary import FRAG_AT, PolicySummary

COLUMNS = (
    "policy",
    "unalloc % @100",
    "alloc % @130",
    f"frag % @{FRAG_AT}",
    "failed pods",
    "time s",
)
"""``@x``: at arrived workload ``x``% of cluster GPU capacity."""


def rows(summaries: Sequence[PolicySummary]) -> list[tuple[str, ...]]:
    return [
        (
            s.policy,
            s.unallocated_at_100.text(),
            s.allocation_at_130.text(),
            s.frag_ratio.text(1),
            s.failed_pods.text(0),
            s.elapsed_s.text(1),
        )
        for s in summaries
    ]


def summary_table(summaries: Sequence[PolicySummary]) -> Table:
    workloads = sorted({s.workload for s in summaries})
    seeds = sorted({seed for s in summaries for seed in s.seeds})
    seed_text = (
        f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}-{seeds[-1]} (mean ± sd)"
    )
    return text_table(f"{', '.join(workloads)} — {seed_text}", COLUMNS, rows(summaries))


def text_table(title: str, columns: Sequence[str], cells: Sequence[Sequence[str | Text]]) -> Table:
    """A terminal table: its first column, the name, left-aligned and never wrapped; the
    figures right-aligned."""
    table = Table(title=title)
    for i, column in enumerate(columns):
        table.add_column(column, justify="left" if i == 0 else "right", no_wrap=i == 0)
    for row in cells:
        table.add_row(*row)
    return table
