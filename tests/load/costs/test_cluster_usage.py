"""Reading a cluster's runs and nodes from Prometheus: from a real Prometheus serving the
recorded cluster (``recording.py``; every expected figure below is worked out from its table),
and from stand-in HTTP answers for the faults a real server rarely shows on demand."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from gpufleet.cost.idle import IdleArgs
from gpufleet.cost.prices import PriceSheet
from gpufleet.load.costs.cluster_usage import ENGINE_ACTIVE, GPU_UTIL, ClusterUsage, read_cluster
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.costs.prometheus import MAX_POINTS, Series, counter_rate, prometheus_label
from gpufleet.load.errors import InputError
from tests.cost.recording import START

HOUR = 3600.0
WINDOW = (float(START), START + 2 * HOUR)
NOW = START + 400 * 86400.0  # a year and more later
NAN = math.nan

SHEET = """\
apiVersion: gpufleet.io/v1alpha1
kind: PriceSheet
metadata: {name: test-cluster}
spec:
  title: round test prices
  currency: USD
  base: {gpuHour: 1.0, vcpuHour: 0.0625, ramGiBHour: 0.015625}
  nodeTypes:
  - name: h100
    gpuProduct: NVIDIA-H100-80GB-HBM3
    category: on-demand
    prices: {gpuHour: 3.0, vcpuHour: 0.05, ramGiBHour: 0.01}
  - name: l4-box
    instanceType: g6.12xlarge
    category: spot
    nodeHour: 8.0
