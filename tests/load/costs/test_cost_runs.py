"""A replay's cost records written out and read back: the same runs and nodes, so that the
allocation computed again from the files, by any dimension, is the replay's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpufleet.cost.allocation import allocate
from gpufleet.load.costs.cost_runs import load_cost_runs
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.model.costs import JOBS_FILE, NODES_FILE, RUNS_FILE
from gpufleet.plugins.registry import REPLAY_POLICIES
from gpufleet.report.cost_files import jobs_csv, nodes_csv, runs_csv
from gpufleet.report.results import results_json
from gpufleet.sim.replay import Replay
from tests.cost.test_replay_cost import JOBS, NODES, QUEUES, SHEET


def write_report(directory: Path, policies: tuple[str, ...] = ("fifo-gang", "gpufleet")) -> None:
    """What ``gpufleet simulate --protocol replay`` writes of the cost, for ``policies``."""
    path = directory / "prices.yaml"
    path.write_text(SHEET, encoding="utf-8")
    sheet = load_price_sheet(path)
    runs, records = [], []
    for name in policies:
        replay = Replay(NODES, JOBS, REPLAY_POLICIES[name], queues=QUEUES, prices=sheet, seed=3)
        runs.append(replay.run())
        assert replay.allocation is not None
        records.append((name, 3, replay.allocation.runs, replay.allocation.nodes))
    (directory / "results.json").write_text(results_json(runs), encoding="utf-8")
    (directory / RUNS_FILE).write_text(runs_csv(records), encoding="utf-8")
    (directory / NODES_FILE).write_text(nodes_csv(records[0][3]), encoding="utf-8")
    (directory / JOBS_FILE).write_text(jobs_csv(runs), encoding="utf-8")


def test_runs_and_nodes_read_back_are_those_costed(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text(SHEET, encoding="utf-8")
    replay = Replay(
        NODES, JOBS, REPLAY_POLICIES["gpufleet"], queues=QUEUES, prices=load_price_sheet(path)
    )
    run = replay.run()
    original = replay.allocation
    assert original is not None
    (tmp_path / "results.json").write_text(results_json([run]), encoding="utf-8")
    (tmp_path / RUNS_FILE).write_text(
        runs_csv([("gpufleet", run.seed, original.runs, original.nodes)]), encoding="utf-8"
    )
    (tmp_path / NODES_FILE).write_text(nodes_csv(original.nodes), encoding="utf-8")

    runs, nodes, window, sheet = load_cost_runs(tmp_path)
    assert (window, sheet) == (original.window, "two-types")
    assert runs.pods == original.runs.pods
    for field in ("node", "start", "end", "request"):
        np.testing.assert_array_equal(getattr(runs, field), getattr(original.runs, field))
    assert dict(runs.dims) == dict(original.runs.dims)
    assert (nodes.names, nodes.types, nodes.categories) == (
        original.nodes.names, original.nodes.types, original.nodes.categories,
    )  # fmt: skip
    for field in ("capacity", "prices", "start", "end"):
        np.testing.assert_array_equal(getattr(nodes, field), getattr(original.nodes, field))
    again = allocate(runs, nodes, window)
    for by in ("queue", "job", "experiment", "nodeType", "node", "pod", "outcome"):
        assert again.aggregate(by) == original.aggregate(by)


def test_a_directory_of_several_runs_is_read_by_policy_and_seed(tmp_path: Path) -> None:
    write_report(tmp_path)
    fifo = load_cost_runs(tmp_path, policy="fifo-gang", seed=3)
    fleet = load_cost_runs(tmp_path, policy="gpufleet")
    assert len(fifo.runs.pods) == len(fleet.runs.pods) == 4  # 2 gang pods, infer, batch
    assert allocate(*fifo[:3]).total == pytest.approx(108.72)
    with pytest.raises(InputError, match="more than one costed run matches; choose a policy"):
        load_cost_runs(tmp_path)
    with pytest.raises(
        InputError, match=r"no costed run matches.*fifo-gang seed 3, gpufleet seed 3"
    ):
        load_cost_runs(tmp_path, policy="kube-default")
    jobs = (tmp_path / JOBS_FILE).read_text(encoding="utf-8").splitlines()
    assert jobs[0].startswith("policy,seed,job,queue,gpuHours")
    assert len(jobs) == 1 + 2 * 3


@pytest.mark.parametrize(
    ("file", "change", "expected"),
    [
        (RUNS_FILE, (",gpus,", ",gpu,"), f"{RUNS_FILE}:1: field 'gpus': the header has no such"),
        (RUNS_FILE, ("h100-0", "h100-9"), "node 'h100-9' is not in cost-nodes.csv"),
        (RUNS_FILE, (",finished,", ",done,"), "field 'outcome': expected one of running"),
        (NODES_FILE, ("3.0", "three"), f"{NODES_FILE}:2: field 'gpuHour': expected a number"),
        ("results.json", ('"window_s"', '"window"'), "field 'cost.window_s'"),
    ],
)
def test_bad_records_are_one_error_naming_file_line_and_field(
    tmp_path: Path, file: str, change: tuple[str, str], expected: str
) -> None:
    write_report(tmp_path, ("gpufleet",))
    path = tmp_path / file
    path.write_text(path.read_text(encoding="utf-8").replace(*change, 1), encoding="utf-8")
    with pytest.raises(InputError) as error:
        load_cost_runs(tmp_path)
    assert expected in str(error.value)


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"results.json: no such file"):
        load_cost_runs(tmp_path)
