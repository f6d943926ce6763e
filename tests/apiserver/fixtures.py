"""The pytest fixture of the emulator, and a small HTTP client for tests.

``emulator`` starts an ``Emulator`` on ``127.0.0.1`` at an ephemeral port, in a thread with
its own event loop, with a short bookmark interval, and stops it after the test. Tests that
need other settings build ``Emulator(...)`` themselves and ``start()``/``stop()`` it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver.server import Emulator

JSON = dict[str, Any]


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    server = Emulator(seed=7, bookmark_interval=0.2).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def client(emulator: Emulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emulator.url, timeout=10) as http:
        yield http


def watch_events(http: httpx.Client, path: str, **params: str) -> list[JSON]:
    """Every event of a watch on ``path`` until the server ends it (set ``timeoutSeconds``)."""
    import json

    events: list[JSON] = []
    with http.stream("GET", path, params={"watch": "1", **params}) as stream:
        events.extend(json.loads(line) for line in stream.iter_lines() if line)
    return events
