"""``gpufleet schedule`` and ``gpufleet explain``: one scheduling cycle over a cluster snapshot.

Both read a snapshot (``-f``), check the cycle's options and ``--now``, and run one cycle
through the composition root; ``schedule`` prints its bindings, evictions and pending pods,
``explain`` one pod's story. A snapshot that contradicts itself is bad input, not a bug.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from gpufleet.cli.options import duration
from gpufleet.cli.output import make_console, warn
from gpufleet.compose import (
    schedule_snapshot,
    schedule_snapshot_autoscaled,
    schedule_snapshot_costed,
)
from gpufleet.cost.autoscale import plan_json
from gpufleet.cost.nodes import UnpricedNodeError
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.foreign import ALL, check_vocabularies
from gpufleet.load.objects.vocabulary import SCHEDULER_NAME
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.supply import PROVISIONED_FOR_LABEL, provisioned_for
from gpufleet.model.workload import Snapshot
from gpufleet.plugins.registry import POLICIES
from gpufleet.report.autoscale import plan_table, release_table, waits_for, waits_for_lines
from gpufleet.report.cycle import (
    cost_tables,
    cycle_json,
    cycle_tables,
    explain_json,
    explain_lines,
)
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.queues.holds import DEFAULT_EXPECTED_S
from gpufleet.scheduler.state.ledger import SnapshotError


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

    Pods and PodGroups carry their ``creationTimestamp`` (an unknown age without one);
    ``--now`` must not be earlier than the earliest of them. The wall clock is not checked:
    a snapshot from a cluster whose clock runs ahead is still scheduled."""
    if not given:
        return
    stamps = [(p.created, f"Pod {p.key}") for p in snapshot.pods if math.isfinite(p.created)]
    stamps += [
        (g.created, f"PodGroup {g.key}") for g in snapshot.groups if math.isfinite(g.created)
    ]
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
ExpectedOption = Annotated[
    float,
    typer.Option(
        parser=duration,
        metavar="DURATION",
        help="How long a run is expected to take when its pod has no "
        "gpufleet.io/expected-duration annotation (seconds, or 2h): what backfill onto "
        "reserved nodes is judged by.",
    ),
]
StarvationOption = Annotated[
    float,
    typer.Option(
        parser=duration,
        metavar="DURATION",
        help="Time (seconds, or 30m) after which a waiting job that does not fit reserves "
        "nodes, the oldest first (others may use them only if expected to end before it "
        "needs them).",
    ),
]
GraceOption = Annotated[
    float,
    typer.Option(
        parser=duration,
        metavar="DURATION",
        help="Time (seconds, or 60s) a gang may stay below minMember before its pods are "
        "released (a PodGroup's scheduleTimeoutSeconds sets its own).",
    ),
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

VocabularyOption = Annotated[
    list[str] | None,
    typer.Option(
        help="Read other schedulers' queues, gangs and pod names in this vocabulary "
        f"({', '.join(sorted(ALL))}); repeat for several, or name `gpufleet` alone for none "
        "but gpufleet's own (docs/migration.md).",
        show_default="all",
    ),
]


def _vocabularies(names: list[str] | None) -> frozenset[str]:
    """The vocabularies ``--vocabulary`` names (all when it is not given)."""
    if names is None:
        return ALL
    chosen = frozenset(names) - {SCHEDULER_NAME}
    try:
        check_vocabularies(chosen)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="'--vocabulary'") from None
    return chosen


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
    *,
    expected: float = DEFAULT_EXPECTED_S,
) -> CycleConfig:
    if policy not in POLICIES:
        raise typer.BadParameter(f"unknown policy {policy!r}; known: {', '.join(POLICIES)}")
    _seconds(starvation, "--starvation-after")
    _seconds(grace, "--stale-grace")
    if not expected > 0:  # also NaN
        raise typer.BadParameter(
            f"expected more than 0 seconds, got {expected:g}", param_hint="'--expected-duration'"
        )
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
        expected_duration_s=expected,
        watch=watch,
    )


