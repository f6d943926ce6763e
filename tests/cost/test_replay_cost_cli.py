"""``gpufleet simulate --protocol replay`` costs its runs: under ``--prices`` (or the bundled
sheet), into the table, ``results.json``, the report and the cost records; a sheet that is
bad, or that cannot price a node, stops it with one line and exit code 2."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from rich.console import Console

from gpufleet.cli.replay import simulate_replay
from gpufleet.cost.allocation import allocate
from gpufleet.load.costs.cost_runs import load_cost_runs
from gpufleet.load.errors import InputError
from gpufleet.model.costs import JOBS_FILE, NO_UTILISATION, NODES_FILE, RUNS_FILE
from tests.cli.test_app import gpufleet
from tests.cli.test_replay import CLUSTER, PHILLY, QUEUES, write

SHEET = """\
apiVersion: gpufleet.io/v1alpha1
kind: PriceSheet
metadata: {name: a100-list}
spec:
  title: A100 list prices, for a test
  currency: USD
  nodeTypes:
  - {name: a100, gpuProduct: A100, category: committed,
     prices: {gpuHour: 1.0, vcpuHour: 0.02, ramGiBHour: 0.001}}
"""
NODE_HOUR = 8 * 1.0 + 64 * 0.02 + 512 * 0.001
"""What one of the cluster's three A100 servers (8 GPUs, 64 cores, 512 GiB) costs an hour."""


def test_a_replay_is_costed_under_the_sheet_given(tmp_path: Path) -> None:
    prices = write(tmp_path / "prices.yaml", SHEET)
    result = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(write(tmp_path / "p.csv", PHILLY)),
        "--cluster", str(write(tmp_path / "c.yaml", CLUSTER)),
        "--queues", str(write(tmp_path / "q.yaml", QUEUES)),
        "--policy", "kube-default", "--policy", "gpufleet", "--prices", str(prices),
        "--out", "report", "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    table = " ".join(result.stderr.split())  # the tables go to stderr when JSON is on stdout
    assert "cost of the replay" in table
    assert f"gpuEfficiency: {NO_UTILISATION}" in table
    assert "A100 list prices, for a test (sheet a100-list, USD)" in table
    report = tmp_path / "report"
    for run in json.loads(result.stdout)["runs"]:
        cost = run["cost"]
        assert cost["sheet"]["name"] == "a100-list"
        hours = cost["window_s"][1] / 3600
        assert cost["window_s"] == [0.0, run["simulated_s"]]
        assert cost["totalCost"] == pytest.approx(3 * NODE_HOUR * hours, abs=1e-3)
        assert cost["allocated"]["gpuCost"] == pytest.approx(run["gpu_hours"] * 1.0, abs=1e-3)
        assert cost["finishedJobs"] == run["finished_jobs"] == 4
        # 16 GPUs x 1 h + 1 x 600 s + 8 x 1200 s + 4 x 900 s of work
        assert cost["finishedGpuHours"] == pytest.approx(16 + (600 + 9600 + 3600) / 3600, abs=1e-3)
        assert {q["name"] for q in cost["queues"]} == {"alpha", "beta"}
        assert cost["jobs"] == 4
        assert cost["gpuEfficiency"] is None
        again = allocate(*load_cost_runs(report, policy=run["policy"])[:3])
        assert again.total == pytest.approx(cost["totalCost"], abs=1e-3)
        queues = {r["name"]: r["totalCost"] for r in again.aggregate("queue")}
        assert queues["alpha"] == pytest.approx(
            next(q["totalCost"] for q in cost["queues"] if q["name"] == "alpha"), abs=1e-3
        )
    for name in (RUNS_FILE, NODES_FILE, JOBS_FILE, "replay-cost.png"):
        assert (report / name).stat().st_size > 0
    assert "Cost per queue" in (report / "index.html").read_text(encoding="utf-8")


def test_a_bad_sheet_exits_2_with_one_line(tmp_path: Path) -> None:
    prices = write(tmp_path / "prices.yaml", SHEET.replace("gpuHour: 1.0", "gpuHour: -1.0"))
    result = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(write(tmp_path / "p.csv", PHILLY)),
        "--prices", str(prices), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr == (
        f"gpufleet: error: {prices}: PriceSheet a100-list entry a100: field "
        "'spec.nodeTypes[0].prices.gpuHour': expected a price from 0 to 1,000,000 per hour, "
        "got -1.0\n"
    )


def test_a_sheet_that_cannot_price_a_node_stops_the_replay_before_it_runs(tmp_path: Path) -> None:
    prices = write(tmp_path / "prices.yaml", SHEET.replace("gpuProduct: A100", "gpuProduct: H100"))
    with pytest.raises(InputError) as error:
        simulate_replay(
            write(tmp_path / "p.csv", PHILLY), None, None, [42], None,
            write(tmp_path / "c.yaml", CLUSTER), None, (None, None), (0.0, 0.0), {}, prices,
            tmp_path / "out",
            Console(),
        )  # fmt: skip
    assert str(error.value).startswith(
        f"{prices}: node pool-000 (GPU A100) matches no entry of price sheet a100-list"
    )
    assert not (tmp_path / "out").exists()


def test_gpufleet_cost_re_aggregates_a_replay_and_writes_its_focus_rows(tmp_path: Path) -> None:
    prices = write(tmp_path / "prices.yaml", SHEET)
    replay = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(write(tmp_path / "p.csv", PHILLY)),
        "--cluster", str(write(tmp_path / "c.yaml", CLUSTER)),
        "--queues", str(write(tmp_path / "q.yaml", QUEUES)),
        "--policy", "kube-default", "--prices", str(prices),
        "--out", "report", "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert replay.returncode == 0, replay.stderr
    [run] = json.loads(replay.stdout)["runs"]
    focus = tmp_path / "focus.csv"
    result = gpufleet(
        "cost", "--results", "report", "--prices", str(prices), "--by", "queue",
        "-o", "json", "--focus", str(focus), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    text = json.dumps(document)
    assert "a100-list" in text
    rows = list(csv.DictReader(focus.open(encoding="utf-8")))
    assert rows
    assert {r["BillingCurrency"] for r in rows} == {"USD"}
    # the whole seconds of the replay's window: within a second's cost of the replay's total
    spent = sum(float(r["EffectiveCost"]) for r in rows)
    assert spent == pytest.approx(run["cost"]["totalCost"], abs=3 * NODE_HOUR / 3600 * 2)
    # its defaults: by queue, as a replay's runs have no namespaces
    default = gpufleet(
        "cost", "--results", "report", "--prices", str(prices), "-o", "json", cwd=tmp_path
    )
    assert default.returncode == 0, default.stderr
    assert json.loads(default.stdout)["allocations"] == document["allocations"]
    missing = gpufleet(
        "cost", "--results", "report", "--prices", str(prices), "--by", "namespace", cwd=tmp_path
    )
    assert missing.returncode == 2
    assert "has no 'namespace' to aggregate by (--by): it has" in missing.stderr
    assert "Traceback" not in missing.stderr
    other = write(tmp_path / "other.yaml", SHEET.replace("a100-list", "other-list"))
    refused = gpufleet("cost", "--results", "report", "--prices", str(other), cwd=tmp_path)
    assert refused.returncode == 2
    assert "priced by price sheet a100-list, not other-list" in refused.stderr
    assert refused.stderr.count("\n") == 1
