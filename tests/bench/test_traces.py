"""The benchmark scripts that read traces take ``--traces DIR`` and, when a trace is
missing, end with one line and exit code 2, not a traceback (a real subprocess)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_replay import PHILLY

ROOT = Path(__file__).resolve().parents[2]


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args, "--no-docs"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("script", "missing"),
    [
        ("bench.replay", "alibaba-gpu-v2023/openb_pod_list_default.csv"),
        ("bench.topology", "philly/philly.csv"),
        ("bench.autoscale", "philly/philly.csv"),
        ("bench.openb_fidelity", "fgd-expected-results/analysis_allo_discrete.csv"),
        ("bench.openb_headroom", "fgd-expected-results/analysis_allo_discrete.csv"),
        ("bench.openb_gpufleet", "fgd-expected-results/analysis_allo_discrete.csv"),
    ],
)
def test_a_missing_trace_is_one_line_and_exit_2(tmp_path: Path, script: str, missing: str) -> None:
    done = bench(script, "--traces", str(tmp_path / "nowhere"))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("bench: error: ")
    assert missing in done.stderr
    assert "--traces DIR" in done.stderr


def test_replay_reads_the_traces_it_is_given(tmp_path: Path) -> None:
    (tmp_path / "philly").mkdir()
    (tmp_path / "philly" / "philly.csv").write_text(PHILLY, encoding="utf-8")
    done = bench(
        "bench.replay", "--traces", str(tmp_path), "--trace", "philly", "--policy", "fifo-gang"
    )
    assert done.returncode == 0, done.stderr
    assert "philly: 4 jobs" in done.stdout


def test_a_trace_that_cannot_be_read_is_one_line_and_exit_2(tmp_path: Path) -> None:
    summary = tmp_path / "philly" / "pollux-osdi21" / "results-jobload" / "tiresias-0.5"
    summary.mkdir(parents=True)
    (summary / "summary.json").write_text("{", encoding="utf-8")
    done = bench("bench.replay", "--traces", str(tmp_path), "--trace", "pollux")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("bench: error: ")
    assert "tiresias-0.5/summary.json: expected a JSON object" in done.stderr
