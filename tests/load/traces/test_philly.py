"""The Philly trace reader: jobs as gangs of 8-GPU servers, and one clear error per bad row."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.traces.philly import gang_shape, load_philly

HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "philly.csv"
    path.write_text(HEADER + body)
    return path


@pytest.mark.parametrize(
    ("gpus", "shape"), [(1, (1, 1)), (8, (1, 8)), (12, (2, 6)), (16, (2, 8)), (24, (3, 8))]
)
def test_gang_shape(gpus: int, shape: tuple[int, int]) -> None:
    assert gang_shape(gpus) == shape


def test_jobs_in_submission_order(tmp_path: Path) -> None:
    jobs = load_philly(
        write(tmp_path, "2017-10-09 07:01:55,66.0,1,66.0,a\n2017-10-09 06:13:03,10,16,160,b\n")
    )
    assert [(j.arrival_s, j.pods, j.gpus_per_pod, j.queue) for j in jobs] == [
        (0.0, 2, 8, "b"),
        (2932.0, 1, 1, "a"),
    ]


def test_the_real_trace_loads() -> None:
    trace = Path(__file__).resolve().parents[4] / "shared" / "traces" / "philly" / "philly.csv"
    if not trace.exists():
        pytest.skip("the shared Philly trace is not next to this checkout")
    jobs = load_philly(trace)
    assert len(jobs) == 82_247
    assert max(j.gpus for j in jobs) == 128


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("yesterday,1,1,1,a\n", "philly.csv:2: field 'timestamp': expected a time like"),
        ("2017-10-09 07:01:55,-1,1,1,a\n", "field 'duration': expected a non-negative number"),
        ("2017-10-09 07:01:55,1,0.5,1,a\n", "field 'num_gpus': expected a whole number"),
        ("2017-10-09 07:01:55,1,1,1,\n", "field 'cluster': expected a cluster name"),
        ("", "no jobs in the trace"),
    ],
)
def test_bad_rows(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        load_philly(write(tmp_path, body))
    assert message in str(caught.value)


def test_missing_columns(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("timestamp,gpus\n")
    with pytest.raises(InputError, match="missing column"):
        load_philly(path)
