"""``gpufleet serve``: the live scheduler, for the pods of ``schedulerName: gpufleet``.

It connects as kubectl does (``--kubeconfig``, ``KUBECONFIG``, ``~/.kube/config``, then the
in-cluster service account), lists and watches the cluster, schedules on the cluster cache
and writes bindings, evictions and pod conditions back (``kube/process/live.py``); ``--dry-run``
writes nothing and logs what it would do. ``/healthz``, ``/livez``, ``/readyz`` and
``/metrics`` are served over HTTPS on ``--bind-address:--secure-port``, ``/metrics`` to
those the API server authorizes (``kube/process/delegated.py``). It stops on SIGTERM or SIGINT.
"""

from __future__ import annotations

import asyncio
import gc
import ipaddress
import logging
import re
import signal
import socket
import sys
import uuid
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpufleet.cli.cycle import (
    ExpectedOption,
    GraceOption,
    NonPreemptibleOption,
    PolicyOption,
    StarvationOption,
    _config,
)
from gpufleet.cli.options import duration
from gpufleet.cost.autoscale import price_stock
from gpufleet.cost.nodes import UnpricedNodeError
from gpufleet.kube.cpu import CLOCK
from gpufleet.kube.process import endpoints
from gpufleet.kube.process.connect import IN_CLUSTER, http_client, load_config
from gpufleet.kube.process.delegated import ALWAYS_ALLOW_PATHS, REVIEWS_IN_FLIGHT
from gpufleet.kube.process.leader import LeaseConfig
from gpufleet.kube.process.lifecycle import (
    SHUTDOWN_GRACE_S,
    UnreachableError,
    reachable,
    until_stopped,
)
from gpufleet.kube.process.live import Replica
from gpufleet.kube.process.logs import LineFormatter
from gpufleet.kube.process.options import ServeOptions
from gpufleet.kube.read.kinds import LIVE_VOCABULARIES
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.objects.config import LEASE_DURATION_S, RENEW_DEADLINE_S, read_configuration
from gpufleet.load.objects.documents import documents, objects_of
from gpufleet.load.snapshot import load_snapshot
from gpufleet.plugins.registry import POLICIES
from gpufleet.scheduler.queues.holds import DEFAULT_EXPECTED_S

if TYPE_CHECKING:
    from lightkube.config.kubeconfig import KubeConfig

    from gpufleet.cost.prices import PriceSheet
    from gpufleet.model.supply import NodeOffer

SECURE_PORT = 10259
"""kube-scheduler's --secure-port."""

YOUNG_GC_ALLOCATIONS = 20_000
"""The live scheduler's threshold of the garbage collector's young generation."""


def _read_config(ctx: typer.Context, path: Path | None) -> Path | None:
    """``--config``: the file's settings become the defaults of the other options, so a
    flag given on the command line wins. Eager: read before any other option is, and before
    anything connects; a bad file is an ``InputError`` (one line, exit code 2)."""
    if path is not None:
        settings = read_configuration(path, POLICIES, LIVE_VOCABULARIES)
        ctx.default_map = {**(ctx.default_map or {}), **settings}
    return path


