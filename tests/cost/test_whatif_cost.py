"""``gpufleet schedule --cost``: what one what-if cycle changes in the hourly cost.

The snapshot and sheet below are small enough to price by hand: an H200 node (8 GPUs at
$4, 64 cores at $0.05, 512 GiB at $0.01 an hour: $40.32/h) and a T4 node (4 GPUs at $0.50,
16 cores, 64 GiB: $3.44/h). team-a runs 2 GPUs, 8 cores and 64 GiB on the H200 ($9.04/h);
team-b's pending pod asks for a T4 GPU, 4 cores and 32 GiB ($1.02/h once bound). Both
queues are children of ``org``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_app import gpufleet

SHEET = """\
apiVersion: gpufleet.io/v1alpha1
kind: PriceSheet
metadata: {name: test-sheet}
spec:
  title: hand-computed test prices
  currency: USD
  nodeTypes:
  - {name: h200, gpuProduct: NVIDIA-H200, category: on-demand,
     prices: {gpuHour: 4.0, vcpuHour: 0.05, ramGiBHour: 0.01}}
  - {name: t4, gpuProduct: Tesla-T4, category: spot,
     prices: {gpuHour: 0.5, vcpuHour: 0.05, ramGiBHour: 0.01}}
"""

FLAT = (
    "apiVersion: gpufleet.io/v1alpha1\nkind: PriceSheet\nmetadata: {name: flat}\n"
    "spec:\n  title: flat test prices\n  currency: EUR\n  default:\n"
    "    category: committed\n    prices: {gpuHour: 1.0, vcpuHour: 0.0, ramGiBHour: 0.0}\n"
)


SNAPSHOT = """\
apiVersion: v1
kind: Node
metadata:
  name: big
  labels: {nvidia.com/gpu.product: NVIDIA-H200}
status:
  allocatable: {cpu: '64', memory: 512Gi, nvidia.com/gpu: '8'}
---
apiVersion: v1
kind: Node
metadata:
  name: small
  labels: {nvidia.com/gpu.product: Tesla-T4}
status:
  allocatable: {cpu: '16', memory: 64Gi, nvidia.com/gpu: '4'}
---
apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: org}
spec: {}
---
apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: team-a}
spec: {parentQueue: org}
---
apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: team-b}
spec: {parentQueue: org}
---
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: a
  creationTimestamp: '2026-01-01T00:00:00Z'
  labels: {gpufleet.io/queue: team-a}
spec:
  schedulerName: gpufleet
  nodeName: big
  containers:
  - name: main
    resources:
      requests: {cpu: '8', memory: 64Gi}
      limits: {nvidia.com/gpu: '2'}
status: {phase: Running, startTime: '2026-01-01T00:00:00Z'}
---
apiVersion: v1
kind: Pod
metadata:
  name: infer
  namespace: b
  creationTimestamp: '2026-01-01T00:30:00Z'
  labels: {gpufleet.io/queue: team-b}
spec:
  schedulerName: gpufleet
  nodeSelector: {nvidia.com/gpu.product: Tesla-T4}
  containers:
  - name: main
    resources:
      requests: {cpu: '4', memory: 32Gi}
      limits: {nvidia.com/gpu: '1'}
