"""Faults a test injects, so that a client's handling of a failing apiserver can be tested.

Each fault is a rule matched on the request's method and path (a regular expression searched
in the URL path) and spent after ``n`` matching requests (``n=None``: until ``clear``):

* ``fail`` — answer ``code`` (5xx, or 409 as for a write that lost a race) with apiserver's
  Status for it (``InternalError``, ``ServiceUnavailable``, ``Conflict``, ...).
* ``throttle`` — answer 429 ``TooManyRequests`` with a ``Retry-After`` header, as apiserver's
  max-in-flight filter does ("API Priority and Fairness": a rejected request gets 429 and
  ``Retry-After``).
* ``delay`` — answer after ``seconds`` more.
* ``drop_reply`` — apply the request, then close the connection without an answer (the
  binding is stored; the client cannot know).
* ``expire_next_watch`` — the next watches get an ``ERROR`` event with a 410 ``Expired``
  Status, as for a watch from a compacted resourceVersion.
* ``drop_watches`` — cut every open watch connection now.
* ``watch_lines`` — the next watch of a matching path gets these raw lines first (events
  shaped wrongly, lines that are no JSON), as a buggy or hostile server might send them.
* ``freeze`` — answer nothing (requests wait, watches send nothing) for ``seconds``.

The rules are set from the test's thread and read on the server's loop, under one lock.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from tests.apiserver.errors import ApiError

REASONS = {
    409: (
        "Conflict",
        "the object has been modified; please apply your changes to the latest version and "
        "try again",
    ),
    500: ("InternalError", "Internal error occurred: injected fault"),
    502: ("InternalError", "Internal error occurred: bad gateway"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "the server was unable to return a response in the time allotted"),
}


@dataclass(slots=True)
class Rule:
    action: str
    method: str | None
    path: re.Pattern[str]
    remaining: int | None
    code: int = 503
    retry_after: int = 1
    seconds: float = 0.0

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and bool(self.path.search(path))


class Faults:
    """The fault rules of one emulator (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Rule] = []
        self._expire_watches = 0
        self._lines: list[tuple[re.Pattern[str], list[str]]] = []
        self.frozen_until = 0.0
        self.on_drop_watches: Callable[[], None] = lambda: None
        self.taken: Counter[str] = Counter()
        """How many times each fault was applied (``expire_watch`` for a 410 at a watch)."""

    def _add(self, rule: Rule) -> None:
        with self._lock:
            self._rules.append(rule)

    def fail(
        self, n: int | None = 1, *, code: int = 503, method: str | None = None, path: str = ""
    ) -> None:
        """The next ``n`` matching requests get ``code``."""
        self._add(Rule("fail", method, re.compile(path), n, code=code))

    def throttle(
        self, n: int | None = 1, *, retry_after: int = 1, method: str | None = None, path: str = ""
    ) -> None:
        """The next ``n`` matching requests get 429 with ``Retry-After: retry_after``."""
        self._add(Rule("throttle", method, re.compile(path), n, retry_after=retry_after))

    def delay(
        self, seconds: float, n: int | None = None, *, method: str | None = None, path: str = ""
    ) -> None:
        """Matching requests are answered ``seconds`` later."""
        self._add(Rule("delay", method, re.compile(path), n, seconds=seconds))

    def drop_reply(
        self, n: int | None = 1, *, method: str | None = "POST", path: str = r"/binding$"
    ) -> None:
        """The next ``n`` matching requests are applied and their connection closed unanswered
        (by default: bindings)."""
        self._add(Rule("drop_reply", method, re.compile(path), n))

    def expire_next_watch(self, n: int = 1) -> None:
        """The next ``n`` watches end at once with a 410 ERROR event."""
        with self._lock:
            self._expire_watches += n

    def drop_watches(self) -> None:
        """Cut every open watch connection."""
        self.on_drop_watches()

    def freeze(self, seconds: float) -> None:
        """Answer nothing for ``seconds`` from now."""
        self.frozen_until = time.monotonic() + seconds

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()
            self._expire_watches = 0
        self.frozen_until = 0.0

    # -- read by the server -----------------------------------------------------------------

    def take(self, action: str, method: str, path: str) -> Rule | None:
        """The first rule of ``action`` that matches, with one of its uses spent."""
        with self._lock:
            for rule in self._rules:
                if rule.action == action and rule.matches(method, path):
                    if rule.remaining is not None:
                        rule.remaining -= 1
                        if rule.remaining <= 0:
                            self._rules.remove(rule)
                    self.taken[action] += 1
                    return rule
        return None

    def watch_lines(self, lines: list[str], *, path: str = "") -> None:
        """The next watch whose path matches ``path`` sends ``lines`` first, as they are."""
        with self._lock:
            self._lines.append((re.compile(path), list(lines)))

    def take_watch_lines(self, path: str) -> list[str]:
        with self._lock:
            for i, (pattern, lines) in enumerate(self._lines):
                if pattern.search(path):
                    del self._lines[i]
                    self.taken["watch_lines"] += 1
                    return lines
        return []

    def take_expired_watch(self) -> bool:
        with self._lock:
            if self._expire_watches:
                self._expire_watches -= 1
                self.taken["expire_watch"] += 1
                return True
        return False

    def frozen(self) -> float:
        """Seconds left of a freeze (0 when not frozen)."""
        return max(0.0, self.frozen_until - time.monotonic())

    @staticmethod
    def error(rule: Rule) -> ApiError:
        if rule.action == "throttle":
            return ApiError(
                429,
                "TooManyRequests",
                "Too many requests, please try again later.",
                {"retryAfterSeconds": rule.retry_after},
            )
        reason, message = REASONS.get(rule.code, ("InternalError", "injected fault"))
        return ApiError(rule.code, reason, message)

    def configure(self, spec: dict[str, object]) -> None:
        """One fault from its JSON form (the HTTP control endpoint): ``{"fault": "fail",
        "n": 2, "code": 500, "method": "POST", "path": "/binding$"}``."""
        fault = str(spec.get("fault", ""))
        kwargs = {k: v for k, v in spec.items() if k != "fault"}
        actions: dict[str, Callable[..., None]] = {
            "fail": self.fail,
            "throttle": self.throttle,
            "delay": self.delay,
            "drop_reply": self.drop_reply,
            "expire_next_watch": self.expire_next_watch,
            "drop_watches": self.drop_watches,
            "freeze": self.freeze,
            "clear": self.clear,
        }
        if fault not in actions:
            raise ApiError(400, "BadRequest", f"unknown fault {fault!r}: one of {sorted(actions)}")
        try:
            actions[fault](**kwargs)
        except TypeError as error:
            raise ApiError(400, "BadRequest", str(error)) from None
