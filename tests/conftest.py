"""A real Prometheus (Debian's ``prometheus`` package) serving the recorded cluster of
``tests/cost/recording.py``: its OpenMetrics text turned into a TSDB block by ``promtool tsdb
create-blocks-from openmetrics``, then served on a loopback port, once per test session.

No binary, no test: the tests that need it fail, naming the package to install."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cost import recording

READY_TIMEOUT = 30.0


def _binary(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(
            f"{name} is not on PATH: install Debian's prometheus package "
            "(apt-get install --no-install-recommends prometheus), as .ci/run does"
        )
    return path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="session")
def prometheus_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The URL of a Prometheus holding the recorded cluster's two hours."""
    prometheus, promtool = _binary("prometheus"), _binary("promtool")
    root = tmp_path_factory.mktemp("prometheus")
    source = root / "cluster.om"
    source.write_text(recording.openmetrics(), encoding="utf-8")
    data = root / "data"
    subprocess.run(
        [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    config = root / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\n", encoding="utf-8")
    port = _free_port()
    log = (root / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            prometheus,
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",  # the recording is old: keep it
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, root / "prometheus.log")
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited with {process.returncode}:\n{log.read_text()}")
        try:
            if httpx.get(f"{url}/-/ready", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    pytest.fail(f"prometheus was not ready within {READY_TIMEOUT:g} s:\n{log.read_text()}")
