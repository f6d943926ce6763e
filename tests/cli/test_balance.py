"""``gpufleet simulate --protocol balance`` end to end: a Philly trace beside a ServeGen load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_app import gpufleet
from tests.load.traces.test_servegen import model

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,7200,16,115200,alpha
2017-10-09 07:00:10,1800,1,1800,beta
2017-10-09 07:01:00,3600,8,28800,beta
2017-10-09 07:20:00,900,4,3600,alpha
"""


def _inputs(tmp_path: Path) -> tuple[Path, Path]:
    trace = tmp_path / "philly.csv"
    trace.write_text(PHILLY)
    # two hours of windows: quiet, then a rise to the peak, then quiet again
    rates = [1.0, 1.0, 1.0, 4.0, 8.0, 8.0, 4.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    serving = model(tmp_path, {600 * k: r for k, r in enumerate(rates)})
    return trace, serving


def test_four_policies_side_by_side_with_results_json_plot_and_page(tmp_path: Path) -> None:
    trace, serving = _inputs(tmp_path)
    out = tmp_path / "report"
    args = ["simulate", "--protocol", "balance", "--workload", str(trace)]
    result = gpufleet(
        *args, "--serving", str(serving), "--serving-nodes", "4", "--out", str(out), cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    assert [r["policy"] for r in document["runs"]] == [
        "static",
        "naive-loaning",
        "lyra-greedy",
        "gpufleet",
    ]
    assert document["serving_nodes"] == 4
    static, *_, ours = document["runs"]
    assert static["serving"]["lent_gpus"] == [0.0] * 12  # a static partition lends nothing
    assert ours["serving"]["replicas"] == [1, 1, 1, 2, 4, 4, 2, 1, 1, 1, 1, 1]
    assert ours["training"]["jobs"] == 4
    assert (out / "balance.png").stat().st_size > 0
    assert "training beside a serving load" in (out / "index.html").read_text()
    # the same inputs give the same figures
    again = gpufleet(
        *args,
        "--serving",
        str(serving),
        "--serving-nodes",
        "4",
        "--out",
        str(tmp_path / "again"),
        cwd=tmp_path,
    )
    assert again.returncode == 0, again.stderr
    first = [{k: v for k, v in r.items() if k != "training"} for r in document["runs"]]
    second = json.loads((tmp_path / "again" / "results.json").read_text())["runs"]
    assert first == [{k: v for k, v in r.items() if k != "training"} for r in second]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ((), "--protocol balance needs --workload"),
        (("--serving-nodes", "0"), "--serving-nodes must be 1 to 100000, got 0"),
        (("--mu-factor", "0"), "--mu-factor must be from 0.01 to 100, got 0"),
        (("--policy", "lyra"), "unknown balance policy 'lyra'"),
        (("--queues", "q.yaml"), "--queues applies to --protocol replay only"),
    ],
)
def test_bad_balance_options_exit_2_naming_the_option(
    tmp_path: Path, extra: tuple[str, ...], message: str
) -> None:
    trace, serving = _inputs(tmp_path)
    base = ["simulate", "--protocol", "balance", "--serving", str(serving)]
    if extra:
        base += ["--workload", str(trace)]
    result = gpufleet(*base, *extra, "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 2
    assert message in " ".join(result.stderr.split())


def test_a_serving_folder_that_is_not_a_servegen_model_exits_2(tmp_path: Path) -> None:
    trace, _ = _inputs(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    args = ["simulate", "--protocol", "balance", "--workload", str(trace), "--serving", str(empty)]
    result = gpufleet(*args, "--out", str(tmp_path / "r"), cwd=tmp_path)
    assert result.returncode == 2
    assert "no chunk-<n>-trace.csv files" in result.stderr
    assert "Traceback" not in result.stderr
