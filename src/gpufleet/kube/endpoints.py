"""The live scheduler's own HTTP endpoints, as kube-scheduler serves them:

* ``/healthz`` — the process answers, and a leader's scheduling loop has not stalled (a
  cycle or a write that never returns would keep renewing the Lease while nothing is
  scheduled; only a restart ends that, so the liveness probe fails);
* ``/readyz`` — every watched kind has been listed: the cache holds the cluster;
* ``/metrics`` — Prometheus' text format (``metrics.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

if TYPE_CHECKING:
    from gpufleet.kube.metrics import Metrics


class Served(Protocol):
    """What the endpoints read: readiness and the metrics."""

    @property
    def ready(self) -> bool: ...
    @property
    def metrics(self) -> Metrics: ...
    def stalled(self) -> float | None:
        """Seconds the scheduling loop has not come round, when that is too long."""


def app(live: Served) -> web.Application:
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

    application = web.Application()
    application.router.add_get("/healthz", healthz)
    application.router.add_get("/readyz", readyz)
    application.router.add_get("/metrics", metrics)
    return application


async def start(live: Served, host: str, port: int) -> web.AppRunner:
    """Serve the endpoints on ``host:port`` (port 0: any free port); stop with
    ``await runner.cleanup()``."""
    runner = web.AppRunner(app(live))
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
