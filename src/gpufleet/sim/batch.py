"""Many fill runs (workloads x policies x seeds), in parallel processes when asked.

Each run is independent and deterministic in its seed, so the results do not depend on the
number of worker processes or on which finishes first; they are returned in task order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

from gpufleet.load.traces.openb import Workload, load_nodes, load_pods
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.results import FillRun
from gpufleet.plugins.registry import POLICIES
from gpufleet.sim.fill import Progress, run_fill


def seed_range(text: str) -> list[int]:
    """``"42"`` -> [42]; ``"42-51"`` -> [42, ..., 51]. ValueError names what was expected."""
    first, sep, last = text.partition("-")
    try:
        lo = int(first)
        hi = int(last) if sep else lo
    except ValueError:
        raise ValueError(f"expected a seed (42) or a range (42-51), got {text!r}") from None
    if lo < 0 or hi < lo:
        raise ValueError(f"expected a non-negative, ascending range, got {text!r}")
    return list(range(lo, hi + 1))


@dataclass(frozen=True, slots=True)
class FillTask:
    """One fill run to do: files, policy, seed, inflation."""

    workload: Path
    nodes: Path
    policy: str
    seed: int
    inflate: float = 1.3


@functools.cache
def _workload(path: Path) -> Workload:
    return load_pods(path)


@functools.cache
def _nodes(path: Path) -> tuple[NodeSpec, ...]:
    return load_nodes(path)


def run_task(task: FillTask, progress: Progress | None = None) -> FillRun:
    workload = _workload(task.workload)
    return run_fill(
        _nodes(task.nodes),
        workload.pods,
        POLICIES[task.policy],
        workload=workload.name,
        seed=task.seed,
        inflate=task.inflate,
        progress=progress,
    )


def run_tasks(
    tasks: Sequence[FillTask],
    jobs: int = 1,
    on_done: Callable[[FillRun], None] | None = None,
) -> list[FillRun]:
    """Run ``tasks`` (in ``jobs`` processes) and return their results in task order."""
    if jobs <= 1:
        results = []
        for task in tasks:
            results.append(run_task(task))
            if on_done is not None:
                on_done(results[-1])
        return results
    ordered: dict[int, FillRun] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        futures = {pool.submit(run_task, task): i for i, task in enumerate(tasks)}
        for future in as_completed(futures):
            ordered[futures[future]] = future.result()
            if on_done is not None:
                on_done(ordered[futures[future]])
    return [ordered[i] for i in range(len(tasks))]