def serve(
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="SchedulerConfiguration file (apiVersion gpufleet.io/v1alpha1); flags given "
            "on the command line override it.",
            callback=_read_config,
            is_eager=True,
        ),
    ] = None,
    kubeconfig: Annotated[
        Path | None,
        typer.Option(help="kubeconfig file (default: KUBECONFIG, ~/.kube/config, in-cluster)."),
    ] = None,
    context: Annotated[
        str | None, typer.Option(help="kubeconfig context (default: current).")
    ] = None,
    scheduler_name: Annotated[
        str, typer.Option(help="Schedule the pods whose spec.schedulerName is this.")
    ] = "gpufleet",
    policy: PolicyOption = "gpufleet",
    starvation_after: StarvationOption = 1800.0,
    expected_duration: ExpectedOption = DEFAULT_EXPECTED_S,
    stale_grace: GraceOption = 60.0,
    non_preemptible_priority: NonPreemptibleOption = 100,
    dry_run: Annotated[
        bool,
        typer.Option(
            help="Bind and evict nothing; say what would be done, in the logs and as events "
            "on the pods."
        ),
    ] = False,
    dry_run_events: Annotated[
        bool,
        typer.Option(
            "--dry-run-events/--dry-run-logs-only",
            help="With --dry-run: tell the pods by events (WouldSchedule, WouldEvict), or "
            "only log.",
        ),
    ] = True,
    bind_address: Annotated[
        str,
        typer.Option(
            help="Address of /healthz, /livez, /readyz and /metrics (HTTPS); 127.0.0.1 for a "
            "local run."
        ),
    ] = "0.0.0.0",  # noqa: S104 (a pod's probes reach it)
    secure_port: Annotated[
        int,
        typer.Option(min=0, max=65535, help="HTTPS port of the endpoints (0: not served)."),
    ] = SECURE_PORT,
    tls_cert_file: Annotated[
        Path | None,
        typer.Option(
            help="PEM certificate (and chain) the endpoints serve; default: a self-signed one."
        ),
    ] = None,
    tls_private_key_file: Annotated[
        Path | None, typer.Option(help="PEM private key of --tls-cert-file.")
    ] = None,
    cert_dir: Annotated[
        Path | None,
        typer.Option(
            help="Where the self-signed certificate is kept across restarts (ignored with "
            "--tls-cert-file); default: in memory, a new one each start."
        ),
    ] = None,
    authorization_always_allow_paths: Annotated[
        str,
        typer.Option(
            help="Comma-separated paths served without credentials (a trailing * matches a "
            "prefix); every other path needs a token the API server authenticates and "
            "authorizes."
        ),
    ] = ",".join(ALWAYS_ALLOW_PATHS),
    address: Annotated[str | None, typer.Option(hidden=True)] = None,
    port: Annotated[str | None, typer.Option(hidden=True)] = None,
    period: Annotated[
        float,
        typer.Option(
            min=0.05,
            parser=duration,
            metavar="DURATION",
            help="Time between cycles when nothing happens (seconds, or 1s).",
        ),
    ] = 1.0,
    watch_down_grace: Annotated[
        float,
        typer.Option(
            min=1.0,
            parser=duration,
            metavar="DURATION",
            help="How long a watch of a kind the cycle needs may be down before /readyz "
            "fails (seconds, or 1m).",
        ),
    ] = 60.0,
    log_format: Annotated[str, typer.Option(help="text (key=value) or json.")] = "text",
    cpu_phases: Annotated[
        bool,
        typer.Option(
            help="Count the scheduler's CPU seconds by phase (watch, cycle, bind, events, "
            "status, ...) on /metrics as gpufleet_cpu_seconds_total; costs about 2 µs per "
            "event-loop callback."
        ),
    ] = False,
    leader_elect: Annotated[
        str,
        typer.Option(
            "--leader-elect",
            help="true or false: schedule only while holding the Lease (kube-scheduler's default).",
        ),
    ] = "true",
    leader_elect_resource_name: Annotated[
        str | None,
        typer.Option(
            help="Name of the Lease (default: gpufleet; gpufleet-dry-run with --dry-run, so "
            "that a shadow never takes the Lease of the scheduler it shadows)."
        ),
    ] = None,
    leader_elect_resource_namespace: Annotated[
        str | None,
        typer.Option(
            help="Namespace of the Lease (default: the pod's in a cluster, else kube-system)."
        ),
    ] = None,
    leader_elect_lease_duration: Annotated[
        float, typer.Option(min=1.0, parser=duration, metavar="DURATION")
    ] = LEASE_DURATION_S,
    leader_elect_renew_deadline: Annotated[
        float, typer.Option(min=0.5, parser=duration, metavar="DURATION")
    ] = RENEW_DEADLINE_S,
    leader_elect_retry_period: Annotated[
        float, typer.Option(min=0.1, parser=duration, metavar="DURATION")
    ] = 2.0,
    prices: Annotated[
        Path,
        typer.Option(
            help="PriceSheet for the hourly cost gauges of /metrics (docs: cost model).",
            show_default="the bundled illustrative sheet",
        ),
    ] = DEFAULT_SHEET,
    forecast_prometheus: Annotated[
        str | None,
        typer.Option(
            metavar="URL",
            help="Prometheus to read serving queues' forecasts from: what each held over the "
            "same hour a day before, as gpufleet_queue_allocated recorded it (docs: serve).",
        ),
    ] = None,
    autoscale: Annotated[
        Path | None,
        typer.Option(
            metavar="NODEPOOLS.yaml",
            help="NodePools (apiVersion gpufleet.io/v1alpha1, with spec.autoscaling) the "
            "cluster's autoscaler may add: jobs that fit nowhere get a ProvisioningRequest "
            "for the cheapest nodes, running pods scale-down protection (docs/autoscaling.md).",
        ),
    ] = None,
    vocabulary: Annotated[
        list[str] | None,
        typer.Option(
            help="Read other schedulers' queues, gangs and pod names in this vocabulary "
            f"({', '.join(sorted(LIVE_VOCABULARIES))}); repeat for several (docs/migration.md). "
            "Each needs its API group's list and watch in the ClusterRole.",
            show_default="gpufleet's own only",
        ),
    ] = None,
) -> None:
    """Run gpufleet as a secondary scheduler on a live cluster (binds, evicts, explains)."""
    del config_file  # its settings are the other options' defaults (_read_config)
    for removed, value, instead in (
        ("--address", address, "--bind-address"),
        ("--port", port, "--secure-port"),
    ):
        if value is not None:
            raise typer.BadParameter(
                f"{removed} was removed: the endpoints are served over HTTPS, on "
                f"--bind-address:--secure-port (default 0.0.0.0:{SECURE_PORT}); use {instead}",
                param_hint=f"'{removed}'",
            )
    serving = _serving(
        bind_address,
        secure_port,
        (tls_cert_file, tls_private_key_file, cert_dir),
        authorization_always_allow_paths,
    )
    if log_format not in {"text", "json"}:
        raise typer.BadParameter(f"--log-format must be text or json, got {log_format!r}")
    vocabularies = frozenset(vocabulary or ()) - {"gpufleet"}
    if unknown := sorted(vocabularies - LIVE_VOCABULARIES):
        raise typer.BadParameter(
            f"{', '.join(unknown)} is not read by the live scheduler; it reads "
            f"{', '.join(sorted(LIVE_VOCABULARIES))}",
            param_hint="'--vocabulary'",
        )
    sheet = load_price_sheet(prices)  # a bad sheet: one line, exit 2, before connecting
    offers = _offers(autoscale, sheet) if autoscale is not None else ()
    if forecast_prometheus is not None and not re.match(r"https?://[^/]", forecast_prometheus):
        raise typer.BadParameter(
            "expected a Prometheus URL such as http://prometheus:9090, got "
            f"{forecast_prometheus!r}",
            param_hint="'--forecast-prometheus'",
        )
    if leader_elect not in {"true", "false"}:
        raise typer.BadParameter(f"--leader-elect must be true or false, got {leader_elect!r}")
    _check_lease(
        leader_elect_lease_duration,
        leader_elect_renew_deadline,
        leader_elect_retry_period,
        (leader_elect_resource_name, leader_elect_resource_namespace),
    )
    lease = None
    if leader_elect == "true":
        lease = LeaseConfig(
            leader_elect_resource_namespace or _own_namespace(),
            leader_elect_resource_name or ("gpufleet-dry-run" if dry_run else "gpufleet"),
            f"{socket.gethostname()}_{uuid.uuid4()}",
            leader_elect_lease_duration,
            leader_elect_renew_deadline,
            leader_elect_retry_period,
        )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LineFormatter(as_json=log_format == "json"))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    # A malformed request to the endpoints is the client's fault, not the scheduler's:
    # aiohttp would log each one as an ERROR with a traceback, which anyone can send.
    logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
    config = load_config(kubeconfig, context)
    options = ServeOptions(
        config=_config(
            policy,
            starvation_after,
            stale_grace,
            non_preemptible_priority,
            expected=expected_duration,
        ),
        scheduler_name=scheduler_name,
        period_s=period,
        dry_run=dry_run,
        dry_run_events=dry_run_events,
        vocabularies=vocabularies,
        price_sheet=sheet,
        forecast_prometheus=forecast_prometheus,
        watch_down_grace_s=watch_down_grace,
        offers=offers,
        cpu_phases=cpu_phases,
    )
    # The cache is hundreds of thousands of long-lived objects; a pod's pass through watch,
    # cycle and writes allocates thousands of short-lived ones. At CPython's default (a
    # young collection every 700 allocations) the collector ran about a hundred times per
    # thousand pods and took 0.12 ms of CPU per pod (``bench.live``'s gc phase); every
    # YOUNG_GC_ALLOCATIONS it takes a quarter of that. The older generations keep their
    # thresholds (one collection per ten of the younger's), so they too run about 28 times
    # less often; the scheduler's peak memory stayed at 160-170 MiB at 5,000 nodes.
    gc.set_threshold(YOUNG_GC_ALLOCATIONS, *gc.get_threshold()[1:])
    try:
        asyncio.run(_serve(config, context, options, lease, serving))
    except UnreachableError as exc:
        logging.getLogger("gpufleet.serve").error("%s", exc)  # noqa: TRY400 (one line, not a trace)
        raise SystemExit(1) from None


