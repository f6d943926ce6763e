"""``gpufleet serve`` as a process against the emulator: it connects through a kubeconfig,
becomes ready once it has listed the cluster, binds a pod, serves its metrics under the
pinned names, and stops cleanly on SIGTERM; a kubeconfig that does not exist is one line
and exit code 2."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gpufleet.kube.cpu import PHASES
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, add_pod, bound

GOLDEN = Path(__file__).with_name("metric_names.txt")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def metric_names(text: str) -> list[str]:
    return sorted({line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")})


def test_serve_binds_reports_ready_and_exports_its_metrics(
    emulator: Emulator, tmp_path: Path
) -> None:
    add_node(emulator, "n0")
    env = {**os.environ, "KUBECONFIG": "/nonexistent"}  # the flag wins over the variable
    process, base = start_serving(emulator, tmp_path, "--period", "0.2", env=env)
    deadline = time.monotonic() + 20
    try:
        assert httpx.get(f"{base}/healthz", verify=False).text == "ok"
        add_pod(emulator, "a", 2)
        while "a" not in bound(emulator):
            assert time.monotonic() < deadline, "never bound"
            time.sleep(0.1)
        admin = {"Authorization": f"Bearer {emulator.token}"}
        names = metric_names(httpx.get(f"{base}/metrics", headers=admin, verify=False).text)
        assert names == GOLDEN.read_text().split()
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    assert 'msg="bound default/a to n0" action="bind" pod="default/a" node="n0"' in stderr


def test_a_missing_kubeconfig_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = subprocess.run(
        [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(missing)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"gpufleet: error: {missing}: no such kubeconfig file"
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--leader-elect=maybe",), "--leader-elect must be true or false, got 'maybe'"),
        (("--log-format", "xml"), "--log-format must be text or json, got 'xml'"),
        (
            ("--leader-elect-renew-deadline", "20"),
            "--leader-elect-renew-deadline must be shorter than --leader-elect-lease-duration",
        ),
        (
            ("--leader-elect-retry-period", "9s"),
            "--leader-elect-renew-deadline must be longer than 1.2 x --leader-elect-retry-period",
        ),
        (
            ("--leader-elect-resource-name", "a/b"),
            "--leader-elect-resource-name must be a Kubernetes name",
        ),
        (
            ("--forecast-prometheus", "prometheus:9090"),
            "Invalid value for '--forecast-prometheus': expected a Prometheus URL such as "
            "http://prometheus:9090, got 'prometheus:9090'",
        ),
        (
            ("--vocabulary", "kai", "--vocabulary", "lsf"),
            "Invalid value for '--vocabulary': lsf is not read by the live scheduler; it "
            "reads capacityscheduling, kai, volcano",
        ),
    ],
)
def test_bad_serve_options_exit_2_with_the_option_named(
    args: tuple[str, ...], message: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "gpufleet", "serve", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert message in " ".join(result.stderr.replace("│", " ").split())
    assert "Traceback" not in result.stderr


def test_a_dry_run_elects_on_a_lease_of_its_own(emulator: Emulator, tmp_path: Path) -> None:
    """A shadow beside the real scheduler must never take the real one's Lease: it elects
    on ``gpufleet-dry-run``, and tells the pod what it would do."""
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
    command += ["--dry-run", "--secure-port", "0", "--period", "0.2"]
    env = {**os.environ, "KUBECONFIG": "/nonexistent"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    leases = emulator.store.resource("coordination.k8s.io", "v1", "leases")
    events = emulator.store.resource("events.k8s.io", "v1", "events")
    try:
        deadline = time.monotonic() + 20
        while not any(e["reason"] == "WouldSchedule" for e in emulator.store.list(events)[0]):
            assert time.monotonic() < deadline, "never told the pod"
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.1)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    names = {lease["metadata"]["name"] for lease in emulator.store.list(leases)[0]}
    assert names == {"gpufleet-dry-run"}
    assert bound(emulator) == {}


def test_cpu_phases_count_where_the_scheduler_spends_its_cpu(
    emulator: Emulator, tmp_path: Path
) -> None:
    """With --cpu-phases, /metrics says how much CPU each phase took: the watch that read the
    pod, the cycle that placed it, the bind and the Scheduled event; together no more than
    the process' own CPU."""
    add_node(emulator, "n0")
    process, base = start_serving(emulator, tmp_path, "--period", "0.2", "--cpu-phases")
    deadline = time.monotonic() + 20
    try:
        for i in range(20):
            add_pod(emulator, f"p{i}", 0)
        while len(bound(emulator)) < 20:
            assert time.monotonic() < deadline, "never bound"
            time.sleep(0.1)
        admin = {"Authorization": f"Bearer {emulator.token}"}
        text = httpx.get(f"{base}/metrics", headers=admin, verify=False).text
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    values = {
        line.split()[0]: float(line.split()[1])
        for line in text.splitlines()
        if line.startswith(("gpufleet_cpu_seconds_total", "process_cpu_seconds_total"))
    }
    phases = {k.split('"')[1]: v for k, v in values.items() if "phase=" in k}
    assert set(phases) == set(PHASES)
    for phase in ("watch", "cycle", "bind", "events"):
        assert phases[phase] > 0, phase
    assert sum(phases.values()) <= values["process_cpu_seconds_total"] + 0.01


