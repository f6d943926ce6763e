"""The ``gpufleet`` command: wiring only; every decision lives in the layers below.

Bad input (a missing file, a wrong column, a bad value in row N) ends with one line on
stderr naming the file, the line and the field, and exit code 2 — never a traceback.
"""

from __future__ import annotations

import datetime as dt
import math
import sys
from functools import partial
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from gpufleet import __version__
from gpufleet.compose import schedule_snapshot
from gpufleet.load.errors import InputError
from gpufleet.load.openb import BUNDLED_NODES, BUNDLED_WORKLOAD, bundled, load_nodes, load_pods
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.traces import load_replay
from gpufleet.load.vocabulary import SCHEDULER_NAME
from gpufleet.model.results import FillRun, ReplayRun
from gpufleet.model.workload import Snapshot
from gpufleet.plugins.registry import POLICIES
from gpufleet.report.cycle import cycle_json, cycle_tables, explain_json, explain_lines
from gpufleet.report.html import report_html
from gpufleet.report.replay import DAY, replay_html, replay_table
from gpufleet.report.results import results_json
from gpufleet.report.summary import summarise
from gpufleet.report.table import summary_table
from gpufleet.scheduler.cycle import CycleConfig
from gpufleet.scheduler.ledger import SnapshotError
from gpufleet.scheduler.outcome import CycleResult
from gpufleet.sim.batch import seed_range
from gpufleet.sim.fill import run_fill
from gpufleet.sim.replay import REPLAY_POLICIES, Replay
from gpufleet.sim.unfit import unfit_pods
from gpufleet.sim.window import trace_window

DEFAULT_POLICIES = ("kube-default", "best-fit", "fgd", "gpufleet")

DEFAULT_REPLAY_CLUSTER = "openb-replay-cluster.yaml"
"""The bundled cluster of the default replay: 3 servers, 24 GPUs (see the file)."""
DEFAULT_REPLAY_WINDOW = (137 * DAY, 140 * DAY)
"""The trace time of the default replay: three busy days of the bundled openb pod list."""

PIPE_WIDTH = 200
"""Columns of a table written to a pipe or file (rich would take 80 and cut every cell)."""

app = typer.Typer(
    name="gpufleet",
    help="A GPU scheduler for Kubernetes AI clusters: simulate placement policies on real traces.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",  # a docstring's paragraph is one paragraph, not its lines
)


