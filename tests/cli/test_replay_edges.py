"""The replay's edges: its table under a pipe, the default run, the windows of a trace
and the plot's axes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpufleet.load.traces.replay_inputs import load_replay
from gpufleet.model.workload import ReplayJob
from gpufleet.plugins.registry import REPLAY_POLICIES
from gpufleet.report.replay_plot import replay_figure
from gpufleet.sim.replay import Replay
from gpufleet.sim.window import trace_window
from tests.builders import pod
from tests.cli.test_app import gpufleet
from tests.cli.test_replay import PHILLY, write


def test_the_table_is_readable_under_a_pipe(tmp_path: Path) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    done = gpufleet("simulate", "--protocol", "replay", "--workload", str(trace), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "…" not in done.stdout
    header = next(line for line in done.stdout.splitlines() if "policy" in line)
    for column in ("mean wait h", "p95 wait h", "alloc %", "lost GPU-h"):
        assert column in header
    assert any("fifo-gang" in line for line in done.stdout.splitlines())


def test_the_default_replay_shows_queueing(tmp_path: Path) -> None:
    done = gpufleet(
        "simulate", "--protocol", "replay", "--policy", "fifo-gang", "--json", "-", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert run["jobs"] == 701  # trace days 137-140 of the bundled openb pod list
    assert run["simulated_s"] == 3 * 86400
    assert run["mean_wait_s"] > 600
    assert run["p95_wait_s"] > 3600
    assert run["gpu_allocation_mean"] > 50
    assert "24 GPUs (bundled openb-replay-cluster.yaml), trace days 137-140" in " ".join(
        done.stderr.split()
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("--since", "-1"), "--since must be zero or more seconds"),
        (("--since", "100", "--until", "50"), "--until (50) must be after --since (100)"),
        (("--since", "1e12"), "no job arrives at or after --since 1e+12"),
        (("--since", "10"), "--since applies to --protocol replay"),
    ],
)
def test_bad_windows_exit_2(tmp_path: Path, args: tuple[str, ...], expected: str) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    protocol = () if "applies" in expected else ("--protocol", "replay")
    done = gpufleet("simulate", *protocol, "--workload", str(trace), *args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert expected in " ".join(done.stderr.replace("│", " ").split())
    assert "Traceback" not in done.stderr


def test_a_window_drops_earlier_jobs_and_starts_the_clock_there() -> None:
    spec = pod("p").gpus(1).obj()
    jobs = [ReplayJob(f"j{t}", "q", float(t), 10.0, spec) for t in (0, 50, 100, 150)]
    assert [(j.name, j.arrival_s) for j in trace_window(jobs, 100)] == [
        ("j100", 0.0),
        ("j150", 50.0),
    ]
    assert trace_window(jobs, 0) == jobs


def test_since_and_until_replay_a_window(tmp_path: Path) -> None:
    trace = write(tmp_path / "philly.csv", PHILLY)
    done = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(trace), "--policy", "fifo-gang",
        "--since", "10", "--until", "70", "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run,) = json.loads(done.stdout)["runs"]
    assert run["jobs"] == 2  # the jobs at 10 s and 60 s
    assert run["simulated_s"] == 60


def test_no_axis_of_the_replay_plot_goes_below_zero(tmp_path: Path) -> None:
    data = load_replay(write(tmp_path / "philly.csv", PHILLY))
    runs = [
        Replay(data.nodes, data.jobs, REPLAY_POLICIES[name], workload="philly").run()
        for name in ("fifo-gang", "gpufleet")
    ]
    assert all(r.mean_wait_s == 0 for r in runs)  # all-zero waits: the case that went negative
    figure = replay_figure(runs, sum(n.gpus for n in data.nodes))
    every = [*figure.get_axes(), *(c for ax in figure.get_axes() for c in ax.child_axes)]
    axes = [ax for ax in every if ax.axison]
    assert len(axes) == 4  # two stacks, pending GPUs, the wait CDF
    for ax in axes:
        for low, high in (ax.get_xlim(), ax.get_ylim()):
            assert 0 <= low < high
        shown = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert min(shown) >= 0
        shown = [t for t in ax.get_yticks() if ax.get_ylim()[0] <= t <= ax.get_ylim()[1]]
        assert min(shown) >= 0
