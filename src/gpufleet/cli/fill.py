"""``simulate --protocol fill``: the FGD paper's protocol, each policy and seed on an openb cluster.

Loads the pod list and the node list (the bundled ones by default), warns about pods no
node could ever hold, fills the cluster once per policy and seed with a progress bar, and
writes the report: the summary table, ``results.json``, the plot and ``index.html``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, TaskID

from gpufleet.cli.options import positive
from gpufleet.cli.output import make_progress, warn
from gpufleet.load.openb import BUNDLED_NODES, BUNDLED_WORKLOAD, bundled, load_nodes, load_pods
from gpufleet.model.results import FillRun
from gpufleet.plugins.registry import POLICIES
from gpufleet.report.files import write_text
from gpufleet.report.html import report_html
from gpufleet.report.results import results_json
from gpufleet.report.summary import summarise
from gpufleet.report.table import summary_table
from gpufleet.sim.fill import run_fill
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
    runs: list[FillRun] = []
    with make_progress() as progress:
        for name in policies:
            for seed in seed_list:
                task = progress.add_task(f"{pods.name} · {name} · seed {seed}", total=None)
                runs.append(
                    run_fill(
                        node_specs,
                        pods.pods,
                        POLICIES[name],
                        workload=pods.name,
                        seed=seed,
                        inflate=inflate,
                        progress=partial(_advance, progress, task),
                    )
                )
                progress.remove_task(task)

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