def parse_seeds(text: str) -> list[int]:
    """``"42"`` -> [42]; ``"42-51"`` -> [42, ..., 51]."""
    try:
        return seed_range(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _advance(progress: Progress, task: TaskID, done: int) -> None:
    progress.update(task, completed=done)


def _days(progress: Progress, task: TaskID, now: float) -> None:
    progress.update(task, completed=round(now / DAY, 1))


def _positive(value: float, option: str) -> float:
    if not 0 < value < math.inf:
        raise typer.BadParameter(f"{option} must be a positive number, got {value}")
    return value


def check_policies(names: list[str] | None) -> list[str]:
    chosen = names or list(DEFAULT_POLICIES)
    for name in chosen:
        if name not in POLICIES:
            raise typer.BadParameter(f"unknown policy {name!r}; known: {', '.join(POLICIES)}")
    return list(dict.fromkeys(chosen))


def _print_version(value: bool) -> None:
    # Eager: runs while the options are parsed, before click asks for a command.
    if value:
        typer.echo(f"gpufleet {__version__}")
        raise typer.Exit


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    del version  # handled by its eager callback


@app.command()
def simulate(
    workload: Annotated[
        Path | None,
        typer.Option(
            help="Trace CSV: an openb pod list, or (replay) the Philly trace.",
            show_default="the bundled openb_pod_list_default",
        ),
    ] = None,
    nodes: Annotated[
        Path | None,
        typer.Option(help="openb node CSV.", show_default="the bundled 1,213 GPU nodes"),
    ] = None,
    policy: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Policy, repeatable. fill: {', '.join(POLICIES)}; "
            f"replay: {', '.join(REPLAY_POLICIES)}.",
            show_default=f"fill: {', '.join(DEFAULT_POLICIES)}; replay: all",
        ),
    ] = None,
    seeds: Annotated[str, typer.Option(help="A seed (42) or an inclusive range (42-51).")] = "42",
    inflate: Annotated[
        float | None,
        typer.Option(
            help="fill: tune the workload to this multiple of the cluster's GPU capacity.",
            show_default="1.3",
        ),
    ] = None,
    protocol: Annotated[
        str,
        typer.Option(
            help="fill: place pods until the cluster is full (the FGD paper's protocol); "
            "replay: jobs arrive, wait, run and finish on a simulated clock."
        ),
    ] = "fill",
    trace_format: Annotated[
        str | None,
        typer.Option(
            "--format", help="replay: openb or philly.", show_default="read from the header"
        ),
    ] = None,
    cluster: Annotated[
        Path | None,
        typer.Option(
            help="replay: cluster YAML (Node objects or NodePools, a Topology, Queues).",
            show_default="no --workload: the bundled openb-replay-cluster.yaml (24 GPUs); "
            "openb: the bundled nodes; philly: the bundled philly-cluster.yaml",
        ),
    ] = None,
    queues: Annotated[
        Path | None,
        typer.Option(
            help="replay: Queue YAML; tenants without a queue go to 'default'.",
            show_default="one per tenant, quota by GPU-time demand",
        ),
    ] = None,
    since: Annotated[
        float | None,
        typer.Option(
            help="replay: start at this many seconds of trace time, on an empty cluster "
            "(jobs that arrived before are left out).",
            show_default="0; with no --workload 11836800, day 137",
        ),
    ] = None,
    until: Annotated[
        float | None,
        typer.Option(
            help="replay: stop at this many seconds of trace time.",
            show_default="the end; with no --workload 12096000, day 140",
        ),
    ] = None,
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("gpufleet-report"),
    json_path: Annotated[
        str | None, typer.Option("--json", help="Also write results JSON here ('-' = stdout).")
    ] = None,
) -> None:
    """Compare policies on a trace: fill a cluster pod by pod (default), or replay it in time.

    Prints a table, and writes OUT/results.json, the plots and OUT/index.html.

    With no --workload, a replay takes three busy days of the bundled openb pod list (trace
    days 137-140, 701 jobs) on a bundled cluster of 3 servers (24 GPUs), so that jobs
    queue; on the openb cluster's own 6,212 GPUs the trace keeps 0.2% of them busy and
    nothing waits. --since, --until, --nodes and --cluster replace these defaults.
    """
    if protocol not in {"fill", "replay"}:
        raise typer.BadParameter(f"--protocol must be fill or replay, got {protocol!r}")
    fill_only = {"--inflate": inflate is not None}
    replay_only = {
        "--format": trace_format is not None,
        "--cluster": cluster is not None,
        "--queues": queues is not None,
        "--since": since is not None,
        "--until": until is not None,
    }
    wrong = fill_only if protocol == "replay" else replay_only
    for option, given in wrong.items():
        if given:
            other = "fill" if protocol == "replay" else "replay"
            raise typer.BadParameter(f"{option} applies to --protocol {other} only")
    seed_list = parse_seeds(seeds)
    to_stdout = json_path == "-"
    console = _console(stderr=to_stdout)
    if protocol == "replay":
        document = _replay(
            workload,
            nodes,
            policy,
            seed_list,
            trace_format,
            cluster,
            queues,
            (since, until),
            out,
            console,
        )
    else:
        document = _fill(
            workload, nodes, policy, seed_list, 1.3 if inflate is None else inflate, out, console
        )
    if to_stdout:
        sys.stdout.write(document)
    elif json_path is not None:
        Path(json_path).write_text(document, encoding="utf-8")
    console.print(f"report: {out / 'index.html'}")


def _console(*, stderr: bool = False) -> Console:
    """A console for tables: a terminal's width, else (a pipe, a file) ``PIPE_WIDTH``.

    Not a terminal, rich takes ``COLUMNS`` or 80 and cuts every cell of a wide table to
    "…"; a file has no width to fit, so the table gets room for its columns."""
    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    return Console(stderr=stderr, width=max(PIPE_WIDTH, console.width))


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
    )


