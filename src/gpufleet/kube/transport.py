"""The live scheduler's HTTP client: httpx's client API over aiohttp's connection pool, and a
lean path for the writes made once per pod.

Every request the live scheduler makes goes through an ``httpx.AsyncClient`` (its API,
errors, authentication flows — lightkube's tokens and exec plugins — and redirects); this
transport carries the requests. httpx's own pool (httpcore, h11) costs about a millisecond
of CPU per request, most of it checking every idle connection for every request it queues,
where aiohttp's pool and its C HTTP parser cost a tenth of that (``bench.live``): at a bind
and an Event per pod, the transport was most of the scheduler's CPU.

It keeps httpx's meaning: the request's timeouts (connect, read, pool; a watch's read
timeout of None waits as long as the server keeps it open), at most ``connections`` open at
once (idle ones kept), TLS from the same ``ssl.SSLContext`` (the cluster's CA, a client
certificate), bodies streamed (a watch is read as it comes), bytes passed through untouched
(httpx decodes the content encoding), and aiohttp's failures raised as httpx's
(``ConnectError``, ``ReadTimeout``, ``ReadError``, ``RemoteProtocolError``…), so that
callers catch ``httpx.HTTPError`` as before.

:func:`send_json` is how a bind and an Event are written: on an :class:`ApiClient` whose
credentials are fixed (a bearer token, basic auth, a client certificate or none) and whose
requests to the API server take no proxy, it goes over gpufleet's own HTTP/1.1 connections
(``http1.py``) with the headers httpx would send, and reads the reply whole — httpx's
request and response objects, URL merging and cookie jar, and aiohttp's own, cost more
than the write itself. Anything else (an exec plugin, whose token may be refreshed on a
401) goes through httpx.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import aiohttp
import httpx
from lightkube.config.client_adapter import BearerAuth
from yarl import URL

from gpufleet.kube.http1 import Http1Pool

if TYPE_CHECKING:
    import ssl
    from collections.abc import AsyncIterator, Mapping

DEFAULT_CONNECTIONS = 100
"""httpx's default ``max_connections``."""
KEEPALIVE_S = 5.0
"""httpx's default ``keepalive_expiry``."""
_DROPPED = frozenset({"content-length", "transfer-encoding", "connection", "keep-alive"})
"""Request headers aiohttp sets itself from the body and its pool."""


class AiohttpTransport(httpx.AsyncBaseTransport):
    """An httpx transport over one ``aiohttp.ClientSession`` (module docstring)."""

    def __init__(self, ssl_context: ssl.SSLContext | None, connections: int | None = None) -> None:
        self._ssl = ssl_context
        self._connections = connections or DEFAULT_CONNECTIONS
        self._session: aiohttp.ClientSession | None = None
        self._pools: list[Http1Pool] = []

    def _open(self) -> aiohttp.ClientSession:
        connector = aiohttp.TCPConnector(
            limit=self._connections,
            limit_per_host=0,
            keepalive_timeout=KEEPALIVE_S,
            ssl=self._ssl if self._ssl is not None else True,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            auto_decompress=False,  # httpx decodes by the reply's Content-Encoding
            skip_auto_headers=("Accept-Encoding", "User-Agent", "Content-Type"),
            trust_env=False,  # a proxy the environment names is httpx's (connect.py)
        )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        session = self._session or self._open()
        timeout = _timeout(request.extensions.get("timeout", {}))
        headers = [
            (k.decode("latin-1"), v.decode("latin-1"))
            for k, v in request.headers.raw
            if k.lower().decode("latin-1") not in _DROPPED
        ]
        body = await request.aread()
        try:
            reply = await session.request(
                request.method,
                URL(str(request.url), encoded=True),
                headers=headers,
                data=body or None,
                timeout=timeout,
                allow_redirects=False,  # httpx follows them, if asked
                compress=None,
            )
        except BaseException as exc:  # noqa: BLE001 (each mapped to httpx's, or raised again)
            _reraise(exc, request)
        return httpx.Response(
            reply.status,
            headers=[(k.decode("latin-1"), v.decode("latin-1")) for k, v in reply.raw_headers],
            stream=_Body(reply, request),
            request=request,
            extensions={
                "http_version": f"HTTP/{reply.version.major}.{reply.version.minor}".encode()
                if reply.version is not None
                else b"HTTP/1.1",
                "reason_phrase": (reply.reason or "").encode("latin-1"),
            },
        )

    def lean(self, base: str, headers: Mapping[str, str]) -> Http1Pool:
        """The connections of the lean writes to the API server at ``base``
        (:func:`send_json`), closed with this transport."""
        pool = Http1Pool(base, headers, self._ssl, self._connections, KEEPALIVE_S)
        self._pools.append(pool)
        return pool

    async def aclose(self) -> None:
        for pool in self._pools:
            await pool.aclose()
        if self._session is not None:
            await self._session.close()
            self._session = None


