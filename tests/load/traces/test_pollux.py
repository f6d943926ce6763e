"""The Pollux workloads reader: run times from the authors' Tiresias runs (the shortest
completion of each application, GPU count and batch size), jobs as gangs of 4-GPU nodes,
and one clear error per bad row or result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.traces.pollux import LOADS, load_workload, run_times, trace_jobs
from gpufleet.load.traces.replay_inputs import load_pollux

HEADER = "name,time,application,num_replicas,batch_size\n"
WORKLOAD = "cifar10-0,10,cifar10,6,2048\nncf-1,5,ncf,1,32768\nbig-2,20,imagenet,24,3200\n"


def folder(load: str) -> str:
    return "workloads" if load == "1.0" else f"workloads-{load}"


def write_root(tmp_path: Path, body: str = WORKLOAD, jcts: dict[str, object] | None = None) -> Path:
    """A pollux-osdi21 folder: the same workload at every load; under Tiresias its jobs
    take 900 s, 80 s and 30,000 s at load 0.5 and longer (they waited) at the others."""
    root = tmp_path / "pollux-osdi21"
    for i, load in enumerate(LOADS):
        (root / folder(load)).mkdir(parents=True)
        (root / folder(load) / "workload-1.csv").write_text(HEADER + body)
        result = root / "results-jobload" / f"tiresias-{load}"
        result.mkdir(parents=True)
        times = jcts or {"cifar10-0": 900 + 100 * i, "ncf-1": 80 + i, "big-2": 30_000 * (1 + i)}
        (result / "summary.json").write_text(json.dumps({"jcts": {"workload-1": times}}))
    return root


def test_a_kinds_run_time_is_its_shortest_completion_under_tiresias(tmp_path: Path) -> None:
    assert run_times(write_root(tmp_path)) == {
        ("cifar10", 6, 2048): 900.0,
        ("ncf", 1, 32768): 80.0,
        ("imagenet", 24, 3200): 30_000.0,
    }


def test_jobs_are_gangs_of_4_gpu_nodes_with_their_run_times(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    path = root / "workloads" / "workload-1.csv"
    jobs = trace_jobs(path, run_times(root), prefix="w1-", offset_s=100.0)
    assert [(j.name, j.arrival_s, j.duration_s, j.pods, j.gpus_per_pod) for j in jobs] == [
        ("w1-ncf-1", 105.0, 80.0, 1, 1),
        ("w1-cifar10-0", 110.0, 900.0, 2, 3),
        ("w1-big-2", 120.0, 30_000.0, 6, 4),
    ]


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("a,1,ncf,0,1\n", "workload-1.csv:2: field 'num_replicas': expected a whole number >= 1"),
        ("a,1,ncf,1.5,1\n", "field 'num_replicas': expected a whole number >= 1, got '1.5'"),
        ("a,-1,ncf,1,1\n", "field 'time': expected a non-negative number"),
        ("a,1,,1,1\n", "field 'application': expected an application"),
        (",1,ncf,1,1\n", "field 'name': expected a job name"),
        ("", "no jobs in the workload"),
        ("a,1,ncf,1,1\na,2,ncf,1,1\n", "workload-1.csv:3: field 'name': job a appears twice"),
    ],
)
def test_bad_rows(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "workload-1.csv"
    path.write_text(HEADER + body)
    with pytest.raises(InputError) as caught:
        load_workload(path)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("jcts", "message"),
    [
        ({"nope-9": 5}, "jcts.workload-1.nope-9: no such job in workload-1.csv"),
        ({"ncf-1": "fast"}, "jcts.workload-1.ncf-1: expected seconds, got 'fast'"),
        ({"ncf-1": -3}, "jcts.workload-1.ncf-1: expected seconds > 0"),
        ({"ncf-1": 10**400}, "jcts.workload-1.ncf-1: expected seconds > 0"),
    ],
)
def test_bad_results(tmp_path: Path, jcts: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as caught:
        run_times(write_root(tmp_path, jcts=jcts))
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "expected a JSON object"),
        ('{"jcts": ' + "[" * 100_000 + "]" * 100_000 + "}", "expected a JSON object"),
        ('{"jcts": {"a\\u0000b": {}}}', "jcts: expected workload names like workload-1"),
        ('{"jcts": {"../x": {}}}', "jcts: expected workload names like workload-1"),
    ],
)
def test_a_bad_summary_names_the_file(tmp_path: Path, text: str, message: str) -> None:
    root = write_root(tmp_path)
    (root / "results-jobload" / "tiresias-2.0" / "summary.json").write_text(text)
    with pytest.raises(InputError, match=rf"tiresias-2.0/summary.json: {message}"):
        run_times(root)


def test_a_job_whose_kind_never_ran_under_tiresias_is_an_error(tmp_path: Path) -> None:
    root = write_root(tmp_path)
    path = tmp_path / "other.csv"
    path.write_text(HEADER + "bert-0,1,bert,8,384\n")
    with pytest.raises(InputError, match="job bert-0: no run time known for bert on 8 GPU"):
        trace_jobs(path, run_times(root))


def test_the_real_workloads_load() -> None:
    root = Path(__file__).resolve().parents[4] / "shared" / "traces" / "philly" / "pollux-osdi21"
    if not root.exists():
        pytest.skip("the shared Pollux workloads are not next to this checkout")
    data = load_pollux(root)
    assert len(data.jobs) == 8 * 160
    assert sum(n.gpus for n in data.nodes) == 64
    assert max(j.pods for j in data.jobs) == 12  # imagenet on 48 GPUs