def _offers(path: Path, sheet: PriceSheet) -> tuple[NodeOffer, ...]:
    """``--autoscale``: the node types of the NodePools in ``path``, each priced by
    ``sheet``. The cluster's nodes are the live ones: a pool with nodes of its own (``count``
    above 0) or any other object is refused, as is a file with no autoscaling pool."""
    snapshot = load_snapshot(path, need_nodes=False)
    hint = "'--autoscale'"
    kinds = {str(o.get("kind")) for doc in documents(path) for o in objects_of(doc, str(path))}
    if snapshot.nodes or snapshot.pods or kinds - {"NodePool"}:
        raise typer.BadParameter(
            f"{path}: expected NodePools of count 0 with spec.autoscaling only (found "
            f"{', '.join(sorted(kinds))}); the live cluster's objects are read from the API "
            "server",
            param_hint=hint,
        )
    if not snapshot.offers:
        raise typer.BadParameter(
            f"{path}: no NodePool has spec.autoscaling: there is no node type to ask for",
            param_hint=hint,
        )
    try:
        price_stock(snapshot.offers, sheet)
    except UnpricedNodeError as error:
        raise typer.BadParameter(f"{path}: {error}", param_hint=hint) from None
    return snapshot.offers


JITTER_FACTOR = 1.2
"""client-go's leader election jitters its retries by up to this factor."""
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
"""A namespace's name: an RFC 1123 label (no dots)."""
DNS_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _check_lease(
    duration: float, deadline: float, retry: float, names: tuple[str | None, str | None]
) -> None:
    """The Lease's times as client-go's leader election checks them, and its name and
    namespace as Kubernetes names (they are part of the Lease's API path)."""
    if not deadline < duration:
        raise typer.BadParameter(
            "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration"
        )
    if not retry * JITTER_FACTOR < deadline:
        raise typer.BadParameter(
            f"--leader-elect-renew-deadline must be longer than {JITTER_FACTOR} x "
            "--leader-elect-retry-period (client-go's jitter)"
        )
    name, namespace = names
    for option, value, limit, pattern in (
        ("--leader-elect-resource-name", name, 253, DNS_NAME),
        ("--leader-elect-resource-namespace", namespace, 63, DNS_LABEL),
    ):
        if value is not None and (len(value) > limit or not pattern.fullmatch(value)):
            raise typer.BadParameter(
                f"{option} must be a Kubernetes name (lowercase letters, digits, '-' and "
                f"'.', at most {limit} characters), got {value!r}"
            )


