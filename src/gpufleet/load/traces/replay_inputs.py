"""What a replay runs on: a trace's jobs, a cluster and its queues, from the user's files.

Workloads: an openb pod list (one job per pod, all of one tenant: the trace has no tenant
column) or the Philly trace (gangs; the ``cluster`` column is the tenant). The format is
read from the header unless named. Clusters: an openb node CSV (``--nodes``), a YAML file
of Node objects or NodePools with an optional Topology and Queues (``--cluster``), or the
default — the bundled openb nodes for openb, the bundled ``philly-cluster.yaml`` for
Philly. Queues: Queue objects from a YAML file (``--queues``) or the cluster file; none
means one per tenant, quota by GPU-time demand (the replay's default).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError, reading, warn_default
from gpufleet.load.objects.kinds import Warn
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.traces import openb, philly, pollux
from gpufleet.load.traces.openb import BUNDLED_NODES, TimedPod, bundled, load_nodes, load_timed_pods
from gpufleet.load.traces.philly import TraceJob, load_philly
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import DEFAULT_QUEUE, ReplayJob

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from gpufleet.model.cluster import NodeSpec
    from gpufleet.model.workload import QueueSpec

FORMATS = ("openb", "philly")

PHILLY_CLUSTER = "philly-cluster.yaml"
"""The default cluster for the Philly trace (bundled): 80 servers of 8 GPUs (640 GPUs),
in racks of 8. The trace asks for 374 GPUs on average, 626 at the median moment and 1,243
at its peak (demand if nothing ever waited), so the cluster is busy and, in the peak weeks,
short."""

CPU_MILLI_PER_GPU = 6000
MEMORY_MIB_PER_GPU = 48 * 1024

POLLUX_CLUSTER = "pollux-cluster.yaml"
"""The Pollux authors' simulated cluster (bundled): 16 nodes of 4 GPUs."""
POLLUX_WORKLOADS = tuple(f"workload-{i}" for i in range(1, 9))
POLLUX_SPACING_S = 7 * 86400.0
"""The Pollux workloads replay one after another, a week apart: each arrives over 8 hours
and the cluster has drained it long before the next."""
POLLUX_CPU_MILLI_PER_GPU = 10_000
POLLUX_MEMORY_MIB_PER_GPU = 40 * 1024


@dataclass(frozen=True, slots=True)
class ReplayInput:
    workload: str
    """The trace's name (its file's stem)."""
    format: str
    jobs: list[ReplayJob]
    nodes: tuple[NodeSpec, ...]
    topology: tuple[str, ...]
    queues: tuple[QueueSpec, ...]
    """Empty: one queue per tenant (the replay's default)."""
    cluster: str
    """Where the nodes came from, for the report."""


def trace_format(path: Path) -> str:
    """``openb`` or ``philly``, by the columns of the file's header."""
    source = str(path)
    with reading(path, "a CSV file"), path.open(newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle), [])
    columns = {c.strip() for c in header}
    if set(philly.COLUMNS) <= columns:
        return "philly"
    if set(openb.POD_COLUMNS) <= columns:
        return "openb"
    raise InputError(
        source,
        f"header {', '.join(header) or '(empty)'} is neither an openb pod list "
        f"({', '.join(openb.POD_COLUMNS)}) nor a Philly trace ({', '.join(philly.COLUMNS)}); "
        "name the format with --format",
        line=1,
    )


