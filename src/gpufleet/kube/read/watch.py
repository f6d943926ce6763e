"""List, then watch, one kind of object — as client-go's reflector does, with what a
scheduler cannot do without.

* **List, then watch from the list's resourceVersion** with bookmarks
  (``allowWatchBookmarks``), so that a quiet kind's watch can restart from a recent version
  (API concepts, "Efficient detection of changes" and "Watch bookmarks"). A list is read in
  pages (``limit``/``continue``).
* **410 GoneError** — at the start of a watch, or mid-stream as an ``ERROR`` event — means the
  version has left the server's window: relist, and reconcile what is known with the list,
  so that an object deleted during the gap is reported ``DELETED`` (its GPUs freed) and one
  changed during it ``MODIFIED``.
* **Errors**: 5xx, 429 and connection errors are retried after a capped, jittered
  exponential backoff that honours ``Retry-After``; other 4xx are not retried but reported
  (a kind the server does not serve, a verb RBAC forbids), and the reflector waits for its
  longest backoff before it asks again.
* A watch that ends (``timeoutSeconds``, a closed connection) is started again from the
  last version seen.

Each change goes to ``sink(type, object)`` as the raw object (a dict, as the server sent
it); :mod:`gpufleet.kube.read.objects` translates it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from gpufleet.kube.cpu import phase

Obj = Mapping[str, Any]
Sink = Callable[[str, Obj], None]

PAGE = 500
"""Objects per list page (client-go's default)."""
QUICK_S = 1.0
"""A watch that ends sooner than this is followed by a backoff, not at once by another."""
WATCH_TIMEOUT = httpx.Timeout(30.0, read=None)
"""A watch waits for events as long as the server keeps it open."""

log = logging.getLogger("gpufleet.watch")


@dataclass(frozen=True, slots=True)
class Kind:
    """One kind as the API serves it: its kind name and the path of its collection."""

    kind: str
    path: str
    """``/api/v1/pods``, ``/apis/scheduling.x-k8s.io/v1alpha1/podgroups``."""
    optional: bool = False
    """A kind the server may not serve (a CustomResourceDefinition not installed): a 404
    reads as a kind with no objects, and the reflector asks again after its longest
    backoff."""
    advisory: bool = False
    """A kind that only informs (serving workloads' replicas): a 403 too reads as a kind with
    no objects (said once), so that a ClusterRole without it holds nothing up."""


class GoneError(Exception):
    """The version asked for has left the server's window (410): relist."""


class RetryableError(Exception):
    """A 5xx, a 429 or a broken connection: try again after ``retry_after`` or a backoff."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RefusedError(Exception):
    """A 4xx other than 410 and 429: not retried soon, reported."""


class NotServedError(RefusedError):
    """A 404 on the kind's collection: the server does not serve the kind."""


@dataclass
class Backoff:
    """Capped exponential backoff with full jitter, from a seeded generator."""

    initial_s: float = 0.8
    cap_s: float = 30.0
    rng: random.Random = field(default_factory=lambda: random.Random(0))  # noqa: S311 (jitter, not secrets)
    attempt: int = 0

    def next(self, retry_after: float | None = None) -> float:
        """The wait before the next try; ``retry_after`` (the server's) is honoured."""
        ceiling = min(self.cap_s, self.initial_s * 2**self.attempt)
        self.attempt += 1
        wait = self.rng.uniform(ceiling / 2, ceiling)
        return max(wait, retry_after) if retry_after is not None else wait

    def reset(self) -> None:
        self.attempt = 0


@dataclass
class WatchStats:
    lists: int = 0
    watches: int = 0
    gone: int = 0
    errors: int = 0
    refused: list[str] = field(default_factory=list)
    bad_objects: int = 0
    """Watch lines and objects that could not be read: each reported and skipped."""
    down_since: float | None = None
    """When (monotonic) the kind was last listed or watched successfully before its watch
    failed; None while it is up (``/readyz`` turns false after ``--watch-down-grace``)."""


class Reflector:
    """Keeps ``sink`` told of every change of one kind."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        kind: Kind,
        sink: Sink,
        *,
        backoff: Backoff | None = None,
        watch_timeout_s: int = 300,
        on_refused: Callable[[str], None] | None = None,
    ) -> None:
        self.http, self.kind, self.sink = http, kind, sink
        self.backoff = backoff or Backoff()
        self.watch_timeout_s = watch_timeout_s
        self.on_refused = on_refused
        self.known: dict[str, str] = {}
        """Every object's key and resourceVersion, as last told to the sink."""
        self.objects: dict[str, Obj] = {}
        self.version = ""
        self.synced = asyncio.Event()
        """Set once the first list has been told."""
        self.stats = WatchStats()

    async def run(self, stop: asyncio.Event) -> None:
        """List and watch until ``stop`` is set: whatever fails, the kind is listed and
        watched again after a backoff (only ``stop`` ends it)."""
        with phase("watch"):
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                await self._round(stop, started)
            except Exception:  # a fault of ours or a server's: the watch goes on
                self.stats.errors += 1
                self.version = ""
                self._down()
                log.exception("%s: watch failed; listing again", self.kind.kind)
                await _sleep(stop, self.backoff.next())

    def _down(self) -> None:
        if self.stats.down_since is None:
            self.stats.down_since = time.monotonic()

    async def _round(self, stop: asyncio.Event, started: float) -> None:
        """One list (if needed) and watch, and what its failures mean."""
        try:
            if not self.version:
                await self.relist()
            await self.watch(stop)
            if time.monotonic() - started < QUICK_S:  # a server that ends watches at once
                await _sleep(stop, self.backoff.next())
            else:
                self.backoff.reset()
        except GoneError:
            self.stats.gone += 1
            self.version = ""
        except RetryableError as exc:
            self.stats.errors += 1
            self._down()
            await _sleep(stop, self.backoff.next(exc.retry_after))
        except NotServedError as exc:
            if not self.kind.optional:
                self._down()
                self._refused(exc)
            elif not self.synced.is_set() or self.known:
                log.info("%s: not served; none of them are read", self.kind.kind)
                self._absent()
            await _sleep(stop, self.backoff.cap_s)
        except RefusedError as exc:
            self._refusal(exc)
            await _sleep(stop, self.backoff.cap_s)
        except ValueError as exc:  # a list body that is not JSON: list again
            self.stats.errors += 1
            self.version = ""
            self._down()
            log.warning("%s: unreadable reply (%s); listing again", self.kind.kind, exc)
            await _sleep(stop, self.backoff.next())

    def _refusal(self, exc: RefusedError) -> None:
        """The server refused the kind (403): an advisory kind reads as none (said once),
        another is down."""
        if not self.kind.advisory:
            self._down()
            self._refused(exc)
        elif not self.synced.is_set() or self.known:
            log.warning("%s: refused (%s); none of them are read", self.kind.kind, exc)
            self._absent()

    def _refused(self, exc: RefusedError) -> None:
        self.stats.refused.append(str(exc))
        if self.on_refused is not None:
            self.on_refused(str(exc))

    def _absent(self) -> None:
        """The kind is not served: every object known of it is gone, and the kind is
        listed (with none)."""
        for key in sorted(self.known):
            self._tell("DELETED", self.objects[key])
        self.version = ""
        self.synced.set()

    async def relist(self) -> None:
        """List every object and tell the sink what changed since it last heard."""
        self.stats.lists += 1
        items: dict[str, Obj] = {}
        token = ""
        version = ""
        while True:
            params = {"limit": str(PAGE)}
            if token:
                params["continue"] = token
            body = await self._get_json(self.kind.path, params)
            listed = body.get("items") if isinstance(body, Mapping) else None
            for item in listed if isinstance(listed, list) else []:
                try:  # one item that cannot be keyed is skipped, never the whole list
                    items[_key(item)] = {"kind": self.kind.kind, **item}
                except (TypeError, ValueError, AttributeError, KeyError) as exc:
                    self._bad(f"a listed item that cannot be read ({exc}): {str(item)[:SHOWN]!r}")
            meta = body.get("metadata") if isinstance(body, Mapping) else None
            meta = meta if isinstance(meta, Mapping) else {}
            version = str(meta.get("resourceVersion") or version)
            token = str(meta.get("continue") or "")
            if not token:
                break
        for key in sorted(set(self.known) - set(items)):
            self._tell("DELETED", self.objects[key])
        for key, item in items.items():
            before = self.known.get(key)
            if before is None:
                self._tell("ADDED", item)
            elif before != _version(item):
                self._tell("MODIFIED", item)
        self.version = version
        self.stats.down_since = None
        self.synced.set()

    async def watch(self, stop: asyncio.Event) -> None:
        """Watch from the last version until the server ends the watch or ``stop``."""
        self.stats.watches += 1
        params = {
            "watch": "1",
            "resourceVersion": self.version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(self.watch_timeout_s),
        }
        try:
            stream = self.http.stream("GET", self.kind.path, params=params, timeout=WATCH_TIMEOUT)
            async with stream as response:
                await _check(response)
                self.stats.down_since = None
                lines = _Lines(
                    response.aiter_lines(), stop, self.watch_timeout_s + SILENCE_MARGIN_S
                )
                try:
                    while (line := await lines.next()) is not None:
                        if line.strip():
                            self._line(line)
                finally:
                    lines.close()
        except httpx.HTTPError as exc:
            raise RetryableError(f"watch of {self.kind.kind}: {exc}") from exc

    def _line(self, line: str) -> None:
        """One watch event: decoded, checked and told on its own. One that cannot be read
        is reported and skipped; the stream goes on."""
        try:
            event = json.loads(line)
        except ValueError as exc:
            self._bad(f"a line that is not JSON ({exc}): {line[:SHOWN]!r}")
            return
        if not isinstance(event, Mapping) or not isinstance(event.get("object"), Mapping):
            self._bad(f"an event that is not a {{type, object}} mapping: {line[:SHOWN]!r}")
            return
        self._event(event)

    def _bad(self, what: str) -> None:
        self.stats.bad_objects += 1
        log.warning("%s watch: skipped %s", self.kind.kind, what)

    def _event(self, event: Mapping[str, Any]) -> None:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410:
                raise GoneError(str(obj.get("message", "")))
            raise RetryableError(f"watch of {self.kind.kind}: {obj.get('message', obj)}")
        version = _version(obj) or self.version
        if kind == "BOOKMARK":
            self.version = version
            return
        if kind in {"ADDED", "MODIFIED", "DELETED"}:
            self._tell(kind, {"kind": self.kind.kind, **obj})
            self.version = version

    def _tell(self, type_: str, obj: Obj) -> None:
        try:
            key = _key(obj)
        except (TypeError, ValueError, AttributeError) as exc:
            self._bad(f"an object without a readable name ({exc})")
            return
        if type_ == "DELETED":
            self.known.pop(key, None)
            self.objects.pop(key, None)
        else:
            self.known[key] = _version(obj)
            self.objects[key] = obj
        try:
            self.sink(type_, obj)
        except Exception as exc:  # noqa: BLE001 (one object's fault never ends the watch)
            self._bad(f"{type_} {key}: {exc!r}")

    async def _get_json(self, path: str, params: Mapping[str, str]) -> Mapping[str, Any]:
        try:
            response = await self.http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise RetryableError(f"list of {self.kind.kind}: {exc}") from exc
        await _check(response)
        body: Mapping[str, Any] = response.json()
        return body


async def _check(response: httpx.Response) -> None:
    """Raise what a non-2xx reply means for a reflector."""
    code = response.status_code
    if code < 300:
        return
    await response.aread()
    message = f"{response.request.method} {response.request.url.path}: {code} {response.text}"
    if code == 410:
        raise GoneError(message)
    if code == 404:
        raise NotServedError(message)
    if code == 429 or code >= 500:
        raise RetryableError(message, _retry_after(response))
    raise RefusedError(message)


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


SHOWN = 200
"""Characters of an unreadable line a log shows."""
SILENCE_MARGIN_S = 30
"""A watch that has sent nothing (not even a bookmark) this long past its timeout is dead."""


class _Lines:
    """The lines of a watch, one at a time, until it ends, ``stop`` is set, or nothing came
    for ``silence_s`` seconds (a dead watch: it is begun again). A line already read waits
    for nothing: the stop ends the wait of a read under way, one waiter per watch."""

    def __init__(self, lines: AsyncIterator[str], stop: asyncio.Event, silence_s: float) -> None:
        self._lines, self._stop, self._silence_s = lines, stop, silence_s
        self._waiting: asyncio.Timeout | None = None
        self._stopper = asyncio.ensure_future(stop.wait())
        self._stopper.add_done_callback(self._stopped)

    def _stopped(self, _: asyncio.Future[Any]) -> None:
        if self._waiting is not None and not self._waiting.expired():
            self._waiting.reschedule(asyncio.get_running_loop().time())  # ends the read now

    async def next(self) -> str | None:
        if self._stop.is_set():
            return None
        try:
            async with asyncio.timeout(self._silence_s) as waiting:
                self._waiting = waiting
                return await anext(self._lines)
        except (TimeoutError, StopAsyncIteration):
            return None
        finally:
            self._waiting = None

    def close(self) -> None:
        self._stopper.cancel()


async def _sleep(stop: asyncio.Event, seconds: float) -> None:
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
    except TimeoutError:
        return


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    if not isinstance(meta, Mapping):
        raise TypeError(f"metadata is {type(meta).__name__}, not a mapping")
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def _version(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return str(meta.get("resourceVersion", "")) if isinstance(meta, Mapping) else ""