def schedule(
    filename: SnapshotFile,
    output: Annotated[str, typer.Option("-o", "--output", help="json or table.")] = "table",
    now: Now = None,
    policy: PolicyOption = "gpufleet",
    starvation_after: StarvationOption = 1800.0,
    expected_duration: ExpectedOption = DEFAULT_EXPECTED_S,
    stale_grace: GraceOption = 60.0,
    non_preemptible_priority: NonPreemptibleOption = 100,
    scheduler_name: SchedulerNameOption = None,
    vocabulary: VocabularyOption = None,
    cost: Annotated[
        bool,
        typer.Option(
            "--cost",
            help="Also say what the cycle changes in the cluster's hourly cost, per queue: "
            "before, and with its bindings running and its evictions gone.",
        ),
    ] = False,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="Price sheet YAML (kind: PriceSheet) for --cost or --autoscale (implies "
            "--cost without --autoscale).",
            show_default="the bundled illustrative list prices",
        ),
    ] = None,
    autoscale: Annotated[
        bool,
        typer.Option(
            "--autoscale",
            help="Also plan the nodes to buy for the pods left pending, from the snapshot's "
            "NodePools with spec.autoscaling: each job whole, cheapest first, with the hourly "
            "cost and the job each node is for (docs/autoscaling.md).",
        ),
    ] = False,
) -> None:
    """Run one scheduling cycle over a cluster snapshot: bindings, evictions, pending pods.

    Nothing is changed in any cluster; this is the what-if edge of the live scheduler.
    """
    if output not in {"json", "table"}:
        raise typer.BadParameter(f"-o must be json or table, got {output!r}")
    config = _config(
        policy, starvation_after, stale_grace, non_preemptible_priority, expected=expected_duration
    )
    if autoscale:
        _autoscale(filename, output, now, config, prices, scheduler_name, vocabulary)
        return
    when = _now(now)
    sheet_path = prices or DEFAULT_SHEET
    sheet = load_price_sheet(sheet_path) if cost or prices is not None else None
    snapshot = _load(filename, scheduler_name, _vocabularies(vocabulary))
    _check_now(when, snapshot, filename, given=now is not None)
    costed = None
    if sheet is None:
        result = _run(snapshot, when, config, filename)
    else:
        with _priced_input(filename, sheet_path):
            result, costed = schedule_snapshot_costed(snapshot, when, config, sheet)
    if output == "json":
        sys.stdout.write(cycle_json(result, costed))
        return
    console = make_console()
    for table in cycle_tables(result) + ([] if costed is None else cost_tables(costed)):
        console.print(table)


@contextlib.contextmanager
def _priced_input(filename: Path, sheet_path: Path) -> Iterator[None]:
    """A snapshot that contradicts itself is the snapshot's error; a node the sheet cannot
    price, the sheet's."""
    try:
        yield
    except SnapshotError as exc:
        raise InputError(str(filename), str(exc)) from None
    except UnpricedNodeError as exc:
        raise InputError(str(sheet_path), str(exc)) from None


