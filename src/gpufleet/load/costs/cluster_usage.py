"""Read what a live cluster ran and used from Prometheus, as the runs and nodes that
:func:`gpufleet.cost.allocation.allocate` costs.

An edge (``gpufleet cost --prometheus URL``): it queries Prometheus
(:mod:`gpufleet.load.costs.prometheus`) for a window ``[start, end)`` and a step, and reads
the series of the exporters most GPU clusters run:

* kube-state-metrics — ``kube_pod_info`` (each pod's node), ``kube_pod_status_phase`` (a pod
  holds its requests while Pending on a node or Running), ``kube_pod_container_resource_requests``
  (``resource`` ``nvidia_com_gpu``, ``nvidia_com_mig_<profile>``, ``cpu``, ``memory``),
  ``kube_pod_labels`` (queue ``label_gpufleet_io_queue``; the experiment label, by default
  ``gpufleet.io/experiment``, then the PodGroup ``label_scheduling_x_k8s_io_pod_group``),
  ``kube_pod_annotations`` (``annotation_gpufleet_io_gpu_fraction``: a share of one GPU),
  ``kube_node_status_capacity`` (what each node holds, and when it existed) and
  ``kube_node_labels`` (``label_node_kubernetes_io_instance_type``,
  ``label_nvidia_com_gpu_product``: its entry in the price sheet). Labels and annotations
  reach Prometheus only where kube-state-metrics' ``--metric-labels-allowlist`` and
  ``--metric-annotations-allowlist`` name them;
* dcgm-exporter — ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (engine activity, 0 to 1), or for a pod
  without it ``DCGM_FI_DEV_GPU_UTIL`` (percent), one series per GPU with the ``pod``,
  ``namespace`` and ``container`` that holds it (``exported_pod``, ... where the scrape kept
  the exporter's own pod in ``pod``); ``modelName`` and ``Hostname`` (``hostname``
  in newer releases) name a node's GPU product where its labels do not;
* cAdvisor, where scraped — ``container_cpu_usage_seconds_total`` (its rate: cores used) and
  ``container_memory_working_set_bytes``.

Every series is read on one grid (``last_over_time``, ``avg_over_time`` over ``[step]``): a
window of ``n`` steps has ``n`` points (its end brought back to a whole step), and a missing
point is time nothing was seen. A pod's *run* is a stretch of consecutive points at
which it was bound to a node and Pending or Running; it is charged its average request over
the run (and its average CPU and memory usage, where known, as OpenCost charges the larger).
Its GPUs' samples give its utilisation and its reserved-but-idle GPU-hours
(:mod:`gpufleet.cost.idle`), its GPU request spread evenly over the GPUs it was seen on: a pod
of 2 GPUs counts each GPU whole, a share of 0.5 half of its GPU's activity and idle time. A
GPU pod without utilisation series has both unknown, never 0.

Faults are one :class:`~gpufleet.load.errors.InputError` naming the server: the client's, a
window in the future or shorter than a step, no kube-state-metrics series in the window, a
node no price-sheet entry matches.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NoReturn

import httpx
import numpy as np

from gpufleet.cost.allocation import GIB, UNALLOCATED, Nodes, Runs
from gpufleet.cost.idle import IdleArgs, idle_hours
from gpufleet.cost.prices import GPU_PRODUCT_LABEL, INSTANCE_TYPE_LABEL, PriceSheet
from gpufleet.load.costs.prometheus import (
    Grid,
    Prometheus,
    Series,
    as_number,
    counter_rate,
    iso,
    prometheus_label,
)
from gpufleet.load.errors import InputError
from gpufleet.model.arrays import FloatArray, IntArray
from gpufleet.model.devices import mig_gpus

ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
DEFAULT_EXPERIMENT_LABEL = "gpufleet.io/experiment"
QUEUE_LABEL = "gpufleet.io/queue"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
FRACTION_ANNOTATION = "gpufleet.io/gpu-fraction"
DEFAULT_QUEUE = "default"
DEFAULT_IDLE = IdleArgs()
_MIG = re.compile(r"nvidia_com_mig_(\d+)g_")
_CONTAINERS = 'container!="",container!="POD",pod!=""'
_GPU_IDENTITY = (
    "namespace, pod, container, exported_namespace, exported_pod, exported_container, "
    "gpu, UUID, GPU_I_ID, Hostname, hostname, modelName"
)


@dataclass(frozen=True, slots=True)
class ClusterUsage:
    """What was read: the runs and nodes to cost over ``window``, the utilisation metrics the
    runs' GPU figures come from (none: unknown) and notes about what was missing."""

    runs: Runs
    nodes: Nodes
    window: tuple[float, float]
    utilisation: tuple[str, ...]
    notes: tuple[str, ...] = ()


