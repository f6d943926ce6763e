"""HTTP/1.1 keep-alive connections for the writes the live scheduler makes once per pod.

A bind and a Scheduled Event per pod are most of what the live scheduler sends. Through
aiohttp's client each cost about 0.15 ms of CPU (its request and response objects, header
multidicts, URL objects, payload wrappers and timers); written here as bytes to an asyncio
transport, the reply parsed by llhttp (``httptools``, the parser uvicorn runs on), one costs
about 0.07 ms (``bench/http1.py``). :class:`Http1Pool` is what a client owes the API server
and its callers, and no more:

* keep-alive connections to one API server: at most ``connections`` open, idle ones reused
  newest first; one idle for ``keepalive_s`` or closed by the server is not reused (it is
  closed when the pool next looks for one); a request waits for a free one at most httpx's
  *pool* timeout (``httpx.PoolTimeout``);
* TLS from the client's ``ssl.SSLContext`` (the cluster's CA, a client certificate), the
  server's name checked; connecting within the *connect* timeout;
* the whole reply within the *read* timeout (httpx bounds each read by it: a write's reply
  is small, one read or a few); its body by Content-Length, chunks or the connection's end;
  1xx replies skipped; a head over :data:`MAX_HEAD_BYTES` or a body over
  :data:`MAX_REPLY_BYTES` (decoded) refused. It asks for no content coding; one the server
  applies anyway is decoded if it is gzip or deflate, and refused if not;
* bytes after a reply that no request asked for (the start of another reply, a late one)
  close the connection: what comes on a kept one always answers its next request;
* failures raised as httpx's: ``ConnectError`` and ``ConnectTimeout`` only when no
  connection was made (the request was never sent); ``ReadTimeout``, ``ReadError`` and
  ``RemoteProtocolError`` when it was (it may have been applied — a bind then reads the pod
  back, ``write/bind.py``). A connection whose reply failed, timed out, was cancelled or
  said ``Connection: close`` is closed, never reused;
* a request target percent-encoded, as httpx does, where it holds bytes a request line may
  not carry (a space or a line break in a hostile object's name cannot split the request).
"""

from __future__ import annotations

import asyncio
import json
import re
import ssl
import zlib
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

import httptools
import httpx

if TYPE_CHECKING:
    from collections.abc import Mapping

