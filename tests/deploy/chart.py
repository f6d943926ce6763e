"""The chart rendered by the real helm (``tests/apiserver/kubectl.py``), for its tests and for
the live benchmark, which runs the scheduler with the RBAC the chart grants."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from tests.apiserver import kubectl
from tests.apiserver.rbac import Authorizer, Identity

JSON = dict[str, Any]
CHART = Path(__file__).parents[2] / "deploy" / "helm" / "gpufleet"
NAMESPACE = "gpufleet-system"
RELEASE = "gf"


def helm(home: Path) -> Callable[..., str]:
    """Run helm with its cache, config and data under ``home``; a failure raises with its
    stderr."""
    binary = kubectl.helm()
    env = {
        **os.environ,
        **{f"HELM_{d}_HOME": str(home / d.lower()) for d in ("CACHE", "CONFIG", "DATA")},
    }

    def run(*args: str) -> str:
        result = subprocess.run(
            [str(binary), *args], capture_output=True, text=True, env=env, check=False
        )
        if result.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)}: {result.stderr}")
        return result.stdout

    return run


def render(run: Callable[..., str], *values: str) -> list[JSON]:
    """``helm template`` of the chart with ``--set`` values, as the objects it renders."""
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for value in values:
        args += ["--set", value]
    return [doc for doc in yaml.safe_load_all(run(*args)) if doc]


def service_account(objects: list[JSON]) -> Identity:
    """The identity the chart's pods run as."""
    [account] = [o for o in objects if o["kind"] == "ServiceAccount"]
    meta = account["metadata"]
    return Identity.service_account(meta["namespace"], meta["name"])


def authorizer(
    objects: list[JSON], token: str, others: dict[str, Identity] | None = None
) -> Authorizer:
    """RBAC as the rendered objects grant it, ``token`` being the ServiceAccount's and
    ``others`` other identities' (a scraper's)."""
    return Authorizer(objects, {**(others or {}), token: service_account(objects)})
