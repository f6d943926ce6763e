"""The live forecast of serving queues: what each held over the same hour of the previous day.

With ``--forecast-prometheus URL``, the live scheduler asks that Prometheus, at most once a
:data:`EVERY_S`, one query (:data:`QUERY`): per queue, the most GPUs it held over the hour
ahead, a day earlier, as gpufleet's own ``gpufleet_queue_allocated`` gauge recorded it
(Prometheus must scrape gpufleet's ``/metrics``; a standby replica exports none of the queue
gauges, so only the leader's count); and each queue's own ``spec.serving.forecastQuery``, if
it has one (the largest value of its answer, in GPUs). Each Queue marked ``spec.serving``
then keeps the largest of these and its ``spec.serving.forecastGPUs`` as whole free nodes
(``scheduler/queues/admission.py``). The Queue object is not written: the forecast is set on
the queue in the scheduler's cache, again after every watch event that brings the Queue as
written.

Without ``--forecast-prometheus`` nothing is asked. Either way, a serving queue keeps at least
what its serving workloads ask for now: the replicas of the Deployments, StatefulSets and
LeaderWorkerSets whose pods are its (``load/objects/workloads.py``), so that a scale-up an HPA
just wrote finds its nodes before the pods exist.

The ask runs beside the cycles: a cycle applies the last answer (only the first cycle waits
for the first answer, at most :data:`FIRST_WAIT_S`, so that nothing is lent before it). A query that
fails (Prometheus unreachable, an error reply, an answer of another shape) is logged once per
run of failures; an answer older than :data:`VALID_S` is dropped, since it forecast an hour
that has passed, and the queues keep only their written forecasts until Prometheus answers.
"""

from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.load.costs.prometheus import Prometheus
from gpufleet.model.workload import QueueSpec
from gpufleet.scheduler.state.changes import Event

if TYPE_CHECKING:
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

EVERY_S = 60.0
"""How often the forecasts are asked for."""
FIRST_WAIT_S = 5.0
"""How long the first cycle waits for the first answer (later ones never wait)."""
VALID_S = 3600.0
"""How long an answer holds: it forecast the hour after it was asked."""
QUERY = 'max by (queue) (max_over_time(gpufleet_queue_allocated{resource="gpu"}[1h] offset 23h))'
"""Per queue, the GPUs it held over the hour ahead, a day earlier."""


class Forecasts:
    """The forecasts of the serving queues, from Prometheus at ``url`` (module docstring)."""

    def __init__(self, url: str | None, every_s: float = EVERY_S) -> None:
        self.prometheus = None if url is None else Prometheus(url, timeout=10.0)
        self.every_s = every_s
        self.asked = -math.inf
        self.answered = -math.inf
        """When the answer in :attr:`gpus` was asked for."""
        self.gpus: dict[str, float] = {}
        """Per queue, the GPUs Prometheus forecast at the last ask that answered."""
        self.failing: set[str] = set()
        """The queries failing now: a queue's own, or "" for the built-in one."""
        self.asking: asyncio.Task[None] | None = None
        self.written: dict[str, float] = {}
        """Per serving queue, its ``spec.serving.forecastGPUs`` as the Queue says."""
        self.applied: dict[str, QueueSpec] = {}
        """Per serving queue, the spec last set in the cache (the very object)."""

    def close(self) -> None:
        if self.asking is not None:
            self.asking.cancel()
        if self.prometheus is not None:
            self.prometheus.close()

    async def refresh(
        self, cache: ClusterCache[Components], now: float, demand: dict[str, float]
    ) -> None:
        """Start an ask if it is time (it runs beside the cycles), then set each serving
        queue's forecast in ``cache``: the largest of its written one, the last answer still
        valid and ``demand``, what its serving workloads' replicas ask for now."""
        queues = {q.name: q for q in cache.objects["Queue"].values() if isinstance(q, QueueSpec)}
        due = now - self.asked >= self.every_s and (self.asking is None or self.asking.done())
        if self.prometheus is not None and due:
            first = self.asking is None
            self.asked = now
            own = {n: q.forecast_query for n, q in queues.items() if q.serving and q.forecast_query}
            self.asking = asyncio.create_task(self._ask(now, own))
            if first:  # the first cycle waits a little for it: nothing is lent before it
                await asyncio.wait({self.asking}, timeout=FIRST_WAIT_S)
        if now - self.answered > VALID_S:
            self.gpus = {}
        for name in [n for n in self.applied if n not in queues or not queues[n].serving]:
            del self.applied[name], self.written[name]  # gone, or no longer serving
        for name, spec in queues.items():
            if not spec.serving:
                continue
            if spec is not self.applied.get(name):  # the Queue as written: a watch brought it
                self.written[name] = spec.forecast_gpus
            wanted = max(self.gpus.get(name, 0.0), demand.get(name, 0.0), self.written[name])
            current = spec
            if wanted != spec.forecast_gpus:
                current = replace(spec, forecast_gpus=wanted)
                cache.apply(Event("MODIFIED", "Queue", current))
            self.applied[name] = current

    async def _ask(self, now: float, own: dict[str, str]) -> None:
        """The default query, and each queue's own (``own``: its ``forecastQuery``), each on
        its own: one that fails is said once (per run of failures) and leaves the others'."""
        prometheus = self.prometheus
        assert prometheus is not None, "asked only with a Prometheus"
        gpus: dict[str, float] = {}
        default = await self._query(prometheus, QUERY, now, "")
        for labels, value in default or ():
            queue = labels.get("queue")
            if isinstance(queue, str) and math.isfinite(value) and value >= 0:
                gpus[queue] = max(gpus.get(queue, 0.0), value)
        for queue, query in own.items():
            for _, value in await self._query(prometheus, query, now, queue) or ():
                if math.isfinite(value) and value >= 0:
                    gpus[queue] = max(gpus.get(queue, 0.0), value)
        if default is not None or any(q in gpus for q in own):
            self.gpus, self.answered = gpus, now

    async def _query(
        self, prometheus: Prometheus, query: str, now: float, queue: str
    ) -> list[tuple[dict[str, str], float]] | None:
        """``query``'s answer at ``now``, or None (said once while it keeps failing);
        ``queue``: whose query it is ("" for the built-in one)."""
        try:
            answer = await asyncio.to_thread(prometheus.instant, query, now)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 (one line per run of failures; cycles go on)
            if queue not in self.failing:
                whose = f"Queue {queue}'s forecastQuery" if queue else "serving forecast"
                log.warning("%s from Prometheus failed: %s", whose, error)
            self.failing.add(queue)
            return None
        self.failing.discard(queue)
        return answer