class _Body(httpx.AsyncByteStream):
    """A reply's body as it arrives; closing it before its end closes the connection."""

    def __init__(self, reply: aiohttp.ClientResponse, request: httpx.Request) -> None:
        self._reply, self._request = reply, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._reply.content.iter_any():
                yield chunk
        except BaseException as exc:  # noqa: BLE001 (each mapped to httpx's, or raised again)
            _reraise(exc, self._request)

    async def aclose(self) -> None:
        if self._reply.content.at_eof():
            self._reply.release()
        else:
            self._reply.close()


class Replied(Protocol):
    """What a write's caller reads of its reply: an ``httpx.Response`` or an
    :class:`~gpufleet.kube.http1.Answer`."""

    @property
    def status_code(self) -> int: ...
    @property
    def text(self) -> str: ...
    def json(self) -> Any: ...


class ApiClient(httpx.AsyncClient):
    """httpx's client over :class:`AiohttpTransport`, with the lean path of
    :func:`send_json` where the credentials allow it (module docstring)."""

    def __init__(self, transport: AiohttpTransport, **parameters: Any) -> None:
        super().__init__(transport=transport, **parameters)
        self._base = str(self.base_url).rstrip("/")
        self._lean: Http1Pool | None = None
        """The lean writes' connections; None: every write goes through httpx."""
        auth = parameters.get("auth")
        # the API server's requests not routed to a proxy of the environment's
        direct = self._transport_for_url(self.base_url) is transport
        if direct and (auth is None or type(auth) in (BearerAuth, httpx.BasicAuth)):
            template = self.build_request("POST", "/", content=b"")
            if auth is not None:  # a fixed header: its flow sets it at once
                template = next(auth.sync_auth_flow(template))
            headers = {
                k: v
                for k, v in template.headers.items()
                if k.lower() not in _DROPPED and k.lower() not in ("host", "content-type")
            }
            if Http1Pool.plain(headers):
                self._lean = transport.lean(self._base, headers)

    async def send_json(self, method: str, path: str, body: Any, content_type: str) -> Replied:
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        data = text.encode()  # as httpx encodes json=
        if self._lean is None:
            return await self.request(
                method, path, content=data, headers={"Content-Type": content_type}
            )
        return await self._lean.exchange(method, path, content_type, data, self.timeout)


async def send_json(
    http: httpx.AsyncClient,
    method: str,
    path: str,
    body: Any,
    content_type: str = "application/json",
) -> Replied:
    """Write ``body`` as JSON: lean on an :class:`ApiClient` (module docstring), through
    httpx on any other client."""
    if isinstance(http, ApiClient):
        return await http.send_json(method, path, body, content_type)
    return await http.request(method, path, json=body, headers={"Content-Type": content_type})


def _timeout(limits: Mapping[str, float | None]) -> aiohttp.ClientTimeout:
    """httpx's timeouts as aiohttp's: connecting includes the wait for a free connection."""
    return aiohttp.ClientTimeout(
        total=None,
        connect=_sum(limits.get("pool"), limits.get("connect")),
        sock_connect=limits.get("connect"),
        sock_read=limits.get("read"),
    )


def _sum(*parts: float | None) -> float | None:
    """A sum of timeouts; None (no limit) if any is."""
    return None if any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _reraise(exc: BaseException, request: httpx.Request | None) -> NoReturn:
    mapped = _as_httpx(exc, request)
    if mapped is exc:
        raise exc
    raise mapped from exc


def _as_httpx(exc: BaseException, request: httpx.Request | None) -> BaseException:
    """aiohttp's failure as httpx's (others — a cancellation — as they are). Only a
    connection never made is a ``ConnectError`` (the request was not sent); a connection
    lost after it may have carried the request, as httpx's ``ReadError`` says."""
    message = str(exc) or type(exc).__name__
    mapped: type[httpx.TransportError] | None = None
    if isinstance(exc, aiohttp.ClientConnectorError):  # certificate errors included
        mapped = httpx.ConnectError
    elif isinstance(exc, aiohttp.ConnectionTimeoutError):  # no connection free, or made
        mapped = httpx.ConnectTimeout
    elif isinstance(exc, TimeoutError):  # aiohttp's socket and server timeouts are ones
        mapped = httpx.ReadTimeout
    elif isinstance(
        exc,
        aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError | aiohttp.ClientResponseError,
    ):
        mapped = httpx.RemoteProtocolError
    elif isinstance(exc, aiohttp.ClientOSError | ConnectionError):
        mapped = httpx.ReadError
    elif isinstance(exc, aiohttp.ClientError):  # an invalid URL among them
        mapped = httpx.TransportError
    return exc if mapped is None else mapped(message, request=request)  # else: a cancellation
