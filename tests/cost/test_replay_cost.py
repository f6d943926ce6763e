"""Cost in the replay: a small replay whose every figure is worked out by hand below, the
queue hierarchy, the cost of evicted runs, and the run log the replay costs from."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gpufleet.cost.nodes import UnpricedNodeError, price_nodes
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.costs import IDLE, NO_UTILISATION
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import QueueSpec, ReplayJob
from gpufleet.plugins.registry import REPLAY_POLICIES
from gpufleet.sim.replay import Replay

HOUR = 3600.0
H100, T4 = "NVIDIA-H100-80GB-HBM3", "Tesla-T4"

SHEET = """\
apiVersion: gpufleet.io/v1alpha1
kind: PriceSheet
metadata: {name: two-types}
spec:
  title: two node types, for a test
  currency: EUR
  nodeTypes:
  - {name: h100, gpuProduct: NVIDIA-H100-80GB-HBM3, category: on-demand,
     prices: {gpuHour: 3.0, vcpuHour: 0.05, ramGiBHour: 0.01}}
  - {name: t4, gpuProduct: Tesla-T4, category: spot,
     prices: {gpuHour: 0.5, vcpuHour: 0.04, ramGiBHour: 0.005}}
"""

NODES = [
    NodeSpec("h100-0", 64_000, 512 * 1024, 8, H100),  # 8 GPUs, 64 cores, 512 GiB
    NodeSpec("t4-0", 32_000, 128 * 1024, 4, T4),  # 4 GPUs, 32 cores, 128 GiB
]


def job(  # noqa: PLR0917 (a table row)
    name: str, queue: str, arrival: float, hours: float, pods: int, spec: PodSpec
) -> ReplayJob:
    return ReplayJob(name, queue, arrival, hours * HOUR, spec, pods)


ON_H100, ON_T4 = frozenset({H100}), frozenset({T4})
JOBS = [
    # A gang of 2 pods x (4 GPUs, 8 cores, 64 GiB) on the H100 node, 0-2 h.
    job("train", "research", 0.0, 2, 2, PodSpec("train", 8000, 64 * 1024, 4, 1000, ON_H100)),
    # Half a T4 (a share), 2 cores, 8 GiB, 0-3 h.
    job("infer", "serving", 0.0, 3, 1, PodSpec("infer", 2000, 8 * 1024, 1, 500, ON_T4)),
    # 2 T4s, 4 cores, 16 GiB, 1-2 h.
    job("batch", "serving", HOUR, 1, 1, PodSpec("batch", 4000, 16 * 1024, 2, 1000, ON_T4)),
]  # fmt: skip
QUEUES = [QueueSpec("ml"), QueueSpec("research", parent="ml"), QueueSpec("serving", parent="ml")]

# By hand, cost = amount x hours x price (GPU, CPU, RAM):
#   train:  2 x 4 x 2 x 3.0 = 48;    2 x 8 x 2 x 0.05 = 1.6;  2 x 64 x 2 x 0.01 = 2.56  -> 52.16
#   infer:  0.5 x 3 x 0.5 = 0.75;    2 x 3 x 0.04 = 0.24;     8 x 3 x 0.005 = 0.12      ->  1.11
#   batch:  2 x 1 x 0.5 = 1.0;       4 x 1 x 0.04 = 0.16;     16 x 1 x 0.005 = 0.08     ->  1.24
# The window is [0, 3 h) (the last completion, infer's). Nodes over 3 h:
#   h100:   8 x 3 x 3.0 = 72;        64 x 3 x 0.05 = 9.6;     512 x 3 x 0.01 = 15.36    -> 96.96
#   t4:     4 x 3 x 0.5 = 6;         32 x 3 x 0.04 = 3.84;    128 x 3 x 0.005 = 1.92    -> 11.76
CLUSTER = (78.0, 13.44, 17.28)  # 108.72
ALLOCATED = (49.75, 2.0, 2.76)  # 54.51
IDLE_COST = (28.25, 11.44, 14.52)  # 54.21
# Finished work: train 8 GPUs x 2 h + infer 0.5 x 3 h + batch 2 x 1 h = 19.5 GPU-hours.


@pytest.fixture
def sheet_path(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(SHEET, encoding="utf-8")
    return path


def replay(sheet_path: Path) -> Replay:
    return Replay(
        NODES,
        JOBS,
        REPLAY_POLICIES["fifo-gang"],
        queues=QUEUES,
        prices=load_price_sheet(sheet_path),
    )


def test_a_small_replay_costs_what_is_worked_out_by_hand(sheet_path: Path) -> None:
    run = replay(sheet_path).run()
    cost = run.cost
    assert cost is not None
    assert cost.window_s == (0.0, 3 * HOUR)
    assert (cost.cluster.gpu, cost.cluster.cpu, cost.cluster.ram) == pytest.approx(CLUSTER)
    assert (cost.allocated.gpu, cost.allocated.cpu, cost.allocated.ram) == pytest.approx(ALLOCATED)
    assert (cost.idle.gpu, cost.idle.cpu, cost.idle.ram) == pytest.approx(IDLE_COST)
    assert cost.cluster.total == pytest.approx(108.72)
    assert cost.idle_share == pytest.approx(54.21 / 108.72)
    assert cost.lost == 0.0
    assert cost.finished_jobs == run.finished_jobs == 3
    assert cost.finished_gpu_hours == pytest.approx(19.5)
    assert cost.per_finished_job == pytest.approx(108.72 / 3)
    assert cost.per_finished_gpu_hour == pytest.approx(108.72 / 19.5)
    jobs = {j.name: j for j in cost.jobs}
    assert [j.name for j in cost.jobs] == ["train", "batch", "infer"]  # most costly first
    assert jobs["train"].cost.total == pytest.approx(52.16)
    assert jobs["train"].gpu_hours == pytest.approx(16.0)
    assert jobs["infer"].cost.total == pytest.approx(1.11)
    assert jobs["infer"].gpu_hours == pytest.approx(1.5)  # a share counts its fraction
    assert jobs["batch"].cost.gpu == pytest.approx(1.0)
    assert jobs["batch"].queue == "serving"


def test_a_parent_queue_s_cost_includes_its_children(sheet_path: Path) -> None:
    cost = replay(sheet_path).run().cost
    assert cost is not None
    queues = {q.name: q for q in cost.queues}
    assert queues["research"].cost.total == pytest.approx(52.16)
    assert queues["serving"].cost.total == pytest.approx(1.11 + 1.24)
    assert queues["ml"].cost.total == pytest.approx(54.51)
    assert queues["ml"].own == 0.0
    assert queues["serving"].own == pytest.approx(2.35)
    assert queues["serving"].parent == "ml"
    assert queues["ml"].gpu_hours == pytest.approx(16 + 1.5 + 2)
    assert [q.name for q in cost.queues] == ["ml", "research", "serving"]


def test_cost_over_time_is_read_off_the_runs_rates(sheet_path: Path) -> None:
    cost = replay(sheet_path).run().cost
    assert cost is not None
    times = np.asarray(cost.timeline.time_s)
    at = int(np.flatnonzero(times == 1.5 * HOUR)[0])
    cumulative = cost.timeline.cumulative
    assert cumulative["research"][at] == pytest.approx(52.16 * 1.5 / 2)
    assert cumulative["serving"][at] == pytest.approx(1.11 * 1.5 / 3 + 1.24 * 0.5)
    end = {name: values[-1] for name, values in cumulative.items()}
    assert end["research"] + end["serving"] == pytest.approx(54.51)
    assert end[IDLE] == pytest.approx(54.21)
    assert cumulative[IDLE][0] == 0.0


def test_the_replay_s_allocation_is_opencost_s_over_the_runs(sheet_path: Path) -> None:
    """The runs the replay logged, costed again by any dimension, give the same figures."""
    subject = replay(sheet_path)
    subject.run()
    alloc = subject.allocation
    assert alloc is not None
    rows = {r["name"]: r for r in alloc.aggregate("nodeType")}
    assert rows["h100"]["totalCost"] == pytest.approx(52.16)
    assert rows["t4"]["gpuHours"] == pytest.approx(1.5 + 2)
    assert rows["t4"]["gpuEfficiency"] is None  # no utilisation: never invented
    assert rows[IDLE]["totalCost"] == pytest.approx(54.21)
    pods = {r["name"]: r["totalCost"] for r in alloc.aggregate("pod")}
    assert pods["train/0"] == pods["train/1"] == pytest.approx(52.16 / 2)  # the gang's pods
    assert set(alloc.runs.dims["outcome"]) == {"finished"}


def test_the_cost_json_names_the_sheet_and_says_efficiency_is_unknown(sheet_path: Path) -> None:
    document = replay(sheet_path).run().to_json()
    cost = document["cost"]
    assert isinstance(cost, dict)
    assert cost["sheet"] == {
        "name": "two-types",
        "title": "two node types, for a test",
        "currency": "EUR",
    }
    assert cost["totalCost"] == pytest.approx(108.72)
    assert cost[IDLE]["totalCost"] == pytest.approx(54.21)
    assert cost["costPerFinishedGpuHour"] == pytest.approx(108.72 / 19.5, abs=1e-4)
    assert (cost["gpuEfficiency"], cost["gpuEfficiencyNote"]) == (None, NO_UTILISATION)
    assert [j["name"] for j in cost["topJobs"]] == ["train", "batch", "infer"]
    assert cost["queues"][0] == {
        "name": "ml", "parent": None, "gpuHours": 19.5, "gpuCost": 49.75, "cpuCost": 2.0,
        "ramCost": 2.76, "totalCost": 54.51, "ownCost": 0.0,
    }  # fmt: skip
    json.dumps(document)  # JSON all the way down


def test_a_replay_costs_the_same_twice(sheet_path: Path) -> None:
    first, second = (replay(sheet_path).run().to_json() for _ in range(2))
    for document in (first, second):
        document.pop("elapsed_s")
        cost = document["cost"]
        assert isinstance(cost, dict)
        cost.pop("elapsed_s")
    assert json.dumps(first) == json.dumps(second)


def test_without_a_sheet_nothing_is_logged_or_costed() -> None:
    subject = Replay(NODES, JOBS, REPLAY_POLICIES["fifo-gang"], queues=QUEUES)
    run = subject.run()
    assert (run.cost, subject.allocation, subject.runlog) == (None, None, None)
    assert "cost" not in run.to_json()


def test_evicted_runs_are_charged_and_counted_as_lost() -> None:
    # As tests/sim/test_replay.py's reclaim case: a's job is reclaimed for b after 30 minutes
    # and reruns. Its first run is charged (lost); every GPU at the default price. (A late
    # small job stretches the arrivals, which the meter's timeline is sampled over.)
    spec = PodSpec("x", 1000, 1024, 4, 1000)
    jobs = [
        *(ReplayJob(f"a{i}", "a", 0.0, 20_000.0, spec) for i in range(2)),
        ReplayJob("b0", "b", 10.0, 40_000.0, spec),
        ReplayJob("late", "b", 60_000.0, 10.0, replace(spec, num_gpu=1)),
    ]
    policy = replace(REPLAY_POLICIES["gpufleet"], actions=("consolidate", "reclaim", "preempt"))
    node = NodeSpec("n0", 64_000, 512 * 1024, 8, "V100")
    subject = Replay([node], jobs, policy, prices=load_price_sheet())
    run = subject.run()
    assert run.cost is not None
    assert run.preemptions == 1
    price = load_price_sheet().default
    assert price is not None
    assert price.components is not None
    alloc = subject.allocation
    assert alloc is not None
    evicted = np.asarray(alloc.runs.dims["outcome"]) == "evicted"
    assert evicted.sum() == 1
    assert alloc.cost[evicted, 0].sum() == pytest.approx(run.lost_gpu_hours * price.components.gpu)
    assert run.cost.lost == pytest.approx(alloc.cost[evicted].sum())
    assert run.cost.lost > 0


def test_a_node_the_sheet_cannot_price_is_named(sheet_path: Path) -> None:
    sheet = load_price_sheet(sheet_path)
    with pytest.raises(UnpricedNodeError, match=r"node v-0 \(GPU V100\) matches no entry"):
        price_nodes([*NODES, NodeSpec("v-0", 1000, 1024, 1, "V100")], sheet)
    nodes = price_nodes(NODES, sheet)
    assert nodes.types == ("h100", "t4")
    assert nodes.categories == ("on-demand", "spot")
    np.testing.assert_allclose(nodes.capacity, [(8, 64, 512), (4, 32, 128)])
