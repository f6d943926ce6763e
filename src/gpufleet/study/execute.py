"""Where a study's runs execute: a process pool over the local cores, or a Ray cluster.

Both take the runs to do and the bytes of their input files, and call ``on_done`` with
each run's outcome as it finishes (in the order they finish), or with its error: a run
that raises is reported with its error, never dropped. A worker that dies (killed, out of
memory) loses the runs it held; both executors run those again, at most ``retries`` times
each, before they count as failed.

* :class:`LocalPool` ships the input files to each worker process once (its initializer)
  and keeps ``workers`` processes busy;
* :class:`RayCluster` puts the input files in Ray's object store once and runs each run
  as a Ray task (``max_retries`` for workers that die); Ray is an optional dependency
  (``pip install 'gpufleet[ray]'``), imported only here and only when asked for.
"""

from __future__ import annotations

import os
import socket
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, Protocol

from gpufleet.load.errors import InputError
from gpufleet.model.study import StudyRun
from gpufleet.study.runs import Blobs, execute

RETRIES = 3
"""Times a run lost with its worker is run again (Ray's own default for tasks)."""

Done = Callable[[int, "dict[str, Any] | None", "str | None"], None]
"""``on_done(index, outcome, error)``: exactly one of ``outcome`` and ``error`` is given."""


class Executor(Protocol):
    workers: int
    name: str

    def run(
        self, tasks: Sequence[tuple[int, StudyRun]], blobs: Blobs, scratch: str, on_done: Done
    ) -> None: ...

    def close(self) -> None: ...


def _error(exc: BaseException) -> str:
    """One line: the exception and where it was raised (the last frame)."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


_BLOBS: Blobs = {}


def _install(blobs: Blobs) -> None:
    """A pool worker's initializer: the input files, shipped once per process."""
    global _BLOBS  # noqa: PLW0603 -- per-process state of a worker, set once
    _BLOBS = blobs


def _execute(run: StudyRun, scratch: str) -> dict[str, Any]:
    return execute(run, _BLOBS, scratch)


@dataclass
class LocalPool:
    """``workers`` processes of this machine (default: every core)."""

    workers: int = os.cpu_count() or 1
    retries: int = RETRIES
    name: str = "local"

    def run(
        self, tasks: Sequence[tuple[int, StudyRun]], blobs: Blobs, scratch: str, on_done: Done
    ) -> None:
        todo = list(tasks)
        lost: dict[int, int] = {}
        while todo:
            broken: list[tuple[int, StudyRun]] = []
            with ProcessPoolExecutor(
                max_workers=min(self.workers, len(todo)), initializer=_install, initargs=(blobs,)
            ) as pool:
                futures: dict[Future[dict[str, Any]], tuple[int, StudyRun]] = {
                    pool.submit(_execute, run, scratch): (i, run) for i, run in todo
                }
                for future in as_completed(futures):
                    i, run = futures[future]
                    try:
                        outcome = future.result()
                    except BrokenProcessPool:
                        broken.append((i, run))
                        continue
                    except Exception as exc:  # noqa: BLE001 -- a run's error is its outcome
                        on_done(i, None, _error(exc))
                        continue
                    on_done(i, outcome, None)
            todo = []
            for i, run in broken:
                lost[i] = lost.get(i, 0) + 1
                if lost[i] > self.retries:
                    on_done(i, None, f"its worker process died {lost[i]} times")
                else:
                    todo.append((i, run))

    def close(self) -> None:
        pass


class RayCluster:
    """Ray tasks on the cluster at ``address`` (``ray://host:10001``, ``host:6379``,
    ``auto``), or on a Ray started here with ``workers`` CPUs (``address`` ``local``)."""

    name = "ray"

    def __init__(self, address: str, workers: int | None = None, retries: int = RETRIES) -> None:
        try:
            import ray  # noqa: PLC0415 -- optional: only a study on Ray needs it
        except ImportError:
            raise InputError("--ray", "Ray is not installed: pip install 'gpufleet[ray]'") from None
        self.ray: Any = ray
        self.retries = retries
        options: dict[str, Any] = {
            "include_dashboard": False,
            "log_to_driver": False,
            "configure_logging": False,
        }
        if address == "local":
            options["num_cpus"] = workers or os.cpu_count() or 1
        else:
            _probe(address)
            options["address"] = address
        try:
            self.ray.init(**options)
        except (ConnectionError, TimeoutError, RuntimeError, ValueError) as exc:
            raise InputError(
                f"--ray {address}", f"cannot reach a Ray cluster there ({_first_line(exc)})"
            ) from None
        self.workers = int(self.ray.cluster_resources().get("CPU", 1))

    def run(
        self, tasks: Sequence[tuple[int, StudyRun]], blobs: Blobs, scratch: str, on_done: Done
    ) -> None:
        ray = self.ray
        shared = ray.put(dict(blobs))  # once: every task reads it from the object store
        remote = ray.remote(num_cpus=1, max_retries=self.retries)(execute)
        pending = {remote.remote(run, shared, scratch): i for i, run in tasks}
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                i = pending.pop(ref)
                try:
                    outcome = ray.get(ref)
                except ray.exceptions.RayTaskError as exc:
                    cause = exc.cause if exc.cause is not None else exc
                    on_done(i, None, _error(cause))
                    continue
                except ray.exceptions.RayError as exc:  # the worker or its node was lost
                    on_done(i, None, f"{type(exc).__name__}: {_first_line(exc)}")
                    continue
                on_done(i, outcome, None)

    def close(self) -> None:
        self.ray.shutdown()


CONNECT_TIMEOUT_S = 10.0
"""How long the Ray cluster's port is given to answer (Ray itself retries for minutes)."""


def _probe(address: str) -> None:
    """Refuse, at once, an address whose port does not answer: ``ray.init`` would wait for
    minutes. ``auto`` (the cluster this machine is part of) is left to Ray."""
    if address == "auto":
        return
    where = address.removeprefix("ray://")
    host, _, port = where.rpartition(":")
    if not host or not port.isdigit():
        raise InputError(f"--ray {address}", "expected ray://HOST:PORT, HOST:PORT, auto or local")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(
            f"--ray {address}", f"cannot reach a Ray cluster there ({reason})"
        ) from None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
