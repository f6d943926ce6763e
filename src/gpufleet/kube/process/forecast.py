"""The live forecast of serving queues: what each held over the same hour of the previous day.

With ``--forecast-prometheus URL``, the live scheduler asks that Prometheus, at most once a
:data:`EVERY_S`, for each Queue marked ``spec.serving``: the most GPUs the queue held over the
hour ahead, a day earlier, as gpufleet's own ``gpufleet_queue_allocated`` gauge recorded it
(:data:`QUERY`; Prometheus must scrape gpufleet's ``/metrics``). The queue then keeps the larger
of that and its ``spec.serving.forecastGPUs`` as whole free nodes (``scheduler/queues/
admission.py``). The Queue object is not written: the forecast is set on the queue in the
scheduler's cache, again after every watch event of the Queue.

A query that fails (Prometheus unreachable, an error reply) is logged once per failure and the
last forecasts are kept; a queue the query finds nothing for (a day not yet recorded) keeps
only its spec's forecast.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.load.costs.prometheus import Prometheus
from gpufleet.load.errors import InputError
from gpufleet.model.workload import QueueSpec
from gpufleet.scheduler.state.changes import Event

if TYPE_CHECKING:
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

EVERY_S = 60.0
"""How often the forecasts are asked for."""
QUERY = (
    'max(max_over_time(gpufleet_queue_allocated{{queue="{queue}",resource="gpu"}}[1h] offset 23h))'
)
"""The GPUs queue ``{queue}`` held over the hour ahead, a day earlier."""


class Forecasts:
    """The forecasts of the serving queues, from Prometheus at ``url`` (module docstring)."""

    def __init__(self, url: str, every_s: float = EVERY_S) -> None:
        self.prometheus = Prometheus(url, timeout=10.0)
        self.every_s = every_s
        self.asked = -math.inf
        self.gpus: dict[str, float] = {}
        """Per serving queue, the GPUs Prometheus forecast at the last ask that answered."""
        self.failing = False
        self.written: dict[str, float] = {}
        """Per serving queue, its ``spec.serving.forecastGPUs`` as the Queue says."""
        self.applied: dict[str, QueueSpec] = {}
        """Per serving queue, the spec last set in the cache."""

    def close(self) -> None:
        self.prometheus.close()

    async def refresh(self, cache: ClusterCache[Components], now: float) -> None:
        """Ask again if it is time, then set each serving queue's forecast in ``cache``."""
        if now - self.asked >= self.every_s:
            self.asked = now
            names = [q.name for q in _queues(cache) if q.serving]
            try:
                self.gpus = await asyncio.to_thread(self._ask, names, now)
            except InputError as error:
                if not self.failing:
                    log.warning("serving forecast: %s; the last forecasts are kept", error)
                self.failing = True
            else:
                self.failing = False
        for spec in _queues(cache):
            if not spec.serving:
                continue
            mine = self.applied.get(spec.name)
            if mine is None or spec != mine:  # the Queue as written (a watch event brought it)
                self.written[spec.name] = spec.forecast_gpus
            wanted = max(self.gpus.get(spec.name, 0.0), self.written[spec.name])
            if wanted != spec.forecast_gpus:
                spec = replace(spec, forecast_gpus=wanted)  # noqa: PLW2901 (the one set)
                cache.apply(Event("MODIFIED", "Queue", spec))
            self.applied[spec.name] = spec

    def _ask(self, names: list[str], now: float) -> dict[str, float]:
        out: dict[str, float] = {}
        for name in names:
            for _, value in self.prometheus.instant(QUERY.format(queue=name), now):
                if math.isfinite(value) and value >= 0:
                    out[name] = max(out.get(name, 0.0), value)
        return out


def _queues(cache: ClusterCache[Components]) -> list[QueueSpec]:
    return [q for q in cache.objects["Queue"].values() if isinstance(q, QueueSpec)]
