"""Before and after: one benchmark run alternately on two source trees, medians per cell.

A change's speed claim is "within 10% of before" or "twice as fast", and on a shared
machine one run of each says little: runs drift with the machine's load. This runs the
benchmark module ``MODULE`` (with its arguments) ``--runs`` times on each tree, before and
after alternately, each run a fresh process whose ``PYTHONPATH`` is that tree's ``src``
and the tree itself (so each tree's own ``bench/`` runs); it reads the Markdown table
every such benchmark prints and prints one table per tree with the median of each numeric
cell over the runs, then the ratio after/before of each numeric cell.

    python -m bench.interleave --before ../gpufleet-main --runs 5 -- bench.cycle --repeat 1

``--after`` defaults to this tree. A benchmark's ``--no-docs`` is added for it: the runs
never rewrite ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

NUMBER = re.compile(r"^-?[\d,]+(\.\d+)?$")


def run(tree: Path, module: str, args: list[str]) -> list[list[str]]:
    """The rows of the Markdown table the benchmark prints (header first)."""
    env = dict(os.environ, PYTHONPATH=f"{tree / 'src'}{os.pathsep}{tree}")
    out = subprocess.run(
        [sys.executable, "-m", module, *args, "--no-docs"],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=3600,
    ).stdout
    rows = [
        [cell.strip() for cell in line.strip().strip("|").split("|")]
        for line in out.splitlines()
        if line.startswith("|") and not line.startswith("|---")
    ]
    if not rows:
        print(f"error: {module} in {tree} printed no Markdown table to compare", file=sys.stderr)
        raise SystemExit(2)
    return rows


def medians(runs: list[list[list[str]]]) -> list[list[str]]:
    """Per cell, the median over ``runs`` where numeric, else the first run's text."""
    first = runs[0]
    out = []
    for r, row in enumerate(first):
        cells = []
        for c, cell in enumerate(row):
            values = [run[r][c] for run in runs if r < len(run) and c < len(run[r])]
            if all(NUMBER.match(v) for v in values) and r > 0:
                number = statistics.median(float(v.replace(",", "")) for v in values)
                cells.append(f"{number:,.2f}")
            else:
                cells.append(cell)
        out.append(cells)
    return out


def ratios(before: list[list[str]], after: list[list[str]]) -> list[list[str]]:
    out = [after[0]]
    for b, a in zip(before[1:], after[1:], strict=False):
        cells = []
        for x, y in zip(b, a, strict=False):
            if NUMBER.match(x) and NUMBER.match(y) and float(x.replace(",", "")):
                cells.append(f"{float(y.replace(',', '')) / float(x.replace(',', '')):.3f}")
            else:
                cells.append(y)
        out.append(cells)
    return out


def show(title: str, rows: list[list[str]]) -> None:
    print(f"\n{title}\n")
    for i, row in enumerate(rows):
        print("| " + " | ".join(row) + " |")
        if i == 0:
            print("|" + "---|" * len(row))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("module")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    extra = [a for a in args.args if a != "--"]
    runs: dict[str, list[list[list[str]]]] = {"before": [], "after": []}
    for i in range(args.runs):
        for name, tree in (("before", args.before), ("after", args.after)):
            runs[name].append(run(tree.resolve(), args.module, extra))
            print(f"run {i + 1}/{args.runs} {name}: done", file=sys.stderr)
    before, after = medians(runs["before"]), medians(runs["after"])
    print(f"{args.module} {' '.join(extra)}: median of {args.runs} interleaved runs per tree")
    show("before", before)
    show("after", after)
    show("after / before", ratios(before, after))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
