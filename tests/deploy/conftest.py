"""The chart's tests run the real helm, taken from the kubectl wheel of the dev extra
(``tests/apiserver/kubectl.py``); without it (another platform) they are skipped."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.apiserver import kubectl

CHART = Path(__file__).parents[2] / "deploy" / "helm" / "gpufleet"
NAMESPACE = "gpufleet-system"
RELEASE = "gf"

Render = Callable[..., list[dict[str, Any]]]


@pytest.fixture(scope="session")
def helm(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., str]:
    """Run helm with its cache, config and data in a directory of the test session's."""
    why = kubectl.unavailable()
    if why:
        pytest.skip(why)
    binary = kubectl.helm()
    home = tmp_path_factory.mktemp("helm")
    env = {
        **os.environ,
        **{f"HELM_{d}_HOME": str(home / d.lower()) for d in ("CACHE", "CONFIG", "DATA")},
    }

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, check=False
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    return run


@pytest.fixture(scope="session")
def render(helm: Callable[..., str]) -> Render:
    """``helm template`` of the chart with ``--set`` values, as the objects it renders."""

    def rendered(*values: str) -> list[dict[str, Any]]:
        args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
        for value in values:
            args += ["--set", value]
        return [doc for doc in yaml.safe_load_all(helm(*args)) if doc]

    return rendered