"""

NOW = "2026-01-01T01:00:00Z"


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    snapshot, sheet = tmp_path / "snapshot.yaml", tmp_path / "prices.yaml"
    snapshot.write_text(SNAPSHOT)
    sheet.write_text(SHEET)
    return snapshot, sheet


def schedule_json(cwd: Path, snapshot: Path, *options: str) -> dict[str, Any]:
    """``gpufleet schedule -o json`` of ``snapshot`` at :data:`NOW`, which must succeed."""
    run = gpufleet("schedule", "-f", str(snapshot), "--now", NOW, "-o", "json", *options, cwd=cwd)
    assert run.returncode == 0, run.stderr
    out: dict[str, Any] = json.loads(run.stdout)
    return out


def _totals(figures: dict[str, object]) -> dict[str, float]:
    queues = figures["queues"]
    assert isinstance(queues, list)
    return {q["name"]: q["totalCost"] for q in queues}


def test_the_cycle_cost_is_priced_by_hand(tmp_path: Path, files: tuple[Path, Path]) -> None:
    snapshot, sheet = files
    out = schedule_json(tmp_path, snapshot, "--prices", str(sheet))
    assert [b["pod"] for b in out["bindings"]] == ["b/infer"]
    cost = out["cost"]
    assert cost["sheet"] == {
        "name": "test-sheet",
        "title": "hand-computed test prices",
        "currency": "USD",
    }
    assert cost["unit"] == "USD per hour"
    before, after = cost["before"], cost["after"]
    assert before["cluster"]["totalCost"] == after["cluster"]["totalCost"] == pytest.approx(43.76)
    assert before["cluster"]["gpuCost"] == pytest.approx(34.0)
    assert before["allocated"] == pytest.approx(
        {"gpuCost": 8.0, "cpuCost": 0.4, "ramCost": 0.64, "totalCost": 9.04}
    )
    assert after["allocated"]["totalCost"] == pytest.approx(10.06)
    assert before["__idle__"]["totalCost"] == pytest.approx(34.72)
    assert after["__idle__"]["totalCost"] == pytest.approx(33.70)
    assert _totals(before) == pytest.approx({"org": 9.04, "team-a": 9.04, "team-b": 0.0})
    assert _totals(after) == pytest.approx({"org": 10.06, "team-a": 9.04, "team-b": 1.02})
    by_name = {q["name"]: q for q in after["queues"]}
    assert by_name["team-b"]["parent"] == "org"
    assert by_name["team-b"]["gpuHours"] == pytest.approx(1.0)
    assert by_name["org"]["ownCost"] == 0.0


def test_the_table_names_the_sheet_and_the_change(tmp_path: Path, files: tuple[Path, Path]) -> None:
    snapshot, sheet = files
    run = gpufleet(
        "schedule", "-f", str(snapshot), "--now", NOW, "--prices", str(sheet), cwd=tmp_path
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    row = next(line for line in lines if "team-b" in line and "+1.02" in line)
    assert "0.00" in row
    assert "1.02" in row
    assert any("unallocated (__idle__)" in line and "-1.02" in line for line in lines)
    assert any("cluster (all nodes)" in line and "43.76" in line for line in lines)
    assert "prices: hand-computed test prices (sheet test-sheet, USD)" in run.stdout


def test_without_cost_the_json_keeps_its_shape(tmp_path: Path, files: tuple[Path, Path]) -> None:
    snapshot, _ = files
    assert set(schedule_json(tmp_path, snapshot)) == {"bindings", "evictions", "pending"}


def test_cost_under_the_bundled_sheet(tmp_path: Path, files: tuple[Path, Path]) -> None:
    """--cost alone prices under the bundled sheet: H200 at $3.80 a GPU-hour, Tesla-T4 at
    $0.35, with OpenCost's default CPU and memory prices."""
    snapshot, _ = files
    cost = schedule_json(tmp_path, snapshot, "--cost")["cost"]
    assert cost["sheet"]["name"] == "gpufleet-illustrative-2026-11"
    assert cost["after"]["cluster"]["gpuCost"] == pytest.approx(8 * 3.80 + 4 * 0.35)


def test_evicted_pods_stop_costing(tmp_path: Path) -> None:
    """A preemption: the urgent pod's two GPUs replace the two it evicts, so the queue's
    hourly cost is what it was and no GPU is charged twice."""
    sheet = tmp_path / "prices.yaml"
    sheet.write_text(FLAT)
    scenario = Path(__file__).parents[1] / "scenarios" / "preempt-minimal.yaml"
    out = schedule_json(tmp_path, scenario, "--prices", str(sheet))
    assert len(out["evictions"]) == 2
    cost = out["cost"]
    assert cost["unit"] == "EUR per hour"
    for side in ("before", "after"):
        assert cost[side]["allocated"]["gpuCost"] == pytest.approx(8.0)
        assert cost[side]["__idle__"]["totalCost"] == pytest.approx(0.0)
        assert _totals(cost[side]) == pytest.approx({"team-a": 8.0})


