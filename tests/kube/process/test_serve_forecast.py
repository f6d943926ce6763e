"""The live forecast of a serving queue, read from a real Prometheus: what the queue held over
the same hour of the previous day (``kube/process/forecast.py``), kept free as whole nodes."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from tests.cost.recording import START
from tests.kube.process.test_serve import add_node, add_pod, bound, run_until

if TYPE_CHECKING:
    from tests.apiserver.server import Emulator

DAY = 86_400.0


def _cluster(emulator: Emulator) -> None:
    store = emulator.store
    for name in ("n0", "n1", "n2"):
        add_node(emulator, name, gpus=8)
    queues = store.resource("gpufleet.io", "v1alpha1", "queues")
    spec = {"resources": {"gpu": {"quota": 24}}, "serving": {}}
    store.create(queues, "", {"metadata": {"name": "inference"}, "spec": spec})
    store.create(queues, "", {"metadata": {"name": "train"}, "spec": {}})
    for k in range(3):
        add_pod(emulator, f"t{k}", 8, labels={"gpufleet.io/queue": "train"})


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
    options = ServeOptions(period_s=0.2, batch_s=0.01, forecast_prometheus=prometheus_url)
    live = run_until(
        emulator,
        lambda http: LiveScheduler(http, options, clock=lambda: now),
        lambda s: s,
        lambda s: s.stats.cycles >= 3,
        timeout=20.0,
    )
    assert len(bound(emulator)) == trained
    assert live.forecasts is not None
    assert live.forecasts.gpus == {"inference": 8.0 if minute == 10 else 16.0}


def test_a_prometheus_that_does_not_answer_leaves_the_written_forecast(
    emulator: Emulator, caplog: pytest.LogCaptureFixture
) -> None:
    """Nothing listens at the URL: the scheduler goes on, with each queue's own
    ``forecastGPUs`` (none here, so all three nodes train), and says so once."""
    _cluster(emulator)
    options = ServeOptions(period_s=0.2, batch_s=0.01, forecast_prometheus="http://127.0.0.1:9")
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
