"""A small study (fills of a slice of the openb workload, replays of half a day of it on the
bundled 24-GPU cluster), ``gpufleet sweep`` run on it, and the processes it starts."""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpufleet.load.traces.openb import bundled

STUDY = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {name: small}
spec:
  experiments:
  - name: slice-fill
    protocol: fill
    traces: [{path: pods.csv}]
    clusters: [{path: nodes.csv}]
    grid: {policy: [best-fit, gpufleet]}
    seeds: [1, 2]
  - name: half-day
    protocol: replay
    traces: [{bundled: openb_pod_list_default.csv}]
    windows: [{since: 3288h, until: 3300h}]
    clusters: [{bundled: openb-replay-cluster.yaml}]
    settings:
    - {policy: gang-backfill}
    - {policy: gpufleet, reserveAfter: 1h}
    - {policy: gpufleet, actions: none, checkpointInterval: 30m, restartTime: 2m}
"""

LONG = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {name: long}
spec:
  experiments:
  - name: openb-fill
    protocol: fill
    traces: [{bundled: openb_pod_list_default.csv}]
    grid: {policy: [best-fit], inflate: [0.6]}
    seeds: "1-10"
"""
"""Ten fills of the whole bundled workload to 60% of the cluster: each about half a second,
long enough to be interrupted."""


def write_study(folder: Path, text: str = STUDY) -> Path:
    """The study and its two sliced input files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    pods = bundled("openb_pod_list_default.csv").read_text().splitlines()
    nodes = bundled("openb_node_list_gpu_node.csv").read_text().splitlines()
    (folder / "pods.csv").write_text("\n".join(pods[:301]) + "\n")
    (folder / "nodes.csv").write_text("\n".join(nodes[:41]) + "\n")
    path = folder / "study.yaml"
    path.write_text(text)
    return path


def sweep_args(study: Path, cache: Path, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "gpufleet", "sweep", str(study), "--cache", str(cache),
        "--out", str(study.parent / "report"), "--json", "-", *extra,
    ]  # fmt: skip


def sweep(study: Path, cache: Path, *extra: str) -> dict[str, Any]:
    """``gpufleet sweep`` to the end: its JSON document (it must succeed)."""
    done = subprocess.run(
        sweep_args(study, cache, *extra), capture_output=True, text=True, check=False, timeout=600
    )
    assert done.returncode == 0, done.stderr[-3000:]
    doc: dict[str, Any] = json.loads(done.stdout)
    return doc


def simulate(command: str, out: Path) -> list[dict[str, Any]]:
    """A ``gpufleet simulate`` command as a study gives it for a run (its seeds maybe a
    range): the results of its runs."""
    args = shlex.split(command)
    assert args[:2] == ["gpufleet", "simulate"]
    done = subprocess.run(
        [sys.executable, "-m", "gpufleet", *args[1:], "--out", str(out), "--json", "-"],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    runs: list[dict[str, Any]] = json.loads(done.stdout)["runs"]
    return runs


def cached(cache: Path) -> int:
    return sum(1 for _ in cache.rglob("*.json"))


def wait_for(condition: Any, what: str, timeout: float = 240.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (Linux)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def processes_named(prefix: str) -> list[int]:
    """Processes whose command line starts with ``prefix`` (a Ray worker running a task is
    ``ray::_execute_files``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if line.startswith(prefix):
            found.append(int(entry.name))
    return found


def kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
