"""``gpufleet schedule --autoscale``: the plan for what a cycle leaves pending."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_app import gpufleet

SNAPSHOT = Path(__file__).with_name("autoscale-snapshot.yaml")
NOW = "--now=2026-12-01T01:00:00Z"


def test_the_plan_buys_the_gang_whole_and_says_what_each_node_is_for(tmp_path: Path) -> None:
    done = gpufleet("schedule", "-f", str(SNAPSHOT), "--autoscale", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [p["pod"] for p in document["pending"]] == ["ml/small", "ml/train-0", "ml/train-1"]
    plan = document["autoscale"]
    assert [(p["for"], p["nodes"]) for p in plan["purchases"]] == [
        ("ml/train", ["p100x8-000", "p100x8-001"]),
        ("ml/small", ["p100x8-002"]),
    ]
    assert plan["currency"] == "USD"
    assert plan["hourly"] == sum(p["hourly"] for p in plan["purchases"])
    assert plan["waiting"] == []


def test_the_table_names_the_nodes_and_their_cost(tmp_path: Path) -> None:
    done = gpufleet("schedule", "-f", str(SNAPSHOT), "--autoscale", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "nodes to buy (3," in done.stdout
    assert "p100x8-000, p100x8-001" in done.stdout


def test_a_snapshot_without_node_types_warns_that_nothing_can_be_bought(tmp_path: Path) -> None:
    text = SNAPSHOT.read_text().replace("  autoscaling: {maxNodes: 16}\n", "")
    text = text.replace("  count: 0\n", "  count: 1\n")
    path = tmp_path / "fixed.yaml"
    path.write_text(text)
    done = gpufleet("schedule", "-f", str(path), "--autoscale", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "no NodePool has spec.autoscaling" in done.stderr
    assert json.loads(done.stdout)["autoscale"]["purchases"] == []
