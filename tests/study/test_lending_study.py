"""A study of lending policies (``protocol: balance``): each run is what ``gpufleet simulate
--protocol balance`` gives for its policy alone — a training trace beside a serving load on
one cluster — and the report prices each setting."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.study import load_study
from gpufleet.report.results import timeless
from tests.study.helpers import simulate, sweep
from tests.study.test_autoscale_study import philly_trace

STUDY = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {name: lending}
spec:
  experiments:
  - name: beside-serving
    protocol: balance
    traces: [{path: philly.csv, format: philly}]
    windows: [{since: 0, until: 4h}]
    serving: [{path: m-test}]
    grid:
      policy: [static, gpufleet]
      servingNodes: [4]
"""


def serving_load(folder: Path) -> Path:
    """A ServeGen model of two clients over eight hours of 10-minute windows."""
    folder.mkdir()
    for client in range(2):
        rows = "".join(
            f"{600 * w},{(1 + (w + client) % 6) * 0.5},1.5,Gamma,0.5,2.0\n" for w in range(48)
        )
        (folder / f"chunk-{client}-trace.csv").write_text(rows)
    return folder


def test_each_lending_run_is_what_simulate_gives_alone(tmp_path: Path) -> None:
    philly_trace(tmp_path / "philly.csv")
    serving_load(tmp_path / "m-test")
    study = tmp_path / "study.yaml"
    study.write_text(STUDY)
    doc = sweep(study, tmp_path / "cache", "--workers", "2")
    assert (doc["computed"], doc["failed"]) == (2, 0)
    for k, run in enumerate(doc["runs"]):
        assert "--seeds" not in run["command"]  # a lending replay draws nothing
        (alone,) = simulate(run["command"], tmp_path / f"alone-{k}")
        assert timeless(run["result"]) == timeless(alone), run["command"]
    summary = doc["summary"]
    assert [s["setting"] for s in summary] == ["static servingNodes=4", "gpufleet servingNodes=4"]
    assert all(set(s["pareto"]) == {"front: mean wait", "front: p95 wait"} for s in summary)
    # The folder is one input: its files' bytes name it, and an edited file is a new input.
    again = sweep(study, tmp_path / "cache", "--workers", "2")
    assert (again["cached"], again["computed"]) == (2, 0)
    (tmp_path / "m-test" / "chunk-2-trace.csv").write_text("0,9.0,1.5,Gamma,0.5,2.0\n")
    edited = sweep(study, tmp_path / "cache", "--workers", "2")
    assert (edited["cached"], edited["computed"]) == (0, 2)
    assert json.dumps(edited["runs"][0]["result"]) != json.dumps(doc["runs"][0]["result"])


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            STUDY.replace("    serving: [{path: m-test}]\n", ""),
            "expected a ServeGen model's folder",
        ),
        (STUDY.replace("{path: m-test}", "{path: philly.csv}"), "expected a folder"),
        (STUDY.replace("servingNodes: [4]", "servingNodes: [0]"), "a whole number of nodes"),
        (STUDY.replace("policy: [static, gpufleet]", "policy: [kube-default]"), "lyra-greedy"),
        (STUDY.replace("protocol: balance", "protocol: replay"), "applies to protocol balance"),
    ],
)
def test_a_bad_lending_study_says_what_was_expected(
    tmp_path: Path, text: str, message: str
) -> None:
    philly_trace(tmp_path / "philly.csv")
    serving_load(tmp_path / "m-test")
    study = tmp_path / "study.yaml"
    study.write_text(text)
    with pytest.raises(InputError, match=message):
        load_study(study)
