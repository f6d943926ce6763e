"""Model-constrained variants of the published openb workloads, for the fill benchmarks.

Each variant is a published workload with a share of its GPU pods naming GPU models in
``gpu_spec`` (:func:`gpufleet.sim.gpu_spec.constrain_gpu_models`: models drawn in
proportion to the cluster's GPUs per model, a fifth of them as a set of two), from a fixed
generator seed, so every run of the benchmark measures the same files. The variants are
written as openb pod CSVs into a directory and read back by the ordinary loader, exactly
as a trace file with a ``gpu_spec`` column would be.

    python -m bench.openb_constrained DIR     # write the variants' CSVs into DIR
"""

from __future__ import annotations

import csv
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.published import NODES_FILE
from gpufleet.load.traces.openb import load_nodes, load_pods
from gpufleet.sim.gpu_spec import constrain_gpu_models

SET_SHARE = 0.2
"""Of the constrained pods, the share that names two models (``V100M16|V100M32``)."""


@dataclass(frozen=True, slots=True)
class Variant:
    base: str
    """Published workload, ``default``, ``cpu200``, ..."""
    fraction: float
    """Share of the GPU pods that name models."""
    seed: int = 0
    """Seed of the generator that picks the pods and their models."""

    @property
    def name(self) -> str:
        return f"{self.base}-models{round(100 * self.fraction)}"


VARIANTS = (
    Variant("default", 0.10, seed=1),
    Variant("default", 0.20, seed=2),
    Variant("default", 0.35, seed=3),
    Variant("cpu200", 0.20, seed=4),
    Variant("gpushare60", 0.35, seed=5),
    Variant("multigpu30", 0.10, seed=6),
    Variant("multigpu30", 0.35, seed=7),
)


def write_variant(traces: Path, variant: Variant, directory: Path) -> Path:
    """Write ``variant`` as ``openb_pod_list_<name>.csv`` in ``directory``; its path."""
    nodes = load_nodes(traces / NODES_FILE)
    pods = load_pods(traces / f"openb_pod_list_{variant.base}.csv").pods
    rng = np.random.default_rng(variant.seed)
    pods = constrain_gpu_models(pods, nodes, variant.fraction, rng, set_share=SET_SHARE)
    path = directory / f"openb_pod_list_{variant.name}.csv"
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"))
        for p in pods:
            spec = "|".join(sorted(p.gpu_models)) if p.gpu_models else ""
            writer.writerow((p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, spec))
    return path


def write_variants(
    traces: Path, directory: Path, variants: tuple[Variant, ...] | list[Variant] = VARIANTS
) -> list[Path]:
    return [write_variant(traces, v, directory) for v in variants]


if __name__ == "__main__":
    from bench.openb_fidelity import TRACES

    for written in write_variants(TRACES, Path(sys.argv[1])):
        print(written)
