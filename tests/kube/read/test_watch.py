"""List, then watch (``kube/read/watch.py``), against the API emulator over real HTTP: the list's
objects and every later change reach the sink; a watch outside the server's window (410)
relists and reconciles, so an object deleted during the gap is reported deleted; 5xx and
429 are retried after the server's Retry-After; a refused kind is reported, not retried at
once."""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from gpufleet.kube.read.watch import Backoff, Kind, Reflector
from tests.apiserver.server import Emulator

JSON = dict[str, Any]
PODS = Kind("Pod", "/api/v1/pods")


def add_pod(emulator: Emulator, name: str) -> None:
    pods = emulator.store.resource("", "v1", "pods")
    body = {"metadata": {"name": name}, "spec": {"containers": [{"name": "c", "image": "x"}]}}
    emulator.store.create(pods, "default", body)


def delete_pod(emulator: Emulator, name: str) -> None:
    emulator.store.delete(emulator.store.resource("", "v1", "pods"), "default", name)


async def until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def watching(
    emulator: Emulator,
    body: Callable[[Reflector, list[tuple[str, str]]], Awaitable[None]],
    *,
    kind: Kind = PODS,
    timeout_s: int = 30,
) -> Reflector:
    """Run a reflector of ``kind`` against ``emulator`` while ``body`` runs; the sink's
    record is (type, name) per event."""
    seen: list[tuple[str, str]] = []

    async def main() -> Reflector:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=5) as http:
            reflector = Reflector(
                http,
                kind,
                lambda t, o: seen.append((t, o["metadata"]["name"])),
                backoff=Backoff(initial_s=0.05, cap_s=0.2, rng=random.Random(1)),
                watch_timeout_s=timeout_s,
            )
            stop = asyncio.Event()
            task = asyncio.create_task(reflector.run(stop))
            try:
                await body(reflector, seen)
            finally:
                stop.set()
                await asyncio.wait_for(task, 5)
        return reflector

    return asyncio.run(main())


def test_the_list_then_every_change_reaches_the_sink(emulator: Emulator) -> None:
    add_pod(emulator, "a")

    async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
        await asyncio.wait_for(reflector.synced.wait(), 5)
        assert seen == [("ADDED", "a")]
        add_pod(emulator, "b")
        delete_pod(emulator, "a")
        await until(lambda: len(seen) == 3)
        assert seen[1:] == [("ADDED", "b"), ("DELETED", "a")]

    reflector = watching(emulator, body)
    assert reflector.stats.lists == 1
    assert set(reflector.known) == {"default/b"}


def test_a_delete_during_a_410_gap_is_reported_by_the_relist() -> None:
    emulator = Emulator(seed=3, bookmark_interval=0.2, window=4).start()
    try:
        add_pod(emulator, "a")
        add_pod(emulator, "b")

        async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
            await asyncio.wait_for(reflector.synced.wait(), 5)
            await until(lambda: reflector.stats.watches >= 1)
            emulator.faults.freeze(0.5)  # the watch hears nothing of what follows
            delete_pod(emulator, "a")
            for i in range(6):  # more changes than the window holds
                add_pod(emulator, f"new-{i}")
            emulator.faults.drop_watches()
            await until(lambda: reflector.stats.lists >= 2)
            await until(lambda: ("DELETED", "a") in seen)

        reflector = watching(emulator, body)
        assert reflector.stats.gone >= 1
        assert set(reflector.known) == {"default/b", *(f"default/new-{i}" for i in range(6))}
    finally:
        emulator.stop()


def test_a_410_mid_stream_relists(emulator: Emulator) -> None:
    async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
        await asyncio.wait_for(reflector.synced.wait(), 5)
        emulator.faults.expire_next_watch()
        emulator.faults.drop_watches()
        await until(lambda: reflector.stats.lists >= 2)
        add_pod(emulator, "after")
        await until(lambda: ("ADDED", "after") in seen)

    reflector = watching(emulator, body)
    assert reflector.stats.gone == 1


def test_server_errors_and_throttling_are_retried(emulator: Emulator) -> None:
    emulator.faults.fail(2, code=503, path="/api/v1/pods")
    emulator.faults.throttle(1, retry_after=1, path="/api/v1/pods")
    add_pod(emulator, "a")
    started = time.monotonic()

    async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
        await asyncio.wait_for(reflector.synced.wait(), 10)
        assert seen == [("ADDED", "a")]

    reflector = watching(emulator, body)
    assert reflector.stats.errors == 3
    assert time.monotonic() - started >= 1.0  # Retry-After: 1 was honoured


def test_a_refused_kind_is_reported_and_not_hammered(emulator: Emulator) -> None:
    missing = Kind("Widget", "/apis/example.com/v1/widgets")

    async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
        await until(lambda: bool(reflector.stats.refused))
        await asyncio.sleep(0.1)

    reflector = watching(emulator, body, kind=missing)
    assert len(reflector.stats.refused) == 1  # waited its longest backoff before asking again
    assert "404" in reflector.stats.refused[0]
    assert not reflector.synced.is_set()


def test_a_watch_that_the_server_ends_starts_again(emulator: Emulator) -> None:
    async def body(reflector: Reflector, seen: list[tuple[str, str]]) -> None:
        await asyncio.wait_for(reflector.synced.wait(), 5)
        await until(lambda: reflector.stats.watches >= 2, timeout=5)
        add_pod(emulator, "late")
        await until(lambda: ("ADDED", "late") in seen)

    reflector = watching(emulator, body, timeout_s=1)
    assert reflector.stats.lists == 1  # restarted from its version, no relist


def test_one_listed_item_that_cannot_be_read_is_skipped_not_the_list() -> None:
    """A list whose items include one without a readable ``metadata``: the others are told,
    the kind is listed (ready), the bad one counted — a relist must not fail for good."""
    items = [
        {"metadata": {"name": "ok", "namespace": "d", "resourceVersion": "1"}},
        {"metadata": "nope"},
        "not even a mapping",
    ]

    def reply(request: httpx.Request) -> httpx.Response:
        if request.url.params.get("watch"):
            return httpx.Response(200, text="")
        return httpx.Response(200, json={"items": items, "metadata": {"resourceVersion": "5"}})

    async def main() -> tuple[bool, list[str], int]:
        told: list[str] = []
        transport = httpx.MockTransport(reply)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            reflector = Reflector(
                http,
                Kind("Pod", "/api/v1/pods"),
                lambda _t, obj: told.append(obj["metadata"]["name"]),
            )
            stop = asyncio.Event()
            task = asyncio.create_task(reflector.run(stop))
            await asyncio.wait_for(reflector.synced.wait(), 10)
            stop.set()
            await task
            return reflector.synced.is_set(), told, reflector.stats.bad_objects

    synced, told, bad = asyncio.run(main())
    assert synced
    assert told == ["ok"]
    assert bad == 2