def _fill(
    workload: Path | None,
    nodes: Path | None,
    policy: list[str] | None,
    seed_list: list[int],
    inflate: float,
    out: Path,
    console: Console,
) -> str:
    policies = check_policies(policy)
    _positive(inflate, "--inflate")
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
    with _progress() as progress:
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
    (out / "results.json").write_text(document, encoding="utf-8")
    from gpufleet.report.plot import plot_unallocated  # matplotlib: only where it plots

    plot_unallocated(runs, out / "unallocated.png")
    subtitle = (
        f"workload {pods.name}, {len(node_specs)} nodes, inflate {inflate}, "
        f"seeds {seed_list[0]}-{seed_list[-1]}"
    )
    (out / "index.html").write_text(report_html(summaries, subtitle), encoding="utf-8")
    return document


def _replay_window(
    bundled_workload: bool, since: float | None, until: float | None
) -> tuple[float, float | None]:
    """The trace time to replay, checked: (start, stop or None for the end)."""
    if bundled_workload:  # the demonstration (see simulate's help)
        since = DEFAULT_REPLAY_WINDOW[0] if since is None else since
        until = DEFAULT_REPLAY_WINDOW[1] if until is None else until
    if until is not None:
        _positive(until, "--until")
    if since is not None and not 0 <= since < math.inf:
        raise typer.BadParameter(f"--since must be zero or more seconds, got {since:g}")
    start = since or 0.0
    if until is not None and until <= start:
        raise typer.BadParameter(f"--until ({until:g}) must be after --since ({start:g})")
    return start, until


def _replay(
    workload: Path | None,
    nodes: Path | None,
    policy: list[str] | None,
    seed_list: list[int],
    trace_format: str | None,
    cluster: Path | None,
    queues: Path | None,
    window: tuple[float | None, float | None],
    out: Path,
    console: Console,
) -> str:
    policies = list(dict.fromkeys(policy or REPLAY_POLICIES))
    for name in policies:
        if name not in REPLAY_POLICIES:
            raise typer.BadParameter(
                f"unknown replay policy {name!r}; known: {', '.join(REPLAY_POLICIES)}"
            )
    if workload is None and nodes is None and cluster is None:
        cluster = bundled(DEFAULT_REPLAY_CLUSTER)
    start, until = _replay_window(workload is None, *window)
    data = load_replay(
        workload or bundled(BUNDLED_WORKLOAD),
        fmt=trace_format,
        nodes=nodes,
        cluster=cluster,
        queues=queues,
        warn=warn,
    )
    where = (
        f"bundled {DEFAULT_REPLAY_CLUSTER}"
        if cluster == bundled(DEFAULT_REPLAY_CLUSTER)
        else data.cluster
    )
    jobs = trace_window(data.jobs, start)
    if not jobs:
        raise InputError(
            str(workload or BUNDLED_WORKLOAD), f"no job arrives at or after --since {start:g}"
        )
    stop = None if until is None else until - start
    end = stop if stop is not None else max(j.arrival_s for j in jobs)
    days = max(end / DAY, 1e-9)
    runs: list[ReplayRun] = []
    with _progress() as progress:
        for name in policies:
            for seed in seed_list:
                task = progress.add_task(
                    f"{data.workload} · {name} · seed {seed} · trace days", total=round(days, 1)
                )
                replay = Replay(
                    data.nodes,
                    jobs,
                    REPLAY_POLICIES[name],
                    queues=data.queues,
                    topology=data.topology,
                    seed=seed,
                    workload=data.workload,
                )
                runs.append(replay.run(until=stop, progress=partial(_days, progress, task)))
                progress.remove_task(task)
    capacity = sum(n.gpus for n in data.nodes)
    arrived = sum(stop is None or j.arrival_s <= stop for j in jobs)
    if start and until is not None:
        span = f", trace days {start / DAY:g}-{until / DAY:g}"
    elif start:
        span = f", from trace day {start / DAY:g}"
    else:
        span = "" if until is None else f", until {until:g}s"
    title = f"{data.workload} replay — {arrived:,} jobs, {capacity:,} GPUs ({where}){span}"
    console.print(replay_table(runs, title))
    document = results_json(runs)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(document, encoding="utf-8")
    from gpufleet.report.replay_plot import plot_replay  # matplotlib: only where it plots

    plot_replay(runs, out / "replay.png", capacity)
    (out / "index.html").write_text(replay_html(runs, title), encoding="utf-8")
    return document