"""
# l4-box: 4 GPUs, 32 vCPUs, 128 GiB at the base prices: 4 + 2 + 2 = 8 $/h, the node's price,
# so its components are the base prices: GPU 1.0, vCPU 0.0625, GiB 0.015625 $/h.


@pytest.fixture(scope="module")
def sheet(tmp_path_factory: pytest.TempPathFactory) -> PriceSheet:
    path = tmp_path_factory.mktemp("sheet") / "prices.yaml"
    path.write_text(SHEET)
    return load_price_sheet(path)


def read(url: str, sheet: PriceSheet, **kwargs: Any) -> ClusterUsage:
    options: dict[str, Any] = {"window": WINDOW, "step": 60.0, "now": NOW, "sheet": sheet}
    return read_cluster(url, **{**options, **kwargs})


def by_pod(usage: ClusterUsage) -> dict[str, int]:
    return {pod: i for i, pod in enumerate(usage.runs.pods)}


# Per run (recording.py): node, [start, end) in seconds from 10:00, requests (GPUs, cores,
# GiB), usage and idle GPU-hours.
#   train-0:  4 GPUs at 0.6 -> 2.4 GPUs used; 20 cores (the counter's slope); 100 GiB.
#   notebook: runs until it succeeds at 90 min, not until its object goes at 105. Activity:
#             25 busy minutes at 0.3 and 65 idle ones at 0.005 -> (7.5 + 0.325) / 90; idle
#             stretches of 45 and 20 minutes: only the first is 30 or more -> 0.75 h.
#   eval-1:   only DCGM_FI_DEV_GPU_UTIL (gpu-b's exporter): 80% for 45 of the 110 minutes
#             seen -> 36 / 110; idle 40 minutes, 10 missing, 25 idle -> 40 min (the gap
#             breaks the stretch and never counts).
#   share-0:  half a GPU by annotation; no DCGM series names it -> usage and idle unknown.
#   web:      two containers: 1 + 3 cores, 4 + 12 GiB; uses 0.5 + 5.5 cores, 2 + 8 GiB.
EXPECTED = {
    "ml/train-0": ("gpu-a", 0, 120, (4, 16, 128), (2.4, 20, 100), 0.0),
    "ml/notebook": ("gpu-a", 0, 90, (1, 4, 32), (7.825 / 90, NAN, NAN), 0.75),
    "ml/eval-1": ("gpu-b", 0, 120, (1, 4, 16), (36 / 110, 2, 8), 40 / 60),
    "infer/share-0": ("gpu-b", 0, 120, (0.5, 2, 8), (NAN, 1, 4), NAN),
    "infer/web": ("gpu-b", 30, 90, (0, 4, 16), (0, 6, 10), 0.0),
}


def test_runs_and_their_usage_as_the_recording_has_them(
    prometheus_url: str, sheet: PriceSheet
) -> None:
    usage = read(prometheus_url, sheet)
    runs = usage.runs
    index = by_pod(usage)
    assert sorted(index) == sorted(EXPECTED)  # ml/pending-0 was never bound: no run
    for pod, (node, first, last, request, used, idle) in EXPECTED.items():
        i = index[pod]
        assert usage.nodes.names[runs.node[i]] == node, pod
        assert (runs.start[i] - START, runs.end[i] - START) == (60 * first, 60 * last), pod
        np.testing.assert_allclose(runs.request[i], request, err_msg=pod)
        np.testing.assert_allclose(runs.usage[i], used, err_msg=pod)
        np.testing.assert_allclose(runs.gpu_idle_hours[i], idle, err_msg=pod)
    assert usage.utilisation == (ENGINE_ACTIVE, GPU_UTIL)
    assert usage.notes == ()
    assert usage.window == WINDOW


def test_queues_and_experiments_from_pod_labels(prometheus_url: str, sheet: PriceSheet) -> None:
    usage = read(prometheus_url, sheet)
    dims = {
        pod: tuple(usage.runs.dims[d][i] for d in ("namespace", "queue", "experiment"))
        for pod, i in by_pod(usage).items()
    }
    assert dims == {
        "ml/train-0": ("ml", "research", "exp-a"),
        "ml/notebook": ("ml", "research", "nb-group"),  # no experiment label: its PodGroup
        "ml/eval-1": ("ml", "research", "exp-a"),
        "infer/share-0": ("infer", "serving", "exp-b"),
        "infer/web": ("infer", "serving", "__unallocated__"),  # neither
    }
    other = read(prometheus_url, sheet, experiment_label="example.com/project")
    experiments = dict(zip(other.runs.pods, other.runs.dims["experiment"], strict=True))
    assert experiments == {
        "ml/train-0": "llm",
        "ml/notebook": "nb-group",
        "ml/eval-1": "vision",
        "infer/share-0": "__unallocated__",
        "infer/web": "__unallocated__",
    }


def test_nodes_with_capacity_prices_and_lifetime(prometheus_url: str, sheet: PriceSheet) -> None:
    nodes = read(prometheus_url, sheet).nodes
    assert nodes.names == ("gpu-a", "gpu-b")
    assert nodes.types == ("h100", "l4-box")  # by GPU product; by instance type
    assert nodes.categories == ("on-demand", "spot")
    np.testing.assert_allclose(nodes.capacity, [(8, 64, 512), (4, 32, 128)])
    np.testing.assert_allclose(nodes.prices, [(3.0, 0.05, 0.01), (1.0, 0.0625, 0.015625)])
    np.testing.assert_allclose(nodes.start, [WINDOW[0]] * 2)
    np.testing.assert_allclose(nodes.end, [WINDOW[1]] * 2)


def test_a_shorter_window_clips_runs_and_idle_stretches(
    prometheus_url: str, sheet: PriceSheet
) -> None:
    """10:30 to 11:00: the notebook's idle stretch (10:20 to 11:05) fills exactly the 30
    minutes of the window, enough; eval-1's (10:00 to 10:40) keeps 10 minutes, then its gap."""
    usage = read(prometheus_url, sheet, window=(START + 1800.0, START + 3600.0))
    index = by_pod(usage)
    idle = {pod: usage.runs.gpu_idle_hours[i] for pod, i in index.items()}
    assert idle["ml/notebook"] == pytest.approx(0.5)
    assert idle["ml/eval-1"] == 0.0
    web = index["infer/web"]
    assert (usage.runs.start[web], usage.runs.end[web]) == (START + 1800.0, START + 3600.0)
    shorter = read(prometheus_url, sheet, idle=IdleArgs(window=10 * 60.0))
    assert shorter.runs.gpu_idle_hours[by_pod(shorter)["ml/notebook"]] == pytest.approx(65 / 60)


def test_a_window_without_kube_state_metrics_is_bad_input(
    prometheus_url: str, sheet: PriceSheet
) -> None:
    with pytest.raises(InputError, match="no kube_node_status_capacity series between"):
        read(prometheus_url, sheet, window=(START - 86400.0, START - 80000.0))


