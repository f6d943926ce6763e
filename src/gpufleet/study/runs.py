"""One run of a study, a pure function of its inputs, and the key its result is kept under.

:func:`execute` computes a :class:`~gpufleet.model.study.StudyRun` from the bytes of its
input files (``blobs``, by digest), wherever it runs: in this process, in a worker of the
local pool, or as a Ray task on another machine. It writes each file once per scratch
folder under its own name (the loaders read files, and know a trace's format by its
header), loads each input once per process, and runs exactly what ``gpufleet simulate``
runs for the same options (``docs/sweep.md`` gives the command of each run).

:func:`run_key` is the SHA-256 of what the result depends on: the protocol, the digests of
the input files, the trace's format and window, the setting, the seed, and the digest of
the installed gpufleet code (:func:`code_digest`: every file of the package, so that an
edited module invalidates the results computed before, as a version string would not).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from gpufleet.cost.nodes import UnpricedNodeError, price_nodes
from gpufleet.cost.prices import PriceSheet
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError, limit_from_env
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.study import unpack_folder
from gpufleet.load.traces.openb import BUNDLED_NODES, Workload, bundled, load_nodes, load_pods
from gpufleet.load.traces.replay_inputs import ReplayInput, load_jobs, load_replay
from gpufleet.load.traces.servegen import ServingLoad, load_model
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.study import InputFile, StudyRun, Value, duration_text, labelled
from gpufleet.model.supply import NodeOffer
from gpufleet.model.workload import ReplayJob
from gpufleet.plugins.registry import POLICIES, REPLAY_PARAMETERS, REPLAY_POLICIES, tuned
from gpufleet.sim.autoscale import SUPPLY_POLICIES, SupplyReplay, peak_nodes
from gpufleet.sim.balance import Lending, hourly_price, lending, replay_lending
from gpufleet.sim.fill import MAX_FILL_PODS, FillTooLargeError, check_size, run_fill
from gpufleet.sim.replay import Replay
from gpufleet.sim.window import trace_window

PACKAGE = Path(__file__).resolve().parents[1]
"""The installed gpufleet package, whose files :func:`code_digest` hashes."""

CHECKPOINT_S, RESTART_S = 1800.0, 120.0
"""An autoscaling run's checkpoint interval and restart time where its setting gives none
(the autoscaling replay's own defaults: ``bench.autoscale``'s run model)."""
DEFAULT_SERVING_NODES = 64
"""A lending run's serving nodes where its setting gives none (``simulate``'s default)."""
DEFAULT_INFLATE = 1.3
"""A fill's ``inflate`` where its setting gives none (``simulate``'s default)."""

Blobs = Mapping[str, tuple[str, bytes]]
"""Input files by digest: their name and bytes."""


@functools.cache
def code_digest() -> str:
    """SHA-256 over the path and bytes of every file of the installed package (compiled
    files left out), and the versions of Python and numpy (whose generators draw a fill's
    order): the code a result was computed with."""
    digest = hashlib.sha256(f"python {sys.version_info[:2]} numpy {np.__version__}\0".encode())
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _json_value(value: Value) -> object:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, float) and math.isinf(value):
        return "never"
    return value


def run_key(run: StudyRun, code: str) -> str:
    """The SHA-256 of everything ``run``'s result depends on (see the module docstring)."""
    doc = {
        "code": code,
        "protocol": run.protocol,
        "files": {f.role: f.digest for f in run.files},
        "workload": run.trace.basename,  # the result names the trace by its file
        "format": run.trace_format,
        "window": [run.window[0], run.window[1]],
        "setting": [[k, _json_value(v)] for k, v in run.setting],  # in order: its label's
        "seed": run.seed,
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Paths:
    """Where a run's input files are read: the trace, and the others where it has them."""

    trace: Path
    cluster: Path | None = None
    queues: Path | None = None
    prices: Path | None = None
    serving: Path | None = None

    @classmethod
    def of(cls, found: Mapping[str, Path]) -> Paths:
        """The paths by input role (``trace``, ``cluster``, ``queues``, ``prices``,
        ``serving``)."""
        return cls(
            found["trace"],
            found.get("cluster"),
            found.get("queues"),
            found.get("prices"),
            found.get("serving"),
        )


def source_paths(run: StudyRun) -> Paths:
    """The run's input files where the study found them (the driver's checks read these)."""
    return Paths.of({f.role: Path(f.path) for f in run.files})


def _quiet(message: str) -> None:
    """A worker's warnings: the driver's checks printed them once already."""
    del message


def _param(params: Mapping[str, Value], name: str, default: float = 0.0) -> float:
    """A numeric parameter of a setting (a duration's seconds, a count, a factor)."""
    value = params.get(name, default)
    return float(value) if isinstance(value, float | int) else default


def _max_fill_pods() -> int:
    """The most pods a fill may place (``GPUFLEET_MAX_FILL_PODS``, as for ``simulate``)."""
    return limit_from_env("GPUFLEET_MAX_FILL_PODS", MAX_FILL_PODS)


def _inflate(run: StudyRun) -> float:
    return _param(run.parameters, "inflate", DEFAULT_INFLATE)


def result_policy(run: StudyRun) -> str:
    """The policy a run's result names: a replay's with its policy's own parameters set
    (``gpufleet reserveAfter=6h``, as ``simulate --param`` names it); the others' as given."""
    if run.protocol != "replay":
        return run.policy
    return labelled(run.policy, _tuning(run))


def _tuning(run: StudyRun) -> dict[str, Value]:
    """A replay setting's parameters of its policy (not of how jobs run)."""
    return {k: v for k, v in run.parameters.items() if k in REPLAY_PARAMETERS}


_LOADED: dict[tuple[object, ...], Any] = {}
"""The inputs this process loaded, by the digests of their files: the driver's checks fill
it, and the pool's workers, forked after the checks, start with it."""
_LOAD_SECONDS = [0.0]
"""Seconds this process spent loading inputs (and writing their files), all told."""

T = TypeVar("T")


def _once(key: tuple[object, ...], load: Callable[[], T]) -> T:
    if key not in _LOADED:
        clock = time.perf_counter()
        _LOADED[key] = load()
        _LOAD_SECONDS[0] += time.perf_counter() - clock
    value: T = _LOADED[key]
    return value


def _digest(file: InputFile | None) -> str | None:
    return None if file is None else file.digest


def is_node_list(cluster: Path | str | None) -> bool:
    """Whether a replay's cluster file is an openb node list (CSV: ``simulate --nodes``)
    rather than cluster YAML (``--cluster``)."""
    return cluster is not None and str(cluster).lower().endswith(".csv")


def _fill_inputs(
    run: StudyRun, paths: Callable[[], Paths]
) -> tuple[Workload, tuple[NodeSpec, ...]]:
    def load() -> tuple[Workload, tuple[NodeSpec, ...]]:
        found = paths()
        return load_pods(found.trace), load_nodes(found.cluster or bundled(BUNDLED_NODES))

    return _once(("fill", run.trace.digest, _digest(run.cluster)), load)


def _replay_inputs(
    run: StudyRun, paths: Callable[[], Paths], warn: Callable[[str], None]
) -> ReplayInput:
    def load() -> ReplayInput:
        found = paths()
        nodes = found.cluster if is_node_list(found.cluster) else None
        return load_replay(
            found.trace,
            fmt=run.trace_format,
            nodes=nodes,
            cluster=None if nodes else found.cluster,
            queues=found.queues,
            warn=warn,
        )

    cluster = run.cluster
    key = (
        "replay",
        run.trace.digest,
        run.trace_format,
        _digest(cluster),
        cluster is not None and is_node_list(cluster.basename),
        _digest(run.queues),
    )
    return _once(key, load)


def _sheet(run: StudyRun, paths: Callable[[], Paths]) -> PriceSheet:
    return _once(
        ("prices", _digest(run.prices)), lambda: load_price_sheet(paths().prices or DEFAULT_SHEET)
    )


AUTOSCALE_CLUSTER = "philly-autoscale.yaml"
"""An autoscaling run's cluster where the study gives none (the bundled one of
``bench.autoscale``: P100 servers on demand and spot, and a system node)."""


@dataclass(frozen=True, slots=True)
class Elastic:
    """An autoscaling run's inputs: the trace's jobs, the node types it may buy and the
    cluster's one node that is always up."""

    workload: str
    jobs: tuple[ReplayJob, ...]
    offers: tuple[NodeOffer, ...]
    system: NodeSpec


def _elastic_inputs(
    run: StudyRun, paths: Callable[[], Paths], warn: Callable[[str], None]
) -> Elastic:
    def load() -> Elastic:
        found = paths()
        _, jobs = load_jobs(found.trace, run.trace_format)
        cluster = found.cluster or bundled(AUTOSCALE_CLUSTER)
        snapshot = load_snapshot(cluster, warn=warn)
        if not snapshot.offers:
            raise InputError(str(cluster), "has no NodePool with spec.autoscaling: nothing to buy")
        if len(snapshot.nodes) != 1 or snapshot.nodes[0].gpus:
            raise InputError(
                str(cluster),
                "expected one node that is always up, without GPUs (the system node: a "
                f"NodePool of count 1), beside the autoscaling NodePools; got "
                f"{len(snapshot.nodes)} nodes",
            )
        return Elastic(found.trace.stem, tuple(jobs), snapshot.offers, snapshot.nodes[0])

    key = ("autoscale", run.trace.digest, run.trace_format, _digest(run.cluster))
    return _once(key, load)


def _serving_load(run: StudyRun, paths: Callable[[], Paths]) -> ServingLoad:
    def load() -> ServingLoad:
        folder = paths().serving
        if folder is None:  # the study's reader asks every lending run for one
            raise InputError(run.trace.name, "a lending run needs a serving load")
        return load_model(folder)

    return _once(("serving", _digest(run.serving)), load)


def _lending(
    run: StudyRun, paths: Callable[[], Paths], warn: Callable[[str], None]
) -> tuple[Lending, float, str]:
    """A lending run's setup, the cluster's hourly price and the trace's name."""
    if run.cluster is not None and is_node_list(run.cluster.basename):
        raise InputError(run.cluster.name, "expected cluster YAML for a lending run, not a CSV")
    data = _replay_inputs(run, paths, warn)
    template = data.nodes[0]
    if not template.gpus:
        raise InputError(data.cluster, f"its first node {template.name} has no GPUs")
    load = _serving_load(run, paths)
    params = run.parameters
    nodes = int(_param(params, "servingNodes", DEFAULT_SERVING_NODES))
    mu = _param(params, "muFactor", 1.0)
    try:
        setup = lending(
            data.jobs,
            template,
            window=run.window,
            load=(load.rate.tolist(), load.window_s, load.sized(nodes, mu).tolist()),
            serving_nodes=nodes,
        )
    except ValueError as error:
        raise InputError(run.trace.name, str(error)) from None
    hourly = hourly_price([*setup.serving_pool, *setup.training_pool], _sheet(run, paths))
    return setup, hourly, data.workload


def check_key(run: StudyRun) -> tuple[object, ...]:
    """What :func:`check` depends on: runs with the same key need checking once."""
    files = tuple(f.digest for f in run.files)
    if run.protocol == "fill":
        return (run.protocol, files, _inflate(run))
    return (run.protocol, files, run.trace_format, run.window, tuple(sorted(run.parameters)))


def check(run: StudyRun, warn: Callable[[str], None]) -> None:
    """Load ``run``'s inputs where the study found them, so that a bad file stops the study
    with an error naming it before any run starts; ``warn`` hears what the loaders warn of.
    Each input is loaded once per process."""
    paths = source_paths(run)
    found = functools.partial(source_paths, run)
    if run.protocol == "fill":
        workload, nodes = _fill_inputs(run, found)
        try:
            capacity = ClusterState(nodes).total_gpu_milli
            check_size(workload.pods, _inflate(run), capacity, _max_fill_pods())
        except FillTooLargeError as error:
            raise InputError(str(paths.trace), str(error)) from None
        return
    if run.protocol == "balance":
        try:
            setup = _lending(run, found, warn)[0]
        except UnpricedNodeError as error:
            raise InputError(str(paths.prices or DEFAULT_SHEET), str(error)) from None
        if not setup.jobs:
            raise InputError(str(paths.trace), "no training job arrives in the window")
        return
    if run.protocol == "autoscale":
        elastic = _elastic_inputs(run, found, warn)
        jobs: Sequence[ReplayJob] = elastic.jobs
        priced = (elastic.system, *(offer.template for offer in elastic.offers))
    else:
        data = _replay_inputs(run, found, warn)
        jobs, priced = data.jobs, tuple(data.nodes)
    try:
        price_nodes(priced, _sheet(run, found))
    except UnpricedNodeError as error:
        raise InputError(str(paths.prices or DEFAULT_SHEET), str(error)) from None
    since = run.window[0]
    if not trace_window(jobs, since):
        raise InputError(
            str(paths.trace),
            f"no job arrives at or after the window's since, {duration_text(since)}",
        )


def compute(run: StudyRun, paths: Callable[[], Paths]) -> dict[str, object]:
    """The result document of ``run``, as ``results.json`` holds one run
    (``docs/simulate.md``); ``paths`` says where its input files are, asked only for an
    input this process has not loaded yet."""
    if run.protocol == "fill":
        workload, nodes = _fill_inputs(run, paths)
        return run_fill(
            nodes,
            workload.pods,
            POLICIES[run.policy],
            workload=workload.name,
            seed=run.seed,
            inflate=_inflate(run),
            max_pods=_max_fill_pods(),
        ).to_json()
    if run.protocol == "autoscale":
        return _autoscale(run, paths)
    if run.protocol == "balance":
        setup, hourly, name = _lending(run, paths, _quiet)
        return replay_lending(setup, run.policy, name).to_json(hourly)
    data = _replay_inputs(run, paths, _quiet)
    since, until = run.window
    params = run.parameters
    policy = REPLAY_POLICIES[run.policy]
    if tuning := _tuning(run):
        policy = tuned(policy, tuning, result_policy(run))
    replay = Replay(
        data.nodes,
        trace_window(data.jobs, since),
        policy,
        queues=data.queues,
        topology=data.topology,
        seed=run.seed,
        workload=data.workload,
        prices=_sheet(run, paths),
        checkpoint_interval_s=_param(params, "checkpointInterval"),
        restart_s=_param(params, "restartTime"),
    )
    return replay.run(until=None if until is None else until - since).to_json()


def _autoscale(run: StudyRun, paths: Callable[[], Paths]) -> dict[str, object]:
    """An autoscaling run: the jobs that arrive in its window, replayed to the end (every
    job finished) on a cluster that buys its nodes, as ``bench.autoscale`` replays them."""
    elastic = _elastic_inputs(run, paths, _quiet)
    since, until = run.window
    jobs = [
        j for j in trace_window(elastic.jobs, since) if until is None or j.arrival_s < until - since
    ]
    params = run.parameters
    return (
        SupplyReplay(
            jobs,
            elastic.offers,
            next(p for p in SUPPLY_POLICIES if p.name == run.policy),
            sheet=_sheet(run, paths),
            system=elastic.system,
            seed=run.seed,
            checkpoint_interval_s=_param(params, "checkpointInterval", CHECKPOINT_S),
            restart_s=_param(params, "restartTime", RESTART_S),
            workload=elastic.workload,
            static_nodes=peak_nodes(jobs, max(o.gpus for o in elastic.offers)),
        )
        .replay()
        .to_json()
    )


def _materialised(scratch: Path, file: InputFile, blobs: Blobs) -> Path:
    """The input ``file`` under ``scratch``, from its bytes in ``blobs`` (a folder from its
    packed files), written once and atomically: workers of one machine share the folder."""
    name, data = blobs[file.digest]
    path = scratch / file.digest[:32] / name
    if path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    if file.role == "serving":
        part = Path(tempfile.mkdtemp(dir=path.parent, prefix=".part-"))
        unpack_folder(data, part)
    else:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".part-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        part = Path(tmp)
    try:
        part.rename(path)
    except OSError:
        shutil.rmtree(part, ignore_errors=True) if part.is_dir() else part.unlink(missing_ok=True)
        if not path.exists():  # not another worker's copy, written first: a real failure
            raise
    return path


def execute(run: StudyRun, blobs: Blobs, scratch: str) -> dict[str, Any]:
    """Run ``run`` on ``blobs`` (see the module docstring): its result and where and when
    it ran (``code``: this machine's :func:`code_digest`, which the driver checks;
    ``load_s``: the seconds it spent writing and loading inputs this process lacked;
    ``compute_s``: the seconds of the run itself; ``busy_s``: all of it)."""
    started, clock, loading = time.time(), time.perf_counter(), _LOAD_SECONDS[0]
    where = Path(scratch)

    def paths() -> Paths:
        return Paths.of({f.role: _materialised(where, f, blobs) for f in run.files})

    result = compute(run, paths)
    computed, load = time.perf_counter() - clock, _LOAD_SECONDS[0] - loading
    doc = {
        "result": result,
        "code": code_digest(),
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "started": started,
        "ended": time.time(),
        "load_s": load,
        "compute_s": computed - load,
    }
    return {**doc, "busy_s": time.perf_counter() - clock}
