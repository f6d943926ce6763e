"""Who may read the live scheduler's endpoints: delegated authentication and authorization,
as kube-scheduler (``DelegatingAuthenticationOptions``, ``DelegatingAuthorizationOptions``)
and kube-rbac-proxy decide it, against the cluster's API server:

* a path of ``--authorization-always-allow-paths`` (``/healthz``, ``/readyz``, ``/livez``
  by default; a trailing ``*`` matches a prefix) is served to anyone, without credentials —
  the kubelet's probes carry none;
* any other request must carry ``Authorization: Bearer <token>``, else ``401``;
* the token is reviewed by a ``TokenReview`` (``authentication.k8s.io/v1``): not
  authenticated, or a review that fails, is ``401``;
* the user it names is checked by a ``SubjectAccessReview`` (``authorization.k8s.io/v1``)
  for the request's non-resource attributes — its path and verb (the HTTP method, lower
  case: ``get``) — as RBAC grants them with ``nonResourceURLs``: denied is ``403``, a
  review that fails ``500``.

Reviews go through a client of their own (a few connections, never the scheduler's, so a
flood of scrapes cannot delay a bind or a Lease renewal), at most ``in_flight`` at once — a
request beyond is answered ``429`` at once rather than queued — and a token or user being
reviewed is reviewed once for every request that waits on it. Reviews are cached for
``ttl`` seconds (10 s, kube-scheduler's default for both), in a bounded
cache keyed by a digest of the token, so a scraper costs two API calls per TTL and a flood
of random tokens costs memory no larger than the bound. The scheduler's ServiceAccount needs
``create`` on ``tokenreviews`` and ``subjectaccessreviews`` (what ``system:auth-delegator``
grants; the chart's ClusterRole names both).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger("gpufleet.serve")

ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
"""kube-scheduler's default ``--authorization-always-allow-paths``."""
CACHE_TTL_S = 10.0
CACHE_SIZE = 4096
REVIEW_TIMEOUT_S = 10.0
REVIEWS_IN_FLIGHT = 4
"""Reviews under way at once (and the connections of the reviews' client)."""
TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"  # noqa: S105 (a path)
ACCESS_REVIEWS = "/apis/authorization.k8s.io/v1/subjectaccessreviews"


@dataclass(frozen=True, slots=True)
class User:
    """Who a TokenReview says a token is."""

    name: str
    uid: str
    groups: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...]


@dataclass(frozen=True, slots=True)
class Verdict:
    """What to answer: ``status`` 200 to serve the request, else the error and its text."""

    status: int
    text: str = ""


ALLOWED = Verdict(200)
UNAUTHORIZED = Verdict(401, "Unauthorized")


class ReviewError(RuntimeError):
    """A review the API server did not answer."""


class BusyError(RuntimeError):
    """Every review slot is taken."""


BUSY = Verdict(429, "Too Many Requests: the API server's reviews are all under way; retry")


class _Cache:
    """At most ``size`` answers, each for ``ttl`` seconds; the oldest go first."""

    def __init__(self, ttl: float, size: int, clock: Callable[[], float]) -> None:
        self.ttl, self.size, self.clock = ttl, size, clock
        self.entries: OrderedDict[Hashable, tuple[float, Any]] = OrderedDict()

    def get(self, key: Hashable) -> tuple[bool, Any]:
        found = self.entries.get(key)
        if found is None or found[0] <= self.clock():
            self.entries.pop(key, None)
            return False, None
        return True, found[1]

    def put(self, key: Hashable, value: Any) -> None:
        self.entries[key] = (self.clock() + self.ttl, value)
        self.entries.move_to_end(key)
        while len(self.entries) > self.size:
            self.entries.popitem(last=False)


def always_allowed(path: str, patterns: Iterable[str]) -> bool:
    """Whether ``path`` is one of ``patterns`` (``/debug/*`` matches a prefix)."""
    return any(path == p or (p.endswith("*") and path.startswith(p[:-1])) for p in patterns)