def test_a_node_no_entry_prices_is_bad_input(prometheus_url: str, tmp_path: Path) -> None:
    path = tmp_path / "h100-only.yaml"
    path.write_text(SHEET.partition("  - name: l4-box")[0])
    with pytest.raises(InputError, match=r"node gpu-b \(.*NVIDIA-L4.*\) matches no entry"):
        read(prometheus_url, load_price_sheet(path))


@pytest.mark.parametrize(
    ("window", "message"),
    [
        ((NOW - 60, NOW + 3540), "the window ends in the future"),
        ((NOW + 60, NOW + 3600), "the window starts in the future"),
        ((START + 60.0, float(START)), "must end after it starts"),
        ((START, START + 30.0), "shorter than one step"),
    ],
    ids=["ends-in-the-future", "starts-in-the-future", "backwards", "under-a-step"],
)
def test_windows_that_cannot_be_read(
    window: tuple[float, float], message: str, sheet: PriceSheet
) -> None:
    with pytest.raises(InputError, match=message):
        read("http://127.0.0.1:9", sheet, window=window)


# -- stand-in answers --------------------------------------------------------------------


def answering(
    body: object, status: int = 200, content_type: str = "application/json"
) -> httpx.MockTransport:
    text = body if isinstance(body, str) else json.dumps(body)
    return httpx.MockTransport(
        lambda request: httpx.Response(status, text=text, headers={"content-type": content_type})
    )


@pytest.mark.parametrize(
    ("transport", "message"),
    [
        (
            answering({"status": "error", "errorType": "bad_data", "error": "parse error"}, 400),
            "Prometheus refused the query .*: bad_data: parse error",
        ),
        (
            answering("<html>Grafana</html>", 200, "text/html"),
            r"answered HTTP 200 \(text/html\), not as Prometheus's HTTP API answers",
        ),
        (
            httpx.MockTransport(lambda r: (_ for _ in ()).throw(httpx.ReadTimeout("slow"))),
            "did not answer in time",
        ),
        (
            httpx.MockTransport(lambda r: (_ for _ in ()).throw(httpx.ConnectError("refused"))),
            r"cannot reach Prometheus \(refused\)",
        ),
    ],
    ids=["error-reply", "not-prometheus", "timeout", "unreachable"],
)
def test_server_faults_are_one_line(
    transport: httpx.BaseTransport, message: str, sheet: PriceSheet
) -> None:
    with pytest.raises(InputError, match=message) as caught:
        read("http://prometheus:9090", sheet, transport=transport)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("http://prometheus:9090: ")


def test_not_a_url(sheet: PriceSheet) -> None:
    with pytest.raises(InputError, match="expected a Prometheus URL such as http://"):
        read("prometheus:9090", sheet)


