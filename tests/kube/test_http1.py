"""The lean writes' HTTP/1.1 connections (``kube/http1.py``) against scripted servers over
real sockets: keep-alive and its limits, every way a reply may be framed, encoded or
broken, timeouts and cancellation, TLS, and request lines a hostile name cannot split."""

from __future__ import annotations

import asyncio
import gzip
import ssl
import zlib
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path

import httpx
import pytest

from gpufleet.kube import http1
from gpufleet.kube.http1 import Answer, Http1Pool
from gpufleet.kube.process.certs import self_signed

Reply = Callable[[bytes], Awaitable["bytes | Closing | None"]]
"""What a scripted server answers a request (its head and body): bytes to send, bytes to
send before closing (:class:`Closing`), or None to close the connection unanswered."""


class Closing(bytes):
    """Bytes a scripted server sends, then closes the connection."""


OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
LIMITS = httpx.Timeout(5.0)


class Server:
    """A server that reads each request whole (by its Content-Length) and answers by
    ``reply``; it counts connections and keeps every request it read."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.connections = 0
        self.open = 0
        self.most_open = 0
        self.requests: list[bytes] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        self.most_open = max(self.most_open, self.open)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                request = head + await reader.readexactly(length)
                self.requests.append(request)
                answer = await self.reply(request)
                if answer is None:
                    return
                writer.write(answer)
                await writer.drain()
                if isinstance(answer, Closing):
                    return
        finally:
            self.open -= 1
            writer.close()

    async def start(self, context: ssl.SSLContext | None = None) -> str:
        self._server = await asyncio.start_server(self.handle, "127.0.0.1", 0, ssl=context)
        port = self._server.sockets[0].getsockname()[1]
        return f"{'https' if context else 'http'}://127.0.0.1:{port}"

    async def stop(self) -> None:
        self._server.close()


def answering(*replies: bytes | Closing | None) -> Reply:
    """Each request answered by the next of ``replies``, the last one from then on."""
    left = list(replies)

    async def reply(_: bytes) -> bytes | Closing | None:
        return left.pop(0) if len(left) > 1 else left[0]

    return reply


def pool(
    base: str,
    connections: int = 4,
    keepalive_s: float = 5.0,
    ssl_context: ssl.SSLContext | None = None,
) -> Http1Pool:
    headers = {"Authorization": "Bearer t", "Accept": "*/*"}
    return Http1Pool(base, headers, ssl_context, connections, keepalive_s)


def run(
    reply: Reply,
    body: Callable[[Http1Pool, Server], Awaitable[None]],
    connections: int = 4,
    keepalive_s: float = 5.0,
) -> Server:
    server = Server(reply)

    async def main() -> None:
        lean = pool(await server.start(), connections, keepalive_s)
        try:
            await body(lean, server)
        finally:
            await lean.aclose()
            await server.stop()

    asyncio.run(main())
    return server


def post(
    lean: Http1Pool, path: str = "/api/v1/x", limits: httpx.Timeout = LIMITS
) -> Coroutine[object, object, Answer]:
    return lean.exchange("POST", path, "application/json", b'{"a":1}', limits)


def test_a_request_carries_its_headers_and_connections_are_kept_alive() -> None:
    async def body(lean: Http1Pool, server: Server) -> None:
        for _ in range(5):
            answer = await post(lean)
            assert (answer.status_code, answer.json()) == (201, {})

    server = run(answering(OK), body)
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /api/v1/x HTTP/1.1\r\nHost: 127.0.0.1:")
    for header in (b"Authorization: Bearer t", b"Content-Type: application/json"):
        assert header in first
    assert first.endswith(b'Content-Length: 7\r\n\r\n{"a":1}')


def test_the_base_url_s_path_prefixes_every_request() -> None:
    server = Server(answering(OK))

    async def main() -> None:
        base = await server.start()
        lean = pool(base + "/k8s/clusters/c-1/")
        await post(lean, "/api/v1/x")
        await lean.aclose()
        await server.stop()

    asyncio.run(main())
    assert server.requests[0].startswith(b"POST /k8s/clusters/c-1/api/v1/x HTTP/1.1\r\n")


@pytest.mark.parametrize(
    ("reply", "content"),
    [
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
            b"abcde",
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s"
            % (len(gzip.compress(b"zipped")), gzip.compress(b"zipped")),
            b"zipped",
        ),
        (b"HTTP/1.1 100 Continue\r\n\r\n" + OK, b"{}"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "gzip", "after 100 Continue", "no content"],
)
def test_a_reply_is_read_however_it_is_framed(reply: bytes, content: bytes) -> None:
    got: list[bytes] = []

    async def body(lean: Http1Pool, server: Server) -> None:
        got.append((await post(lean)).content)
        got.append((await post(lean)).content)

    server = run(answering(reply), body)
    assert got == [content, content]
    assert server.connections == 1  # each framed reply leaves the connection usable


def test_a_reply_without_length_ends_with_its_connection() -> None:
    server = Server(answering(None))

    async def main() -> bytes:
        async def until_close(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readuntil(b"\r\n\r\n")
            await reader.readexactly(7)
            writer.write(b"HTTP/1.1 200 OK\r\n\r\nthe whole body")
            await writer.drain()
            writer.close()

        listener = await asyncio.start_server(until_close, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        lean = pool(f"http://127.0.0.1:{port}")
        try:
            return (await post(lean)).content
        finally:
            await lean.aclose()
            listener.close()

    assert asyncio.run(main()) == b"the whole body"
    assert server.connections == 0


def test_connection_close_is_obeyed_and_an_idle_connection_expires() -> None:
    closing = b"HTTP/1.1 201 Created\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"

    async def body(lean: Http1Pool, server: Server) -> None:
        await post(lean)  # closed after its reply
        await post(lean)  # a new connection, kept
        await post(lean)  # reused
        await asyncio.sleep(0.3)
        await post(lean)  # idle too long: a new one

    server = run(answering(closing, OK), body, keepalive_s=0.2)
    assert server.connections == 3


def test_at_most_so_many_connections_and_a_wait_bounded_by_the_pool_timeout() -> None:
    gate = asyncio.Event()
    gate.set()

    async def body(lean: Http1Pool, server: Server) -> None:
        answers = await asyncio.gather(*(post(lean) for _ in range(7)))
        assert [a.status_code for a in answers] == [201] * 7
        gate.clear()
        waiting = [asyncio.create_task(post(lean)) for _ in range(2)]
        await asyncio.sleep(0.05)
        with pytest.raises(httpx.PoolTimeout):
            await post(lean, limits=httpx.Timeout(5.0, pool=0.05))
        gate.set()
        assert [(await w).status_code for w in waiting] == [201, 201]

    async def slow(_: bytes) -> bytes:
        await asyncio.sleep(0.02)
        await gate.wait()
        return OK

    server = run(slow, body, connections=2)
    assert server.most_open == 2
    assert server.connections == 2


@pytest.mark.parametrize(
    "reply",
    [
        None,
        Closing(b"HTTP/1.1 201 Created\r\nContent-Length: 10\r\n\r\n{}"),
        Closing(b"HTTP/1.1 201 Created\r\nContent-"),
        b"SMTP ready\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n",
    ],
    ids=["closed unanswered", "closed mid-body", "closed mid-head", "not HTTP", "upgraded"],
)
def test_a_broken_reply_is_httpx_s_error_and_its_connection_is_not_reused(
    reply: bytes | None,
) -> None:
    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(httpx.RemoteProtocolError):  # not a ConnectError: it was sent
            await post(lean)
        assert (await post(lean)).status_code == 201

    server = run(answering(reply, OK), body)
    assert server.connections == 2


def test_a_reply_too_large_is_refused() -> None:
    big = b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000

    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="over 4096 bytes"):
            await post(lean)
        assert (await post(lean)).status_code == 201

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(http1, "MAX_REPLY_BYTES", 4096)
        server = run(answering(big, OK), body)
    assert server.connections == 2


def test_a_reply_late_is_a_read_timeout_and_a_cancelled_request_closes_its_connection() -> None:
    async def late(request: bytes) -> bytes:
        if b"/slow" in request:
            await asyncio.sleep(0.5)
        return OK

    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(httpx.ReadTimeout):
            await post(lean, "/slow", httpx.Timeout(5.0, read=0.1))
        task = asyncio.create_task(post(lean, "/slow"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.sleep(0)
        assert lean.connections == 0  # both closed: their replies would answer later requests
        assert (await post(lean)).status_code == 201

    server = run(late, body)
    assert server.connections == 3


def test_nothing_listening_is_a_connect_error_and_a_closed_pool_refuses() -> None:
    async def main() -> None:
        listener = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = listener.sockets[0].getsockname()[1]
        listener.close()
        await listener.wait_closed()
        lean = pool(f"http://127.0.0.1:{port}")
        with pytest.raises(httpx.ConnectError):
            await post(lean)
        await lean.aclose()
        with pytest.raises(RuntimeError, match="closed"):
            await post(lean)

    asyncio.run(main())


def test_a_name_that_would_split_the_request_line_is_escaped() -> None:
    async def body(lean: Http1Pool, server: Server) -> None:
        await post(lean, "/api/v1/namespaces/a b/pods/x\r\nX-Evil: 1/binding")
        await post(lean, "/api/v1/namespaces/d\u00e9j\u00e0/pods/p")

    server = run(answering(OK), body)
    first, second = (r.split(b"\r\n", 1)[0] for r in server.requests)
    assert first == b"POST /api/v1/namespaces/a%20b/pods/x%0D%0AX-Evil:%201/binding HTTP/1.1"
    assert second == b"POST /api/v1/namespaces/d%C3%A9j%C3%A0/pods/p HTTP/1.1"
    assert not any(b"\r\nX-Evil" in r for r in server.requests)


def test_headers_a_request_cannot_carry_are_not_plain() -> None:
    assert Http1Pool.plain({"Authorization": "Bearer abc.def"})
    assert not Http1Pool.plain({"Authorization": "Bearer a\r\nX-Evil: 1"})
    assert not Http1Pool.plain({"Authorization": "Bearer \u2603"})


def test_tls_with_the_cluster_s_ca_and_a_server_it_does_not_trust(tmp_path: Path) -> None:
    cert, key = self_signed(["127.0.0.1"])
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
    trusting = ssl.create_default_context(cafile=str(tmp_path / "tls.crt"))

    server = Server(answering(OK))

    async def main() -> None:
        base = await server.start(serving)
        assert base.startswith("https://")
        lean, untrusting = pool(base, ssl_context=trusting), pool(base)
        try:
            assert (await post(lean)).status_code == 201
            assert (await post(lean)).status_code == 201
            with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await post(untrusting)
        finally:
            await lean.aclose()
            await untrusting.aclose()
            await server.stop()

    asyncio.run(main())
    assert server.requests[0].startswith(b"POST /api/v1/x HTTP/1.1")


def test_bytes_after_a_reply_in_the_same_read_close_its_connection() -> None:
    """The start of a reply no request asked for, read with the one asked for: kept, the
    connection would answer the next request with it."""
    stray = b"HTTP/1.1 409 Conflict\r\nContent-Length: 6\r\n\r\n"

    async def body(lean: Http1Pool, server: Server) -> None:
        assert (await post(lean)).status_code == 201
        again = await post(lean)
        assert (again.status_code, again.content) == (201, b"{}")

    server = run(answering(OK + stray, OK), body)
    assert server.connections == 2


def test_a_reply_head_too_large_is_refused() -> None:
    huge = b"HTTP/1.1 200 OK\r\nX-Big: " + b"y" * (200 * 1024) + b"\r\nContent-Length: 2\r\n\r\n{}"

    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(httpx.RemoteProtocolError, match="head over 65536 bytes"):
            await post(lean)
        assert (await post(lean)).status_code == 201

    server = run(answering(huge, OK), body)
    assert server.connections == 2


@pytest.mark.parametrize(
    ("headers", "content"),
    [
        (b"Content-Encoding: deflate\r\n", zlib.compress(b"deflated")),
        (b"Content-Encoding: gzip\r\nContent-Encoding: identity\r\n", gzip.compress(b"listed")),
    ],
    ids=["deflate", "two headers, one list"],
)
def test_a_content_coding_the_server_applies_anyway_is_undone(
    headers: bytes, content: bytes
) -> None:
    reply = b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (headers, len(content), content)
    got: list[bytes] = []

    async def body(lean: Http1Pool, server: Server) -> None:
        got.append((await post(lean)).content)

    server = run(answering(reply), body)
    assert got == [zlib.decompress(content, zlib.MAX_WBITS | 32)]
    assert b"Accept-Encoding: identity\r\n" in server.requests[0]
    assert server.requests[0].count(b"Accept-Encoding") == 1


@pytest.mark.parametrize(
    ("headers", "content", "match"),
    [
        (b"Content-Encoding: gzip\r\n", gzip.compress(b"0" * 5000), "over 4096 bytes decoded"),
        (b"Content-Encoding: br\r\n", b"\x0b\x02\x80{}\x03", "content coding 'br'"),
    ],
    ids=["a bomb", "not asked for"],
)
def test_a_content_coding_too_large_or_unknown_is_refused(
    headers: bytes, content: bytes, match: str
) -> None:
    reply = b"HTTP/1.1 200 OK\r\n%sContent-Length: %d\r\n\r\n%s" % (headers, len(content), content)

    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(httpx.DecodingError, match=match):
            await post(lean)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(http1, "MAX_REPLY_BYTES", 4096)
        run(answering(reply), body)


def test_closing_the_pool_fails_what_waits_and_leaves_nothing_open() -> None:
    gate = asyncio.Event()

    async def held(_: bytes) -> bytes:
        await gate.wait()
        return OK

    async def body(lean: Http1Pool, server: Server) -> None:
        sent = asyncio.create_task(post(lean))
        waiting = asyncio.create_task(post(lean))  # for the pool's one connection
        await asyncio.sleep(0.05)
        await lean.aclose()
        gate.set()
        with pytest.raises(httpx.ReadError, match="client closed"):
            await sent
        with pytest.raises(RuntimeError, match="closed"):
            await waiting
        await asyncio.sleep(0.05)
        assert lean.connections == 0

    server = run(held, body, connections=1)
    assert server.connections == 1


def test_a_content_type_that_would_split_the_head_is_refused() -> None:
    async def body(lean: Http1Pool, server: Server) -> None:
        with pytest.raises(ValueError, match="content type"):
            await lean.exchange("POST", "/x", "a/b\r\nX-Evil: 1", b"{}", LIMITS)

    server = run(answering(OK), body)
    assert server.requests == []