@pytest.mark.parametrize(
    ("sheet", "expected"),
    [
        (
            "apiVersion: gpufleet.io/v1alpha1\nkind: PriceSheet\nmetadata: {name: h}\n"
            "spec:\n  title: t\n  currency: USD\n  nodeTypes:\n"
            "  - {name: h200, gpuProduct: NVIDIA-H200, category: on-demand,\n"
            "     prices: {gpuHour: 4, vcpuHour: 0, ramGiBHour: 0}}\n",
            "node small (GPU Tesla-T4) matches no entry of price sheet h",
        ),
        (
            "apiVersion: gpufleet.io/v1alpha1\nkind: PriceSheet\nmetadata: {name: h}\n"
            "spec:\n  title: t\n  currency: USD\n  default:\n    category: on-demand\n"
            "    prices: {gpuHour: -1, vcpuHour: 0, ramGiBHour: 0}\n",
            "gpuHour",
        ),
    ],
)
def test_a_sheet_that_cannot_price_the_snapshot_exits_2(
    tmp_path: Path, files: tuple[Path, Path], sheet: str, expected: str
) -> None:
    snapshot, path = files
    path.write_text(sheet)
    run = gpufleet(
        "schedule", "-f", str(snapshot), "--now", NOW, "--prices", str(path), cwd=tmp_path
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert str(path) in run.stderr
    assert expected in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1


def test_another_schedulers_pods_are_costed_as_unallocated_to_a_queue(tmp_path: Path) -> None:
    """Their pods take capacity and cost money, but belong to no queue of gpufleet's: they
    are charged under ``__unallocated__``, as OpenCost names a missing label."""
    sheet = tmp_path / "prices.yaml"
    sheet.write_text(FLAT)
    scenario = Path(__file__).parents[1] / "scenarios" / "other-schedulers-take-capacity.yaml"
    cost = schedule_json(tmp_path, scenario, "--prices", str(sheet))["cost"]
    names = set(_totals(cost["before"]))
    assert "__unallocated__" in names
    assert "" not in names
    assert sum(_totals(cost["before"]).values()) == pytest.approx(
        cost["before"]["allocated"]["totalCost"]
    )


@pytest.mark.parametrize(
    ("scenario", "cluster", "before", "after"),
    [
        # 7 slices of 1g on one H100 (the mixed strategy): the node is one GPU; the 7 pods
        # bound take 1/7 each.
        ("mig-static-slices", 1.0, 0.0, 1.0),
        # GPUs published as DRA devices, none as nvidia.com/gpu: 4 devices; a claim two
        # pods share is one GPU, split between them.
        ("dra-shared-claim-counts-once", 4.0, 1.0, 2.0),
        ("dra-mig-devices-count-their-share", 9 / 7, 0.0, 6 / 7),
        ("dra-no-claims", 4.0, 0.0, 0.0),
        ("dra-network-devices", 0.0, 0.0, 0.0),
    ],
)
def test_mig_slices_and_dra_devices_are_priced_as_gpus(
    tmp_path: Path, scenario: str, cluster: float, before: float, after: float
) -> None:
    sheet = tmp_path / "prices.yaml"
    sheet.write_text(FLAT)
    path = Path(__file__).parents[1] / "scenarios" / f"{scenario}.yaml"
    if not path.exists():
        path = Path(__file__).parent / "snapshots" / f"{scenario}.yaml"
    cost = schedule_json(tmp_path, path, "--prices", str(sheet))["cost"]
    for side, allocated in (("before", before), ("after", after)):
        figures = cost[side]
        assert figures["cluster"]["gpuCost"] == pytest.approx(cluster, abs=1e-4)
        assert figures["allocated"]["gpuCost"] == pytest.approx(allocated, abs=1e-4)
        assert figures["__idle__"]["gpuCost"] == pytest.approx(cluster - allocated, abs=1e-4)
