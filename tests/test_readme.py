"""Every command line of the README runs: the ``gpufleet`` lines in order in one directory (the
cost line reads the replay's report), ``serve`` against the API emulator, the Helm line through
``helm template``. A README example that stops working fails here, not in a reader's shell."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.apiserver.fixtures import emulator  # noqa: F401 (the fixture)
from tests.apiserver.server import Emulator
from tests.deploy.chart import CHART
from tests.deploy.chart import helm as chart_helm
from tests.kube.process.test_serve import add_node, add_pod, bound

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def command_lines() -> list[list[str]]:
    """The README's shell lines, continuations joined and comments dropped, as words."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    lines: list[list[str]] = []
    for block in BLOCK.findall(text):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                lines.append(words)
    return lines


def of(program: str, subcommand: str | None = None) -> list[list[str]]:
    return [
        w for w in command_lines() if w[0] == program and (subcommand is None or w[1] == subcommand)
    ]


def test_the_readme_shows_every_command_once_at_least() -> None:
    assert {w[1] for w in of("gpufleet")} == {
        "simulate", "sweep", "schedule", "explain", "serve", "cost",
    }  # fmt: skip
    assert of("make") == [["make", "demo"], ["make", "test"]]
    assert of("helm")


def test_the_offline_commands_run(tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for words in of("gpufleet"):
        if words[1] == "serve":
            continue
        result = subprocess.run(
            [sys.executable, "-m", "gpufleet", *words[1:]],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            check=False,
            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},  # sweep's results
        )
        assert result.returncode == 0, f"{shlex.join(words)}: {result.stderr}"
        assert result.stdout


def test_serve_runs_against_a_cluster(emulator: Emulator, tmp_path: Path) -> None:  # noqa: F811
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    for words in of("gpufleet", "serve"):
        command = [sys.executable, "-m", "gpufleet", *words[1:], "--secure-port", "0"]
        process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
        try:
            time.sleep(3)
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            if "--dry-run" in words:
                assert not bound(emulator)
        finally:
            process.send_signal(signal.SIGTERM)
            _, stderr = process.communicate(timeout=15)
        assert process.returncode == 0, f"{shlex.join(words)}: {stderr}"


def test_the_helm_lines_render(tmp_path: Path) -> None:
    helm = chart_helm(tmp_path)
    for words in of("helm"):
        assert words[1] == "install"
        args = [str(CHART) if w == "deploy/helm/gpufleet" else w for w in words[2:]]
        assert "kind: Deployment" in helm("template", *args)
