"""``gpufleet sweep --ray``: a study on a real Ray (started here with 2 CPUs, as ``ray.init``
starts one) gives the results the process pool gives, and a Ray worker killed mid-study
costs no run: Ray runs its task again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ray

from gpufleet.report.results import timeless
from tests.study.helpers import (
    LONG,
    STUDY,
    kill,
    processes_named,
    sweep,
    sweep_args,
    wait_for,
    write_study,
)


def test_a_study_on_ray_gives_what_the_pool_gives_though_a_worker_is_killed(
    tmp_path: Path,
) -> None:
    assert ray.__version__.startswith("2.")
    pool = sweep(write_study(tmp_path / "pool"), tmp_path / "pool-cache", "--workers", "2")
    # The same runs, and ten longer ones: long enough to kill a worker in the middle.
    both = STUDY + LONG.split("  experiments:\n", 1)[1]
    study = write_study(tmp_path / "ray", both)
    process = subprocess.Popen(
        sweep_args(study, tmp_path / "ray-cache", "--ray", "local", "--workers", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: processes_named("ray::_execute_files"), "a Ray task to start")
        kill(processes_named("ray::_execute_files")[0])
        out, err = process.communicate(timeout=600)
    finally:
        process.kill()
    assert process.returncode == 0, err[-3000:]
    assert out.startswith("{"), out[:3000]  # Ray's own messages went to stderr
    on_ray = json.loads(out)
    assert (on_ray["executor"], on_ray["workers"]) == ("ray", 2)
    assert (on_ray["computed"], on_ray["failed"]) == (17, 0)
    mine = {r["key"]: r["result"] for r in on_ray["runs"]}
    assert [timeless(mine[r["key"]]) for r in pool["runs"]] == [
        timeless(r["result"]) for r in pool["runs"]
    ]
