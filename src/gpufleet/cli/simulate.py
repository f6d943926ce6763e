"""``gpufleet simulate``: compare placement policies on a trace, by fill or by replay.

The command's options, which of them apply to which protocol, and where the results JSON
goes; the protocols themselves are :mod:`gpufleet.cli.fill` and :mod:`gpufleet.cli.replay`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from gpufleet.cli.balance import simulate_balance
from gpufleet.cli.fill import DEFAULT_POLICIES, simulate_fill
from gpufleet.cli.options import parse_seeds
from gpufleet.cli.output import make_console
from gpufleet.cli.replay import simulate_replay
from gpufleet.load.study import RUN_MODEL, parse_parameter
from gpufleet.model.study import Value
from gpufleet.plugins.registry import POLICIES, REPLAY_POLICIES
from gpufleet.report.files import OutputPathError, check_directory, check_file, write_text

PROTOCOLS = ("fill", "replay", "balance")
APPLIES: dict[str, tuple[str, ...]] = {
    "--inflate": ("fill",),
    "--nodes": ("fill", "replay"),
    "--format": ("replay", "balance"),
    "--cluster": ("replay", "balance"),
    "--queues": ("replay",),
    "--since": ("replay", "balance"),
    "--until": ("replay", "balance"),
    "--checkpoint-interval": ("replay",),
    "--param": ("replay",),
    "--restart-time": ("replay",),
    "--prices": ("replay", "balance"),
    "--serving": ("balance",),
    "--serving-nodes": ("balance",),
    "--mu-factor": ("balance",),
}
"""Which protocols each option applies to (the others refuse it)."""


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
            "replay: jobs arrive, wait, run and finish on a simulated clock; balance: a "
            "replay beside a serving load, per lending policy."
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
    checkpoint_interval: Annotated[
        float | None,
        typer.Option(
            help="replay: seconds between a job's checkpoints (an evicted job keeps what it "
            "saved).",
            show_default="none: an evicted job reruns from the start",
        ),
    ] = None,
    restart_time: Annotated[
        float | None,
        typer.Option(
            help="replay: seconds a restarted job runs before it makes progress (counted "
            "in the GPU-hours lost).",
            show_default="0",
        ),
    ] = None,
    param: Annotated[
        list[str] | None,
        typer.Option(
            "--param",
            help="replay: set a parameter of the policies, NAME=VALUE, repeatable: "
            "actions=consolidate,preempt (or none), reserveAfter=6h (or never), "
            "topology=true|false, readsCheckpoints=true|false (docs/sweep.md).",
        ),
    ] = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="replay: price sheet YAML (kind: PriceSheet) to cost the runs under.",
            show_default="the bundled illustrative list prices",
        ),
    ] = None,
    serving: Annotated[
        Path | None,
        typer.Option(
            help="balance: a ServeGen model's folder of client CSVs (servegen/language/m-large).",
        ),
    ] = None,
    serving_nodes: Annotated[
        int, typer.Option(help="balance: nodes of the serving pool, one replica each.")
    ] = 64,
    mu_factor: Annotated[
        float,
        typer.Option(
            help="balance: requests a replica serves, over what makes the peak need the pool."
        ),
    ] = 1.0,
    out: Annotated[Path, typer.Option(help="Report directory.")] = Path("gpufleet-report"),
    json_path: Annotated[
        str | None, typer.Option("--json", help="Also write results JSON here ('-' = stdout).")
    ] = None,
) -> None:
    """Compare policies on a trace: fill a cluster pod by pod (default), or replay it in time.

    Prints a table, and writes OUT/results.json, the plots and OUT/index.html. A replay is
    also costed, under the bundled illustrative price sheet or --prices: its cost tables,
    and the runs, nodes and jobs it was costed from as OUT/cost-*.csv.

    With no --workload, a replay takes three busy days of the bundled openb pod list (trace
    days 137-140, 701 jobs) on a bundled cluster of 3 servers (24 GPUs), so that jobs
    queue; on the openb cluster's own 6,212 GPUs the trace keeps 0.2% of them busy and
    nothing waits. --since, --until, --nodes and --cluster replace these defaults.
    """
    if protocol not in PROTOCOLS:
        raise typer.BadParameter(
            f"--protocol must be {', '.join(PROTOCOLS[:-1])} or {PROTOCOLS[-1]}, got {protocol!r}"
        )
    given = {
        "--inflate": inflate is not None,
        "--nodes": nodes is not None,
        "--format": trace_format is not None,
        "--cluster": cluster is not None,
        "--queues": queues is not None,
        "--since": since is not None,
        "--until": until is not None,
        "--checkpoint-interval": checkpoint_interval is not None,
        "--param": bool(param),
        "--restart-time": restart_time is not None,
        "--prices": prices is not None,
        "--serving": serving is not None,
        "--serving-nodes": serving_nodes != 64,
        "--mu-factor": mu_factor != 1.0,
    }
    for option, is_given in given.items():
        if is_given and protocol not in APPLIES[option]:
            where = " or ".join(APPLIES[option])
            raise typer.BadParameter(f"{option} applies to --protocol {where} only")
    seed_list = parse_seeds(seeds)
    to_stdout = json_path == "-"
    try:  # refused before the run, not after it
        check_directory(out, "--out")
        if json_path is not None and not to_stdout:
            check_file(Path(json_path), "--json")
    except OutputPathError as exc:
        raise typer.BadParameter(str(exc)) from None
    console = make_console(stderr=to_stdout)
    if protocol == "balance":
        document = simulate_balance(
            workload,
            serving,
            (trace_format, cluster),
            (since, until),
            (serving_nodes, mu_factor),
            policy,
            prices,
            out,
            console,
        )
    elif protocol == "replay":
        document = simulate_replay(
            workload,
            nodes,
            policy,
            seed_list,
            trace_format,
            cluster,
            queues,
            (since, until),
            (checkpoint_interval or 0.0, restart_time or 0.0),
            _parameters(param or []),
            prices,
            out,
            console,
        )
    else:
        document = simulate_fill(
            workload, nodes, policy, seed_list, 1.3 if inflate is None else inflate, out, console
        )
    if to_stdout:
        sys.stdout.write(document)
    elif json_path is not None:
        write_text(Path(json_path), document)
    console.print(f"report: {out / 'index.html'}")


def _parameters(texts: list[str]) -> dict[str, Value]:
    """``--param NAME=VALUE`` options, each checked; a name given twice is refused."""
    out: dict[str, Value] = {}
    for text in texts:
        try:
            name, value = parse_parameter(text, "replay")
        except ValueError as error:
            raise typer.BadParameter(f"--param: expected {error}") from None
        if name in RUN_MODEL:
            option = "--checkpoint-interval" if name == "checkpointInterval" else "--restart-time"
            raise typer.BadParameter(f"--param {name}: give it as {option}")
        if name in out:
            raise typer.BadParameter(f"--param {name} is given twice")
        out[name] = value
    return out
