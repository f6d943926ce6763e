"""``gpufleet simulate --protocol replay`` end to end, and the files it reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.load.traces.openb import load_timed_pods
from gpufleet.load.traces.replay_inputs import load_replay, trace_format
from tests.cli.test_app import gpufleet

PHILLY = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-09 07:00:00,3600,16,57600,alpha
2017-10-09 07:00:10,600,1,600,beta
2017-10-09 07:01:00,1200,8,9600,beta
2017-10-09 07:02:00,900,4,3600,alpha
"""

OPENB = (
    (
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
    )
    + """p0,4000,8192,1,1000,,LS,Running,0,3600,0
p1,2000,4096,1,500,,LS,Succeeded,100,700,200
p2,2000,4096,1,500,,BE,Pending,300,400,
p3,8000,16384,2,1000,,LS,Running,500,,600
"""
)

CLUSTER = """apiVersion: gpufleet.io/v1alpha1
kind: NodePool
metadata: {name: pool}
spec:
  count: 3
  template:
    metadata: {labels: {nvidia.com/gpu.product: A100}}
    status: {allocatable: {cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}
  domains:
  - {label: topology.gpufleet.io/rack, size: 2}
"""

QUEUES = """apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: alpha}
spec:
  resources:
    gpu: {quota: 16}
---
apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: beta}
spec:
  resources:
    gpu: {quota: 8}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_format_is_read_from_the_header(tmp_path: Path) -> None:
    assert trace_format(write(tmp_path / "a.csv", PHILLY)) == "philly"
    assert trace_format(write(tmp_path / "b.csv", OPENB)) == "openb"
    with pytest.raises(InputError, match="neither an openb pod list"):
        trace_format(write(tmp_path / "c.csv", "a,b\n1,2\n"))


def test_openb_times_become_arrivals_and_run_times(tmp_path: Path) -> None:
    pods = load_timed_pods(write(tmp_path / "pods.csv", OPENB))
    assert [(p.arrival_s, p.duration_s) for p in pods] == [
        (0.0, 3600.0),  # deletion - scheduled
        (100.0, 500.0),
        (300.0, 100.0),  # never scheduled: creation to deletion
        (500.0, 3000.0),  # never deleted: runs to the trace's last time (3600)
    ]


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("p9,1,1,0,0,,LS,Running,50,40,50", "deletion_time"),
        ("p9,1,1,0,0,,LS,Running,50,90,20", "scheduled_time"),
        ("p9,1,1,0,0,,LS,Running,x,90,50", "creation_time"),
    ],
)
def test_bad_openb_times_name_the_line_and_field(tmp_path: Path, row: str, field: str) -> None:
    path = write(tmp_path / "pods.csv", OPENB + row + "\n")
    with pytest.raises(InputError) as error:
        load_timed_pods(path)
    assert error.value.line == 6
    assert error.value.field == field


def test_node_pool_expands_to_nodes_with_topology(tmp_path: Path) -> None:
    snapshot = load_snapshot(write(tmp_path / "c.yaml", CLUSTER))
    assert [n.name for n in snapshot.nodes] == ["pool-000", "pool-001", "pool-002"]
    assert [n.labels["topology.gpufleet.io/rack"] for n in snapshot.nodes] == [
        "pool-rack-00",
        "pool-rack-00",
        "pool-rack-01",
    ]
    assert {n.gpus for n in snapshot.nodes} == {8}
    assert snapshot.nodes[0].gpu_model == "A100"
    assert snapshot.topology == ("topology.gpufleet.io/rack", "kubernetes.io/hostname")


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (("count: 3", "count: 0"), "spec.count"),
        (("size: 2", "size: -1"), "spec.domains[0].size"),
        (
            ('nvidia.com/gpu: "8"', "nvidia.com/gpu: lots"),
            "spec.template.status.allocatable.nvidia.com/gpu",
        ),
        (("count: 3", "count: 1000000"), "spec.count"),
        (
            ("size: 2", "size: 2}\n  - {label: topology.gpufleet.io/rack, size: 1"),
            "spec.domains[1].label",
        ),
        (
            ("size: 2", "size: 2}\n  - {label: topology.gpufleet.io/zone, size: 3"),
            "spec.domains[1].size",
        ),
        (("topology.gpufleet.io/rack", "kubernetes.io/hostname"), "spec.domains[0].label"),
    ],
)
def test_bad_node_pool_names_the_field(tmp_path: Path, change: tuple[str, str], field: str) -> None:
    path = write(tmp_path / "c.yaml", CLUSTER.replace(*change))
    with pytest.raises(InputError) as error:
        load_snapshot(path)
    assert error.value.field == field
    assert "NodePool pool" in str(error.value)


def test_philly_defaults_to_the_bundled_cluster_and_tenant_queues(tmp_path: Path) -> None:
    data = load_replay(write(tmp_path / "philly.csv", PHILLY))
    assert data.format == "philly"
    assert len(data.nodes) == 80
    assert sum(n.gpus for n in data.nodes) == 640
    assert data.topology[0] == "topology.gpufleet.io/rack"
    assert data.queues == ()  # one per tenant, made by the replay
    assert [(j.pods, j.spec.num_gpu, j.queue) for j in data.jobs] == [
        (2, 8, "alpha"),
        (1, 1, "beta"),
        (1, 8, "beta"),
        (1, 4, "alpha"),
    ]


def test_replay_command_writes_table_json_and_plots(tmp_path: Path) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    cluster = write(tmp_path / "cluster.yaml", CLUSTER)
    queues = write(tmp_path / "queues.yaml", QUEUES)
    result = gpufleet(
        "simulate",
        "--protocol",
        "replay",
        "--workload",
        str(trace),
        "--cluster",
        str(cluster),
        "--queues",
        str(queues),
        "--json",
        "-",
        "--out",
        "report",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    runs = json.loads(result.stdout)["runs"]
    assert [r["policy"] for r in runs] == ["kube-default", "fifo-gang", "gang-backfill", "gpufleet"]
    for run in runs:
        assert run["protocol"] == "replay"
        assert run["workload"] == "philly"
        assert run["jobs"] == 4
        assert run["finished_jobs"] == 4  # 24 GPUs take every job in turn
        assert {q["queue"] for q in run["queues"]} == {"alpha", "beta"}
        assert run["capacity_gpu_hours"] > 0
        assert run["never_started_jobs"] == 0
        assert [c["size"] for c in run["sizes"]] == ["1", "2-4", "5-8", ">8"]
        assert sum(c["jobs"] for c in run["sizes"]) == 4
    for name in ("results.json", "replay.png", "index.html"):
        assert (tmp_path / "report" / name).stat().st_size > 0
    page = (tmp_path / "report" / "index.html").read_text()
    assert "gpufleet" in page
    assert "Waits by job size" in page


def test_until_cuts_the_replay_short(tmp_path: Path) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    result = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(trace), "--policy", "fifo-gang",
        "--until", "30", "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run,) = json.loads(result.stdout)["runs"]
    assert run["jobs"] == 2
    assert run["simulated_s"] == 30


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--protocol", "replay", "--policy", "best-fit"), "unknown replay policy 'best-fit'"),
        (("--protocol", "replay", "--inflate", "2"), "--inflate applies to --protocol fill"),
        (("--until", "10"), "--until applies to --protocol replay"),
        (("--prices", "p.yaml"), "--prices applies to --protocol replay"),
        (("--protocol", "replay", "--until", "0"), "--until must be a positive number"),
        (("--protocol", "replay", "--until", "inf"), "--until must be a positive number"),
        (("--protocol", "rewind"), "--protocol must be fill, replay or balance"),
        (("--protocol", "replay", "--format", "csv"), "expected one of openb, philly"),
        (("--protocol", "replay", "--cluster", "missing.yaml"), "missing.yaml: no such file"),
    ],
)
def test_bad_replay_options_exit_2(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    result = gpufleet("simulate", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert expected in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr


def test_bad_files_for_a_replay_exit_2(tmp_path: Path) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    empty = write(
        tmp_path / "empty.yaml",
        "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: q}\n",
    )
    result = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(trace), "--cluster", str(empty),
        cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2
    assert "holds no Node (nor NodePool)" in result.stderr
    bad = write(tmp_path / "bad.csv", PHILLY + "2017-10-09 07:03:00,60,zero,0,beta\n")
    result = gpufleet("simulate", "--protocol", "replay", "--workload", str(bad), cwd=tmp_path)
    assert result.returncode == 2
    assert f"{bad}:6: field 'num_gpus'" in result.stderr
