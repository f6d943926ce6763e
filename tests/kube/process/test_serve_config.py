"""``gpufleet serve --config`` as a process: the file's settings are used, a flag given on
the command line wins over the file, and a bad file is one line naming the file and the
field, exit code 2, before anything connects."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, add_pod, bound

CONFIG = """\
apiVersion: gpufleet.io/v1alpha1
kind: SchedulerConfiguration
schedulerName: not-this-one
period: 200ms
vocabularies: [kai]
leaderElection:
  leaderElect: true
  resourceName: from-the-file
  resourceNamespace: default
"""


def test_the_file_sets_what_no_flag_does_and_a_flag_wins(
    emulator: Emulator, tmp_path: Path
) -> None:
    add_node(emulator, "n0")
    # schedulerName: gpufleet, the flag's, not the file's; in a KAI queue of 1 GPU, read
    # because the file names the kai vocabulary.
    add_kai_queue(emulator, "kai-q", gpus=1)
    for name in ("a", "b"):
        add_pod(emulator, name, 1, labels={"kai.scheduler/queue": "kai-q"})
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG)
    kubeconfig = emulator.kubeconfig(tmp_path / "kubeconfig")
    command = [sys.executable, "-m", "gpufleet", "serve", "--config", str(config)]
    command += ["--kubeconfig", str(kubeconfig), "--scheduler-name", "gpufleet"]
    command += ["--secure-port", "0"]
    env = {**os.environ, "KUBECONFIG": "/nonexistent"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    leases = emulator.store.resource("coordination.k8s.io", "v1", "leases")
    try:
        deadline = time.monotonic() + 20
        while not bound(emulator):
            assert time.monotonic() < deadline, "never bound"
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            time.sleep(0.1)
        time.sleep(1.0)  # five periods: the other pod stays pending at the queue's limit
        assert len(bound(emulator)) == 1
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=15)
    assert process.returncode == 0, stderr
    names = {
        (lease["metadata"]["namespace"], lease["metadata"]["name"])
        for lease in emulator.store.list(leases)[0]
    }
    assert names == {("default", "from-the-file")}


def add_kai_queue(emulator: Emulator, name: str, gpus: int) -> None:
    unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
    gpu = {"quota": gpus, "limit": gpus, "overQuotaWeight": 1}
    emulator.store.create(
        emulator.store.resource("scheduling.run.ai", "v2", "queues"),
        "",
        {
            "metadata": {"name": name},
            "spec": {"resources": {"gpu": gpu, "cpu": unlimited, "memory": unlimited}},
        },
    )


def test_a_bad_config_is_one_line_naming_the_field_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("resourceName:", "resourceNmae:"))
    # The kubeconfig does not exist either: the file is read before anything connects.
    command = [sys.executable, "-m", "gpufleet", "serve", "--kubeconfig", "/nonexistent"]
    result = subprocess.run(
        [*command, "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.startswith(
        f"gpufleet: error: {config}: field 'leaderElection.resourceNmae': unknown field"
    )
    assert result.stderr.count("\n") == 1
