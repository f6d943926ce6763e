"""Where a study's runs execute: a process pool over the local cores, or a Ray cluster.

Both take the runs to do and the bytes of their input files, and call ``on_done`` with
each run's outcome as it finishes (in the order they finish), or with its error: a run
that raises is reported with its error, never dropped, and its exception never crosses a
process boundary (only its text does).

* :class:`LocalPool` ships the input files to each worker process once (its initializer)
  and keeps ``workers`` processes busy. A worker that dies (killed, out of memory) takes
  the runs in flight with it; those run again one at a time, so that the one that killed
  its worker is found and tried ``retries`` more times before it is reported, and the
  others lose nothing. Ctrl-C stops the workers at once.
* :class:`RayCluster` puts each input file in Ray's object store once and runs each run
  as a Ray task handed its own files (Ray runs a task again, ``retries`` times, if its
  worker dies); Ray is an optional dependency (``pip install 'gpufleet[ray]'``), imported
  only here and only when asked for.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import socket
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
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
    """A pool worker's initializer: the input files, shipped once per process; Ctrl-C is
    the command's to handle (it stops the workers), not each worker's."""
    global _BLOBS  # noqa: PLW0603 -- per-process state of a worker, set once
    _BLOBS = blobs
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _outcome(run: StudyRun, blobs: Blobs, scratch: str) -> tuple[dict[str, Any] | None, str | None]:
    """A run in a worker: its outcome, or its error as text (an exception is never sent
    back: one that cannot be pickled again would break the pool)."""
    try:
        return execute(run, blobs, scratch), None
    except Exception as exc:  # noqa: BLE001 -- a run's error is its outcome
        return None, _error(exc)


def _execute(run: StudyRun, scratch: str) -> tuple[dict[str, Any] | None, str | None]:
    """A run in a pool worker, on the input files its process was shipped."""
    return _outcome(run, _BLOBS, scratch)


Task = tuple[int, StudyRun]


@dataclass
class LocalPool:
    """``workers`` processes of this machine (default: every core).

    At most twice ``workers`` runs are handed to the pool at a time. When a worker dies,
    every run in flight is lost with the pool; those runs are then run again one at a time,
    so that a run that kills its worker is known: it is tried ``retries`` more times, then
    reported, and the runs beside it lose nothing."""

    workers: int = os.cpu_count() or 1
    retries: int = RETRIES
    name: str = "local"

    def run(self, tasks: Sequence[Task], blobs: Blobs, scratch: str, on_done: Done) -> None:
        queue: deque[Task] = deque(tasks)
        suspects: deque[Task] = deque()
        deaths: dict[int, int] = {}
        while queue or suspects:
            alone = bool(suspects)
            source = suspects if alone else queue
            lost = self._batch(source, self.workers, alone, (blobs, scratch), on_done)
            for i, run in lost:
                if not alone:
                    suspects.append((i, run))
                    continue
                deaths[i] = deaths.get(i, 0) + 1
                if deaths[i] > self.retries:
                    on_done(i, None, f"its worker process died {deaths[i]} times (killed, or "
                            "out of memory)")  # fmt: skip
                else:
                    suspects.append((i, run))

    def _batch(
        self,
        source: deque[Task],
        workers: int,
        alone: bool,
        inputs: tuple[Blobs, str],
        on_done: Done,
    ) -> list[Task]:
        """Runs from ``source`` on a new pool until it is empty or the pool breaks (one run
        at a time if ``alone``, else twice ``workers`` in flight, so that a worker never
        waits for its next run); the runs lost with a broken pool."""
        blobs, scratch = inputs
        workers, limit = (1, 1) if alone else (workers, 2 * workers)
        running: dict[Future[tuple[dict[str, Any] | None, str | None]], Task] = {}
        lost: list[Task] = []
        with ProcessPoolExecutor(
            max_workers=min(workers, len(source)), initializer=_install, initargs=(blobs,)
        ) as pool:
            try:
                while source or running:
                    while source and len(running) < limit:
                        task = source.popleft()
                        try:
                            running[pool.submit(_execute, task[1], scratch)] = task
                        except BrokenProcessPool:
                            source.appendleft(task)
                            return [*lost, *running.values()]
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in done:
                        task = running.pop(future)
                        try:
                            outcome, error = future.result()
                        except BrokenProcessPool:
                            lost.append(task)
                            continue
                        on_done(task[0], outcome, error)
                    if lost:
                        return [*lost, *running.values()]
            except KeyboardInterrupt:
                for child in multiprocessing.active_children():  # the pool's workers
                    child.terminate()
                raise
        return lost

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

    def run(self, tasks: Sequence[Task], blobs: Blobs, scratch: str, on_done: Done) -> None:
        ray = self.ray
        # Each input file once in the object store; a task is handed its own files only.
        refs = {digest: ray.put(data) for digest, data in blobs.items()}
        remote = ray.remote(num_cpus=1, max_retries=self.retries)(_execute_files)
        pending = {
            remote.remote(run, scratch, *(refs[f.digest] for f in run.files)): i for i, run in tasks
        }
        while pending:
            # Whatever finished within a second: one call per second, not one per run.
            done, _ = ray.wait(list(pending), num_returns=len(pending), timeout=1.0)
            for ref in done:
                i = pending.pop(ref)
                try:
                    outcome, error = ray.get(ref)
                except ray.exceptions.RayError as exc:  # the worker or its node was lost
                    on_done(i, None, f"{type(exc).__name__}: {_first_line(exc)}")
                    continue
                on_done(i, outcome, error)

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


def _execute_files(
    run: StudyRun, scratch: str, *files: tuple[str, bytes]
) -> tuple[dict[str, Any] | None, str | None]:
    """A run as a Ray task, handed the bytes of its own input files in ``run.files``'
    order; its outcome, or its error as text."""
    return _outcome(
        run, {f.digest: data for f, data in zip(run.files, files, strict=True)}, scratch
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
