"""``gpufleet sweep STUDY.yaml``: every run of a policy study, on the local cores or on Ray.

Reads the study (``load/study.py``), runs what the result cache does not hold yet
(``study/sweep.py``) on a process pool or, with ``--ray`` (or ``RAY_ADDRESS``), as Ray
tasks, with a progress bar of runs done and failed and the time left; then prints a table
per experiment and writes the report (``report/study.py``): ``results.json``,
``runs.csv``, ``summary.csv``, a plot per experiment and ``index.html``.

Exit code 0 when every run has a result, 1 when some failed (they are listed, and the
report is written with the others), 2 for a bad study or input file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from gpufleet.cli.output import make_console, warn
from gpufleet.load.study import load_study
from gpufleet.model.study import Study, StudyRun, number_text, setting_text
from gpufleet.report.files import OutputPathError, check_directory, check_file, write_text
from gpufleet.report.study import (
    RunRow,
    SettingSummary,
    groups,
    metrics_of,
    runs_csv,
    study_html,
    study_json,
    summarise,
    summary_csv,
    tables,
)
from gpufleet.study.execute import Executor, LocalPool, RayCluster
from gpufleet.study.runs import code_digest, is_node_list
from gpufleet.study.sweep import Outcome, ResultCache, describe
from gpufleet.study.sweep import sweep as run_study


def default_cache() -> Path:
    """``$XDG_CACHE_HOME/gpufleet/runs``, else ``~/.cache/gpufleet/runs``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpufleet" / "runs"


def sweep(
    study_file: Annotated[
        Path, typer.Argument(metavar="STUDY.yaml", help="The study (kind: Study).")
    ],
    workers: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Local worker processes (with --ray local: the CPUs of the Ray it starts).",
            show_default="every core",
        ),
    ] = None,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            envvar="RAY_ADDRESS",
            help="Run each run as a Ray task on the cluster at this address (ray://HOST:10001, "
            "HOST:6379, auto), or 'local' for a Ray started here. Needs gpufleet[ray].",
            show_default="no: a process pool on this machine",
        ),
    ] = None,
    cache: Annotated[
        Path | None,
        typer.Option(
            help="Results of earlier runs, by a hash of their inputs and of gpufleet's code.",
            show_default="$XDG_CACHE_HOME/gpufleet/runs or ~/.cache/gpufleet/runs",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("gpufleet-study"),
    json_path: Annotated[
        str | None, typer.Option("--json", help="Also write the study JSON here ('-' = stdout).")
    ] = None,
) -> None:
    """Run a policy study: a grid of replays and fills, each result cached, on every local
    core or on a Ray cluster; one report of which settings cost what.

    Prints a table per experiment (each metric's mean ± sd over seeds; for a replay, the
    Pareto fronts of cost per finished job against the mean and the p95 wait), the failed
    runs with their errors, and writes OUT/results.json, OUT/runs.csv, OUT/summary.csv, a
    plot per experiment and OUT/index.html. Runs the cache holds are not run again.
    """
    to_stdout = json_path == "-"
    try:
        check_directory(out, "--out")
        if json_path is not None and not to_stdout:
            check_file(Path(json_path), "--json")
        root = cache or default_cache()
        check_directory(root, "--cache")
    except OutputPathError as exc:
        raise typer.BadParameter(str(exc)) from None
    if workers is not None and ray not in {None, "local"}:
        raise typer.BadParameter("--workers applies to the local pool and --ray local only")
    study = load_study(study_file)
    console = make_console(stderr=to_stdout)
    started = time.perf_counter()
    counts: dict[str, int] = {"cached": 0, "computed": 0, "failed": 0}
    # What the executor's libraries print (Ray's raylet tells of a worker that died) goes
    # to stderr: stdout carries the tables, or the JSON document alone.
    with contextlib.redirect_stdout(sys.stderr):
        executor: Executor = (
            LocalPool(workers or os.cpu_count() or 1) if ray is None else RayCluster(ray, workers)
        )
        try:
            outcomes = _run(study, executor, ResultCache(root), counts)
        except KeyboardInterrupt:
            sys.stderr.write(
                f"gpufleet sweep: interrupted; the {counts['computed']} results computed are "
                "kept in the cache, and a rerun computes only the rest\n"
            )
            raise typer.Exit(130) from None
        finally:
            executor.close()
    wall = time.perf_counter() - started
    rows = [o.row() for o in outcomes]
    summaries = summarise(rows)
    for table in tables(summaries, rows):
        console.print(table)
    failed = sum(o.result is None for o in outcomes)
    header = {
        "study": study.name,
        "source": study.source,
        "code": code_digest(),
        "executor": executor.name,
        "workers": executor.workers,
        "wall_s": round(wall, 3),
        "cached": counts["cached"],
        "computed": counts["computed"],
        "failed": failed,
    }
    document = study_json(header, [_run_json(o) for o in outcomes], summaries)
    _write(out, study, document, summaries, rows)
    if to_stdout:
        sys.stdout.write(document)
    elif json_path is not None:
        write_text(Path(json_path), document)
    console.print(
        f"{len(outcomes)} runs: {counts['cached']} from the cache, {counts['computed']} "
        f"computed, {failed} failed, in {wall:.1f} s on {executor.workers} "
        f"{executor.name} worker{'s' * (executor.workers != 1)}"
    )
    console.print(f"report: {out / 'index.html'}")
    if failed:
        raise typer.Exit(1)


def _run(
    study: Study, executor: Executor, cache: ResultCache, counts: dict[str, int]
) -> list[Outcome]:
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[failed]} failed"),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    with progress:
        task = progress.add_task(f"{study.name} · runs", total=None, failed=0)

        def start(cached: int, todo: int) -> None:
            counts["cached"] = cached
            progress.update(task, total=todo)

        def done(outcome: Outcome) -> None:
            if outcome.result is None:
                counts["failed"] += 1
            else:
                counts["computed"] += 1
            progress.update(task, advance=1, failed=counts["failed"])

        return run_study(study, executor, cache, warn=warn, on_start=start, on_done=done)