@dataclass(slots=True)
class _Run:
    key: tuple[str, str, str]  # namespace, pod, uid
    node: str
    points: IntArray
    request: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    usage: list[float] = field(default_factory=lambda: [math.nan, math.nan, math.nan])
    gpu_idle_hours: float = math.nan


def read_cluster(
    url: str,
    *,
    window: tuple[float, float],
    step: float,
    now: float,
    sheet: PriceSheet,
    experiment_label: str = DEFAULT_EXPERIMENT_LABEL,
    idle: IdleArgs = DEFAULT_IDLE,
    transport: httpx.BaseTransport | None = None,
) -> ClusterUsage:
    """The runs and nodes of the cluster Prometheus at ``url`` watched over ``window``
    (module docstring); ``now`` is the time a window may not end after."""
    prom = Prometheus(url, transport=transport)
    try:
        grid = Grid.of_window(url, window, step, now)
        notes: list[str] = []
        nodes, node_index = _nodes(prom, grid, sheet, notes)
        runs = _runs(prom, grid)
        _requests(prom, grid, runs)
        _cpu_memory(prom, grid, runs)
        used = _gpu(prom, grid, runs, idle)
        labels = _pod_labels(prom, grid, experiment_label)
    finally:
        prom.close()
    kept = [r for r in runs if r.node in node_index]
    notes.extend(
        f"pods on node {node} left out: it has no kube_node_status_capacity series"
        for node in sorted({r.node for r in runs} - set(node_index))
    )
    runs_read = _as_runs(kept, node_index, labels, grid)
    return ClusterUsage(runs_read, nodes, (grid.start, grid.end), used, tuple(notes))


def _require(prom: Prometheus, grid: Grid, metric: str) -> NoReturn:
    raise InputError(
        prom.url,
        f"no {metric} series between {iso(grid.start)} and {iso(grid.end)}: is "
        f"kube-state-metrics scraped by this Prometheus, and was it in that window?",
    )