class Delegated:
    """The decision for one request to the endpoints (module docstring), through ``http``,
    a client of the API server."""

    def __init__(
        self,
        http: httpx.AsyncClient,
        always_allow: Iterable[str] = ALWAYS_ALLOW_PATHS,
        *,
        ttl: float = CACHE_TTL_S,
        size: int = CACHE_SIZE,
        clock: Callable[[], float] = time.monotonic,
        in_flight: int = REVIEWS_IN_FLIGHT,
    ) -> None:
        self.http = http
        self.always_allow = tuple(always_allow)
        self.users = _Cache(ttl, size, clock)
        self.decisions = _Cache(ttl, size, clock)
        self.slots = asyncio.Semaphore(in_flight)
        self.under_way: dict[Hashable, asyncio.Future[Any]] = {}

    async def decide(self, method: str, path: str, authorization: str | None) -> Verdict:
        if always_allowed(path, self.always_allow):
            return ALLOWED
        try:
            return await self._decide(method, path, authorization)
        except BusyError:
            return BUSY

    async def _decide(self, method: str, path: str, authorization: str | None) -> Verdict:
        user = await self._who(path, authorization)
        if user is None:
            return UNAUTHORIZED
        verb = method.lower()  # a non-resource request's verb, as apiserver derives it
        try:
            allowed, reason = await self._authorize(user, verb, path)
        except ReviewError as exc:
            log.warning("cannot authorize %s to %s %s: %s", user.name, verb, path, exc)
            return Verdict(500, "Internal Server Error: the authorization review failed")
        if allowed:
            return ALLOWED
        why = f": {reason}" if reason else ""
        return Verdict(403, f'Forbidden: User "{user.name}" cannot {verb} path "{path}"{why}')

    async def _who(self, path: str, authorization: str | None) -> User | None:
        """The user a bearer token authenticates as; None without one, or when the API
        server does not authenticate it."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return None
        try:
            return await self._authenticate(token)
        except ReviewError as exc:
            log.warning("cannot authenticate a request to %s: %s", path, exc)
            return None

    async def _authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).digest()
        hit, user = self.users.get(key)
        if hit:
            return user  # type: ignore[no-any-return]
        status = await self._once(key, TOKEN_REVIEWS, "TokenReview", {"token": token})
        found = _user(status) if status.get("authenticated") is True else None
        self.users.put(key, found)
        return found

    async def _authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        key = (user, verb, path)
        hit, decision = self.decisions.get(key)
        if hit:
            return decision  # type: ignore[no-any-return]
        spec: dict[str, Any] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra}
        status = await self._once(key, ACCESS_REVIEWS, "SubjectAccessReview", spec)
        reason = status.get("reason")
        decision = (status.get("allowed") is True, reason if isinstance(reason, str) else "")
        self.decisions.put(key, decision)
        return decision

    async def _once(
        self, key: Hashable, path: str, kind: str, spec: dict[str, Any]
    ) -> dict[str, Any]:
        """The review of ``key``: the one under way if there is one, else a new one if a
        slot is free (:class:`BusyError` if none is)."""
        waiting = self.under_way.get(key)
        if waiting is not None:
            return await asyncio.shield(waiting)
        if self.slots.locked():
            raise BusyError
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.under_way[key] = future
        try:
            async with self.slots:
                status = await self._review(path, kind, spec)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # retrieved here; each waiter raises it again
            raise
        else:
            future.set_result(status)
            return status
        finally:
            self.under_way.pop(key, None)

    async def _review(self, path: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
        group_version = path.split("/")[2] + "/v1"
        body = {"apiVersion": group_version, "kind": kind, "spec": spec}
        try:
            response = await asyncio.wait_for(self.http.post(path, json=body), REVIEW_TIMEOUT_S)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise ReviewError(f"{kind}: {type(exc).__name__}: {exc}") from None
        if response.status_code not in {200, 201}:
            raise ReviewError(f"{kind}: HTTP {response.status_code}")
        try:
            status = response.json().get("status")
        except (ValueError, AttributeError):
            raise ReviewError(f"{kind}: the reply is not a {kind}") from None
        return status if isinstance(status, dict) else {}


def _user(status: dict[str, Any]) -> User | None:
    info = status.get("user")
    if not isinstance(info, dict) or not isinstance(info.get("username"), str):
        return None
    groups = info.get("groups")
    extra = info.get("extra")
    return User(
        info["username"],
        info["uid"] if isinstance(info.get("uid"), str) else "",
        tuple(g for g in groups if isinstance(g, str)) if isinstance(groups, list) else (),
        tuple(
            sorted(
                (k, tuple(str(x) for x in v))
                for k, v in extra.items()
                if isinstance(k, str) and isinstance(v, list)
            )
        )
        if isinstance(extra, dict)
        else (),
    )
