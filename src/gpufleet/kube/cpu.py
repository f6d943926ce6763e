"""Where the live scheduler's CPU goes, by phase (``--cpu-phases``): the seconds of CPU its
event-loop thread spends in each, and the cycle's own in its worker thread, exported as
``gpufleet_cpu_seconds_total{phase}`` beside the process collector's
``process_cpu_seconds_total``.

The event loop runs one callback at a time, each in the context of the task it steps; a
task's phase is a context variable it sets (:func:`phase`) and its sub-tasks inherit. So the
thread CPU time (``CLOCK_THREAD_CPUTIME_ID``) of every callback is charged to the phase its
context is in when it ends, and a switch of phase within a callback charges the part before
it to the phase it leaves. Callbacks of the transports themselves (a socket that became
readable: TLS and HTTP bytes read, for whichever request) are ``sockets``. The cyclic
garbage collector runs inside whichever callback or cycle allocated past its threshold;
its collections are ``gc`` (timed by ``gc.callbacks``), not charged to that phase. What no
callback ran — the selector's wait and the loop's own bookkeeping, other threads — is the
process total less the phases.

Phases: ``watch`` (reading watch and list replies, decoding and translating objects),
``cycle`` (events applied to the cache, the cycle itself), ``bind`` (volume, claim and
binding writes), ``evict``, ``events`` (Events written), ``status`` (pod conditions,
PodGroup and Queue status, reports), ``sockets``, ``gc``, ``other``.

Measuring costs two clock reads per callback (about a microsecond each), so it is off
unless asked for; :func:`phase` costs a context-variable set either way.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

PHASES = ("watch", "cycle", "bind", "evict", "events", "status", "sockets", "gc", "other")

_current: ContextVar[str] = ContextVar("gpufleet_cpu_phase", default="other")
_thread_time = time.thread_time


class PhaseClock:
    """The CPU seconds charged to each phase so far (module docstring); one per process,
    :data:`CLOCK`, since the event loop's callbacks are measured where asyncio runs them."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        """What the event loop's thread spent, by phase (written by that thread alone)."""
        self._workers: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        """What worker threads spent (the cycle), under the lock."""
        self.on = False
        self._loop_thread = 0
        self._mark = 0.0
        """Thread CPU time when the running callback, or its current phase, began."""
        self._lock = threading.RLock()
        """Reentrant: a collection may start inside :meth:`snapshot` (it allocates) and
        charge ``gc`` from the same thread."""
        self._collecting = threading.local()
        """Per thread: when its running collection began, and its collections' seconds."""

    def start(self) -> None:
        """Measure from now on, the calling thread being the event loop's."""
        _install()
        self._loop_thread = threading.get_ident()
        self._mark = _thread_time()
        if self._collected not in gc.callbacks:
            gc.callbacks.append(self._collected)
        self.on = True

    def _collected(self, stage: str, _info: dict[str, int]) -> None:
        """A collection starts or stops in the calling thread: its CPU is ``gc``'s, and
        left out of the phase it interrupted (in the loop's thread the running callback's
        mark moves past it; in a worker, :meth:`timed` subtracts it)."""
        now, local = _thread_time(), self._collecting
        if stage == "start":
            local.begun = now
            return
        spent = now - getattr(local, "begun", now)
        if threading.get_ident() == self._loop_thread:
            self.seconds["gc"] += spent
            self._mark += spent
            return
        local.seconds = getattr(local, "seconds", 0.0) + spent
        self.charge("gc", spent)

    def switch(self) -> None:
        """Charge the running callback's CPU so far to the phase it is leaving."""
        if self.on and threading.get_ident() == self._loop_thread:
            now = _thread_time()
            self.seconds[_current.get()] += now - self._mark
            self._mark = now

    def charge(self, name: str, seconds: float) -> None:
        """CPU a thread of its own measured (the cycle's worker)."""
        with self._lock:
            self._workers[name] += seconds

    def timed(self, name: str, work: Callable[..., Any], *args: Any) -> Any:
        """``work(*args)``, its thread CPU charged to ``name`` (for a worker thread)."""
        if not self.on:
            return work(*args)
        begun, collected = _thread_time(), getattr(self._collecting, "seconds", 0.0)
        try:
            return work(*args)
        finally:
            collecting = getattr(self._collecting, "seconds", 0.0) - collected
            self.charge(name, _thread_time() - begun - collecting)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {name: self.seconds[name] + self._workers[name] for name in PHASES}


CLOCK = PhaseClock()


class phase:  # noqa: N801 (used as a context manager, like contextlib's)
    """``with phase("bind"): ...``: the task is in ``name`` until the block ends, and any
    task it starts meanwhile too."""

    __slots__ = ("_name", "_token")

    def __init__(self, name: str) -> None:
        if name not in PHASES:  # charged inside asyncio's callback runner: never unknown
            raise ValueError(f"unknown phase {name!r}; expected one of {', '.join(PHASES)}")
        self._name = name

    def __enter__(self) -> None:
        CLOCK.switch()
        self._token = _current.set(self._name)

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        CLOCK.switch()
        _current.reset(self._token)


_installed = False


def _install() -> None:
    """Wrap asyncio's callback runner once, so that each callback's CPU is charged."""
    global _installed  # noqa: PLW0603 (one wrap per process)
    if _installed:
        return
    _installed = True
    original = asyncio.events.Handle._run
    clock = CLOCK

    def run(handle: asyncio.Handle) -> None:
        if threading.get_ident() != clock._loop_thread:
            original(handle)
            return
        clock._mark = _thread_time()
        original(handle)
        spent = _thread_time() - clock._mark
        owner = getattr(handle._callback, "__self__", None)  # type: ignore[attr-defined]
        if isinstance(owner, asyncio.BaseTransport):
            name = "sockets"
        else:
            name = handle._context.get(_current, "other")  # type: ignore[attr-defined]
        clock.seconds[name] += spent

    asyncio.events.Handle._run = run  # type: ignore[method-assign,assignment]
