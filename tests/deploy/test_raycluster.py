"""The RayCluster of policy studies (``deploy/ray/raycluster.yaml``, docs/sweep.md): one image
for the head and the workers, a Ray version that gpufleet's ``ray`` extra accepts, the
client port the docs forward, and pods that do not run as root."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[2]
MANIFEST = ROOT / "deploy" / "ray" / "raycluster.yaml"


def cluster() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return doc


def test_it_is_a_raycluster_of_kuberay() -> None:
    doc = cluster()
    assert (doc["apiVersion"], doc["kind"]) == ("ray.io/v1", "RayCluster")
    assert doc["metadata"]["namespace"] == "gpufleet-studies"


def test_head_and_workers_run_one_image_as_a_user_that_is_not_root() -> None:
    spec = cluster()["spec"]
    templates = [spec["headGroupSpec"]["template"]] + [
        g["template"] for g in spec["workerGroupSpecs"]
    ]
    images = {c["image"] for t in templates for c in t["spec"]["containers"]}
    assert images == {"registry.example.com/gpufleet-ray:0.1.0"}
    for t in templates:
        assert t["spec"]["securityContext"]["runAsNonRoot"] is True
        assert t["spec"]["securityContext"]["runAsUser"] == 65532  # the image's user


def test_the_ray_version_is_one_the_extra_accepts() -> None:
    version = cluster()["spec"]["rayVersion"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    low, high = re.search(r'ray = \["ray\[client\]>=([0-9.]+),<([0-9.]+)"\]', pyproject).groups()  # type: ignore[union-attr]
    assert _version(low) <= _version(version) < _version(high)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def test_the_head_schedules_and_opens_the_client_port_the_docs_forward() -> None:
    head = cluster()["spec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-cpus"] == "0"
    ports = {
        p["name"]: p["containerPort"] for p in head["template"]["spec"]["containers"][0]["ports"]
    }
    assert ports["client"] == 10001
    assert (
        "service/gpufleet-studies-head-svc 10001:10001" in (ROOT / "docs" / "sweep.md").read_text()
    )