def test_long_windows_are_read_in_parts_prometheus_allows(sheet: PriceSheet) -> None:
    """Prometheus answers at most 11,000 points a series: 20,000 steps take two requests per
    range query, the second starting a step after the first ends."""
    asked: list[tuple[float, float]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("query_range"):
            asked.append((float(request.url.params["start"]), float(request.url.params["end"])))
        return httpx.Response(200, json={"status": "success", "data": {"result": []}})

    with pytest.raises(InputError, match="no kube_node_status_capacity"):
        read(
            "http://prometheus:9090",
            sheet,
            window=(float(START), START + 20_000 * 60.0),
            transport=httpx.MockTransport(answer),
        )
    assert asked == [
        (START + 60.0, START + MAX_POINTS * 60.0),
        (START + (MAX_POINTS + 1) * 60.0, START + 20_000 * 60.0),
    ]


def test_a_counter_s_rate_counts_resets_as_prometheus_does() -> None:
    points = np.arange(6, dtype=np.int64)
    steady = Series({}, points, np.array([100.0, 160, 220, 280, 340, 400]))
    assert counter_rate(steady, points, 60.0) == pytest.approx(1.0)
    # restarted after 280: 60 more counted from 0, then 60 per step again
    reset = Series({}, points, np.array([100.0, 160, 220, 280, 60, 120]))
    assert counter_rate(reset, points, 60.0) == pytest.approx((3 * 60 + 60 + 60) / 300)
    lone = Series({}, points[:1], np.array([5.0]))
    assert math.isnan(counter_rate(lone, points, 60.0))


@pytest.mark.parametrize(
    ("key", "label"),
    [
        ("gpufleet.io/experiment", "label_gpufleet_io_experiment"),
        ("scheduling.x-k8s.io/pod-group", "label_scheduling_x_k8s_io_pod_group"),
        ("team", "label_team"),
    ],
)
def test_kube_state_metrics_label_names(key: str, label: str) -> None:
    assert prometheus_label(key) == label


class FakePrometheus:
    """Answers each query with the series given for the first metric name it contains: a
    constant value at every point of a range query, or once for an instant query. Series are
    given as the query would group them."""

    def __init__(self, series: dict[str, list[tuple[dict[str, str], float]]]) -> None:
        self.series = series

    def __call__(self, request: httpx.Request) -> httpx.Response:
        query = request.url.params["query"]
        found = next((s for name, s in self.series.items() if name in query), [])
        result: list[dict[str, object]]
        if request.url.path.endswith("query_range"):
            p = request.url.params
            times = np.arange(float(p["start"]), float(p["end"]) + 1, float(p["step"]))
            result = [
                {"metric": labels, "values": [(float(t), str(value)) for t in times]}
                for labels, value in found
            ]
        else:
            result = [{"metric": labels, "value": (0.0, str(value))} for labels, value in found]
        return httpx.Response(200, json={"status": "success", "data": {"result": result}})


def test_what_other_clusters_publish() -> None:
    """A node without labels priced by dcgm-exporter's modelName, with a whole GPU and two
    static MIG slices (priced as the GPUs they count as); a MIG slice; utilisation
    under ``exported_pod`` (the scrape kept the exporter's own pod in ``pod``); no phase
    series (every bound pod holds its requests); a pod on a node without capacity series."""
    pod = {"namespace": "a", "pod": "p", "uid": "u"}
    fake = FakePrometheus(
        {
            "kube_node_status_capacity": [
                ({"node": "n1", "resource": "cpu"}, 8),
                ({"node": "n1", "resource": "memory"}, 32 * 2**30),
                ({"node": "n1", "resource": "nvidia_com_gpu"}, 1),
                ({"node": "n1", "resource": "nvidia_com_mig_3g_40gb"}, 2),
            ],
            "count by (Hostname, hostname, modelName) (last_over_time(DCGM_FI_PROF": [
                ({"Hostname": "n1", "modelName": "NVIDIA L4"}, 1),
            ],
            "kube_pod_info": [
                ({**pod, "node": "n1"}, 1),
                ({"namespace": "a", "pod": "lost", "uid": "v", "node": "ghost"}, 1),
            ],
            "kube_pod_container_resource_requests": [
                ({**pod, "resource": "nvidia_com_mig_3g_40gb"}, 1),
                ({**pod, "resource": "cpu"}, 2),
            ],
            "avg_over_time(DCGM_FI_PROF_GR_ENGINE_ACTIVE": [
                (
                    {
                        "namespace": "gpu-operator",
                        "pod": "dcgm-exporter-x1",
                        "exported_namespace": "a",
                        "exported_pod": "p",
                        "gpu": "0",
                    },
                    0.0,
                ),
            ],
        }
    )
    usage = read_cluster(
        "http://prometheus:9090",
        window=(float(START), START + HOUR),
        step=60.0,
        now=NOW,
        sheet=load_price_sheet(),
        transport=httpx.MockTransport(fake),
    )
    assert usage.nodes.types == ("l4",)  # NVIDIA L4 -> NVIDIA-L4, the bundled sheet's entry
    np.testing.assert_allclose(usage.nodes.capacity[0, 0], 1 + 2 * 3 / 7)  # whole + slices
    assert usage.runs.pods == ("a/p",)
    np.testing.assert_allclose(usage.runs.request, [(3 / 7, 2, 0)])  # 3 of 7 compute slices
    np.testing.assert_allclose(usage.runs.usage[0, 0], 0.0)
    np.testing.assert_allclose(usage.runs.gpu_idle_hours, [3 / 7])  # idle the whole hour
    assert usage.runs.dims["queue"] == ("default",)
    assert usage.runs.dims["experiment"] == ("__unallocated__",)
    assert usage.utilisation == (ENGINE_ACTIVE,)
    assert usage.notes == (
        "pods on node ghost left out: it has no kube_node_status_capacity series",
    )