def _nodes(
    prom: Prometheus, grid: Grid, sheet: PriceSheet, notes: list[str]
) -> tuple[Nodes, dict[str, int]]:
    """Every node with a capacity series in the window, when it existed and its prices; its
    GPUs are its whole ones and its static MIG slices counted as their GPUs, as a pod's
    slices are charged."""
    series = prom.range(
        "max by (node, resource) (last_over_time(kube_node_status_capacity"
        f'{{resource=~"nvidia_com_gpu|nvidia_com_mig_.+|cpu|memory"}}[{grid.step:g}s]))',
        grid,
    )
    if not series:
        _require(prom, grid, "kube_node_status_capacity")
    columns = {"nvidia_com_gpu": 0, "cpu": 1, "memory": 2}
    names = sorted({s.labels.get("node", "") for s in series} - {""})
    index = {name: i for i, name in enumerate(names)}
    capacity = np.zeros((len(names), 3))
    first = np.full(len(names), np.iinfo(np.int64).max)
    last = np.full(len(names), -1)
    for s in series:
        i = index.get(s.labels.get("node", ""))
        if i is None or not len(s.k):
            continue
        resource = s.labels["resource"]
        if (mig := _MIG.match(resource)) is not None:  # static MIG: slices as their GPUs
            capacity[i, 0] += s.v[-1] * mig_gpus(f"{mig[1]}g.")
        elif resource in columns:  # (a MIG resource of no profile gpufleet knows: none)
            capacity[i, columns[resource]] += s.v[-1]
        first[i], last[i] = min(first[i], s.k[0]), max(last[i], s.k[-1])
    capacity[:, 2] /= GIB
    labels = _node_labels(prom, grid, names)
    models = (
        _gpu_models(prom, grid) if any(GPU_PRODUCT_LABEL not in labels[n] for n in names) else {}
    )
    types, categories, prices = [], [], []
    for i, name in enumerate(names):
        entry = sheet.type_of(labels[name], models.get(name))
        if entry is None:
            shown = ", ".join(f"{k}={v}" for k, v in sorted(labels[name].items())) or "no labels"
            raise InputError(
                prom.url,
                f"node {name} ({shown}) matches no entry of price sheet {sheet.name} and the "
                f"sheet has no default: add an entry for it",
            )
        gpus, cpus, ram = capacity[i]
        p = entry.prices(float(gpus), float(cpus), float(ram), sheet.base)
        types.append(entry.name)
        categories.append(entry.category)
        prices.append((p.gpu, p.cpu, p.ram))
        if entry is sheet.default:
            notes.append(f"node {name} is priced at the sheet's default")
    nodes = Nodes.of(
        names,
        types=types,
        categories=categories,
        capacity=capacity,
        prices=np.array(prices).reshape(len(names), 3),
        start=[grid.time(int(k)) for k in first],
        end=[grid.time(int(k) + 1) for k in last],
    )
    return nodes, index


def _node_labels(prom: Prometheus, grid: Grid, names: Sequence[str]) -> dict[str, dict[str, str]]:
    keys = {
        prometheus_label(INSTANCE_TYPE_LABEL): INSTANCE_TYPE_LABEL,
        prometheus_label(GPU_PRODUCT_LABEL): GPU_PRODUCT_LABEL,
    }
    labels: dict[str, dict[str, str]] = {name: {} for name in names}
    for metric, _ in prom.instant(_last("kube_node_labels", grid), grid.end):
        node = labels.get(metric.get("node", ""))
        if node is not None:
            node.update({keys[k]: v for k, v in metric.items() if k in keys and v})
    return labels


def _gpu_models(prom: Prometheus, grid: Grid) -> dict[str, str]:
    """Each node's GPU product as dcgm-exporter names it, spaces as GPU feature discovery
    writes them (``NVIDIA H100 80GB HBM3`` -> ``NVIDIA-H100-80GB-HBM3``)."""
    models: dict[str, str] = {}
    for metric in (ENGINE_ACTIVE, GPU_UTIL):
        query = f"count by (Hostname, hostname, modelName) ({_last(metric, grid)})"
        for labels, _ in prom.instant(query, grid.end):
            host = labels.get("Hostname") or labels.get("hostname")
            if host and labels.get("modelName"):
                models.setdefault(host, labels["modelName"].replace(" ", "-"))
    return models


def _last(metric: str, grid: Grid) -> str:
    """``metric``'s last sample in the window (an instant query at its end)."""
    return f"last_over_time({metric}[{grid.end - grid.start:g}s])"


def _runs(prom: Prometheus, grid: Grid) -> list[_Run]:
    """Each pod's runs: stretches of points bound to a node and Pending or Running."""
    info = prom.range(
        f"max by (namespace, pod, uid, node) (last_over_time(kube_pod_info[{grid.step:g}s]))",
        grid,
    )
    if not info:
        _require(prom, grid, "kube_pod_info")
    phase = prom.range(
        "max by (namespace, pod, uid) (last_over_time(kube_pod_status_phase"
        f'{{phase=~"Pending|Running"}}[{grid.step:g}s]))',
        grid,
    )
    holding = {_pod_key(s.labels): s.k[s.v == 1] for s in phase}
    runs: list[_Run] = []
    for s in info:
        key, node = _pod_key(s.labels), s.labels.get("node", "")
        if not node:
            continue  # not bound (yet)
        # Without phase series (kube-state-metrics told not to publish them), bound is held.
        points = np.intersect1d(s.k, holding.get(key, s.k[:0])) if phase else s.k
        parts = np.split(points, np.flatnonzero(np.diff(points) > 1) + 1)
        runs.extend(_Run(key, node, part) for part in parts if len(part))
    return runs


