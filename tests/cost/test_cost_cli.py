"""``gpufleet cost`` against a real Prometheus serving the recorded cluster
(``recording.py``): the tables and JSON a user gets, and one line and exit code 2 for each
kind of bad input. The figures are worked out by hand from the recording, under the test
sheet of ``tests/load/costs/test_cluster_usage.py`` or the bundled one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpufleet.cli.app import main
from tests.conftest import _free_port
from tests.load.costs.test_cluster_usage import SHEET

WINDOW = ["--start", "2025-03-03T10:00:00Z", "--end", "2025-03-03T12:00:00Z"]


def gpufleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=120,
    )


def table_rows(text: str) -> dict[str, list[str]]:
    """Each body row's cells by its first cell (header rows are drawn with other lines)."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells[1:]
    return rows


def tables(text: str) -> list[str]:
    """The output cut at each table title line (the text before a table's top border)."""
    parts: list[str] = []
    for line in text.splitlines():
        if line.startswith("┏") or not parts:
            parts.append("")
        parts[-1] += line + "\n"
    return parts


@pytest.fixture
def sheet_file(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(SHEET)
    return path


def test_the_table_a_user_reads(prometheus_url: str, sheet_file: Path, tmp_path: Path) -> None:
    result = gpufleet(
        "cost",
        "--prometheus",
        prometheus_url,
        *WINDOW,
        "--prices",
        str(sheet_file),
        "--by",
        "namespace",
        "--by",
        "experiment",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    out = result.stdout
    assert "prices: test-cluster — round test prices (USD)" in out
    assert "GPU utilisation: DCGM_FI_PROF_GR_ENGINE_ACTIVE, DCGM_FI_DEV_GPU_UTIL / 100" in out
    namespace, experiment, idle_pods, idle_queues, nodes = (table_rows(t) for t in tables(out)[1:])
    # Per pod, GPU + CPU + RAM $ (test sheet; runs and usage as test_cluster_usage.py has them):
    #   train-0  gpu-a 2 h: 4 x 2 x 3 = 24;  max(20, 16) x 2 x 0.05 = 2.0;  128 x 2 x 0.01 = 2.56
    #   notebook gpu-a 1.5 h: 1 x 1.5 x 3 = 4.5;  4 x 1.5 x 0.05 = 0.3;  32 x 1.5 x 0.01 = 0.48
    #   eval-1   gpu-b 2 h: 1 x 2 x 1 = 2;  4 x 2 x 0.0625 = 0.5;  16 x 2 x 0.015625 = 0.5
    #   share-0  gpu-b 2 h: 0.5 x 2 x 1 = 1;  2 x 2 x 0.0625 = 0.25;  8 x 2 x 0.015625 = 0.25
    #   web      gpu-b 1 h: 0;  max(6, 4) x 0.0625 = 0.375;  max(10, 16) x 0.015625 = 0.25
    # ml GPU efficiency: (2.4 x 2 + 7.825 / 90 x 1.5 + 36 / 110 x 2) / (8 + 1.5 + 2) = 48.6%;
    # its CPU and RAM unknown (the notebook has no cAdvisor series). infer: CPU used
    # (1 x 2 + 6 x 1) of (2 x 2 + 4 x 1) core-hours = 100%, RAM (4 x 2 + 10) / (8 x 2 + 16).
    # Nodes: gpu-a 48 + 6.4 + 10.24 = 64.64, gpu-b 8 + 4 + 4 = 16; unallocated is the rest,
    # per resource: GPU 56 - 31.5 = 24.5, CPU 10.4 - 3.425 = 6.975, RAM 14.24 - 4.04 = 10.2.
    assert namespace == {
        "ml": ["11.50", "48.6%", "unknown", "unknown", "30.50", "2.80", "3.54", "0.00", "36.84"],
        "infer": ["1.00", "unknown", "100.0%", "56.2%", "1.00", "0.62", "0.50", "0.00", "2.12"],
        "__idle__": ["", "", "", "", "24.50", "6.98", "10.20", "0.00", "41.67"],
        "total": ["", "", "", "", "56.00", "10.40", "14.24", "", "80.64"],
    }
    assert {name: cells[-1] for name, cells in experiment.items()} == {
        "exp-a": "31.56",  # train-0 + eval-1
        "nb-group": "5.28",  # the notebook, by its PodGroup
        "exp-b": "1.50",
        "__unallocated__": "0.62",  # web: no experiment, no PodGroup
        "__idle__": "41.67",
        "total": "80.64",
    }
    assert experiment["__unallocated__"][1] == "-"  # no GPUs: no GPU efficiency
    # Idle allocated GPUs: notebook 0.75 h x 3 = 2.25; eval-1 40 min x 1 = 0.67; the share
    # has no utilisation series: unknown, and so is its queue's.
    assert idle_pods == {
        "ml/notebook": ["1.50", "0.75", "2.25"],
        "ml/eval-1": ["2.00", "0.67", "0.67"],
        "infer/share-0": ["1.00", "unknown", "unknown"],
    }
    assert idle_queues == {
        "research": ["11.50", "1.42", "2.92"],
        "serving": ["1.00", "unknown", "unknown"],
    }
    assert nodes["gpu-a"] == ["h100", "on-demand", "2.00", "64.64", "30.80", "47.6%"]
    assert nodes["gpu-b"] == ["l4-box", "spot", "2.00", "16.00", "10.88", "68.0%"]
    assert out.rstrip().endswith("unallocated (__idle__): 41.67 of 80.64 USD (51.7%)")


def test_json_under_the_bundled_sheet(prometheus_url: str, tmp_path: Path) -> None:
    result = gpufleet(
        "cost", "--prometheus", prometheus_url, *WINDOW, "--by", "queue", "-o", "json", cwd=tmp_path
    )
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["priceSheet"]["name"] == "gpufleet-illustrative-2026-11"
    assert "illustrative" in doc["priceSheet"]["title"]
    assert doc["window"] == {"start": "2025-03-03T10:00:00Z", "end": "2025-03-03T12:00:00Z"}
    assert doc["utilisation"] == ["DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"]
    # Bundled prices: H100 3.00 and L4 0.55 $/GPU-h, 0.031611 $/vCPU-h, 0.004237 $/GiB-h.
    # gpu-a 8 x 2 x 3 + 64 x 2 x 0.031611 + 512 x 2 x 0.004237 = 48 + 4.046208 + 4.338688;
    # gpu-b 4 x 2 x 0.55 + 32 x 2 x 0.031611 + 128 x 2 x 0.004237 = 4.4 + 2.023104 + 1.084672.
    assert doc["totalCost"] == pytest.approx(63.892672)
    assert [n["nodeType"] for n in doc["nodes"]] == ["h100-sxm", "l4"]
    queues = {r["name"]: r for r in doc["allocations"]["queue"]}
    assert set(queues) == {"research", "serving", "__idle__"}
    research = queues["research"]
    # GPUs: train-0 8 h and notebook 1.5 h at 3.00, eval-1 2 h at 0.55
    assert research["gpuCost"] == pytest.approx(9.5 * 3.0 + 2 * 0.55)
    assert research["gpuHours"] == pytest.approx(11.5)
    assert research["gpuIdleHours"] == pytest.approx(0.75 + 40 / 60)
    assert research["gpuIdleCost"] == pytest.approx(0.75 * 3.0 + 40 / 60 * 0.55)
    assert research["cpuEfficiency"] is None
    assert queues["serving"]["gpuEfficiency"] is None
    assert sum(r["totalCost"] for r in queues.values()) == pytest.approx(doc["totalCost"])
    idle_pods = {r["name"]: r["gpuIdleCost"] for r in doc["gpuIdle"]["pod"]}
    assert idle_pods == {
        "ml/notebook": pytest.approx(2.25),
        "ml/eval-1": pytest.approx(40 / 60 * 0.55),
        "infer/share-0": None,
    }


def run_main(monkeypatch: pytest.MonkeyPatch, *args: str) -> int:
    monkeypatch.setattr(sys, "argv", ["gpufleet", "cost", *args])
    with pytest.raises(SystemExit) as ended:
        main()
    code = ended.value.code
    assert isinstance(code, int)
    return code


BAD_SHEET = SHEET.replace("gpuHour: 3.0", "gpuHour: -3.0")


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("unreachable", "cannot reach Prometheus"),
        ("missing-series", "no kube_node_status_capacity series between 2024-03-03T10:00:00Z"),
        ("future", "the window ends in the future (2099-01-01T00:00:00Z;"),
        ("bad-price-sheet", "entry h100: field 'spec.nodeTypes[0].prices.gpuHour': expected a"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    case: str,
    message: str,
    prometheus_url: str,
    tmp_path: Path,
    *,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    sheet = tmp_path / "prices.yaml"
    sheet.write_text(BAD_SHEET if case == "bad-price-sheet" else SHEET)
    url = f"http://127.0.0.1:{_free_port()}" if case == "unreachable" else prometheus_url
    window = {
        "missing-series": ["--start", "2024-03-03T10:00:00Z", "--end", "2024-03-03T12:00:00Z"],
        "future": ["--start", "2025-03-03T10:00:00Z", "--end", "2099-01-01T00:00:00Z"],
    }.get(case, WINDOW)
    code = run_main(monkeypatch, "--prometheus", url, *window, "--prices", str(sheet))
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1, err
    assert err.startswith("gpufleet: error: ")
    assert message in err
