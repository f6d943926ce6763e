"""``gpufleet sweep --ray``: a study on a real Ray (started here with 2 CPUs, as ``ray.init``
starts one) gives the results the process pool gives, and a Ray worker killed mid-study
costs no run: Ray runs its task again."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import ray

from tests.study.helpers import (
    LONG,
    kill,
    processes_named,
    sweep,
    sweep_args,
    timeless,
    wait_for,
    write_study,
)


def test_a_study_on_ray_gives_what_the_pool_gives(tmp_path: Path) -> None:
    assert ray.__version__.startswith("2.")
    study = write_study(tmp_path / "study")
    pool = sweep(study, tmp_path / "pool-cache", "--workers", "2")
    on_ray = sweep(study, tmp_path / "ray-cache", "--ray", "local", "--workers", "2")
    assert (on_ray["executor"], on_ray["workers"]) == ("ray", 2)
    assert (on_ray["computed"], on_ray["failed"]) == (7, 0)
    assert [timeless(r["result"]) for r in on_ray["runs"]] == [
        timeless(r["result"]) for r in pool["runs"]
    ]
    assert [r["key"] for r in on_ray["runs"]] == [r["key"] for r in pool["runs"]]


def test_a_ray_worker_killed_mid_study_costs_no_run(tmp_path: Path) -> None:
    study = write_study(tmp_path / "study", LONG)
    cache = tmp_path / "cache"
    process = subprocess.Popen(
        sweep_args(study, cache, "--ray", "local", "--workers", "2"),
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
    assert out.startswith("{"), (out[:3000], err[-3000:])
    doc = json.loads(out)
    assert (doc["computed"], doc["failed"]) == (8, 0)
