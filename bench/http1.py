"""CPU per write of the live scheduler's HTTP clients against the API emulator, on loopback.

The live scheduler writes a bind and a Scheduled Event per pod. Each client here posts
``--requests`` Events (3,000 by default), ``--in-flight`` at once (4, as many as the
scheduler's Event workers keep), from a process of its own; the emulator runs in this one.
Reported: the client process's CPU time (user and system) per request, of each of
``--repeat`` runs (3) and their median, and the requests per second of the median run.

* **lean** — ``send_json`` on the scheduler's client with a bearer token: gpufleet's own
  HTTP/1.1 connections (``kube/http1.py``). Binds, Events, pod conditions and status
  patches go this way.
* **aiohttp** — a bare ``aiohttp.ClientSession`` post: what the lean writes used before.
* **httpx** — ``send_json`` on the same client when its credentials need a flow (an exec
  plugin): httpx's request objects over aiohttp's pool.

    python -m bench.http1 [--requests 3000] [--in-flight 4] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import platform
import statistics
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import httpx
from tests.apiserver.server import Emulator

from bench.docs import publish_table
from gpufleet.kube.transport import AiohttpTransport, ApiClient, send_json

SECTION = "http1"
EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"
CLIENTS = ("lean", "aiohttp", "httpx")


def event(i: int) -> dict[str, Any]:
    """A Scheduled Event as the scheduler's recorder writes one."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"p-{i}.{time.time_ns():x}", "namespace": "default"},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "gpufleet",
        "reportingInstance": "gpufleet-0",
        "action": "Binding",
        "reason": "Scheduled",
        "note": f"Successfully assigned default/p-{i} to node-{i % 5000:05d}",
        "type": "Normal",
        "regarding": {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": f"p-{i}"},
    }


async def _posts(post: Callable[[int], Awaitable[int]], count: int, at_once: int) -> None:
    left = deque(range(count))

    async def worker() -> None:
        while left:
            status = await post(left.popleft())
            if status != 201:
                raise RuntimeError(f"the emulator answered {status}")

    await asyncio.gather(*(worker() for _ in range(at_once)))


def _client(kind: str, emulator: tuple[str, str], count: int, at_once: int, queue: Any) -> None:
    """In a process of its own: ``count`` Events by client ``kind`` to the ``emulator``
    (its URL and token), after a warm-up; put (CPU s per request, requests/s) on
    ``queue``."""
    url, token = emulator
    headers = {"Authorization": f"Bearer {token}"}

    async def run() -> tuple[float, float]:
        if kind == "aiohttp":
            async with aiohttp.ClientSession(url, headers=headers) as session:

                async def post(i: int) -> int:
                    async with session.post(EVENTS, json=event(i)) as reply:
                        await reply.read()
                        return reply.status

                return await measured(post)

        class Flow(httpx.Auth):  # a credential httpx must apply per request: no lean path
            def auth_flow(self, request: httpx.Request):  # type: ignore[no-untyped-def]
                request.headers["Authorization"] = headers["Authorization"]
                yield request

        fixed = {"headers": headers} if kind == "lean" else {"auth": Flow()}
        async with ApiClient(AiohttpTransport(None), base_url=url, timeout=30.0, **fixed) as http:

            async def post(i: int) -> int:
                return (await send_json(http, "POST", EVENTS, event(i))).status_code

            return await measured(post)

    async def measured(post: Callable[[int], Awaitable[int]]) -> tuple[float, float]:
        await _posts(post, 200, at_once)  # connections open, code warm
        cpu, wall = time.process_time(), time.monotonic()
        await _posts(post, count, at_once)
        return (time.process_time() - cpu) / count, count / (time.monotonic() - wall)

    queue.put(asyncio.run(run()))


def measure(kind: str, emulator: Emulator, count: int, at_once: int) -> tuple[float, float]:
    spawn = multiprocessing.get_context("spawn")
    queue = spawn.Queue()
    args = (kind, (emulator.url, emulator.token), count, at_once, queue)
    process = spawn.Process(target=_client, args=args)
    process.start()
    result: tuple[float, float] = queue.get(timeout=600)
    process.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=3_000)
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    emulator = Emulator(require_token=True).start()
    runs: dict[str, list[tuple[float, float]]] = {kind: [] for kind in CLIENTS}
    try:
        for _ in range(args.repeat):  # interleaved: a drift of the machine's speed is shared
            for kind in CLIENTS:
                runs[kind].append(measure(kind, emulator, args.requests, args.in_flight))
    finally:
        emulator.stop()
    lines = [
        f"Python {platform.python_version()} on {platform.machine()}; {args.requests:,} "
        f"Event POSTs per run, {args.in_flight} in flight, one client process.",
        "",
        "| client | CPU ms/request (median) | each run | requests/s |",
        "|---|---|---|---|",
    ]
    for kind in CLIENTS:
        cpu = [c for c, _ in runs[kind]]
        middle = statistics.median_low(cpu)
        rate = runs[kind][cpu.index(middle)][1]
        each = " / ".join(f"{c * 1000:.3f}" for c in cpu)
        lines.append(f"| {kind} | {middle * 1000:.3f} | {each} | {rate:,.0f} |")
    return publish_table("bench.http1", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    sys.exit(main())
