"""The live scheduler's HTTP client (``kube/transport.py``) against the API emulator over real
HTTP: httpx's API over aiohttp's pool gives what httpx's own pool gives; the lean writes
carry the kubeconfig's token and read the same replies; failures are httpx's errors; a
watch streams through it and stops on time."""

from __future__ import annotations

import asyncio
import random
import socket
from pathlib import Path

import httpx
import pytest

from gpufleet.kube.process.connect import environment_proxy, http_client, load_config
from gpufleet.kube.read.watch import Backoff, Kind, Reflector
from gpufleet.kube.transport import AiohttpTransport, ApiClient, send_json
from tests.apiserver.server import Emulator

POD = {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
PODS = "/api/v1/namespaces/default/pods"


def client(emulator: Emulator, tmp_path: Path) -> httpx.AsyncClient:
    return http_client(load_config(emulator.kubeconfig(tmp_path / "kubeconfig")))


def test_the_client_reads_and_writes_as_httpx_does(tmp_path: Path) -> None:
    emulator = Emulator(require_token=True).start()
    try:

        async def main() -> None:
            async with client(emulator, tmp_path) as http:
                assert isinstance(http, ApiClient)
                created = await send_json(http, "POST", PODS, POD)
                assert created.status_code == 201, created.text
                assert created.json()["metadata"]["name"] == "a"
                again = await send_json(http, "POST", PODS, POD)
                assert again.status_code == 409
                assert "already exists" in again.json()["message"]
                patched = await send_json(
                    http,
                    "PATCH",
                    f"{PODS}/a",
                    {"metadata": {"labels": {"x": "y"}}},
                    "application/merge-patch+json",
                )
                assert patched.status_code == 200, patched.text
                read = await http.get(f"{PODS}/a")
                assert read.status_code == 200
                assert read.json()["metadata"]["labels"] == {"x": "y"}
                listed = await http.get(PODS, params={"limit": "1"})
                assert [p["metadata"]["name"] for p in listed.json()["items"]] == ["a"]

            async with httpx.AsyncClient(base_url=emulator.url) as anonymous:
                assert (await send_json(anonymous, "POST", PODS, POD)).status_code == 401

        asyncio.run(main())
    finally:
        emulator.stop()


def test_an_unreachable_server_is_httpx_s_connect_error(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    transport = AiohttpTransport(None)

    async def main() -> None:
        async with ApiClient(transport, base_url=f"http://127.0.0.1:{port}", timeout=2) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get("/api/v1/pods")
            with pytest.raises(httpx.ConnectError):
                await send_json(http, "POST", PODS, POD)

    asyncio.run(main())


def test_an_auth_flow_that_needs_the_reply_goes_through_httpx(tmp_path: Path) -> None:
    """A credential that may be refreshed on a 401 (an exec plugin) is never written once
    into lean headers: every write goes through httpx and its flow."""

    class Refreshing(httpx.Auth):
        def __init__(self) -> None:
            self.flows = 0

        def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
            self.flows += 1
            request.headers["Authorization"] = f"Bearer {emulator.token}"
            yield request

    emulator = Emulator(require_token=True).start()
    auth = Refreshing()
    try:

        async def main() -> None:
            transport = AiohttpTransport(None)
            async with ApiClient(transport, base_url=emulator.url, auth=auth) as http:
                assert (await send_json(http, "POST", PODS, POD)).status_code == 201

        asyncio.run(main())
    finally:
        emulator.stop()
    assert auth.flows == 1


def test_a_watch_streams_through_it_and_stops_at_once(emulator: Emulator, tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    async def main() -> float:
        async with client(emulator, tmp_path) as http:
            reflector = Reflector(
                http,
                Kind("Pod", "/api/v1/pods"),
                lambda t, o: seen.append((t, o["metadata"]["name"])),
                backoff=Backoff(initial_s=0.05, cap_s=0.2, rng=random.Random(1)),
            )
            stop = asyncio.Event()
            task = asyncio.create_task(reflector.run(stop))
            await asyncio.wait_for(reflector.synced.wait(), 5)
            await send_json(http, "POST", PODS, POD)
            while ("ADDED", "a") not in seen:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.2)  # the watch waits for its next line
            stopped = asyncio.get_running_loop().time()
            stop.set()
            await asyncio.wait_for(task, 5)
            return asyncio.get_running_loop().time() - stopped

    assert asyncio.run(main()) < 1.0
    assert seen == [("ADDED", "a")]


def test_a_connection_lost_after_the_request_is_not_a_connect_error() -> None:
    """A server that takes the request and closes: the bind may have been applied, so the
    error must not say the request was never sent (httpx's ConnectError)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    async def main() -> None:
        loop = asyncio.get_running_loop()

        async def serve() -> None:
            for _ in range(2):
                conn, _ = await loop.sock_accept(listener)
                await loop.sock_recv(conn, 65536)
                conn.close()

        listener.setblocking(False)
        server = asyncio.create_task(serve())
        transport = AiohttpTransport(None)
        async with ApiClient(transport, base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            for attempt in (http.post(PODS, json=POD), send_json(http, "POST", PODS, POD)):
                with pytest.raises(httpx.TransportError) as caught:
                    await attempt
                assert not isinstance(caught.value, httpx.ConnectError)
        await server

    try:
        asyncio.run(main())
    finally:
        listener.close()


@pytest.mark.parametrize(
    ("server", "environ", "expected"),
    [
        ("https://api.example:6443", {"HTTPS_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
        ("https://api.example:6443", {"https_proxy": "proxy:3128"}, "http://proxy:3128"),
        ("https://api.example:6443", {"HTTP_PROXY": "http://proxy:3128"}, None),
        ("http://api.example", {"HTTP_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": "http://proxy:3128"}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": "http://proxy:3128"}, None),
        ("https://localhost:6443", {"HTTPS_PROXY": "http://proxy:3128"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "*"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "x, api.example"}, None),
        ("https://k8s.api.example", {"HTTPS_PROXY": "p:1", "no_proxy": "api.example"}, None),
        ("https://k8s.api.example", {"HTTPS_PROXY": "p:1", "NO_PROXY": ".api.example"}, None),
        ("https://api.example", {"HTTPS_PROXY": "p:1", "NO_PROXY": ".api.example"}, "http://p:1"),
        ("https://notapi.example", {"HTTPS_PROXY": "p:1", "NO_PROXY": "api.example"}, "http://p:1"),
        ("https://api.example:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "api.example:6443"}, None),
        (
            "https://api.example:6443",
            {"HTTPS_PROXY": "p:1", "NO_PROXY": "api.example:443"},
            "http://p:1",
        ),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "10.1.2.3"}, None),
        ("https://11.1.2.3:6443", {"HTTPS_PROXY": "p:1", "NO_PROXY": "10.0.0.0/8"}, "http://p:1"),
    ],
)
def test_the_proxy_is_the_one_kubectl_would_take(
    server: str, environ: dict[str, str], expected: str | None
) -> None:
    assert environment_proxy(server, environ) == expected


def test_a_proxy_named_by_the_environment_carries_every_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writes included: the lean path, which speaks to the API server alone, steps aside."""
    heads: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        heads.append(head)
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        await writer.drain()
        writer.close()

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
        "clusters: [{name: c, cluster: {server: 'http://api.example:6443'}}]\n"
        "users: [{name: u, user: {token: t0k}}]\n"
        "contexts: [{name: x, context: {cluster: c, user: u}}]\n"
    )

    async def main() -> None:
        server = await asyncio.start_server(proxy, "127.0.0.1", 0)
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}")
        async with http_client(load_config(kubeconfig)) as http:
            assert isinstance(http, ApiClient)
            assert http._lean is None
            assert (await send_json(http, "POST", PODS, POD)).status_code == 201
        server.close()

    asyncio.run(main())
    request_line, *headers = heads[0].split(b"\r\n")
    assert request_line == b"POST http://api.example:6443/api/v1/namespaces/default/pods HTTP/1.1"
    assert b"Authorization: Bearer t0k" in headers
