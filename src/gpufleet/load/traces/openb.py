"""Read the Alibaba openb trace (alibaba/clusterdata, cluster-trace-gpu-v2023): pods, nodes.

Pod CSV columns: ``name, cpu_milli, memory_mib, num_gpu, gpu_milli`` and optionally
``gpu_spec`` (allowed GPU models, ``|``-separated); the fill protocol ignores the other
columns (times, QoS). The replay reads the times too (:func:`load_timed_pods`):
``creation_time``, ``scheduled_time`` and ``deletion_time``, seconds from the trace's start.
Node CSV columns: ``sn, cpu_milli, memory_mib, gpu, model``.

Every row is checked; the first bad value stops the load with an :class:`InputError` naming
the file, the line (the header is line 1) and the field — no row is dropped silently.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from gpufleet.load.errors import InputError, reading
from gpufleet.load.shown import shown
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import MAX_GPUS_PER_NODE, NodeSpec
from gpufleet.model.pod import PodSpec

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "scheduled_time", "deletion_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")

BUNDLED_WORKLOAD = "openb_pod_list_default.csv"
BUNDLED_NODES = "openb_node_list_gpu_node.csv"


@dataclass(frozen=True, slots=True)
class Workload:
    """Pods of one trace file, in file order; ``name`` is the file's stem."""

    name: str
    pods: tuple[PodSpec, ...]


def bundled(filename: str) -> Path:
    """Path of a data file shipped inside the package."""
    return Path(str(resources.files("gpufleet") / "data" / filename))


def csv_rows(
    path: Path, required: Sequence[str], *, header: bool = True
) -> Iterator[tuple[int, dict[str, str]]]:
    """The rows of CSV file ``path`` with their lines, its header checked for ``required``
    columns (``header=False``: a file without one, its columns ``required`` in order); a
    file that is not UTF-8 CSV is one error naming it."""
    source = str(path)
    with reading(path, "a CSV file"):
        handle = path.open(newline="", encoding="utf-8")
    with handle:
        try:
            reader = csv.DictReader(handle, fieldnames=None if header else list(required))
            names = reader.fieldnames or []
            missing = [c for c in required if c not in names]
            if missing:
                raise InputError(
                    source,
                    f"missing column(s) {', '.join(missing)}; expected a header with "
                    f"{', '.join(required)}",
                    line=1,
                )
            for row in reader:
                yield reader.line_num, row
        except UnicodeDecodeError:
            raise InputError(source, "is not UTF-8 text, expected a CSV file") from None
        except csv.Error as exc:
            raise InputError(source, f"is not valid CSV ({exc})") from None


MAX_VALUE = 1 << 52
"""Values beyond this (milli-CPU, MiB, GPUs) are typos, and overflow the model's arrays."""


ASCII_INTEGER = re.compile(r"-?[0-9]+")


def _int(source: str, line: int, row: dict[str, str], field: str) -> int:
    raw = row.get(field)
    if raw is None:
        raise InputError(source, "missing value (row too short)", line=line, field=field)
    text = raw.strip()
    if not ASCII_INTEGER.fullmatch(text):  # int() takes "1_0" and "٣": a CSV means neither
        raise InputError(
            source, f"expected a non-negative integer, got {shown(raw)}", line=line, field=field
        )
    try:
        value = int(text)
    except ValueError:
        raise InputError(
            source, f"expected a non-negative integer, got {shown(raw)}", line=line, field=field
        ) from None
    if value < 0:
        raise InputError(
            source, f"expected a non-negative integer, got {value}", line=line, field=field
        )
    if value >= MAX_VALUE:
        raise InputError(
            source,
            f"{text} is too large (expected an integer below 2^52)",
            line=line,
            field=field,
        )
    return value


@dataclass(frozen=True, slots=True)
class TimedPod:
    """A pod of the trace with its life: it arrives at ``arrival_s`` and runs ``duration_s``."""

    spec: PodSpec
    arrival_s: float
    duration_s: float


def load_pods(path: Path) -> Workload:
    """The pods of an openb pod CSV."""
    return Workload(path.stem, tuple(spec for spec, _ in _pods(path, POD_COLUMNS)))


