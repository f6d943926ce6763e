"""The FGD authors' published results (``fgd-expected-results/analysis_allo_discrete.csv``).

Each row holds one run's GPU allocation (%) at arrived workload 0..130; unallocated at
arrived 100% is ``100 - row["100"]``. Policy directory names map to gpufleet policies.
"""

from __future__ import annotations

import csv
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gpufleet.sim.batch import FillTask

POLICY_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dot-product",
    "03-GpuClustering": "gpu-clustering",
    "04-GpuPacking": "gpu-packing",
    "05-BestFit": "best-fit",
    "06-FGD": "fgd",
}
PUBLISHED_POLICIES = tuple(POLICY_NAMES.values())
RESULTS_FILE = Path("fgd-expected-results") / "analysis_allo_discrete.csv"


NODES_FILE = "openb_node_list_gpu_node.csv"


def chosen_workloads(published: Iterable[tuple[str, str]], names: list[str] | None) -> list[str]:
    """Workloads with published results, all or those named (``default``, ``cpu050``, ...)."""
    workloads = sorted({w for w, _ in published})
    if names:
        workloads = [w for w in workloads if w.removeprefix("openb_pod_list_") in names]
    return workloads


def fill_tasks(
    traces: Path, workloads: list[str], policies: Iterable[str], seeds: list[int]
) -> list[FillTask]:
    """One fill run per workload, policy and seed, on the openb GPU nodes."""
    return [
        FillTask(traces / f"{w}.csv", traces / NODES_FILE, p, s)
        for w in workloads
        for p in policies
        for s in seeds
    ]


@dataclass(frozen=True, slots=True)
class Published:
    mean: float
    sd: float
    runs: int


def published_unallocated(traces: Path) -> dict[tuple[str, str], Published]:
    """(workload, policy) -> mean and population sd of unallocated GPU % at arrived 100%.

    Population sd, as the benchmark's table of published numbers uses.
    """
    values: dict[tuple[str, str], list[float]] = {}
    with (traces / RESULTS_FILE).open(newline="") as handle:
        for row in csv.DictReader(handle):
            key = (row["workload"], POLICY_NAMES[row["sc_policy"]])
            values.setdefault(key, []).append(100.0 - float(row["100"]))
    return {
        key: Published(statistics.fmean(v), statistics.pstdev(v), len(v))
        for key, v in values.items()
    }