def _now(text: str | None) -> float:
    """``--now`` as seconds since the epoch; RFC 3339 requires the time zone."""
    if text is None:
        return dt.datetime.now(dt.UTC).timestamp()
    try:
        stamp = dt.datetime.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(
            f"expected an RFC 3339 time such as 2026-01-31T12:00:00Z, got {text!r}"
        ) from None
    if stamp.tzinfo is None:
        raise typer.BadParameter(
            f"{text!r} has no time zone; RFC 3339 needs one, such as 'Z' or '+00:00' ({text}Z)",
            param_hint="'--now'",
        )
    return stamp.timestamp()


def _rfc3339(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat().replace("+00:00", "Z")


def _check_now(now: float, snapshot: Snapshot, source: Path, given: bool) -> None:
    """A cycle before every object of the snapshot was created has nothing real to judge.

    Pods and PodGroups carry their ``creationTimestamp`` (0 when the object has none);
    ``--now`` must not be earlier than the earliest of them. The wall clock is not checked:
    a snapshot from a cluster whose clock runs ahead is still scheduled."""
    if not given:
        return
    stamps = [(p.created, f"Pod {p.key}") for p in snapshot.pods if p.created > 0]
    stamps += [(g.created, f"PodGroup {g.key}") for g in snapshot.groups if g.created > 0]
    if stamps and now < min(stamps)[0]:
        first, name = min(stamps)
        raise InputError(
            str(source),
            f"--now {_rfc3339(now)} is before every object's creationTimestamp (the "
            f"earliest: {name}, created {_rfc3339(first)}); give a later --now",
        )


SnapshotFile = Annotated[
    Path,
    typer.Option(
        "-f", "--filename", help="Cluster snapshot: the YAML `kubectl get -o yaml` prints."
    ),
]
Now = Annotated[
    str | None,
    typer.Option(
        help="Time of the cycle (RFC 3339), for ages and min runtimes.", show_default="now"
    ),
]
PolicyOption = Annotated[str, typer.Option(help=f"Placement policy: {', '.join(POLICIES)}.")]
StarvationOption = Annotated[
    float, typer.Option(help="Seconds after which a waiting job holds nodes against overtaking.")
]
GraceOption = Annotated[
    float,
    typer.Option(help="Seconds a gang may stay below minMember before its pods are released."),
]
NonPreemptibleOption = Annotated[
    int, typer.Option(help="Priority at and above which work is non-preemptible.")
]
SchedulerNameOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Schedule the pods of this spec.schedulerName too, as if they were gpufleet's "
        "(what if gpufleet took over another scheduler's pods?); repeat for several."
    ),
]


def _seconds(value: float, option: str) -> float:
    """A duration option: zero or more seconds (infinite: never)."""
    if not value >= 0:  # also NaN
        raise typer.BadParameter(
            f"expected zero or more seconds, got {value:g}", param_hint=f"'{option}'"
        )
    return value