def load_timed_pods(path: Path) -> list[TimedPod]:
    """The pods of an openb pod CSV with their times, for the time-driven replay.

    A pod arrives at ``creation_time`` and runs ``deletion_time - scheduled_time``. A pod
    the trace never scheduled (no ``scheduled_time``; it was deleted while pending) asks
    for its resources from creation to deletion; a pod never deleted runs to the end of the
    trace (the latest time in the file).
    """
    source = str(path)
    rows = []
    end = 0
    for spec, (line, row) in _pods(path, (*POD_COLUMNS, *TIME_COLUMNS)):
        created = _int(source, line, row, "creation_time")
        scheduled = _optional_int(source, line, row, "scheduled_time")
        deleted = _optional_int(source, line, row, "deletion_time")
        for field, value in (("scheduled_time", scheduled), ("deletion_time", deleted)):
            if value is not None and value < created:
                raise InputError(
                    source,
                    f"expected a time at or after creation_time {created}, got {value}",
                    line=line,
                    field=field,
                )
        if scheduled is not None and deleted is not None and deleted < scheduled:
            raise InputError(
                source,
                f"expected a time at or after scheduled_time {scheduled}, got {deleted}",
                line=line,
                field="deletion_time",
            )
        end = max(end, created, scheduled or 0, deleted or 0)
        rows.append((spec, created, scheduled, deleted))
    return [
        TimedPod(
            spec,
            float(created),
            float(
                (end if deleted is None else deleted)
                - (created if scheduled is None else scheduled)
            ),
        )
        for spec, created, scheduled, deleted in rows
    ]


def _optional_int(source: str, line: int, row: dict[str, str], field: str) -> int | None:
    return None if not (row.get(field) or "").strip() else _int(source, line, row, field)


def _pods(
    path: Path, columns: Sequence[str]
) -> Iterator[tuple[PodSpec, tuple[int, dict[str, str]]]]:
    """Each pod of an openb pod CSV with its line and row (every field checked)."""
    source = str(path)
    seen: set[str] = set()
    count = 0
    for line, row in csv_rows(path, columns):
        name = (row.get("name") or "").strip()
        if not name:
            raise InputError(
                source, "expected a pod name, got an empty value", line=line, field="name"
            )
        if name in seen:
            raise InputError(source, f"duplicate pod name {shown(name)}", line=line, field="name")
        seen.add(name)
        cpu = _int(source, line, row, "cpu_milli")
        memory = _int(source, line, row, "memory_mib")
        num_gpu = _int(source, line, row, "num_gpu")
        gpu_milli = _int(source, line, row, "gpu_milli")
        if num_gpu == 0 and gpu_milli != 0:
            raise InputError(
                source,
                f"expected 0 for a pod without GPUs, got {gpu_milli}",
                line=line,
                field="gpu_milli",
            )
        if num_gpu > 0 and not 0 < gpu_milli <= MILLI:
            raise InputError(
                source,
                f"expected 1..{MILLI} milli-GPU per GPU, got {gpu_milli}",
                line=line,
                field="gpu_milli",
            )
        if num_gpu > 1 and gpu_milli != MILLI:
            raise InputError(
                source,
                f"expected {MILLI} for a pod with {num_gpu} GPUs (a share is only possible "
                f"on one GPU), got {gpu_milli}",
                line=line,
                field="gpu_milli",
            )
        spec = (row.get("gpu_spec") or "").strip()
        models = frozenset(m.strip() for m in spec.split("|") if m.strip()) or None
        count += 1
        yield PodSpec(name, cpu, memory, num_gpu, gpu_milli, models), (line, row)
    if not count:
        raise InputError(source, "has no pods (expected at least one data row)")


def load_nodes(path: Path) -> tuple[NodeSpec, ...]:
    """The nodes of an openb node CSV."""
    source = str(path)
    nodes: list[NodeSpec] = []
    seen: set[str] = set()
    for line, row in csv_rows(path, NODE_COLUMNS):
        name = (row.get("sn") or "").strip()
        if not name:
            raise InputError(
                source, "expected a node name, got an empty value", line=line, field="sn"
            )
        if name in seen:
            raise InputError(source, f"duplicate node name {shown(name)}", line=line, field="sn")
        seen.add(name)
        cpu = _int(source, line, row, "cpu_milli")
        memory = _int(source, line, row, "memory_mib")
        gpus = _int(source, line, row, "gpu")
        if gpus > MAX_GPUS_PER_NODE:
            raise InputError(
                source,
                f"expected at most {MAX_GPUS_PER_NODE} GPUs on one node, got {gpus}",
                line=line,
                field="gpu",
            )
        model = (row.get("model") or "").strip() or None
        if gpus > 0 and model is None:
            raise InputError(
                source,
                f"expected the GPU model of a node with {gpus} GPUs, got an empty value",
                line=line,
                field="model",
            )
        nodes.append(NodeSpec(name, cpu, memory, gpus, model))
    if not nodes:
        raise InputError(source, "has no nodes (expected at least one data row)")
    return tuple(nodes)
