"""``gpufleet sweep`` on the local process pool: each run's result is what ``gpufleet
simulate`` gives for that setting alone; results are cached by their inputs and code, so a
rerun, an extended study or an interrupted one computes only what is missing; a worker
killed mid-study loses nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from gpufleet.load.study import load_study
from gpufleet.model.study import StudyRun
from gpufleet.report.results import timeless
from gpufleet.report.study import RunRow, failed_rows, pareto, summarise
from gpufleet.study.execute import Done, LocalPool
from gpufleet.study.runs import Blobs, execute, run_key
from gpufleet.study.sweep import ResultCache
from gpufleet.study.sweep import sweep as run_study
from tests.study.helpers import (
    LONG,
    STUDY,
    cached,
    children,
    kill,
    simulate,
    sweep,
    sweep_args,
    wait_for,
    write_study,
)


def test_each_run_is_what_simulate_gives_alone_and_a_rerun_computes_nothing(
    tmp_path: Path,
) -> None:
    study = write_study(tmp_path / "study")
    cache = tmp_path / "cache"
    doc = sweep(study, cache, "--workers", "2")
    assert (doc["cached"], doc["computed"], doc["failed"]) == (0, 7, 0)
    assert [r["status"] for r in doc["runs"]] == ["ok"] * 7
    # One simulate per setting, its seeds together (--seeds 1-2 runs both, as alone).
    by_setting: dict[str, list[dict[str, object]]] = {}
    for run in doc["runs"]:
        by_setting.setdefault(run["command"].rsplit(" --seeds ", 1)[0], []).append(run)
    for k, (command, runs) in enumerate(by_setting.items()):
        seeds = sorted(int(str(r["seed"])) for r in runs)
        alone = simulate(f"{command} --seeds {seeds[0]}-{seeds[-1]}", tmp_path / f"alone-{k}")
        assert len(alone) == len(runs) == len(seeds)
        for run in runs:
            (same,) = [a for a in alone if a["seed"] == run["seed"]]
            assert timeless(run["result"]) == timeless(same), command
    again = sweep(study, cache, "--workers", "2")
    assert (again["cached"], again["computed"]) == (7, 0)
    assert [r["result"] for r in again["runs"]] == [r["result"] for r in doc["runs"]]
    # The report: a table row per setting, the fronts, the CSVs and a plot per experiment.
    report = study.parent / "report"
    assert {"index.html", "results.json", "runs.csv", "summary.csv"} <= {
        p.name for p in report.iterdir()
    }
    assert len(list(report.glob("*.png"))) == 2
    summary = {(s["experiment"], s["setting"]): s for s in doc["summary"]}
    assert summary["slice-fill", "best-fit"]["runs"] == 2
    assert (
        summary["slice-fill", "best-fit"]["metrics"]["unallocated GPU % at 100%"]["sd"] is not None
    )
    fronts = [s["pareto"] for s in doc["summary"] if s["protocol"] == "replay"]
    assert any(f["front: mean wait"] for f in fronts)
    assert (report / "runs.csv").read_text().count("\n") == 1 + 7


def test_an_extended_study_computes_only_its_new_runs(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study")
    cache = tmp_path / "cache"
    sweep(study, cache, "--workers", "2")
    study.write_text(STUDY.replace("seeds: [1, 2]", "seeds: [1, 2, 3]"))
    doc = sweep(study, cache, "--workers", "2")
    assert (doc["cached"], doc["computed"]) == (7, 2)
    # An edited input file is a new input: its runs are computed again.
    pods = study.parent / "pods.csv"
    pods.write_text(pods.read_text().replace("openb-pod-0001,6000", "openb-pod-0001,5000"))
    doc = sweep(study, cache, "--workers", "2")
    assert (doc["cached"], doc["computed"]) == (3, 6)


def test_the_key_is_what_a_run_computes_on_not_where_or_in_which_study(tmp_path: Path) -> None:
    runs = load_study(write_study(tmp_path / "a")).runs
    renamed = STUDY.replace("name: slice-fill", "name: other").replace("[1, 2]", "[2, 1]")
    moved = load_study(write_study(tmp_path / "b", renamed)).runs
    code = "c" * 64
    keys = {run_key(r, code) for r in runs}
    assert len(keys) == len(runs)
    assert {run_key(r, code) for r in moved} == keys
    assert {run_key(r, "d" * 64) for r in runs}.isdisjoint(keys)  # other code, other results


def test_a_killed_worker_loses_no_run(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study", LONG)
    cache = tmp_path / "cache"
    process = subprocess.Popen(
        [*sweep_args(study, cache, "--workers", "2")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: len(children(process.pid)) >= 2, "the pool's workers")
        kill(children(process.pid)[0])
        out, err = process.communicate(timeout=600)
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    doc = json.loads(out)
    assert (doc["computed"], doc["failed"]) == (10, 0)
    assert cached(cache) == 10


def test_an_interrupted_study_reruns_only_the_missing_runs(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study", LONG)
    cache = tmp_path / "cache"
    process = subprocess.Popen(
        sweep_args(study, cache, "--workers", "2"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_for(lambda: cached(cache) >= 2, "two results")
    finally:
        os.killpg(process.pid, signal.SIGKILL)  # the command and its workers, at once
        process.wait()
    done = cached(cache)
    assert 2 <= done < 10
    doc = sweep(study, cache, "--workers", "2")
    assert (doc["cached"], doc["computed"], doc["failed"]) == (done, 10 - done, 0)


class _Flaky:
    """An executor that runs every run here, but fails the first with an error and
    answers the second with a result computed by other gpufleet code."""

    workers, name = 1, "flaky"

    def run(
        self, tasks: Sequence[tuple[int, StudyRun]], blobs: Blobs, scratch: str, on_done: Done
    ) -> None:
        for n, (i, run) in enumerate(tasks):
            if n == 0:
                on_done(i, None, "MemoryError: out of memory")
                continue
            outcome = execute(run, blobs, scratch)
            on_done(i, {**outcome, "code": "0" * 64} if n == 1 else outcome, None)

    def close(self) -> None:
        pass


def test_a_failed_run_is_reported_with_its_error_and_never_cached(tmp_path: Path) -> None:
    study = load_study(write_study(tmp_path / "study"))
    cache = ResultCache(tmp_path / "cache")
    outcomes = run_study(study, _Flaky(), cache, warn=lambda _: None)
    failed = [o for o in outcomes if o.error is not None]
    assert sorted(str(o.error)[:40] for o in failed) == [
        "MemoryError: out of memory",
        "computed with other gpufleet code (00000",
    ]
    assert all(o.result is None for o in failed)
    assert cached(tmp_path / "cache") == 5
    rows = [o.row() for o in outcomes]
    assert len(failed_rows(rows)) == 2
    for summary in summarise(rows):
        mine = [o for o in failed if o.run.setting_label() == summary.setting]
        assert summary.failed == len(mine)
    # The next sweep computes the two that failed, and only those.
    again = run_study(study, LocalPool(2), cache, warn=lambda _: None)
    assert [not o.cached for o in again] == [o.error is not None for o in outcomes]
    assert all(o.error is None for o in again)


def _row(setting: str, cost: float, wait: float) -> RunRow:
    result = {
        "cost": {"costPerFinishedJob": cost},
        "all_waits": {"mean_wait_s": wait * 3600, "p95_wait_s": wait * 3600},
    }
    return RunRow("e", "replay", "in", setting, 42, result, None, False)


def test_the_pareto_front_keeps_what_nothing_beats_on_both() -> None:
    assert pareto([(1.0, 5.0), (2.0, 2.0), (3.0, 3.0), (2.0, 2.0), (5.0, 1.0)]) == [
        True, True, False, True, True,
    ]  # fmt: skip
    rows = [_row("a", 1.0, 5.0), _row("b", 2.0, 2.0), _row("c", 3.0, 3.0)]
    failed = RunRow("e", "replay", "in", "d", 42, None, "boom", False)
    summaries = summarise([*rows, failed])
    assert [bool(s.fronts) for s in summaries] == [True, True, False, False]
    assert summaries[3].failed == 1


def test_a_run_is_named_by_its_setting(tmp_path: Path) -> None:
    runs: tuple[StudyRun, ...] = load_study(write_study(tmp_path)).runs
    assert [r.setting_label() for r in runs[4:]] == [
        "gang-backfill",
        "gpufleet reserveAfter=1h",
        "gpufleet actions=none checkpointInterval=30m restartTime=2m",
    ]


def _fake(run: StudyRun, blobs: Blobs, scratch: str) -> dict[str, object]:
    """A run in a worker that dies outright for one run (best-fit, seed 2), as an
    out-of-memory kill would end it, and answers at once for the others."""
    if run.policy == "best-fit" and run.seed == 2:
        os._exit(137)
    return {"result": {"seed": run.seed}, "code": "x"}


def test_a_run_that_kills_its_worker_is_found_and_the_others_lose_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = load_study(write_study(tmp_path)).runs
    monkeypatch.setattr("gpufleet.study.execute.execute", _fake)  # the forked workers' too
    said: dict[int, tuple[object, str | None]] = {}

    def done(i: int, outcome: object, error: str | None) -> None:
        said[i] = (outcome, error)

    LocalPool(2).run(list(enumerate(runs)), {}, str(tmp_path), done)
    assert sorted(said) == list(range(len(runs)))
    killer = [i for i, r in enumerate(runs) if r.policy == "best-fit" and r.seed == 2]
    for i, (outcome, error) in said.items():
        if i in killer:
            assert outcome is None
            assert error == "its worker process died 4 times (killed, or out of memory)"
        else:
            assert error is None, error


def test_a_cached_result_that_is_not_the_runs_is_computed_again(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study")
    cache = tmp_path / "cache"
    sweep(study, cache, "--workers", "2")
    files = sorted(cache.rglob("*.json"))
    # One result edited, another replaced by a third run's file, one cut short.
    edited = json.loads(files[0].read_text())
    edited["result"]["jobs"] = "many"
    files[0].write_text(json.dumps(edited))
    files[1].write_bytes(files[2].read_bytes())
    files[3].write_text(files[3].read_text()[:100])
    doc = sweep(study, cache, "--workers", "2")
    assert (doc["cached"], doc["computed"]) == (4, 3)


def test_a_cache_that_cannot_be_written_is_warned_of_and_the_study_goes_on(
    tmp_path: Path,
) -> None:
    study = write_study(tmp_path / "study")
    cache = tmp_path / "cache"
    cache.mkdir()
    for first in "0123456789abcdef":  # a file where every key's folder would go
        for second in "0123456789abcdef":
            (cache / f"{first}{second}").write_text("")
    done = subprocess.run(
        sweep_args(study, cache, "--workers", "2"), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert "cannot keep results there" in done.stderr
    assert "Traceback" not in done.stderr
    assert json.loads(done.stdout)["computed"] == 7


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ray", "nohost"), "gpufleet: error: --ray nohost: expected ray://HOST:PORT, HOST:PORT"),
        (("--ray", "127.0.0.1:1"), "gpufleet: error: --ray 127.0.0.1:1: cannot reach a Ray"),
        (("--workers", "2", "--ray", "auto"), "--workers applies to the local pool and --ray"),
        (("--broken",), "study.yaml: Study small: field 'spec.experiments[0].grid.policy'"),
    ],
)
def test_a_bad_study_or_option_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    study = write_study(tmp_path)
    extra = args
    if args == ("--broken",):
        study.write_text(STUDY.replace("[best-fit, gpufleet]", "[best-fit, nosuch]"))
        extra = ()
    done = subprocess.run(
        sweep_args(study, tmp_path / "cache", *extra), capture_output=True, text=True, check=False
    )
    assert done.returncode == 2, done.stderr
    assert message in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr
    assert not done.stdout
