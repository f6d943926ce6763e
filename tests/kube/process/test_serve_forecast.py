"""The live forecast of a serving queue, read from a real Prometheus: what the queue held over
the same hour of the previous day (``kube/process/forecast.py``), kept free as whole nodes."""

from __future__ import annotations

import asyncio
import math
import time
from typing import TYPE_CHECKING, Any

import pytest

from gpufleet.kube.process.forecast import VALID_S, Forecasts
from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from gpufleet.model.workload import QueueSpec, vector
from gpufleet.scheduler.state.changes import Event
from tests.cost.recording import START
from tests.kube.process.test_serve import add_node, add_pod, bound, run_until
from tests.kube.process.test_serve_cli import free_port
from tests.scheduler.state.test_cache import cache_of, gpu_node

if TYPE_CHECKING:
    from tests.apiserver.server import Emulator

DAY = 86_400.0
JSON = dict[str, Any]


def _cluster(emulator: Emulator, serving: JSON | None = None) -> None:
    store = emulator.store
    for name in ("n0", "n1", "n2"):
        add_node(emulator, name, gpus=8)
    queues = store.resource("gpufleet.io", "v1alpha1", "queues")
    spec = {"resources": {"gpu": {"quota": 24}}, "serving": serving or {}}
    store.create(queues, "", {"metadata": {"name": "inference"}, "spec": spec})
    store.create(queues, "", {"metadata": {"name": "train"}, "spec": {}})
    for k in range(3):
        add_pod(emulator, f"t{k}", 8, labels={"gpufleet.io/queue": "train"})


def _serve(
    emulator: Emulator, prometheus: str | None = None, now: float | None = None
) -> LiveScheduler:
    """The live scheduler for three cycles, asking ``prometheus``, its clock at ``now``."""
    options = ServeOptions(period_s=0.2, batch_s=0.01, forecast_prometheus=prometheus)
    clock = time.time if now is None else (lambda: now)
    return run_until(
        emulator,
        lambda http: LiveScheduler(http, options, clock=clock),
        lambda s: s,
        lambda s: s.stats.cycles >= 3,
        timeout=20.0,
    )


@pytest.mark.parametrize(
    ("minute", "trained"),
    [
        pytest.param(10, 2, id="a-day-after-8-GPUs"),  # minutes -50 to 10: 8, one node kept
        pytest.param(40, 1, id="a-day-after-16-GPUs"),  # -20 to 40: 16, two nodes kept
    ],
)
def test_the_forecast_keeps_what_the_queue_held_over_the_same_hour_a_day_before(
    emulator: Emulator, prometheus_url: str, minute: int, trained: int
) -> None:
    _cluster(emulator)
    now = START + DAY + 60 * minute - 3600  # the hour ahead, a day before, ends at minute
    live = _serve(emulator, prometheus_url, now)
    assert len(bound(emulator)) == trained
    assert live.forecasts is not None
    assert live.forecasts.gpus == {"inference": 8.0 if minute == 10 else 16.0}


