"""``gpufleet schedule`` on a KAI, Volcano or Kueue cluster's snapshot: its pods taken over with
``--scheduler-name``, its queues and gangs read unless ``--vocabulary`` leaves them out."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.cli.test_app import gpufleet

KAI_SCENARIO = Path(__file__).parents[1] / "scenarios" / "kai-gang-and-gpu-sharing.yaml"
NOW = "2026-01-01T01:00:00Z"


def test_kai_pods_are_scheduled_under_kais_queues_and_gangs(tmp_path: Path) -> None:
    shutil.copy(KAI_SCENARIO, tmp_path / "kai.yaml")
    args = ["schedule", "-f", "kai.yaml", "--now", NOW, "-o", "json"]
    result = gpufleet(*args, "--scheduler-name", "kai-scheduler", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert {b["pod"]: b["gpus"] for b in out["bindings"]} == {
        "ml/gpu-sharing": [0],
        "ml/gpu-memory": [0],
    }
    assert sorted(p["pod"] for p in out["pending"]) == ["ml/job-0", "ml/job-1", "ml/job-2"]


def test_without_the_kai_vocabulary_its_objects_are_skipped_and_said(tmp_path: Path) -> None:
    shutil.copy(KAI_SCENARIO, tmp_path / "kai.yaml")
    result = gpufleet(
        *("schedule", "-f", "kai.yaml", "--now", NOW, "-o", "json"),
        *("--scheduler-name", "kai-scheduler", "--vocabulary", "gpufleet"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "the kai vocabulary is not read" in result.stderr
    # Without KAI's names the sharing pods ask for no GPU and the gang's pods are gangs of one.
    bound = {b["pod"] for b in json.loads(result.stdout)["bindings"]}
    assert {"ml/gpu-sharing", "ml/gpu-memory", "ml/job-0", "ml/job-1"} <= bound


def test_an_unknown_vocabulary_is_one_line_and_exit_2(tmp_path: Path) -> None:
    shutil.copy(KAI_SCENARIO, tmp_path / "kai.yaml")
    result = gpufleet("schedule", "-f", "kai.yaml", "--vocabulary", "slurm", cwd=tmp_path)
    assert result.returncode == 2
    assert "unknown vocabulary slurm; known:" in result.stderr
    assert "capacityscheduling, kai, kueue, volcano" in result.stderr
    assert "Traceback" not in result.stderr


def test_two_vocabularies_naming_one_queue_is_one_line_and_exit_2(tmp_path: Path) -> None:
    own = "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: default-queue}\n"
    (tmp_path / "kai.yaml").write_text(KAI_SCENARIO.read_text() + "\n---\n" + own)
    result = gpufleet("schedule", "-f", "kai.yaml", "--now", NOW, cwd=tmp_path)
    assert result.returncode == 2
    (line,) = [w for w in result.stderr.strip().splitlines() if not w.startswith("Warning:")]
    assert "Queue scheduling.run.ai/v2 default-queue" in line
    assert "Queue gpufleet.io/v1alpha1 default-queue" in line


VOLCANO_SCENARIO = (
    Path(__file__).parents[1] / "scenarios" / "volcano-gang-and-queue-capability.yaml"
)


def test_volcano_pods_are_held_by_its_queue_capability(tmp_path: Path) -> None:
    shutil.copy(VOLCANO_SCENARIO, tmp_path / "volcano.yaml")
    args = ["schedule", "-f", "volcano.yaml", "--now", NOW, "-o", "json"]
    result = gpufleet(*args, "--scheduler-name", "volcano", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert sorted(b["pod"] for b in out["bindings"]) == ["ml/train-0", "ml/train-1"]
    assert len(out["pending"]) == 3


def test_without_the_volcano_vocabulary_its_objects_are_skipped_and_said(tmp_path: Path) -> None:
    shutil.copy(VOLCANO_SCENARIO, tmp_path / "volcano.yaml")
    result = gpufleet(
        *("schedule", "-f", "volcano.yaml", "--now", NOW, "-o", "json"),
        *("--scheduler-name", "volcano", "--vocabulary", "kai"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "the volcano vocabulary is not read" in result.stderr
    # Without Volcano's queue there is no capability: the job's pods are bound.
    bound = {b["pod"] for b in json.loads(result.stdout)["bindings"]}
    assert {f"ml/test-job-default-nginx-{i}" for i in range(3)} <= bound


KUEUE_SCENARIO = Path(__file__).parents[1] / "scenarios" / "kueue-cluster-queue-quota-kept.yaml"


def test_kueue_pods_are_held_by_their_cluster_queues_quota(tmp_path: Path) -> None:
    shutil.copy(KUEUE_SCENARIO, tmp_path / "kueue.yaml")
    args = ["schedule", "-f", "kueue.yaml", "--now", NOW, "-o", "json"]
    result = gpufleet(*args, "--scheduler-name", "default-scheduler", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert sorted(b["pod"] for b in out["bindings"]) == [f"default/kueue-sleep-{x}" for x in "abc"]
    assert sorted(p["pod"] for p in out["pending"]) == [
        "default/kueue-sleep-d",
        "team-a/kueue-sleep-e",
    ]


def test_without_the_kueue_vocabulary_its_objects_are_skipped_and_said(tmp_path: Path) -> None:
    shutil.copy(KUEUE_SCENARIO, tmp_path / "kueue.yaml")
    result = gpufleet(
        *("schedule", "-f", "kueue.yaml", "--now", NOW, "-o", "json"),
        *("--scheduler-name", "default-scheduler", "--vocabulary", "gpufleet"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "the kueue vocabulary is not read" in result.stderr
    # Without Kueue's queues the pods are the default queue's: every one is bound.
    assert len(json.loads(result.stdout)["bindings"]) == 5


def test_a_bad_kueue_field_is_one_line_and_exit_2(tmp_path: Path) -> None:
    text = KUEUE_SCENARIO.read_text()
    (tmp_path / "kueue.yaml").write_text(text.replace("nominalQuota: 9\n", "nominalQuota: -9\n"))
    result = gpufleet("schedule", "-f", "kueue.yaml", "--now", NOW, cwd=tmp_path)
    assert result.returncode == 2
    (line,) = [w for w in result.stderr.strip().splitlines() if not w.startswith("Warning:")]
    assert line == (
        "gpufleet: error: kueue.yaml: ClusterQueue cluster-queue: field "
        "'spec.resourceGroups[0].flavors[0].resources[0].nominalQuota': expected a "
        "non-negative quantity such as '500m', '4' or '80Gi', got -9"
    )


def test_a_cluster_queue_and_a_queue_of_one_name_is_one_line_and_exit_2(tmp_path: Path) -> None:
    own = "apiVersion: gpufleet.io/v1alpha1\nkind: Queue\nmetadata: {name: cluster-queue}\n"
    (tmp_path / "kueue.yaml").write_text(KUEUE_SCENARIO.read_text() + "---\n" + own)
    result = gpufleet("schedule", "-f", "kueue.yaml", "--now", NOW, cwd=tmp_path)
    assert result.returncode == 2
    (line,) = [w for w in result.stderr.strip().splitlines() if not w.startswith("Warning:")]
    assert "Queue gpufleet.io/v1alpha1 cluster-queue" in line
    assert "ClusterQueue kueue.x-k8s.io/v1beta2 cluster-queue" in line