def _serving(
    address: str,
    port: int,
    files: tuple[Path | None, Path | None, Path | None],
    always_allow: str,
) -> endpoints.Serving | None:
    """The endpoints' settings, checked before connecting: None with port 0."""
    cert, key, cert_dir = files
    if (cert is None) != (key is None):
        raise typer.BadParameter(
            "--tls-cert-file and --tls-private-key-file must be given together"
        )
    paths = tuple(p.strip() for p in always_allow.split(",") if p.strip())
    if bad := [p for p in paths if not p.startswith("/") or "*" in p[:-1]]:
        raise typer.BadParameter(
            f"each path must start with / (a * only at its end), got {bad[0]!r}",
            param_hint="'--authorization-always-allow-paths'",
        )
    try:
        ipaddress.ip_address(address)
    except ValueError:
        raise typer.BadParameter(f"--bind-address must be an IP address, got {address!r}") from None
    if port == 0:
        return None
    # Here, not at the top: cryptography is loaded by serve alone, not by every command.
    from gpufleet.kube.process.certs import server_context, serving_hosts

    tls = server_context(cert, key, cert_dir, serving_hosts(address))
    return endpoints.Serving(address, port, tls, paths)


def _own_namespace() -> str:
    """The pod's namespace in a cluster (its service account says), else kube-system."""
    path = IN_CLUSTER / "namespace"
    return path.read_text().strip() if path.is_file() else "kube-system"


async def _serve(
    config: KubeConfig,
    context: str | None,
    options: ServeOptions,
    lease: LeaseConfig | None,
    serving: endpoints.Serving | None,
) -> None:
    stop = asyncio.Event()
    if options.cpu_phases:
        CLOCK.start()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    log = logging.getLogger("gpufleet.serve")
    async with http_client(config, context) as http:
        if not await reachable(http, stop):
            log.info("stopped before the API server answered")
            return
        replica = Replica(http, options, lease)
        async with AsyncExitStack() as stack:
            where = "no endpoints (--secure-port=0)"
            if serving is not None:
                # The reviews of scrapers go through a small client of their own: a flood of
                # them never takes the connections binds and the Lease need.
                reviews = await stack.enter_async_context(
                    http_client(config, context, connections=REVIEWS_IN_FLIGHT)
                )
                await stack.enter_async_context(endpoints.served(replica, reviews, serving))
                where = f"endpoints on https://{serving.address}:{serving.port}"
            log.info("serving scheduler %s, %s", options.scheduler_name, where)
            await until_stopped(replica.run(stop), stop, SHUTDOWN_GRACE_S)