def _pod_key(labels: Mapping[str, str]) -> tuple[str, str, str]:
    return labels.get("namespace", ""), labels.get("pod", ""), labels.get("uid", "")


def _requests(prom: Prometheus, grid: Grid, runs: Sequence[_Run]) -> None:
    """Each run's average request: GPUs (whole, MIG slices by their compute slices, or a
    share by annotation), cores and GiB."""
    series = prom.range(
        "sum by (namespace, pod, uid, resource) (max by (namespace, pod, uid, container, "
        "resource) (last_over_time(kube_pod_container_resource_requests"
        f'{{resource=~"nvidia_com_gpu|nvidia_com_mig_.+|cpu|memory"}}[{grid.step:g}s])))',
        grid,
    )
    by_pod: dict[tuple[str, str, str], list[Series]] = defaultdict(list)
    for s in series:
        by_pod[_pod_key(s.labels)].append(s)
    fractions = {
        (m.get("namespace", ""), m.get("pod", "")): as_number(m.get(_FRACTION, ""))
        for m, _ in prom.instant(_last(f'kube_pod_annotations{{{_FRACTION}!=""}}', grid), grid.end)
    }
    for run in runs:
        for s in by_pod.get(run.key, []):
            amount = _mean(s.at(run.points))
            resource = s.labels.get("resource", "")
            if resource == "nvidia_com_gpu":
                run.request[0] += amount
            elif (mig := _MIG.match(resource)) is not None:
                run.request[0] += amount * mig_gpus(f"{mig[1]}g.")
            elif resource == "cpu":
                run.request[1] += amount
            elif resource == "memory":
                run.request[2] += amount / GIB
        fraction = fractions.get(run.key[:2], math.nan)
        if run.request[0] == 0 and 0 < fraction <= 1:
            run.request[0] = fraction


_FRACTION = prometheus_label(FRACTION_ANNOTATION, "annotation_")


def _mean(values: FloatArray) -> float:
    known = values[~np.isnan(values)]
    return float(known.mean()) if len(known) else 0.0


def _cpu_memory(prom: Prometheus, grid: Grid, runs: Sequence[_Run]) -> None:
    """Average cores (the counter's increase over the run, resets counted as Prometheus
    counts them) and GiB of working set, where cAdvisor's series are there."""
    counters = prom.range(
        "max by (namespace, pod, container) (last_over_time(container_cpu_usage_seconds_total"
        f"{{{_CONTAINERS}}}[{grid.step:g}s]))",
        grid,
    )
    memory = prom.range(
        "sum by (namespace, pod) (max by (namespace, pod, container) (avg_over_time("
        f"container_memory_working_set_bytes{{{_CONTAINERS}}}[{grid.step:g}s])))",
        grid,
    )
    cpu_of = _by_pod(counters)
    memory_of = _by_pod(memory)
    for run in runs:
        cores = [counter_rate(s, run.points, grid.step) for s in cpu_of.get(run.key[:2], [])]
        known = [c for c in cores if not math.isnan(c)]
        if known:
            run.usage[1] = sum(known)
        values = [s.at(run.points) for s in memory_of.get(run.key[:2], [])]
        if values and np.any(~np.isnan(values[0])):
            run.usage[2] = _mean(values[0]) / GIB


def _by_pod(series: Iterable[Series]) -> dict[tuple[str, str], list[Series]]:
    """Series by the pod they describe: ``exported_namespace`` and ``exported_pod`` where
    the scrape renamed an exporter's own labels so (``honor_labels: false``), else
    ``namespace`` and ``pod``."""
    out: dict[tuple[str, str], list[Series]] = defaultdict(list)
    for s in series:
        if s.labels.get("exported_pod"):
            out[s.labels.get("exported_namespace", ""), s.labels["exported_pod"]].append(s)
        else:
            out[s.labels.get("namespace", ""), s.labels.get("pod", "")].append(s)
    return out


