"""Start and stop of the live scheduler's process, bounded in time whatever the API server does.

* **Start**: before anything is watched, one request proves the API server can be reached
  and that it takes gpufleet's credentials (``GET /api``). A refused connection, a timeout
  or a server error is retried a few times (:data:`START_TRIES`, with a doubling wait); a
  certificate that does not verify, a 401 or a 403 is not (waiting does not change them).
  Either ends the process, exit code 1, with one line saying what failed — rather than
  watches retrying in silence.
* **Stop**: on SIGTERM the scheduler stops starting work, and what it is doing gets
  :data:`SHUTDOWN_GRACE_S` to finish (a bind being written, the Lease being released); then
  every request still in flight is cancelled, so the process exits within the kubelet's
  grace period (30 s by default) even while the API server does not answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
from collections.abc import Awaitable, Coroutine
from typing import Any

import httpx
from lightkube.core.exceptions import ConfigError

log = logging.getLogger("gpufleet.serve")

SHUTDOWN_GRACE_S = 8.0
"""How long work in flight may take to finish after SIGTERM before it is cancelled."""
START_TRIES = 5
"""Attempts to reach the API server at start (waits of 1, 2, 4 and 8 s between them)."""


class UnreachableError(RuntimeError):
    """The API server could not be reached, or refused gpufleet's credentials, at start."""


async def reachable(http: httpx.AsyncClient, stop: asyncio.Event, tries: int = START_TRIES) -> bool:
    """True once ``GET /api`` answers 200; False as soon as ``stop`` is set (a SIGTERM while
    the server hangs ends the process at once); :class:`UnreachableError` naming why after
    ``tries`` failures."""
    why = ""
    for attempt in range(tries):
        try:
            response = await _unless_stopped(http.get("/api"), stop)
        except _StoppedError:
            return False
        except (ConfigError, OSError) as exc:  # a credential plugin that fails or is absent
            why = f"the kubeconfig's credentials: {type(exc).__name__}: {exc}"
            break
        except httpx.HTTPError as exc:
            why = f"{type(exc).__name__}: {exc}"
            if isinstance(exc.__context__, ssl.SSLError) or "SSL" in str(exc):
                break  # a certificate does not get better by waiting
        else:
            if response.status_code == 200:
                return True
            if response.status_code in {401, 403}:
                why = f"HTTP {response.status_code} for GET /api: the credentials were refused"
                break
            why = f"HTTP {response.status_code} for GET /api"
        if attempt + 1 < tries:
            log.warning("cannot reach the API server (%s); trying again", why)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=float(2**attempt))
            if stop.is_set():
                return False
    raise UnreachableError(f"cannot reach the API server at {http.base_url}: {why}")


class _StoppedError(Exception):
    """A stop was asked for while the API server was being reached."""


async def _unless_stopped(
    request: Awaitable[httpx.Response], stop: asyncio.Event
) -> httpx.Response:
    """``request``'s reply, or :class:`_StoppedError` as soon as ``stop`` is set (a server
    that hangs must not hold a SIGTERM)."""
    task = asyncio.ensure_future(request)
    stopped = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopped.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, httpx.HTTPError):
            await task
        raise _StoppedError
    return task.result()


async def until_stopped(
    work: Coroutine[Any, Any, None], stop: asyncio.Event, grace: float = SHUTDOWN_GRACE_S
) -> None:
    """Run ``work`` until it ends or, once ``stop`` is set, for ``grace`` more seconds; then
    cancel it (a failure of ``work`` is raised)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if not task.done():
            done, _ = await asyncio.wait({task}, timeout=grace)
            if not done:
                log.warning(
                    "shutdown: work still in flight after %.0fs (the API server does not "
                    "answer); cancelled",
                    grace,
                )
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
                return
        task.result()
    finally:
        stopper.cancel()
