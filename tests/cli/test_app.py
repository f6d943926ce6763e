"""The ``gpufleet`` command end to end, as a user runs it (a real subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.builders import node, pod, write_nodes_csv, write_pods_csv


def gpufleet(
    *args: str, cwd: Path, preexec: Callable[[], None] | None = None
) -> subprocess.CompletedProcess[str]:
    """``gpufleet ARGS`` in ``cwd`` (``preexec``: run in the child before it starts)."""
    return subprocess.run(
        [sys.executable, "-m", "gpufleet", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        check=False,
        timeout=300,
        preexec_fn=preexec,
    )


@pytest.fixture
def small_files(tmp_path: Path) -> tuple[Path, Path]:
    pods = [pod(f"s{i:02d}").cpu(2).share(250 + 50 * (i % 6)).obj() for i in range(20)]
    pods += [pod(f"w{i}").cpu(8).gpus(1 + i % 4).obj() for i in range(6)]
    nodes = [node(f"n{i}", cpu=32, gpus=4) for i in range(4)] + [node("t", gpus=2, model="T4")]
    return (
        write_pods_csv(tmp_path / "pods.csv", pods),
        write_nodes_csv(tmp_path / "nodes.csv", nodes),
    )


def test_simulate_writes_table_json_plot_and_html(
    tmp_path: Path, small_files: tuple[Path, Path]
) -> None:
    pods, nodes = small_files
    result = gpufleet(
        "simulate",
        "--workload",
        str(pods),
        "--nodes",
        str(nodes),
        "--policy",
        "fgd",
        "--policy",
        "kube-default",
        "--seeds",
        "1-2",
        "--out",
        "report",
        "--json",
        "-",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [(r["policy"], r["seed"]) for r in runs] == [
        ("fgd", 1),
        ("fgd", 2),
        ("kube-default", 1),
        ("kube-default", 2),
    ]
    for run in runs:
        assert run["workload"] == "pods"
        assert len(run["allocation_curve"]) == len(run["frag_ratio_curve"]) == 131
        assert set(run) >= {"unallocated_at_100", "failed_pods", "elapsed_s"}
    report = tmp_path / "report"
    assert json.loads((report / "results.json").read_text()) == {"runs": runs}
    assert (report / "unallocated.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (report / "index.html").read_text()
    assert "<td>fgd</td>" in page
    assert "unallocated.png" in page
    assert "kube-default" in result.stderr  # the table goes to stderr when JSON owns stdout


def test_simulate_on_the_bundled_workload(tmp_path: Path) -> None:
    result = gpufleet("simulate", "--policy", "best-fit", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "openb_pod_list_default" in result.stdout
    assert "best-fit" in result.stdout
    run = json.loads((tmp_path / "gpufleet-report" / "results.json").read_text())["runs"][0]
    assert run["pods"] == 10903
    assert 5.0 < run["unallocated_at_100"] < 10.0


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        ("x1,12k,100,0,0,", ":3: field 'cpu_milli': expected a non-negative integer, got '12k'"),
        ("x1,100,-1,0,0,", ":3: field 'memory_mib': expected a non-negative integer, got -1"),
    ],
)
def test_bad_workload_row_is_one_line_and_exit_2(tmp_path: Path, row: str, expected: str) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\nok,1,1,0,0,\n" + row + "\n"
    )
    result = gpufleet("simulate", "--workload", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().count("\n") == 0
    assert result.stderr.startswith(f"gpufleet: error: {bad}{expected}")
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--workload", "missing.csv"), "missing.csv: no such file"),
        (("--nodes", "missing.csv"), "missing.csv: no such file"),
        (("--seeds", "51-42"), "ascending range"),
        (("--seeds", "abc"), "expected a seed"),
        (("--policy", "tetris"), "unknown policy 'tetris'"),
        (("--inflate", "-1"), "must be a positive number"),
        (("--inflate", "0"), "must be a positive number"),
    ],
)
def test_bad_options_exit_2(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    result = gpufleet("simulate", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


SCENARIOS = Path(__file__).parents[1] / "scenarios"
NOW = "--now=2026-01-01T01:00:00Z"


def test_schedule_prints_the_what_if_json(tmp_path: Path) -> None:
    done = gpufleet(
        "schedule", "-f", str(SCENARIOS / "preempt-minimal.yaml"), "-o", "json", NOW, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert set(document) == {"bindings", "evictions", "pending"}
    assert document["bindings"] == [
        {"pod": "team-a/urgent", "node": "n1", "gpus": [6, 7], "pipelined": True}
    ]
    assert sorted(e["pod"] for e in document["evictions"]) == ["team-a/low-6", "team-a/low-7"]
    assert {e["action"] for e in document["evictions"]} == {"preempt"}
    assert {e["for"] for e in document["evictions"]} == {"team-a/urgent"}
    assert document["pending"] == []


def test_schedule_table_and_pending_reasons(tmp_path: Path) -> None:
    done = gpufleet("schedule", "-f", str(SCENARIOS / "limit-blocks.yaml"), NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "bindings (2)" in done.stdout
    assert "queue team-a is at its limit of 2 GPUs" in done.stdout


def test_explain_tells_the_story(tmp_path: Path) -> None:
    done = gpufleet(
        "explain",
        "-f",
        str(SCENARIOS / "gang-all-or-nothing.yaml"),
        "ml/train-0",
        NOW,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "queue default: fair share 16 GPUs" in out
    assert "gang ml/train needs 3 pods, 2 fit" in out
    assert "preempt: no lower-priority preemptible pods in queue default" in out
    assert "n3: Insufficient nvidia.com/gpu" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["schedule", "-f", "missing.yaml"], "missing.yaml: no such file", id="no-file"
        ),
        pytest.param(
            ["explain", "-f", str(SCENARIOS / "limit-blocks.yaml"), "team-a/nobody"],
            "no pod team-a/nobody in the snapshot",
            id="unknown-pod",
        ),
        pytest.param(
            ["schedule", "-f", str(SCENARIOS / "limit-blocks.yaml"), "--now", "noon"],
            "expected an RFC 3339 time",
            id="bad-now",
        ),
        pytest.param(
            ["schedule", "-f", str(SCENARIOS / "limit-blocks.yaml"), "-o", "xml"],
            "-o must be json or table",
            id="bad-output",
        ),
    ],
)
def test_schedule_bad_input_exits_2(tmp_path: Path, args: list[str], message: str) -> None:
    done = gpufleet(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr


def test_overcommitted_snapshot_is_a_clear_error(tmp_path: Path) -> None:
    snapshot = tmp_path / "over.yaml"
    snapshot.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '4', memory: 8Gi, nvidia.com/gpu: '1'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n"
        "spec: {nodeName: n1, containers: [{name: c, resources: "
        "{limits: {nvidia.com/gpu: '2'}}}]}\n"
    )
    done = gpufleet("schedule", "-f", str(snapshot), cwd=tmp_path)
    assert done.returncode == 2
    assert "Pod default/a cannot run on node n1 as the snapshot says" in done.stderr


def test_the_readme_example(tmp_path: Path) -> None:
    example = Path(__file__).parents[2] / "examples" / "cluster.yaml"
    done = gpufleet("schedule", "-f", str(example), "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    actions = {e["pod"]: e["action"] for e in document["evictions"]}
    assert actions == {
        "inference/serve-batch-0": "preempt",
        "nlp/nlp-sweep-0": "reclaim",
        "nlp/nlp-sweep-1": "reclaim",
    }
    bound = {b["pod"] for b in document["bindings"]}
    assert bound == {
        "inference/llm-eval",
        "inference/llm-train",
        "vision/detector-0",
        "vision/detector-1",
    }


def test_a_running_slice_the_gpu_cannot_have_is_a_clear_error(tmp_path: Path) -> None:
    snapshot = tmp_path / "mig.yaml"
    snapshot.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: h1, labels: {nvidia.com/gpu.product: "
        "NVIDIA-H100-80GB-HBM3, gpufleet.io/mig-dynamic: 'true'}}\n"
        "status: {allocatable: {cpu: '8', memory: 8Gi, nvidia.com/gpu: '1'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: big, annotations: "
        "{gpufleet.io/gpu-index: '0'}}\nspec: {nodeName: h1, containers: [{name: c, "
        "resources: {limits: {nvidia.com/mig-1g.5gb: '1'}}}]}\n"
    )
    done = gpufleet("schedule", "-f", str(snapshot), cwd=tmp_path)
    assert done.returncode == 2
    assert "no MIG profile 1g.5gb" in done.stderr
    assert "Traceback" not in done.stderr


def test_explain_prints_the_claim_allocation_as_kubernetes_writes_it(tmp_path: Path) -> None:
    done = gpufleet(
        "explain",
        "-f",
        str(SCENARIOS / "dra-config-and-tolerations.yaml"),
        "ml/p",
        NOW,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "tolerations: [{key: maintenance, operator: Exists}]" in out
    assert '{source: FromClass, opaque: {driver: gpu.nvidia.com, parameters: {"sharing": ' in out
    assert "{source: FromClaim, requests: [gpu]" in out
    assert "values: [n1]" in out


def test_gang_devices_share_the_attribute(tmp_path: Path) -> None:
    done = gpufleet(
        "schedule",
        "-f",
        str(SCENARIOS / "dra-gang-device-match.yaml"),
        "-o",
        "json",
        NOW,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    devices = {
        (result["pool"], result["device"])
        for binding in json.loads(done.stdout)["bindings"]
        for results in binding["claims"].values()
        for result in results
    }
    assert devices == {("n1", "g2"), ("n1", "g3"), ("n2", "g0"), ("n2", "g1")}  # clique "b"


def test_a_stale_device_in_an_allocation_is_ignored(tmp_path: Path) -> None:
    snapshot = tmp_path / "stale.yaml"
    snapshot.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '8', memory: 8Gi}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
        "spec: {driver: d, nodeName: n1, pool: {name: n1}, devices: [{name: gpu-0}]}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: old}\n"
        "spec: {devices: {requests: [{name: r, exactly: {deviceClassName: g}}]}}\n"
        "status: {allocation: {devices: {results: [{request: r, driver: d, pool: n1, "
        "device: gpu-9}]}}}\n"
    )
    done = gpufleet("schedule", "-f", str(snapshot), "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
