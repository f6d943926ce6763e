"""A study of autoscaling policies (``protocol: autoscale``): each run is the autoscaling
replay ``bench.autoscale`` makes — the jobs of its window on a cluster that buys its nodes,
spot interruptions drawn from its seed — and the report prices each setting."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest

from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.study import load_study
from gpufleet.load.traces.openb import bundled
from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.report.results import timeless
from gpufleet.sim.autoscale import SUPPLY_POLICIES, SupplyReplay, peak_nodes
from gpufleet.sim.window import trace_window
from tests.study.helpers import sweep

STUDY = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {name: budget}
spec:
  experiments:
  - name: philly-day
    protocol: autoscale
    traces: [{path: philly.csv, format: philly}]
    windows: [{since: 1h, until: 7h}]
    grid:
      policy: [ca-price, gpufleet]
      checkpointInterval: [30m]
    seeds: [1, 2]
"""


def philly_trace(path: Path) -> Path:
    """Sixty jobs over eight hours, of 1 to 16 GPUs, drawn from a fixed seed."""
    draw = random.Random(7)
    lines = ["timestamp,duration,num_gpus,gpu_time,cluster"]
    for k in range(60):
        at = 8 * 3600 * k // 60
        gpus = draw.choice([1, 1, 2, 4, 8, 16])
        duration = draw.randint(600, 3 * 3600)
        stamp = f"2017-10-09 {at // 3600:02d}:{at % 3600 // 60:02d}:{at % 60:02d}"
        lines.append(f"{stamp},{duration},{gpus},{gpus * duration},team-{k % 3}")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_each_autoscaling_run_is_the_replay_bench_autoscale_makes(tmp_path: Path) -> None:
    trace = philly_trace(tmp_path / "philly.csv")
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    doc = sweep(study, tmp_path / "cache", "--workers", "2")
    assert (doc["computed"], doc["failed"]) == (4, 0)
    runs = doc["runs"]
    assert [(r["setting"], r["seed"]) for r in runs] == [
        ("ca-price checkpointInterval=30m", 1), ("ca-price checkpointInterval=30m", 2),
        ("gpufleet checkpointInterval=30m", 1), ("gpufleet checkpointInterval=30m", 2),
    ]  # fmt: skip
    assert all(r["command"] is None for r in runs)  # simulate has no autoscaling protocol
    # The run alone, built as bench.autoscale builds it.
    snapshot = load_snapshot(bundled("philly-autoscale.yaml"))
    jobs = [j for j in trace_window(load_replay(trace).jobs, 3600.0) if j.arrival_s < 6 * 3600]
    alone = SupplyReplay(
        jobs,
        snapshot.offers,
        next(p for p in SUPPLY_POLICIES if p.name == "gpufleet"),
        sheet=load_price_sheet(),
        system=snapshot.nodes[0],
        seed=2,
        checkpoint_interval_s=1800.0,
        restart_s=120.0,
        workload="philly",
        static_nodes=peak_nodes(jobs, max(o.gpus for o in snapshot.offers)),
    ).replay()
    assert timeless(runs[3]["result"]) == timeless(alone.to_json())
    assert runs[3]["result"]["spend"] > 0
    # Priced: the Pareto fronts of cost per finished job against the waits.
    summary = doc["summary"]
    assert [s["runs"] for s in summary] == [2, 2]
    assert all(set(s["pareto"]) == {"front: mean wait", "front: p95 wait"} for s in summary)
    assert any(s["pareto"]["front: mean wait"] for s in summary)
    assert summary[0]["metrics"]["cost"]["mean"] > 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("    seeds: [1, 2]\n", ""),  # seeds are a dimension here: spot is random
        (
            "policy: [ca-price, gpufleet]",
            re.escape("expected a policy of the autoscale protocol (static-peak, ca-price"),
        ),
        ("checkpointInterval: [30m]", "expected a parameter of the autoscale protocol"),
    ],
)
def test_an_autoscaling_study_is_checked_like_the_others(
    tmp_path: Path, change: str, message: str
) -> None:
    philly_trace(tmp_path / "philly.csv")
    study = tmp_path / "study.yaml"
    bad = {
        "    seeds: [1, 2]\n": STUDY,
        "policy: [ca-price, gpufleet]": STUDY.replace("ca-price, gpufleet", "fgd"),
        "checkpointInterval: [30m]": STUDY.replace("checkpointInterval: [30m]", "inflate: [1]"),
    }[change]
    study.write_text(bad)
    if not message:
        assert len(load_study(study).runs) == 4
        return
    with pytest.raises(InputError, match=message):
        load_study(study)