def load_replay(
    workload: Path,
    *,
    fmt: str | None = None,
    nodes: Path | None = None,
    cluster: Path | None = None,
    queues: Path | None = None,
    warn: Warn = warn_default,
) -> ReplayInput:
    """Read everything a replay of ``workload`` needs (see the module docstring)."""
    if fmt is not None and fmt not in FORMATS:
        raise InputError("--format", f"expected one of {', '.join(FORMATS)}, got {fmt!r}")
    if nodes is not None and cluster is not None:
        raise InputError("--cluster", "give either --nodes (openb CSV) or --cluster (YAML)")
    kind, jobs = load_jobs(workload, fmt)
    topology: tuple[str, ...] = ()
    queue_specs: tuple[QueueSpec, ...] = ()
    if nodes is not None:
        node_specs, where = load_nodes(nodes), str(nodes)
    elif cluster is None and kind == "openb":
        node_specs, where = load_nodes(bundled(BUNDLED_NODES)), f"bundled {BUNDLED_NODES}"
    else:
        path = cluster or bundled(PHILLY_CLUSTER)
        where = str(cluster) if cluster is not None else f"bundled {PHILLY_CLUSTER}"
        snapshot = load_snapshot(path, warn=warn)
        node_specs, topology, queue_specs = snapshot.nodes, snapshot.topology, snapshot.queues
    if queues is not None:
        queue_specs = load_snapshot(queues, warn=warn, need_nodes=False).queues
        if not queue_specs:
            raise InputError(str(queues), "has no Queue objects (kind: Queue, gpufleet.io)")
    if not any(n.gpus for n in node_specs):
        raise InputError(where, "has no GPUs (expected a GPU cluster to replay on)")
    return ReplayInput(workload.stem, kind, jobs, tuple(node_specs), topology, queue_specs, where)


def load_jobs(workload: Path, fmt: str | None = None) -> tuple[str, list[ReplayJob]]:
    """The format of trace ``workload`` (``fmt``, else read from its header) and its jobs."""
    kind = fmt or trace_format(workload)
    if kind == "philly":
        return kind, philly_jobs(load_philly(workload))
    return kind, openb_jobs(load_timed_pods(workload))


def openb_jobs(pods: Sequence[TimedPod]) -> list[ReplayJob]:
    """openb pods as replay jobs of one pod each, all of one tenant."""
    return [
        ReplayJob(pod.spec.name, DEFAULT_QUEUE, pod.arrival_s, pod.duration_s, pod.spec)
        for pod in pods
    ]


def load_pollux(
    root: Path, workloads: Sequence[str] = POLLUX_WORKLOADS, *, warn: Warn = warn_default
) -> ReplayInput:
    """The Pollux workloads under ``root`` (the ``pollux-osdi21`` folder of the traces), one
    after another (:data:`POLLUX_SPACING_S`), with the run times of
    :func:`~gpufleet.load.traces.pollux.run_times`, on the bundled Pollux cluster."""
    times = pollux.run_times(root)
    jobs: list[TraceJob] = []
    for k, name in enumerate(workloads):
        path = root / "workloads" / f"{name}.csv"
        jobs += pollux.trace_jobs(path, times, prefix=f"{name}-", offset_s=k * POLLUX_SPACING_S)
    snapshot = load_snapshot(bundled(POLLUX_CLUSTER), warn=warn)
    return ReplayInput(
        root.name,
        "pollux",
        philly_jobs(jobs, POLLUX_CPU_MILLI_PER_GPU, POLLUX_MEMORY_MIB_PER_GPU),
        tuple(snapshot.nodes),
        snapshot.topology,
        (),
        f"bundled {POLLUX_CLUSTER}",
    )


def philly_jobs(
    jobs: Sequence[TraceJob],
    cpu_milli_per_gpu: int = CPU_MILLI_PER_GPU,
    memory_mib_per_gpu: int = MEMORY_MIB_PER_GPU,
) -> list[ReplayJob]:
    """Philly jobs (or Pollux's, sampled from Philly) as replay jobs: each pod asks for its
    GPUs and, per GPU, a share of the servers' CPU and memory (on Philly's, 6 CPUs and
    48 GiB: their CPU and memory divided by their GPUs, less the system's part)."""
    return [
        ReplayJob(
            job.name,
            job.queue,
            job.arrival_s,
            job.duration_s,
            PodSpec(
                job.name,
                cpu_milli_per_gpu * job.gpus_per_pod,
                memory_mib_per_gpu * job.gpus_per_pod,
                job.gpus_per_pod,
                1000,
            ),
            job.pods,
        )
        for job in jobs
    ]