def test_a_prometheus_that_does_not_answer_leaves_the_written_forecast(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens at the URL: the scheduler goes on, with each queue's own
    ``forecastGPUs`` (none here, so all three nodes train), and says so once."""
    _cluster(emulator)
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    options = ServeOptions(period_s=0.2, batch_s=0.01, forecast_prometheus=url)
    live = run_until(
        emulator,
        lambda http: LiveScheduler(http, options),
        lambda s: s,
        lambda s: s.stats.cycles >= 3 and len(bound(emulator)) == 3,
        timeout=20.0,
    )
    assert live.forecasts is not None
    assert live.forecasts.gpus == {}
    warned = [r.getMessage() for r in caplog.records if "serving forecast" in r.getMessage()]
    assert len(warned) == 1
    assert "cannot reach Prometheus" in warned[0]


def _inference(forecast: float) -> QueueSpec:
    return QueueSpec("inference", quota=vector(32.0), serving=True, forecast_gpus=forecast)


def test_the_queue_keeps_the_larger_of_its_written_forecast_and_prometheus_s() -> None:
    """Written 4, Prometheus 8: 8. The Queue is raised to 8 (what the cache already holds):
    Prometheus then says 2, and the written 8 holds. An answer older than an hour is dropped."""

    async def scenario() -> list[float]:
        forecasts = Forecasts("http://127.0.0.1:1", every_s=math.inf)
        forecasts.asked = 0.0  # no ask: the answers are set here
        cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
        cache.apply(Event("ADDED", "Queue", _inference(4.0)))
        seen = []

        async def at(now: float) -> None:
            await forecasts.refresh(cache, now, {})
            seen.append(cache.objects["Queue"]["inference"].forecast_gpus)  # type: ignore[union-attr]

        forecasts.gpus, forecasts.answered = {"inference": 8.0}, 0.0
        await at(10.0)
        cache.apply(Event("MODIFIED", "Queue", _inference(8.0)))  # the user writes 8
        await at(20.0)
        forecasts.gpus = {"inference": 2.0}
        await at(30.0)
        forecasts.gpus = {"inference": 16.0}
        await at(40.0)
        await at(VALID_S + 1.0)  # the answer asked at 0 forecast an hour long past
        forecasts.close()
        return seen

    assert asyncio.run(scenario()) == [8.0, 8.0, 8.0, 16.0, 8.0]


def test_a_queue_s_own_query_raises_its_forecast(emulator: Emulator, prometheus_url: str) -> None:
    """Its query asks the most it held over the recording's two hours: 16 GPUs, two nodes
    kept, though the hour ahead a day before held 8."""
    query = (
        'max_over_time(gpufleet_queue_allocated{queue="inference",resource="gpu"}[2h] offset 22h)'
    )
    _cluster(emulator, {"forecastQuery": query})
    now = START + DAY + 60 * 10 - 3600
    live = _serve(emulator, prometheus_url, now)
    assert live.forecasts is not None
    assert live.forecasts.gpus == {"inference": 16.0}
    assert len(bound(emulator)) == 1


def test_without_prometheus_a_forecast_query_is_said_to_go_unasked(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    _cluster(emulator, {"forecastGPUs": 8, "forecastQuery": "max(desired)"})
    _serve(emulator)
    assert len(bound(emulator)) == 2  # forecastGPUs 8 keeps one node
    told = [r.getMessage() for r in caplog.records if "forecastQuery" in r.getMessage()]
    assert told == [
        "Queue inference: spec.serving.forecastQuery is not asked without "
        "--forecast-prometheus; it keeps its forecastGPUs (8)"
    ]


def test_a_serving_deployment_s_replicas_are_kept_before_its_pods_exist(
    emulator: Emulator,
) -> None:
    """A Deployment of the serving queue asks for 2 replicas of 8 GPUs; no controller has
    made its pods yet: two nodes are kept for them, and training gets the third."""
    _cluster(emulator)
    deployments = emulator.store.resource("apps", "v1", "deployments")
    template = {
        "metadata": {"labels": {"gpufleet.io/queue": "inference", "app": "web"}},
        "spec": {
            "schedulerName": "gpufleet",
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        },
    }
    body = {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}, "template": template}
    emulator.store.create(deployments, "default", {"metadata": {"name": "web"}, "spec": body})
    _serve(emulator)
    assert len(bound(emulator)) == 1


def test_a_queue_s_broken_query_leaves_the_built_in_forecast(
    emulator: Emulator, prometheus_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    _cluster(emulator, {"forecastQuery": "this is not promql"})
    now = START + DAY + 60 * 10 - 3600  # the built-in query: 8 GPUs
    live = _serve(emulator, prometheus_url, now)
    assert live.forecasts.gpus == {"inference": 8.0}
    assert len(bound(emulator)) == 2
    told = [
        r.getMessage() for r in caplog.records if "forecastQuery from Prometheus" in r.getMessage()
    ]
    assert len(told) == 1
    assert told[0].startswith("Queue inference's forecastQuery from Prometheus failed")