MAX_REPLY_BYTES = 16 * 1024 * 1024
"""The largest reply body a write reads, decoded (an Event or a Status is a few KiB)."""
MAX_HEAD_BYTES = 64 * 1024
"""The most a reply's status line and headers may take (kube-apiserver's take a few
hundred bytes; Go's servers refuse requests whose headers pass 1 MiB)."""
_PLAIN_TARGET = re.compile(r"[A-Za-z0-9\-._~!$&'()*+,;=:@/%?]*")
"""A request target that needs no escaping (RFC 3986's path and query characters)."""
_SAFE = "/:@!$&'()*+,;=-._~%?"
"""What escaping leaves as it is."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply read whole."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")

    def json(self) -> Any:
        return json.loads(self.content)


class Http1Pool:
    """Keep-alive HTTP/1.1 connections to the API server at ``base`` (module docstring),
    each request carrying ``headers`` (the client's credentials and accepted encodings)."""

    def __init__(
        self,
        base: str,
        headers: Mapping[str, str],
        ssl_context: ssl.SSLContext | None,
        connections: int,
        keepalive_s: float,
    ) -> None:
        parts = urlsplit(base)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {base!r}")
        secure = parts.scheme == "https"
        self._host = parts.hostname
        self._port = parts.port or (443 if secure else 80)
        self._origin = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        self._prefix = parts.path.rstrip("/")
        self._ssl = (ssl_context or ssl.create_default_context()) if secure else None
        kept = {k: v for k, v in headers.items() if k.lower() != "accept-encoding"}
        self._head = (
            f"Host: {parts.netloc.rpartition('@')[2]}\r\nAccept-Encoding: identity\r\n"
            + "".join(f"{name}: {value}\r\n" for name, value in kept.items())
        ).encode("latin-1")
        self._keepalive_s = keepalive_s
        self._slots = asyncio.Semaphore(connections)
        self._idle: deque[_Connection] = deque()
        self._open: set[_Connection] = set()
        self._closed = False

    @staticmethod
    def plain(headers: Mapping[str, str]) -> bool:
        """Whether ``headers`` can be written as they are (else a client leaves the
        writes to httpx, which refuses them with its own error)."""
        try:
            text = "".join(f"{k}{v}" for k, v in headers.items())
            text.encode("latin-1")
        except UnicodeEncodeError:
            return False
        return not any(c in text for c in "\r\n\0")

    async def exchange(
        self, method: str, path: str, content_type: str, body: bytes, limits: httpx.Timeout
    ) -> Answer:
        """``method`` on ``path`` (under the base URL's path) with ``body``: the reply,
        read whole; a failure as httpx's error (module docstring)."""
        if "\r" in content_type or "\n" in content_type:
            raise ValueError(f"not a content type: {content_type!r}")
        target = self._prefix + path
        if not _PLAIN_TARGET.fullmatch(target):
            target = quote(target, safe=_SAFE)
        request = b"".join(
            (
                f"{method} {target} HTTP/1.1\r\n".encode("latin-1"),
                self._head,
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n".encode(
                    "latin-1"
                ),
                body,
            )
        )
        self._open_or_refuse()
        await self._slot(limits.pool)
        try:
            self._open_or_refuse()
            connection = self._reused() or await self._connect(limits.connect)
            try:
                self._open_or_refuse()
                status, content, encoding = await connection.send(request, limits.read)
            except BaseException:
                connection.abort()
                raise
            if connection.keep and connection.usable and not self._closed:
                connection.idle_since = asyncio.get_running_loop().time()
                self._idle.append(connection)
            else:
                connection.close()
        finally:
            self._slots.release()
        if encoding:
            return Answer(status, _decoded(content, encoding))
        return Answer(status, content)

    def _open_or_refuse(self) -> None:
        if self._closed:
            raise RuntimeError(f"the client of {self._origin} is closed")

    @property
    def connections(self) -> int:
        """How many connections are open (idle or carrying a request)."""
        return len(self._open)

    async def aclose(self) -> None:
        """Close every connection: a request still waiting for its reply fails."""
        self._closed = True
        self._idle.clear()
        for connection in list(self._open):
            connection.close()

    async def _slot(self, limit: float | None) -> None:
        """Wait for a connection of the pool's few to be free, at most ``limit`` s."""
        if not self._slots.locked():
            await self._slots.acquire()  # free: no wait, no timer
            return
        try:
            async with asyncio.timeout(limit):
                await self._slots.acquire()
        except TimeoutError:
            message = f"no connection to {self._origin} free within {limit} s"
            raise httpx.PoolTimeout(message) from None

    def _reused(self) -> _Connection | None:
        """The newest idle connection still open and not idle too long; older ones past
        their time, or closed by the server, are closed and dropped."""
        now = asyncio.get_running_loop().time()
        idle = self._idle
        while idle and (not idle[0].usable or now - idle[0].idle_since >= self._keepalive_s):
            idle.popleft().close()
        while idle:
            connection = idle.pop()
            if connection.usable:
                return connection
            connection.close()
        return None

    async def _connect(self, limit: float | None) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(limit):
                _, connection = await loop.create_connection(
                    lambda: _Connection(self._open),
                    self._host,
                    self._port,
                    ssl=self._ssl,
                    server_hostname=self._host if self._ssl is not None else None,
                )
        except TimeoutError:
            message = f"no connection to {self._origin} within {limit} s"
            raise httpx.ConnectTimeout(message) from None
        except OSError as exc:  # refused, unreachable, unresolved, TLS refused
            raise httpx.ConnectError(f"{self._origin}: {exc or type(exc).__name__}") from exc
        return connection