def _config(
    policy: str,
    starvation: float,
    grace: float,
    non_preemptible: int,
    watch: frozenset[str] = frozenset(),
) -> CycleConfig:
    if policy not in POLICIES:
        raise typer.BadParameter(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    _seconds(starvation, "--starvation-after")
    _seconds(grace, "--stale-grace")
    if non_preemptible < 0:
        # Pods without a priority class have priority 0: a negative threshold would make
        # every such pod non-preemptible, which no one means.
        raise typer.BadParameter(
            f"expected a priority of 0 or more, got {non_preemptible}",
            param_hint="'--non-preemptible-priority'",
        )
    return CycleConfig(
        policy=policy,
        non_preemptible_priority=non_preemptible,
        stale_grace_s=grace,
        starvation_after_s=starvation,
        watch=watch,
    )


@app.command()
def schedule(
    filename: SnapshotFile,
    output: Annotated[str, typer.Option("-o", "--output", help="json or table.")] = "table",
    now: Now = None,
    policy: PolicyOption = "gpufleet",
    starvation_after: StarvationOption = 1800.0,
    stale_grace: GraceOption = 60.0,
    non_preemptible_priority: NonPreemptibleOption = 100,
    scheduler_name: SchedulerNameOption = None,
) -> None:
    """Run one scheduling cycle over a cluster snapshot: bindings, evictions, pending pods.

    Nothing is changed in any cluster; this is the what-if edge of the live scheduler.
    """
    if output not in {"json", "table"}:
        raise typer.BadParameter(f"-o must be json or table, got {output!r}")
    config = _config(policy, starvation_after, stale_grace, non_preemptible_priority)
    when = _now(now)
    snapshot = _load(filename, scheduler_name)
    _check_now(when, snapshot, filename, given=now is not None)
    result = _run(snapshot, when, config, filename)
    if output == "json":
        sys.stdout.write(cycle_json(result))
        return
    console = _console()
    for table in cycle_tables(result):
        console.print(table)


@app.command()
def explain(
    filename: SnapshotFile,
    pod: Annotated[str, typer.Argument(metavar="NAMESPACE/NAME", help="The pod.")],
    output: Annotated[
        str,
        typer.Option(
            "-o",
            "--output",
            help="text, or json: {pod, status (bound, pending or evicted), node, gpus, "
            "reason, action, for}.",
        ),
    ] = "text",
    now: Now = None,
    policy: PolicyOption = "gpufleet",
    starvation_after: StarvationOption = 1800.0,
    stale_grace: GraceOption = 60.0,
    non_preemptible_priority: NonPreemptibleOption = 100,
    scheduler_name: SchedulerNameOption = None,
) -> None:
    """Tell one pod's story in a cycle: its queue and fair share, each node and why not,
    what preemption, reclaim and consolidation found."""
    if "/" not in pod:
        raise typer.BadParameter(f"expected NAMESPACE/NAME, got {pod!r}")
    if output not in {"json", "text"}:
        raise typer.BadParameter(f"-o must be json or text, got {output!r}")
    config = _config(
        policy, starvation_after, stale_grace, non_preemptible_priority, frozenset({pod})
    )
    when = _now(now)
    snapshot = _load(filename, scheduler_name)
    info = next((p for p in snapshot.pods if p.key == pod), None)
    if info is None:
        raise InputError(str(filename), f"no pod {pod} in the snapshot")
    _check_now(when, snapshot, filename, given=now is not None)
    result = _run(snapshot, when, config, filename)
    if output == "json":
        sys.stdout.write(explain_json(result, info))
        return
    record = next((r for r in result.jobs if pod in r.pods), None)
    typer.echo("\n".join(explain_lines(result, pod, record, info)))


def _load(filename: Path, scheduler_names: list[str] | None) -> Snapshot:
    """The snapshot, its pods of gpufleet and of ``--scheduler-name`` to be scheduled."""
    return load_snapshot(filename, warn=warn, schedulers=(SCHEDULER_NAME, *(scheduler_names or ())))


def _run(snapshot: Snapshot, now: float, config: CycleConfig, source: Path) -> CycleResult:
    try:
        return schedule_snapshot(snapshot, now, config)
    except SnapshotError as exc:
        raise InputError(str(source), str(exc)) from None


def warn(message: str) -> None:
    """A warning about the input, on stderr as kubectl prints them."""
    sys.stderr.write(f"Warning: {message}\n")


def main() -> None:
    """Console entry point: bad input is one line on stderr and exit code 2."""
    try:
        app()
    except InputError as exc:
        sys.stderr.write(f"gpufleet: error: {exc}\n")
        raise SystemExit(2) from None
