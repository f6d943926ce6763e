"""``simulate --protocol fill``: the FGD paper's protocol, each policy and seed on an openb cluster.

Loads the pod list and the node list (the bundled ones by default), warns about pods no
node could ever hold, fills the cluster once per policy and seed with a progress bar, and
writes the report: the summary table, ``results.json``, the plot and ``index.html``.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from gpufleet.cli.options import positive
from gpufleet.cli.output import make_progress, warn
from gpufleet.load.errors import InputError, limit_from_env
from gpufleet.load.traces.openb import (
    BUNDLED_NODES,
    BUNDLED_WORKLOAD,
    bundled,
    load_nodes,
    load_pods,
)
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.results import FillRun
from gpufleet.plugins.registry import POLICIES
from gpufleet.report.files import write_text
from gpufleet.report.html import report_html
from gpufleet.report.results import results_json
from gpufleet.report.summary import summarise
from gpufleet.report.table import summary_table
from gpufleet.sim.fill import MAX_FILL_PODS, FillTooLargeError, check_size, run_fill
from gpufleet.sim.unfit import unfit_pods

DEFAULT_POLICIES = ("kube-default", "best-fit", "fgd", "gpufleet")


def check_policies(names: list[str] | None) -> list[str]:
    chosen = names or list(DEFAULT_POLICIES)
    for name in chosen:
        if name not in POLICIES:
            raise typer.BadParameter(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    return list(dict.fromkeys(chosen))


def _advance(progress: Progress, task: TaskID, done: int) -> None:
    progress.update(task, completed=done)


def _fill_all(
    name: str,
    pods: Sequence[PodSpec],
    node_specs: Sequence[NodeSpec],
    policies: list[str],
    seed_list: list[int],
    inflate: float,
    max_pods: int,
) -> list[FillRun]:
    """One fill per policy and seed."""
    runs: list[FillRun] = []
    with make_progress() as progress:
        for policy in policies:
            for seed in seed_list:
                task = progress.add_task(f"{name} · {policy} · seed {seed}", total=None)
                runs.append(
                    run_fill(
                        node_specs,
                        pods,
                        POLICIES[policy],
                        workload=name,
                        seed=seed,
                        inflate=inflate,
                        progress=partial(_advance, progress, task),
                        max_pods=max_pods,
                    )
                )
                progress.remove_task(task)
    return runs


def simulate_fill(
    workload: Path | None,
    nodes: Path | None,
    policy: list[str] | None,
    seed_list: list[int],
    inflate: float,
    out: Path,
    console: Console,
) -> str:
    policies = check_policies(policy)
    positive(inflate, "--inflate")
    pods = load_pods(workload or bundled(BUNDLED_WORKLOAD))
    node_specs = load_nodes(nodes or bundled(BUNDLED_NODES))
    unfit = unfit_pods(node_specs, pods.pods)
    if unfit is not None:
        warn(
            f"{unfit.count:,} of {len(pods.pods):,} pods of {pods.name} fit "
            f"no node even on an empty cluster (e.g. {unfit.example}: {unfit.reason}); the "
            "fill runs and counts them as failed"
        )
    max_pods = limit_from_env("GPUFLEET_MAX_FILL_PODS", MAX_FILL_PODS)
    try:  # refused before the progress bars start; tune() holds the bound in any case
        check_size(pods.pods, inflate, ClusterState(node_specs).total_gpu_milli, max_pods)
        runs = _fill_all(pods.name, pods.pods, node_specs, policies, seed_list, inflate, max_pods)
    except FillTooLargeError as exc:
        raise InputError(str(workload or pods.name), str(exc)) from None

    summaries = summarise(runs)
    console.print(summary_table(summaries))
    document = results_json(runs)
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "results.json", document)
    from gpufleet.report.plot import plot_unallocated  # matplotlib: only where it plots

    plot_unallocated(runs, out / "unallocated.png")
    subtitle = (
        f"workload {pods.name}, {len(node_specs)} nodes, inflate {inflate}, "
        f"seeds {seed_list[0]}-{seed_list[-1]}"
    )
    write_text(out / "index.html", report_html(summaries, subtitle))
    return document