class _Connection(asyncio.Protocol):
    """One connection: a request written, its reply parsed as it arrives."""

    def __init__(self, pool: set[_Connection]) -> None:
        self._pool = pool
        """The pool's open connections: this one while it is open."""
        self._parser = httptools.HttpResponseParser(self)
        self._transport: asyncio.Transport | None = None
        self._reply: asyncio.Future[tuple[int, bytes, str]] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._body = bytearray()
        self._encoding = ""
        """The reply's content codings, in the order applied ("" for none)."""
        self._head_bytes = 0
        self._framed = False
        """The reply said its length (Content-Length or chunks): else it ends with the
        connection."""
        self._started = self._head_read = False
        self.closed = False
        self.keep = False
        """The last reply may be followed by another request."""
        self.idle_since = 0.0

    @property
    def usable(self) -> bool:
        """Open, and not closing."""
        return not self.closed and self._transport is not None and not self._transport.is_closing()

    # -- the request ----------------------------------------------------------------------

    def send(self, request: bytes, limit: float | None) -> asyncio.Future[tuple[int, bytes, str]]:
        assert self._transport is not None, "connection_made comes first"
        loop = asyncio.get_running_loop()
        self._reply = reply = loop.create_future()
        self._started = self._head_read = self.keep = False
        self._head_bytes = 0
        if limit is not None:
            self._timer = loop.call_later(limit, self._timed_out, limit)
        self._transport.write(request)
        return reply

    def close(self) -> None:
        """Close (the pool's own doing): a request waiting on it fails."""
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(httpx.ReadError("the client closed the connection"))
        self.closed = True
        self._stop_timer()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Close at once: what is written and unsent, or read and unparsed, is dropped."""
        self.closed = True
        self._stop_timer()
        if self._transport is not None:
            self._transport.abort()

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _timed_out(self, limit: float) -> None:
        self._timer = None
        self._fail(httpx.ReadTimeout(f"no whole reply within {limit} s"))

    def _fail(self, error: httpx.TransportError) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(error)
        self.abort()

    # -- asyncio's Protocol ---------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._pool.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._pool.discard(self)
        if self._reply is None or self._reply.done():
            self._stop_timer()
            return
        if exc is not None:
            self._fail(httpx.ReadError(f"the connection broke: {exc or type(exc).__name__}"))
        elif self._head_read and not self._framed:  # a reply that ends with the connection
            self._deliver(keep=False)
        elif self._started:
            self._fail(httpx.RemoteProtocolError("the server closed the connection mid-reply"))
        else:
            self._fail(httpx.RemoteProtocolError("the server closed the connection unanswered"))

    def data_received(self, data: bytes) -> None:
        if self._reply is None or self._reply.done():  # nothing asked: the stream is off
            self.abort()
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"not an HTTP/1.1 reply: {exc}"))
        else:
            if not self._head_read and not self.closed:  # the head goes on past this read
                self._head_bytes += len(data)
                if self._head_bytes > MAX_HEAD_BYTES:
                    self._fail(
                        httpx.RemoteProtocolError(f"a reply head over {MAX_HEAD_BYTES} bytes")
                    )

    def eof_received(self) -> bool:
        return False  # close: a reply that ends with the connection is read in connection_lost

    # -- httptools' callbacks -------------------------------------------------------------

    def on_message_begin(self) -> None:
        if self._reply is None or self._reply.done():  # another reply, unasked for
            self.keep = False
            self.abort()
            return
        self._started, self._head_read = True, False
        self._body.clear()
        self._encoding, self._framed = "", False

    def on_headers_complete(self) -> None:
        self._head_read = True

    def on_header(self, name: bytes, value: bytes) -> None:
        lower = name.lower()
        if lower == b"content-encoding":  # several: one list, in the order given
            coding = value.decode("latin-1").strip().lower()
            self._encoding = f"{self._encoding}, {coding}" if self._encoding else coding
        elif lower in (b"content-length", b"transfer-encoding"):
            self._framed = True

    def on_body(self, body: bytes) -> None:
        if self.closed:
            return
        if len(self._body) + len(body) > MAX_REPLY_BYTES:
            self._fail(httpx.RemoteProtocolError(f"a reply over {MAX_REPLY_BYTES} bytes"))
            return
        self._body += body

    def on_message_complete(self) -> None:
        status = self._parser.get_status_code()
        if status == 101:
            self._fail(httpx.RemoteProtocolError("the server switched protocols"))
        elif status < 200:  # informational: the reply follows
            self._started = self._head_read = False
        else:
            self._deliver(keep=self._parser.should_keep_alive())

    def _deliver(self, *, keep: bool) -> None:
        self._stop_timer()
        reply = self._reply
        if reply is None or reply.done():
            return
        self.keep = keep and not self.closed
        reply.set_result((self._parser.get_status_code(), bytes(self._body), self._encoding))


def _decoded(content: bytes, codings: str) -> bytes:
    """``content`` with its content ``codings`` undone, last applied first: gzip and
    deflate (zlib-wrapped or raw, as servers send it), each to at most
    :data:`MAX_REPLY_BYTES`; anything else is refused."""
    for coding in reversed([c.strip() for c in codings.split(",")]):
        if coding in ("", "identity"):
            continue
        if coding in ("gzip", "x-gzip"):
            content = _inflated(content, zlib.MAX_WBITS | 16)
        elif coding == "deflate":
            try:
                content = _inflated(content, zlib.MAX_WBITS)
            except zlib.error:
                content = _inflated(content, -zlib.MAX_WBITS)
        else:
            raise httpx.DecodingError(f"a reply in content coding {coding!r}, not asked for")
    return content


def _inflated(content: bytes, wbits: int) -> bytes:
    inflate = zlib.decompressobj(wbits)
    out = inflate.decompress(content, MAX_REPLY_BYTES + 1)
    if len(out) > MAX_REPLY_BYTES:
        raise httpx.DecodingError(f"a reply over {MAX_REPLY_BYTES} bytes decoded")
    return out