def start_serving(
    emulator: Emulator, tmp_path: Path, *args: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    """``gpufleet serve ARGS`` against ``emulator``, once it reports ready."""
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    port = free_port()
    command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
    command += ["--bind-address", "127.0.0.1", "--secure-port", str(port), *args]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    base = f"https://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        assert time.monotonic() < deadline, "never ready"
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        try:
            if httpx.get(f"{base}/readyz", verify=False).status_code == 200:
                return process, base
        except httpx.HTTPError:
            pass
        time.sleep(0.1)


def test_sigterm_ends_serve_while_the_api_server_hangs(emulator: Emulator, tmp_path: Path) -> None:
    add_node(emulator, "n0")
    process, _ = start_serving(emulator, tmp_path, "--leader-elect=false")
    emulator.faults.freeze(60)  # every request and watch waits a minute
    time.sleep(1.0)
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=10)  # the kubelet's patience is 30 s
    finally:
        emulator.faults.frozen_until = 0.0
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "ERROR" not in stderr
    assert "Traceback" not in stderr


def test_a_clean_shutdown_logs_no_error(emulator: Emulator, tmp_path: Path) -> None:
    add_node(emulator, "n0")
    process, _ = start_serving(emulator, tmp_path, "--leader-elect=false")
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    assert "ERROR" not in stderr
    assert "never retrieved" not in stderr


def test_refused_credentials_are_one_line_and_exit_1(tmp_path: Path) -> None:
    locked = Emulator(require_token=True).start()
    try:
        kubeconfig = locked.kubeconfig(tmp_path / "kubeconfig", token="wrong")
        command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
        command += ["--secure-port", "0", "--leader-elect=false"]
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    finally:
        locked.stop()
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "cannot reach the API server" in line
    assert "HTTP 401 for GET /api: the credentials were refused" in line


def test_sigterm_while_the_api_server_hangs_at_start_exits_at_once(
    emulator: Emulator, tmp_path: Path
) -> None:
    """Before anything is watched, serve proves the API server answers; a server that hangs
    must not hold a SIGTERM (the kubelet's grace is 30 s)."""
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    emulator.faults.freeze(60)
    command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
    command += ["--secure-port", "0", "--leader-elect=false"]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(3.0)  # started, and waiting on GET /api
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=10)
    finally:
        emulator.faults.frozen_until = 0.0
        if process.poll() is None:
            process.kill()
    assert process.returncode == 0, stderr
    assert "stopped before the API server answered" in stderr
    assert "ERROR" not in stderr


def test_a_credential_plugin_that_fails_is_one_line_and_exit_1(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
        "users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1beta1, "
        f"command: {tmp_path / 'no-such-helper'}, "
        "interactiveMode: Never}}}]\n"
    )
    command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", str(kubeconfig)]
    command += ["--secure-port", "0", "--leader-elect=false"]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=60)
    assert done.returncode == 1, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert "the kubeconfig's credentials: FileNotFoundError" in line


POOLS = Path(__file__).with_name("autoscale-pools.yaml")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (POOLS.read_text().replace("count: 0", "count: 2"), "expected NodePools of count 0"),
        (
            POOLS.read_text()
            .replace("  autoscaling: {maxNodes: 16, provisioningDelay: 5m}\n", "")
            .replace("count: 0", "count: 1"),
            "expected NodePools of count 0",
        ),
        (
            POOLS.read_text().replace("provisioningDelay: 5m", "provisioningDelay: soon"),
            "provisioningDelay",
        ),
        (POOLS.read_text().replace("maxNodes: 16", "maxNodes: -1"), "maxNodes"),
    ],
)
def test_bad_node_pools_exit_2_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "gpufleet", "serve", "--autoscale", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.replace("│", " ").split())
    assert "pools.yaml" in said
    assert message in said
    assert "Traceback" not in result.stderr
