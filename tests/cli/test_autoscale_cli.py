"""``gpufleet schedule --autoscale``: the plan for what a cycle leaves pending."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_app import gpufleet

SNAPSHOT = Path(__file__).with_name("autoscale-snapshot.yaml")
RELEASE = Path(__file__).with_name("autoscale-release-snapshot.yaml")
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
    assert plan["releases"] == []  # pending work needs more nodes: none goes


@pytest.mark.parametrize("least", [1, 2])
def test_the_plan_names_the_nodes_that_may_go_and_how(tmp_path: Path, least: int) -> None:
    """Nothing pending: the nodes running only a DaemonSet's or a static pod may go, and the
    node whose job checkpoints once the job moves right after its next checkpoint; the node
    whose job never saves stays, and the pool keeps its minNodes."""
    path = tmp_path / "pool.yaml"
    path.write_text(RELEASE.read_text().replace("minNodes: 2", f"minNodes: {least}"))
    at = "--now=2026-12-01T01:10:00Z"
    done = gpufleet("schedule", "-f", str(path), "--autoscale", "-o", "json", at, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)["autoscale"]
    gone = [(r["node"], r["moves"]) for r in plan["releases"]]
    expected: list[tuple[str, list[dict[str, str]]]] = [("p100x8-000", []), ("p100x8-003", [])]
    if least == 1:
        expected.append(("p100x8-001", [{"job": "ml/saves", "at": "2026-12-01T01:30:01Z"}]))
    assert gone == expected
    table = gpufleet("schedule", "-f", str(path), "--autoscale", at, cwd=tmp_path).stdout
    assert f"nodes that may go ({len(expected)}," in table


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


def test_explain_names_the_nodes_a_pending_job_waits_for(tmp_path: Path) -> None:
    done = gpufleet("explain", "-f", str(SNAPSHOT), "ml/train-1", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        "autoscaling: waits for nodes to be bought: p100x8-000, p100x8-001 (pool p100x8, "
        "17.98 USD an hour)"
    ) in done.stdout
    done = gpufleet("explain", "-f", str(SNAPSHOT), "ml/small", "-o", "json", NOW, cwd=tmp_path)
    said = json.loads(done.stdout)["autoscale"]
    assert (said["waitsFor"], said["nodes"], said["heldNodes"]) == (
        "nodes to buy",
        ["p100x8-002"],
        [],
    )


def test_explain_names_the_node_a_finishing_job_frees_and_the_nodes_held_for_a_job(
    tmp_path: Path,
) -> None:
    # The running job (7 GPUs on busy-0 since 00:00, expected to take 4 minutes) has run 2:
    # it frees busy-0 within the 5-minute provisioning delay, so the 2-GPU pod waits for
    # busy-0 and nothing is bought for it.
    args = ("--now=2026-12-01T00:02:00Z", "--expected-duration", "4m")
    done = gpufleet("explain", "-f", str(SNAPSHOT), *args, "ml/small", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "autoscaling: waits for node(s) busy-0: fits what running jobs are expected" in (
        done.stdout
    )
    # A node that came for the gang holds one of its two pods: one node is bought, not two.
    path = tmp_path / "held.yaml"
    path.write_text(
        SNAPSHOT.read_text()
        + "---\napiVersion: v1\nkind: Node\n"
        + "metadata: {name: came-0, labels: {gpufleet.io/provisioned-for: ml.train}}\n"
        + 'status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}\n'
    )
    done = gpufleet("explain", "-f", str(path), NOW, "ml/train-0", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "nodes provisioned for it, kept off every other job: came-0" in done.stdout
    assert "waits for nodes to be bought: p100x8-000 (pool p100x8" in done.stdout
