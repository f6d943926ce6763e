"""Events about pods, as kube-scheduler's event recorder writes them (``events.k8s.io/v1``).

``Scheduled`` (Normal, action ``Binding``: "Successfully assigned ns/pod to node"),
``FailedScheduling`` (Warning, action ``Scheduling``: the reason ``explain`` gives),
``Preempted`` (Normal, action ``Preempting``: by which job, with which action) and
``FailedToRead`` (Warning: an object gpufleet cannot read, and why, in the what-if tool's
words). Repeats are de-duplicated as the recorder does: the same reason and note about the
same object within ``series_window_s`` (6 minutes) are not a new Event but a patch of the
first one's ``series`` (its count and last observed time).

At most ``at_once`` events are in flight: a cycle that binds thousands of pods does not
queue thousands of requests on the client's connection pool at once (whose bookkeeping
grows with the queue), and its events never crowd out its binds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gpufleet.kube.cpu import phase
from gpufleet.kube.transport import send_json
from gpufleet.kube.write.workers import at_most

log = logging.getLogger("gpufleet.events")

SERIES_WINDOW_S = 360.0
"""client-go's: a repeat within 6 minutes joins the first event's series."""

EVENTS_AT_ONCE = 4
"""Event writes in flight at once."""


@dataclass(frozen=True, slots=True)
class Regarding:
    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = "v1"


Told = tuple[Regarding, str, str, str, str]
"""An event to write: regarding, type, reason, action, note (:meth:`EventRecorder.record`)."""


@dataclass
class _Seen:
    name: str
    namespace: str
    first: float
    count: int


def rfc3339(moment: float) -> str:
    """A ``metav1.Time``: seconds, UTC."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(moment))


def micro_time(moment: float) -> str:
    """A ``metav1.MicroTime``: microseconds, UTC."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment))
    return f"{whole}.{int(moment % 1 * 1_000_000):06d}Z"


class EventRecorder:
    def __init__(
        self,
        http: httpx.AsyncClient,
        *,
        controller: str = "gpufleet",
        instance: str = "gpufleet",
        clock: Callable[[], float] = time.time,
        series_window_s: float = SERIES_WINDOW_S,
        at_once: int = EVENTS_AT_ONCE,
        may_write: Callable[[], bool] = lambda: True,
    ) -> None:
        self.http, self.controller, self.instance = http, controller, instance
        self.clock, self.window = clock, series_window_s
        self.seen: dict[tuple[str, str, str, str], _Seen] = {}
        self.written = 0
        self.at_once = at_once
        self._gate = asyncio.Semaphore(at_once)
        self.may_write = may_write
        """Asked before every write: a replica that no longer leads tells nothing."""

    async def record(
        self, regarding: Regarding, type_: str, reason: str, action: str, note: str
    ) -> None:
        """Write the event, or count it in the series of its first occurrence."""
        if not self.may_write():
            return
        with phase("events"):
            async with self._gate:
                await self._record(regarding, type_, reason, action, note)

    async def record_all(self, told: Sequence[Told]) -> None:
        """:meth:`record` each of ``told`` (regarding, type, reason, action, note), ``at_once``
        at a time: a cycle's thousand events cost no task and no wait on the gate each."""
        await at_most(self.at_once, lambda one: self.record(*one), told, what="event write")

    def prune(self, now: float) -> None:
        """Forget the series whose window has passed (a repeat starts a new Event)."""
        for key in [k for k, seen in self.seen.items() if now - seen.first >= self.window]:
            del self.seen[key]

    async def _record(
        self, regarding: Regarding, type_: str, reason: str, action: str, note: str
    ) -> None:
        now = self.clock()
        key = (regarding.uid or f"{regarding.namespace}/{regarding.name}", reason, action, note)
        seen = self.seen.get(key)
        namespace = regarding.namespace or "default"
        base = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
        try:
            if seen is not None and now - seen.first < self.window:
                seen.count += 1
                series = {"count": seen.count, "lastObservedTime": micro_time(now)}
                await send_json(
                    self.http,
                    "PATCH",
                    f"{base}/{seen.name}",
                    {"series": series},
                    "application/merge-patch+json",
                )
                return
            name = f"{regarding.name}.{int(now * 1e9):x}"
            body: dict[str, Any] = {
                "apiVersion": "events.k8s.io/v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "eventTime": micro_time(now),
                "reportingController": self.controller,
                "reportingInstance": self.instance,
                "action": action,
                "reason": reason,
                "type": type_,
                "note": note[:1024],
                "regarding": {
                    "apiVersion": regarding.api_version,
                    "kind": regarding.kind,
                    "namespace": regarding.namespace,
                    "name": regarding.name,
                    "uid": regarding.uid,
                },
            }
            response = await send_json(self.http, "POST", base, body)
            if response.status_code < 300:
                self.seen[key] = _Seen(name, namespace, now, 1)
                self.written += 1
        except httpx.HTTPError as exc:
            log.warning("event %s about %s/%s: %s", reason, namespace, regarding.name, exc)
