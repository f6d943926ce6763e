"""The emulator: the HTTP server in front of the store, run on loopback in its own thread.

Requests pass, in order: a freeze (``faults.py``), authentication when ``require_token`` (a
bearer token, as apiserver's token authenticator: anything else is a 401 ``Unauthorized``
Status; ``/version`` and the health endpoints are public, as for
``system:public-info-viewer``; off by default because kubectl sends no token over plain
HTTP, so the kubeconfig's token is only for clients that do), authorization when ``rbac``
is given (``rbac.py``: a request must then carry the emulator's own token, which stays
unrestricted so that tests can seed and read, or a token of the authorizer's, whose
identity gets only what its roles grant), the injected failures and delays, then the
routes: discovery (``discovery.py``), the resource paths (``handlers.py``, ``watch.py``,
``reviews.py`` for TokenReview and SubjectAccessReview)
and ``/_emulator/`` — a path no apiserver has — for the fault controls
(``POST /_emulator/faults`` with a fault's JSON) and the write log
(``GET /_emulator/writes``). Failures become ``Status`` bodies (``errors.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import threading
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from random import Random
from typing import Any

import yaml
from aiohttp import web

from tests.apiserver import discovery, errors, handlers, reviews, tables
from tests.apiserver.faults import Faults
from tests.apiserver.rbac import Attributes, Authorizer, verb
from tests.apiserver.resources import Resource
from tests.apiserver.selectors import field_selector, label_selector
from tests.apiserver.store import Store
from tests.apiserver.watch import Watch, WatchRequest, serve

JSON = dict[str, Any]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
PUBLIC = {"/version", "/healthz", "/livez", "/readyz"}
UNAUTHORIZED = errors.ApiError(401, "Unauthorized", "Unauthorized")


class Emulator:
    """An API server on ``127.0.0.1`` (see the package docstring). ``start`` it, use ``url``,
    ``store`` and ``faults``, then ``stop`` it."""

    def __init__(
        self,
        *,
        seed: int = 0,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        window: int = 1000,
        bookmark_interval: float = 60.0,
        watch_timeout: float = 1800.0,
        token: str = "emulator-token",
        require_token: bool = False,
        rbac: Authorizer | None = None,
    ) -> None:
        self.store = Store(rng=Random(seed), clock=clock, window=window)
        self.faults = Faults()
        self.faults.on_drop_watches = self._drop_watches_threadsafe
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.token = token
        self.require_token = require_token
        self.rbac = rbac
        self.url = ""
        self._watches: set[Watch] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    # -- lifecycle --------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app

    def start(self) -> Emulator:
        """Serve on an ephemeral loopback port from a thread with its own event loop."""
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        loop = asyncio.new_event_loop()
        self._loop = loop
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            self._runner = web.AppRunner(self.app(), access_log=None, shutdown_timeout=1.0)
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.SockSite(self._runner, sock).start())
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="apiserver-emulator", daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        """End every watch, close the server and its thread."""
        loop, runner = self._loop, self._runner
        if loop is None or runner is None or self._thread is None:
            return

        async def shutdown() -> None:
            self._drop_watches(abort=False)
            await runner.cleanup()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        self._thread.join(10)
        self._loop = self._thread = self._runner = None

    def kubeconfig(self, path: Path, token: str = "") -> Path:
        """Write a kubeconfig for this server (plain HTTP, a bearer token: ``token``, else the
        emulator's own) and return it."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "emulator", "cluster": {"server": self.url}}],
            "users": [{"name": "emulator", "user": {"token": token or self.token}}],
            "contexts": [
                {
                    "name": "emulator",
                    "context": {"cluster": "emulator", "user": "emulator", "namespace": "default"},
                }
            ],
            "current-context": "emulator",
        }
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    # -- watches ----------------------------------------------------------------------------

    def _drop_watches(self, *, abort: bool = True) -> None:
        for watch in list(self._watches):
            watch.dropped = True
            watch.wake.set()
            transport = watch.request.transport if watch.request else None
            if abort and transport is not None:
                transport.abort()

    def _drop_watches_threadsafe(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._drop_watches)

    # -- requests ---------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        while wait := self.faults.frozen():
            await asyncio.sleep(wait)
        try:
            if (
                self.require_token
                and request.path not in PUBLIC
                and (request.headers.get("Authorization") != f"Bearer {self.token}")
            ):
                raise UNAUTHORIZED
            if self.rbac is not None and not request.path.startswith("/_emulator/"):
                self._authorize(self.rbac, request)
            if not request.path.startswith("/_emulator/"):
                method, path = request.method, request.path
                rule = self.faults.take("fail", method, path) or self.faults.take(
                    "throttle", method, path
                )
                if rule is not None:
                    raise self.faults.error(rule)
                if (delay := self.faults.take("delay", method, path)) is not None:
                    await asyncio.sleep(delay.seconds)
            response = await handler(request)
        except errors.ApiError as error:
            headers = {}
            if error.code in {429, 504} and "details" in error.status:
                headers["Retry-After"] = str(error.status["details"].get("retryAfterSeconds", 1))
            return web.json_response(error.status, status=error.code, headers=headers)
        if self.faults.take("drop_reply", request.method, request.path) is not None:
            if request.transport is not None:
                request.transport.abort()
            raise asyncio.CancelledError
        return response

    def _authorize(self, rbac: Authorizer, request: web.Request) -> None:
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        if token == self.token:
            return
        identity = rbac.identity(token)
        if identity is None:
            raise UNAUTHORIZED
        path = request.path.rstrip("/") or "/"
        target = handlers.parse(path)
        if target is None:
            rbac.authorize(identity, Attributes(request.method.lower(), path=path))
            return
        plural = target.resource.plural
        rbac.authorize(
            identity,
            Attributes(
                verb(
                    request.method,
                    named=bool(target.name),
                    watch=request.query.get("watch") in {"1", "true"},
                ),
                target.resource.group,
                f"{plural}/{target.sub}" if target.sub else plural,
                target.namespace,
                target.name,
                path,
            ),
        )

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        document = self._discovery(path, request.host)
        if document is not None:
            return web.json_response(document)
        if path in PUBLIC - {"/version"}:
            return web.Response(text="ok")
        if path.startswith("/_emulator/"):
            return await self._control(request, path)
        target = handlers.parse(path)
        if target is None:
            raise handlers.NOT_FOUND
        query = request.query
        if request.method == "GET" and not target.name and query.get("watch") in {"1", "true"}:
            spec = WatchRequest(
                resource=target.resource,
                namespace=target.namespace,
                matches=_predicate(
                    query.get("labelSelector"), query.get("fieldSelector"), target.resource
                ),
                resource_version=query.get("resourceVersion", ""),
                bookmarks=query.get("allowWatchBookmarks") in {"1", "true"},
                initial_events=query.get("sendInitialEvents") == "true",
                timeout=float(query.get("timeoutSeconds") or self.watch_timeout),
                as_table=tables.wants_table(request.headers.get("Accept", "")),
                include=query.get("includeObject", "Metadata"),
            )
            return await serve(
                request,
                spec,
                store=self.store,
                faults=self.faults,
                watches=self._watches,
                bookmark_interval=self.bookmark_interval,
            )
        if target.resource.review:
            return await reviews.handle(request, target, self.rbac, self.token)
        return await handlers.handle(request, self.store, target)

    @staticmethod
    def _discovery(path: str, host: str) -> JSON | None:  # noqa: PLR0911 (one per document)
        parts = [p for p in path.split("/") if p]
        if path == "/version":
            return discovery.VERSION
        if path == "/api":
            return discovery.api_versions(host)
        if path == "/apis":
            return discovery.api_group_list()
        if len(parts) == 2 and parts[0] == "api":
            return discovery.api_resource_list("", parts[1])
        if len(parts) == 2 and parts[0] == "apis" and parts[1] in discovery.group_versions():
            return discovery.api_group(parts[1])
        if len(parts) == 3 and parts[0] == "apis":
            return discovery.api_resource_list(parts[1], parts[2])
        return None

    async def _control(self, request: web.Request, path: str) -> web.Response:
        if path == "/_emulator/faults" and request.method == "POST":
            self.faults.configure(await handlers.body(request))
            return web.json_response(errors.success(200))
        if path == "/_emulator/writes" and request.method == "GET":
            return web.json_response([dataclasses.asdict(w) for w in self.store.writes])
        raise handlers.NOT_FOUND


def _predicate(
    labels: str | None, fields: str | None, resource: Resource
) -> Callable[[JSON], bool]:
    by_label, by_field = label_selector(labels), field_selector(fields, resource)
    return lambda obj: by_label(obj) and by_field(obj)
