"""Prometheus's HTTP query API (``/api/v1/query_range``, ``/api/v1/query``), read on one grid
of points: what :mod:`gpufleet.load.costs.cluster_usage` reads a cluster's runs and use with.

The point at ``t`` says what was seen in the step before ``t`` and stands for
``[t - step, t)``; a range longer than Prometheus answers in one reply is read in parts. Every
failure — unreachable, an error reply, an answer that is not Prometheus's — is one
:class:`~gpufleet.load.errors.InputError` naming the server.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from gpufleet.load.errors import InputError
from gpufleet.model.arrays import FloatArray, IntArray

MAX_POINTS = 11_000
"""Prometheus answers at most this many points per series; longer ranges are read in parts."""


def prometheus_label(key: str, prefix: str = "label_") -> str:
    """The Prometheus label kube-state-metrics gives a Kubernetes label (or annotation)
    ``key``: ``gpufleet.io/experiment`` -> ``label_gpufleet_io_experiment``."""
    return prefix + re.sub(r"[^a-zA-Z0-9_]", "_", key)


@dataclass(frozen=True, slots=True)
class Grid:
    """Points ``start + step, ..., end``; point ``k`` (from 0) stands for
    ``[start + k * step, start + (k + 1) * step)``."""

    start: float
    end: float
    step: float

    @property
    def size(self) -> int:
        return round((self.end - self.start) / self.step)

    def index(self, times: FloatArray) -> IntArray:
        k: IntArray = np.rint((times - self.start) / self.step).astype(np.int64) - 1
        return k

    @classmethod
    def of_window(cls, url: str, window: tuple[float, float], step: float, now: float) -> Grid:
        """The window's grid, its end brought back to a whole number of steps (``--end now``
        rarely falls on one)."""
        start, end = window
        if not step > 0:
            raise InputError(url, f"the step must be positive, got {step:g} s")
        if not end > start:
            raise InputError(
                url, f"the window must end after it starts: {iso(start)} to {iso(end)}"
            )
        if end > now:
            what, when = ("starts", start) if start >= now else ("ends", end)
            raise InputError(
                url,
                f"the window {what} in the future ({iso(when)}; now is {iso(now)}): "
                f"give an --end no later than now",
            )
        steps = math.floor((end - start) / step + 1e-9)
        if steps < 1:
            raise InputError(
                url, f"the window, {end - start:g} s, is shorter than one step ({step:g} s)"
            )
        return cls(start, start + steps * step, step)

    def time(self, k: int) -> float:
        """The start of what point ``k`` stands for."""
        return self.start + k * self.step


@dataclass(frozen=True, slots=True)
class Series:
    """One series on the grid: its labels, the points it has and their values."""

    labels: Mapping[str, str]
    k: IntArray
    v: FloatArray

    def at(self, points: IntArray) -> FloatArray:
        """Its values at ``points`` (NaN where it has none)."""
        out = np.full(len(points), np.nan)
        pos = np.searchsorted(self.k, points)
        pos = np.minimum(pos, max(len(self.k) - 1, 0))
        hit = (self.k[pos] == points) if len(self.k) else np.zeros(len(points), dtype=bool)
        out[hit] = self.v[pos[hit]]
        return out


class Prometheus:
    """Prometheus's HTTP query API; every failure is an :class:`InputError` naming it."""

    def __init__(
        self, url: str, *, timeout: float = 30.0, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.url = url.rstrip("/")
        if not re.match(r"https?://[^/]", url):
            raise InputError(url, "expected a Prometheus URL such as http://prometheus:9090")
        try:
            self.http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise InputError(url, f"not a Prometheus URL ({exc})") from None

    def close(self) -> None:
        self.http.close()

    def range(self, query: str, grid: Grid) -> list[Series]:
        """``query`` at every point of ``grid``, read in parts of at most ``MAX_POINTS``."""
        parts: dict[tuple[tuple[str, str], ...], list[tuple[IntArray, FloatArray]]] = {}
        for first in range(0, grid.size, MAX_POINTS):
            last = min(first + MAX_POINTS, grid.size) - 1
            data = self._get(
                "/api/v1/query_range",
                query,
                start=grid.start + (first + 1) * grid.step,
                end=grid.start + (last + 1) * grid.step,
                step=grid.step,
            )
            for item in data:
                times = np.array([float(t) for t, _ in item["values"]])
                values = np.array([as_number(v) for _, v in item["values"]])
                key = tuple(sorted(item["metric"].items()))
                parts.setdefault(key, []).append((grid.index(times), values))
        return [
            Series(dict(key), np.concatenate([k for k, _ in p]), np.concatenate([v for _, v in p]))
            for key, p in parts.items()
        ]

    def instant(self, query: str, at: float) -> list[tuple[dict[str, str], float]]:
        """``query`` at time ``at``: each series' labels and value."""
        return [
            (dict(item["metric"]), as_number(item["value"][1]))
            for item in self._get("/api/v1/query", query, time=at)
        ]

    def _get(self, path: str, query: str, **params: float) -> list[dict[str, Any]]:
        try:
            reply = self.http.get(path, params={"query": query, **params})
        except httpx.TimeoutException:
            raise InputError(self.url, "Prometheus did not answer in time") from None
        except httpx.HTTPError as exc:
            raise InputError(self.url, f"cannot reach Prometheus ({_reason(exc)})") from None
        try:
            body = reply.json()
        except ValueError:
            body = None
        if not isinstance(body, dict) or body.get("status") not in {"success", "error"}:
            kind = reply.headers.get("content-type", "no content type")
            raise InputError(
                self.url,
                f"answered HTTP {reply.status_code} ({kind}), not as Prometheus's HTTP API "
                f"answers: is this the address of a Prometheus server?",
            )
        if body["status"] == "error":
            raise InputError(
                self.url,
                f"Prometheus refused the query {query!r}: "
                f"{body.get('errorType', 'error')}: {body.get('error', '')}",
            )
        result = body.get("data", {}).get("result", [])
        return result if isinstance(result, list) else []


def as_number(text: object) -> float:
    """A sample's value as Prometheus writes it (``NaN``, ``+Inf``); NaN where it is none."""
    try:
        return float(str(text))
    except ValueError:
        return math.nan


def _reason(exc: httpx.HTTPError) -> str:
    cause: BaseException | None = exc
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(cause or exc) or type(exc).__name__
    return text.splitlines()[0]


def counter_rate(counter: Series, points: IntArray, step: float) -> float:
    """A counter's average rate over ``points`` (NaN with fewer than two samples)."""
    values = counter.at(points)
    known = ~np.isnan(values)
    if known.sum() < 2:
        return math.nan
    v, k = values[known], points[known]
    rises = np.diff(v)
    rises = np.where(rises < 0, v[1:], rises)  # a reset: the counter restarted from 0
    return float(rises.sum() / ((k[-1] - k[0]) * step))


def iso(t: float) -> str:
    """``t`` as Prometheus and kubectl write times (UTC, to the second)."""
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