def _gpu(prom: Prometheus, grid: Grid, runs: Sequence[_Run], idle: IdleArgs) -> tuple[str, ...]:
    """Each GPU run's utilisation and idle GPU-hours from its GPUs' series: engine activity
    where a pod has it, else GPU utilisation / 100."""
    step = f"[{grid.step:g}s]"
    active = _by_pod(
        prom.range(
            f'max by ({_GPU_IDENTITY}) (avg_over_time({ENGINE_ACTIVE}{{pod!=""}}{step}))', grid
        )
    )
    util = _by_pod(
        prom.range(
            f'max by ({_GPU_IDENTITY}) (avg_over_time({GPU_UTIL}{{pod!=""}}{step})) / 100', grid
        )
    )
    used: set[str] = set()
    rows: list[tuple[int, IntArray, FloatArray, float]] = []  # run, points, values, weight
    for i, run in enumerate(runs):
        if run.request[0] <= 0:
            run.usage[0], run.gpu_idle_hours = 0.0, 0.0
            continue
        for metric, source in ((ENGINE_ACTIVE, active), (GPU_UTIL, util)):
            gpus = [(s.at(run.points), s) for s in source.get(run.key[:2], [])]
            gpus = [(v, s) for v, s in gpus if np.any(~np.isnan(v))]
            if gpus:
                used.add(metric)
                weight = run.request[0] / len(gpus)
                run.usage[0] = sum(_mean(v) for v, _ in gpus) * weight
                rows.extend((i, run.points, v, weight) for v, _ in gpus)
                break
    if rows:
        series = np.concatenate(
            [np.full(len(p), j, dtype=np.int64) for j, (_, p, _, _) in enumerate(rows)]
        )
        times = np.concatenate([p * grid.step for _, p, _, _ in rows])
        values = np.concatenate([v for _, _, v, _ in rows])
        hours = idle_hours(series, times, values, n_series=len(rows), interval=grid.step, args=idle)
        for (i, _, _, weight), h in zip(rows, hours, strict=True):
            run = runs[i]
            run.gpu_idle_hours = (
                0.0 if math.isnan(run.gpu_idle_hours) else run.gpu_idle_hours
            ) + h * weight
    return tuple(m for m in (ENGINE_ACTIVE, GPU_UTIL) if m in used)


def _pod_labels(
    prom: Prometheus, grid: Grid, experiment_label: str
) -> dict[tuple[str, str, str], tuple[str, str]]:
    """Each pod's queue and experiment."""
    queue_key = prometheus_label(QUEUE_LABEL)
    keys = (prometheus_label(experiment_label), prometheus_label(POD_GROUP_LABEL))
    out = {}
    for labels, _ in prom.instant(_last("kube_pod_labels", grid), grid.end):
        experiment = next((labels[k] for k in keys if labels.get(k)), UNALLOCATED)
        out[_pod_key(labels)] = (labels.get(queue_key) or DEFAULT_QUEUE, experiment)
    return out


def _as_runs(
    runs: Sequence[_Run],
    node_index: Mapping[str, int],
    labels: Mapping[tuple[str, str, str], tuple[str, str]],
    grid: Grid,
) -> Runs:
    named = [labels.get(r.key, (DEFAULT_QUEUE, UNALLOCATED)) for r in runs]
    return Runs.of(
        [f"{r.key[0]}/{r.key[1]}" for r in runs],
        node=[node_index[r.node] for r in runs],
        start=[grid.time(int(r.points[0])) for r in runs],
        end=[grid.time(int(r.points[-1]) + 1) for r in runs],
        request=np.array([r.request for r in runs]).reshape(len(runs), 3),
        usage=np.array([r.usage for r in runs]).reshape(len(runs), 3),
        gpu_idle_hours=[r.gpu_idle_hours for r in runs],
        dims={
            "namespace": [r.key[0] for r in runs],
            "queue": [q for q, _ in named],
            "experiment": [e for _, e in named],
        },
    )
