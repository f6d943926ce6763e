"""The live scheduler's own HTTP endpoints, as kube-scheduler serves them:

* ``/healthz`` (and ``/livez``) — the process answers, and a leader's scheduling loop has
  not stalled (a cycle or a write that never returns would keep renewing the Lease while
  nothing is scheduled; only a restart ends that, so the liveness probe fails);
* ``/readyz`` — every watched kind has been listed: the cache holds the cluster;
* ``/metrics`` — Prometheus' text format (``metrics.py``).

They are served over HTTPS (``certs.py``) to whom the API server says may read them
(``delegated.py``): the probes to anyone, ``/metrics`` to a token whose user RBAC grants
``get`` on the non-resource URL ``/metrics``.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from gpufleet.kube.process.delegated import ALWAYS_ALLOW_PATHS, Delegated

if TYPE_CHECKING:
    import httpx

    from gpufleet.kube.process.metrics import Metrics

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Served(Protocol):
    """What the endpoints read: readiness and the metrics."""

    @property
    def ready(self) -> bool: ...
    @property
    def metrics(self) -> Metrics: ...
    def stalled(self) -> float | None:
        """Seconds the scheduling loop has not come round, when that is too long."""


def app(live: Served, guard: Delegated | None) -> web.Application:
    """The endpoints, each request first decided by ``guard`` (None: served to anyone, for a
    caller that has secured the socket otherwise)."""

    @web.middleware
    async def guarded(request: web.Request, handler: Handler) -> web.StreamResponse:
        if guard is not None:
            verdict = await guard.decide(
                request.method, request.path, request.headers.get("Authorization")
            )
            if verdict.status != 200:
                return web.Response(status=verdict.status, text=verdict.text)
        return await handler(request)

    async def healthz(_request: web.Request) -> web.Response:
        stalled = live.stalled()
        if stalled is not None:
            return web.Response(status=500, text=f"unhealthy: no cycle for {stalled:.0f}s")
        return web.Response(text="ok")

    async def readyz(_request: web.Request) -> web.Response:
        if live.ready:
            return web.Response(text="ok")
        return web.Response(status=503, text="not ready: the first lists are not in yet")

    async def metrics(_request: web.Request) -> web.Response:
        body = generate_latest(live.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    application = web.Application(middlewares=[guarded])
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/livez", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics)
    return application


@dataclass(frozen=True, slots=True)
class Serving:
    """Where and how the endpoints are served: HTTPS on ``address:port`` (port 0: any free
    port) with ``tls``, ``always_allow`` paths to anyone, the others as the API server says
    (``delegated.py``)."""

    address: str
    port: int
    tls: ssl.SSLContext
    always_allow: tuple[str, ...] = ALWAYS_ALLOW_PATHS


@asynccontextmanager
async def served(
    live: Served, http: httpx.AsyncClient, serving: Serving
) -> AsyncIterator[tuple[str, int]]:
    """The endpoints of ``live`` served while inside, the reviews made through ``http`` (a
    client of the API server); yields the address and port they listen on."""
    guard = Delegated(http, serving.always_allow)
    runner = await start(live, serving.address, serving.port, guard=guard, tls=serving.tls)
    host, port = runner.addresses[0][:2]
    try:
        yield host, port
    finally:
        await runner.cleanup()


async def start(
    live: Served,
    host: str,
    port: int,
    *,
    guard: Delegated | None,
    tls: ssl.SSLContext | None,
) -> web.AppRunner:
    """Serve the endpoints on ``host:port`` (port 0: any free port), over TLS with ``tls``;
    stop with ``await runner.cleanup()``."""
    runner = web.AppRunner(app(live, guard), access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=tls).start()
    return runner
