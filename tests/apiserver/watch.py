"""Watch: a stream of changes after a resourceVersion (API concepts, "Efficient detection of
changes").

The answer is ``200`` with a chunked body of JSON lines ``{"type": ..., "object": ...}``:

* ``resourceVersion=N`` — the changes after revision N. When some of them have left the
  window the stream has one ``ERROR`` event, whose object is a 410 ``Expired`` Status ``too
  old resource version: N (M)``, and ends, as a watch served by apiserver's watch cache does
  (API concepts, "Resource versions": "410 Gone"). N past the current revision is a 504
  ``Too large resource version`` before the stream starts.
* ``resourceVersion`` unset or ``"0"`` — "Get State and Start at Most Recent" / "at Any":
  synthetic ``ADDED`` events for every object that exists now, then the changes after that.
  Both start at the current revision here.
* ``sendInitialEvents=true`` (with ``resourceVersionMatch=NotOlderThan``: API concepts,
  "Streaming lists") — the same synthetic ``ADDED`` events, then a ``BOOKMARK`` annotated
  ``k8s.io/initial-events-end: "true"``.
* ``allowWatchBookmarks=true`` — a ``BOOKMARK`` every ``bookmark_interval`` seconds whose
  object carries only ``kind``, ``apiVersion`` and ``metadata.resourceVersion`` (API
  concepts, "Watch bookmarks"): every change up to it has been sent.
* ``labelSelector`` / ``fieldSelector`` — only matching objects. An object that starts to
  match is ``ADDED``, one that stops matching ``DELETED`` (the watch cache's filtering).
* ``Accept: ...;as=Table`` — each event's object is a Table of one row (``tables.py``).
* ``timeoutSeconds`` — the stream ends (a clean end of the body) after that long; without
  it, after the server's default.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.apiserver import errors, tables
from tests.apiserver.faults import Faults
from tests.apiserver.resources import Resource
from tests.apiserver.selectors import Predicate
from tests.apiserver.store import Change, Store
from tests.apiserver.views import to_view

JSON = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(eq=False, slots=True)
class Watch:
    """One open watch: how the server wakes it and cuts it."""

    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: bool = False
    request: web.Request | None = None


@dataclass(frozen=True, slots=True)
class WatchRequest:
    resource: Resource
    namespace: str
    matches: Predicate
    resource_version: str
    bookmarks: bool
    initial_events: bool
    timeout: float
    as_table: bool = False
    include: str = "Metadata"


def _event(kind: str, obj: JSON) -> bytes:
    return json.dumps({"type": kind, "object": obj}, separators=(",", ":")).encode() + b"\n"


def _bookmark(resource: Resource, revision: int, *, initial_end: bool = False) -> bytes:
    meta: JSON = {"resourceVersion": str(revision)}
    if initial_end:
        meta["annotations"] = {INITIAL_EVENTS_END: "true"}
    obj = {"kind": resource.kind, "apiVersion": resource.api_version, "metadata": meta}
    return _event("BOOKMARK", obj)


def visible(spec: WatchRequest, change: Change) -> tuple[str, JSON] | None:
    """The event a watcher sees for ``change``, if any (see the module's docstring)."""
    if change.storage != spec.resource.storage_key:
        return None
    obj = to_view(spec.resource, change.obj)

    def matches(candidate: JSON) -> bool:
        namespace = candidate["metadata"].get("namespace", "")
        return (not spec.namespace or namespace == spec.namespace) and spec.matches(candidate)

    now = matches(obj)
    before = change.prev is not None and matches(to_view(spec.resource, change.prev))
    if change.type == "DELETED":
        return ("DELETED", obj) if before or now else None
    if now:
        return ("MODIFIED" if before else "ADDED"), obj
    return ("DELETED", obj) if before else None


async def serve(
    request: web.Request,
    spec: WatchRequest,
    *,
    store: Store,
    faults: Faults,
    watches: set[Watch],
    bookmark_interval: float,
) -> web.StreamResponse:
    """Stream one watch (see the module docstring)."""
    loop = asyncio.get_running_loop()
    initial = spec.initial_events or spec.resource_version in {"", "0"}
    start = 0
    if not initial:
        try:
            start = int(spec.resource_version)
        except ValueError:
            raise errors.bad_request(
                f'resourceVersion: Invalid value: "{spec.resource_version}"'
            ) from None
        if start > store.revision:
            raise errors.too_large(start, store.revision)
    expire = faults.take_expired_watch()
    response = web.StreamResponse(headers={"Content-Type": "application/json"})
    response.enable_chunked_encoding()
    await response.prepare(request)
    watch = Watch(request=request)
    first = [True]

    def encode(kind: str, obj: JSON) -> bytes:
        if not spec.as_table:
            return _event(kind, obj)
        rendered = tables.table(
            spec.resource, [obj], now=store.clock(), include=spec.include, columns=first[0]
        )
        first[0] = False
        return _event(kind, rendered)

    def wake() -> None:
        loop.call_soon_threadsafe(watch.wake.set)

    watches.add(watch)
    store.subscribe(wake)
    try:
        if expire:
            message = f"too old resource version: {spec.resource_version or 0} ({store.revision})"
            await response.write(_event("ERROR", errors.expired(message).status))
            return response
        if initial:
            items, start = store.list(spec.resource, spec.namespace)
            for obj in items:
                if spec.matches(obj):
                    await response.write(encode("ADDED", obj))
            if spec.initial_events:
                await response.write(_bookmark(spec.resource, start, initial_end=True))
        for line in faults.take_watch_lines(request.path):
            await response.write(line.encode() + b"\n")
        await _follow(
            response,
            spec,
            store=store,
            faults=faults,
            watch=watch,
            cursor=start,
            bookmark_interval=bookmark_interval,
            encode=encode,
        )
    except (ConnectionResetError, asyncio.CancelledError):
        return response
    finally:
        store.unsubscribe(wake)
        watches.discard(watch)
    if not watch.dropped:
        await response.write_eof()
    return response


async def _follow(
    response: web.StreamResponse,
    spec: WatchRequest,
    *,
    store: Store,
    faults: Faults,
    watch: Watch,
    cursor: int,
    bookmark_interval: float,
    encode: Callable[[str, JSON], bytes],
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + spec.timeout
    next_bookmark = loop.time() + bookmark_interval
    while not watch.dropped and loop.time() < deadline:
        frozen = faults.frozen()
        if frozen:
            await asyncio.sleep(min(frozen, deadline - loop.time()))
            continue
        watch.wake.clear()
        try:
            changes = store.changes_since(cursor)
        except errors.ApiError as error:
            await response.write(_event("ERROR", error.status))
            return
        for change in changes:
            event = visible(spec, change)
            if event:
                await response.write(encode(*event))
            cursor = change.revision
        if spec.bookmarks and loop.time() >= next_bookmark:
            await response.write(_bookmark(spec.resource, cursor))
            next_bookmark = loop.time() + bookmark_interval
        wait = min(deadline, next_bookmark if spec.bookmarks else deadline) - loop.time()
        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(watch.wake.wait(), wait)