def _autoscale(
    filename: Path,
    output: str,
    now: str | None,
    config: CycleConfig,
    prices: Path | None,
    scheduler_name: list[str] | None,
    vocabulary: list[str] | None,
) -> None:
    """``schedule --autoscale``: the cycle, then the plan for what it leaves pending."""
    when = _now(now)
    sheet_path = prices or DEFAULT_SHEET
    sheet = load_price_sheet(sheet_path)
    snapshot = _load(filename, scheduler_name, _vocabularies(vocabulary))
    _check_now(when, snapshot, filename, given=now is not None)
    if not snapshot.offers:
        warn(
            f"{filename}: no NodePool has spec.autoscaling: there is no node type to buy, "
            "so every pending job waits"
        )
    with _priced_input(filename, sheet_path):
        result, plan = schedule_snapshot_autoscaled(snapshot, when, config, sheet)
    if output == "json":
        text = cycle_json(result).rstrip().removesuffix("}").rstrip()
        body = json.dumps(plan_json(plan, sheet.currency), indent=2, ensure_ascii=False)
        sys.stdout.write(text + ',\n  "autoscale": ' + body.replace("\n", "\n  ") + "\n}\n")
        return
    console = make_console()
    tables = [*cycle_tables(result), plan_table(plan, sheet.currency)]
    if plan.releases:
        tables.append(release_table(plan, sheet.currency))
    for table in tables:
        console.print(table)


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
    expected_duration: ExpectedOption = DEFAULT_EXPECTED_S,
    stale_grace: GraceOption = 60.0,
    non_preemptible_priority: NonPreemptibleOption = 100,
    scheduler_name: SchedulerNameOption = None,
    vocabulary: VocabularyOption = None,
    prices: Annotated[
        Path | None,
        typer.Option(
            help="Price sheet YAML (kind: PriceSheet) for the nodes a pending job would be "
            "bought, where the snapshot has NodePools with spec.autoscaling.",
            show_default="the bundled illustrative list prices",
        ),
    ] = None,
) -> None:
    """Tell one pod's story in a cycle: its queue and fair share, each node and why not,
    what preemption, reclaim and consolidation found, and, where the snapshot has node types
    to buy, the nodes a pending job waits for."""
    if "/" not in pod:
        raise typer.BadParameter(f"expected NAMESPACE/NAME, got {pod!r}")
    if output not in {"json", "text"}:
        raise typer.BadParameter(f"-o must be json or text, got {output!r}")
    config = _config(
        policy,
        starvation_after,
        stale_grace,
        non_preemptible_priority,
        frozenset({pod}),
        expected=expected_duration,
    )
    when = _now(now)
    snapshot = _load(filename, scheduler_name, _vocabularies(vocabulary))
    info = next((p for p in snapshot.pods if p.key == pod), None)
    if info is None:
        raise InputError(str(filename), f"no pod {pod} in the snapshot")
    _check_now(when, snapshot, filename, given=now is not None)
    said: dict[str, object] | None = None
    if snapshot.offers:  # what the job waits for, if it waits: the plan's word
        sheet_path = prices or DEFAULT_SHEET
        sheet = load_price_sheet(sheet_path)
        with _priced_input(filename, sheet_path):
            result, plan = schedule_snapshot_autoscaled(snapshot, when, config, sheet)
        said = waits_for(plan, info.gang, sheet.currency)
    else:
        result = _run(snapshot, when, config, filename)
    label = provisioned_for(info.gang)
    held = [n.name for n in snapshot.nodes if n.labels.get(PROVISIONED_FOR_LABEL) == label]
    if output == "json":
        extra = {"autoscale": {**(said or {}), "heldNodes": held}} if said or held else {}
        sys.stdout.write(explain_json(result, info, extra))
        return
    record = next((r for r in result.jobs if pod in r.pods), None)
    lines = explain_lines(result, pod, record, info)
    if not info.bound:
        lines += waits_for_lines(said, held)
    typer.echo("\n".join(lines))


def _load(
    filename: Path, scheduler_names: list[str] | None, vocabularies: frozenset[str]
) -> Snapshot:
    """The snapshot, its pods of gpufleet and of ``--scheduler-name`` to be scheduled, read
    in gpufleet's vocabulary and ``vocabularies``."""
    return load_snapshot(
        filename,
        warn=warn,
        schedulers=(SCHEDULER_NAME, *(scheduler_names or ())),
        vocabularies=vocabularies,
    )


def _run(snapshot: Snapshot, now: float, config: CycleConfig, source: Path) -> CycleResult:
    try:
        return schedule_snapshot(snapshot, now, config)
    except SnapshotError as exc:
        raise InputError(str(source), str(exc)) from None