def _run_json(o: Outcome) -> dict[str, Any]:
    return {
        "index": o.index,
        **describe(o.run),
        "key": o.key,
        "status": "ok" if o.result is not None else "failed",
        "cached": o.cached,
        "error": o.error,
        "command": simulate_command(o.run),
        "metrics": metrics_of(o.run.protocol, o.result),
        "timing": o.timing,
        "result": o.result,
    }


def simulate_command(run: StudyRun) -> str | None:
    """The ``gpufleet simulate`` command that runs ``run`` alone (its JSON has the same
    result); None for an autoscaling run, which ``simulate`` has no protocol for."""
    if run.protocol == "autoscale":
        return None
    args = ["gpufleet", "simulate", "--protocol", run.protocol, "--workload", run.trace.path]
    if run.trace_format:
        args += ["--format", run.trace_format]
    if run.cluster is not None:
        nodes = run.protocol == "fill" or is_node_list(run.cluster.path)
        args += ["--nodes" if nodes else "--cluster", run.cluster.path]
    if run.serving is not None:
        args += ["--serving", run.serving.path]
    if run.queues is not None:
        args += ["--queues", run.queues.path]
    if run.prices is not None:
        args += ["--prices", run.prices.path]
    since, until = run.window
    if since:
        args += ["--since", number_text(since)]
    if until is not None:
        args += ["--until", number_text(until)]
    args += ["--policy", run.policy]
    options = {
        "inflate": "--inflate",
        "checkpointInterval": "--checkpoint-interval",
        "restartTime": "--restart-time",
        "servingNodes": "--serving-nodes",
        "muFactor": "--mu-factor",
    }
    for name, value in run.setting[1:]:
        if name in options and isinstance(value, float):
            args += [options[name], number_text(value)]
        else:
            args += ["--param", setting_text(name, value)]
    seeds = [] if run.protocol == "balance" else ["--seeds", str(run.seed)]
    return shlex.join([*args, *seeds])


def _write(
    out: Path,
    study: Study,
    document: str,
    summaries: list[SettingSummary],
    rows: list[RunRow],
) -> None:
    from gpufleet.report.study_plot import plot_experiment  # matplotlib: only where it plots

    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "results.json", document)
    write_text(out / "runs.csv", runs_csv(rows))
    write_text(out / "summary.csv", summary_csv(summaries))
    images: dict[tuple[str, str], str] = {}
    for n, (key, members) in enumerate(groups(summaries).items()):
        name = f"{n + 1:02d}-{re.sub(r'[^A-Za-z0-9._-]+', '-', key[0])[:60]}.png"
        if plot_experiment(members, out / name):
            images[key] = name
    for old in out.glob("[0-9][0-9]-*.png"):  # an earlier study's plots in the same folder
        if old.name not in images.values():
            old.unlink(missing_ok=True)
    subtitle = f"{len(rows)} runs of {study.source}"
    write_text(
        out / "index.html", study_html(f"Study {study.name}", subtitle, summaries, rows, images)
    )
