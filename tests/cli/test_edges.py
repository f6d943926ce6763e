"""The edges of the ``gpufleet`` command: option checks, ``--version``, the fill warning
for pods no node can hold, and ``explain`` of pods the cycle evicts (a real subprocess)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pytest

from gpufleet import __version__
from gpufleet.report.files import atomic_path, write_text
from gpufleet.sim.unfit import unfit_pods
from tests.builders import node, pod, write_nodes_csv, write_pods_csv
from tests.cli.test_app import NOW, SCENARIOS, gpufleet

LIMIT_BLOCKS = str(SCENARIOS / "limit-blocks.yaml")
PREEMPT = str(SCENARIOS / "preempt-minimal.yaml")


def test_durations_are_accepted_as_kubernetes_writes_them(tmp_path: Path) -> None:
    done = gpufleet(
        "schedule", "-f", PREEMPT, "--stale-grace", "60s", "--starvation-after", "1h30m",
        "-o", "json", NOW, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    bad = gpufleet("schedule", "-f", PREEMPT, "--stale-grace", "6x0s", NOW, cwd=tmp_path)
    assert bad.returncode == 2
    assert "expected seconds or a duration such as '90s'" in " ".join(
        bad.stderr.replace("│", " ").split()
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--out", "taken"), "--out taken: exists and is not a directory", id="out-file"
        ),
        pytest.param(("--json", "adir"), "--json adir: is a directory, not a file", id="json-dir"),
        pytest.param(
            ("--json", "nowhere/results.json"),
            "--json nowhere/results.json: its directory does not exist",
            id="json-no-dir",
        ),
        pytest.param(
            ("--json", "apipe"),
            "--json apipe: is not a regular file (a device or a pipe); give a file, or '-' "
            "for stdout",
            id="json-fifo",
        ),
    ],
)
def test_output_paths_are_refused_before_the_run(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / "taken").write_text("keep", encoding="utf-8")
    (tmp_path / "adir").mkdir()
    os.mkfifo(tmp_path / "apipe")
    done = gpufleet("simulate", "--seeds", "42", *args, cwd=tmp_path)
    assert done.returncode == 2
    assert message in " ".join(done.stderr.replace("│", " ").split())
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "gpufleet-report").exists()  # refused before any work
    assert (tmp_path / "taken").read_text(encoding="utf-8") == "keep"


def test_an_output_file_is_written_through_a_link_with_the_usual_mode(tmp_path: Path) -> None:
    target = tmp_path / "kept.json"
    target.write_text("old", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "results.json"
    link.symlink_to(target)
    write_text(link, "new")
    assert link.is_symlink()
    assert target.read_text(encoding="utf-8") == "new"
    assert target.stat().st_mode & 0o777 == 0o640  # the mode of the file it replaced
    fresh = tmp_path / "fresh.json"
    umask = os.umask(0o022)
    try:
        write_text(fresh, "x")
    finally:
        os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o644  # not the temporary file's 0600


def test_an_output_file_is_whole_or_not_there(tmp_path: Path) -> None:
    target = tmp_path / "results.json"
    target.write_text("old", encoding="utf-8")

    def fail_halfway() -> None:
        with atomic_path(target) as temporary:
            temporary.write_text("half of a new", encoding="utf-8")
            raise RuntimeError("the run failed")

    with pytest.raises(RuntimeError):
        fail_halfway()
    assert target.read_text(encoding="utf-8") == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]
    write_text(target, "new")
    assert target.read_text(encoding="utf-8") == "new"


def test_version_prints_and_exits_0(tmp_path: Path) -> None:
    done = gpufleet("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"gpufleet {__version__}"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("--starvation-after", "-1"), "expected zero or more seconds, got -1", id="starvation"
        ),
        pytest.param(("--stale-grace", "-5"), "expected zero or more seconds, got -5", id="grace"),
        pytest.param(("--stale-grace", "nan"), "expected zero or more seconds", id="grace-nan"),
        pytest.param(
            ("--non-preemptible-priority", "-1"),
            "expected a priority of 0 or more, got -1",
            id="non-preemptible",
        ),
        pytest.param(
            ("--now", "2026-01-01T01:00:00"),
            "has no time zone; RFC 3339 needs one, such as 'Z' or '+00:00'",
            id="naive-now",
        ),
    ],
)
@pytest.mark.parametrize("command", ["schedule", "explain"])
def test_bad_cycle_options_exit_2(
    tmp_path: Path, command: str, args: tuple[str, ...], message: str
) -> None:
    target = ("team-a/a-0",) if command == "explain" else ()
    done = gpufleet(command, "-f", LIMIT_BLOCKS, *target, *args, cwd=tmp_path)
    assert done.returncode == 2, done.stdout
    assert message in " ".join(done.stderr.replace("│", " ").split())
    assert "Traceback" not in done.stderr


def test_now_before_every_object_is_refused_naming_the_earliest(tmp_path: Path) -> None:
    done = gpufleet("schedule", "-f", PREEMPT, "--now", "2025-06-01T00:00:00+02:00", cwd=tmp_path)
    assert done.returncode == 2
    errors = [line for line in done.stderr.splitlines() if not line.startswith("Warning:")]
    assert len(errors) == 1  # the scenario's Expectation is a kind gpufleet skips, with a warning
    assert errors[0].startswith(f"gpufleet: error: {PREEMPT}: --now 2025-05-31T22:00:00Z")
    assert "is before every object's creationTimestamp" in done.stderr
    assert "the earliest: Pod team-a/low-0, created 2026-01-01T00:00:00Z" in done.stderr


def test_a_now_with_an_offset_is_accepted(tmp_path: Path) -> None:
    done = gpufleet("schedule", "-f", PREEMPT, "--now", "2026-01-01T03:00:00+02:00", cwd=tmp_path)
    assert done.returncode == 0, done.stderr


def test_fill_warns_of_pods_that_fit_no_node_and_still_runs(tmp_path: Path) -> None:
    pods = [pod(f"ok{i}").cpu(2).gpus(1).obj() for i in range(6)]
    pods += [pod("huge").cpu(2).gpus(100).obj(), pod("alien").cpu(2).gpus(1).models("B300").obj()]
    workload = write_pods_csv(tmp_path / "pods.csv", pods)
    nodes = write_nodes_csv(tmp_path / "nodes.csv", [node(f"n{i}", gpus=8) for i in range(2)])
    done = gpufleet(
        "simulate", "--workload", str(workload), "--nodes", str(nodes), "--policy", "best-fit",
        "--json", "-", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    warning = next(line for line in done.stderr.splitlines() if line.startswith("Warning:"))
    assert warning.startswith("Warning: 2 of 8 pods of pods fit no node")
    assert "huge: it asks for 100 GPUs and the largest node has 8" in warning
    (run,) = json.loads(done.stdout)["runs"]
    assert run["pods"] > 0


def test_no_fill_warning_when_every_pod_fits(tmp_path: Path) -> None:
    workload = write_pods_csv(tmp_path / "pods.csv", [pod("a").gpus(1).obj()])
    nodes = write_nodes_csv(tmp_path / "nodes.csv", [node("n0", gpus=1)])
    done = gpufleet("simulate", "--workload", str(workload), "--nodes", str(nodes),
                    "--policy", "best-fit", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Warning:" not in done.stderr


@pytest.mark.parametrize(
    ("pods", "reason"),
    [
        pytest.param(
            [pod("big").gpus(9).obj()], "it asks for 9 GPUs and the largest node has 8", id="gpus"
        ),
        pytest.param(
            [pod("m").gpus(1).models("B300", "GB200").obj()],
            "its gpu_spec allows B300, GB200, and no node has that model",
            id="model",
        ),
        pytest.param(
            [pod("c").cpu(100).obj()],
            "it asks for 100000 milli-CPU and the largest node has 64000",
            id="cpu",
        ),
        pytest.param(
            [pod("both").cpu(40).gpus(8).obj()],
            "no node has 40000 milli-CPU",
            id="together",
        ),
    ],
)
def test_unfit_reason(pods: list[object], reason: str) -> None:
    nodes = [node("gpu", cpu=32, gpus=8, model="A100"), node("cpu", cpu=64, gpus=0)]
    found = unfit_pods(nodes, [pod("fine").gpus(1).obj(), *pods])  # type: ignore[list-item]
    assert found is not None
    assert found.count == 1
    assert reason in found.reason


def test_unfit_counts_shapes_not_pods() -> None:
    nodes = [node("n", cpu=32, gpus=8, model="A100")]
    pods = [pod(f"p{i}").gpus(1 + i % 10).obj() for i in range(1000)]
    found = unfit_pods(nodes, pods)
    assert found is not None
    assert (found.count, found.example) == (200, "p8")
    assert unfit_pods(nodes, pods[:8]) is None


def test_explain_an_evicted_pod_says_what_and_for_whom(tmp_path: Path) -> None:
    done = gpufleet("explain", "-f", PREEMPT, "team-a/low-6", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "not scheduled by gpufleet" not in done.stdout
    assert "this cycle evicts it (preempt)" in done.stdout
    assert "preempted for team-a/urgent" in done.stdout


def test_explain_json_of_an_evicted_pod(tmp_path: Path) -> None:
    done = gpufleet("explain", "-f", PREEMPT, "team-a/low-6", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["pod"] == "team-a/low-6"
    assert outcome["status"] == "evicted"
    assert outcome["node"] == "n1"
    assert (outcome["action"], outcome["for"]) == ("preempt", "team-a/urgent")
    assert "team-a/urgent" in outcome["reason"]


def test_explain_json_of_a_bound_and_a_pending_pod(tmp_path: Path) -> None:
    done = gpufleet("explain", "-f", PREEMPT, "team-a/urgent", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    bound = json.loads(done.stdout)
    assert bound | {"pipelined": True} == {
        "pod": "team-a/urgent", "status": "bound", "node": "n1", "gpus": [6, 7],
        "reason": None, "action": None, "for": None, "pipelined": True,
    }  # fmt: skip
    done = gpufleet("explain", "-f", LIMIT_BLOCKS, "team-a/a-2", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    pending = json.loads(done.stdout)
    assert pending["status"] == "pending"
    assert pending["node"] is None
    assert "queue team-a is at its limit of 2 GPUs" in pending["reason"]


def test_explain_bad_output_exits_2(tmp_path: Path) -> None:
    done = gpufleet("explain", "-f", PREEMPT, "team-a/low-6", "-o", "xml", NOW, cwd=tmp_path)
    assert done.returncode == 2
    assert "-o must be json or text" in done.stderr


def test_reclaim_refusal_is_a_whole_sentence(tmp_path: Path) -> None:
    scenario = str(SCENARIOS / "reclaim-not-beyond-own-fair-share.yaml")
    done = gpufleet("explain", "-f", scenario, "team-a/more", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    line = next(x for x in done.stdout.splitlines() if x.strip().startswith("reclaim:"))
    assert line.endswith(
        "with this job; reclaim takes GPUs only for a queue that stays within its fair share"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ("schedule", "--bogus"),
            "gpufleet schedule: error: No such option: --bogus",
            id="unknown-option",
        ),
        pytest.param(
            ("schedule", "-f", LIMIT_BLOCKS, "-o", "xml"),
            "gpufleet schedule: error: Invalid value: -o must be json or table, got 'xml'",
            id="bad-value",
        ),
        pytest.param(("nope",), "gpufleet: error: No such command 'nope'", id="unknown-command"),
        pytest.param(
            ("cost", "--results", ".", "--focus", "."),
            "gpufleet cost: error: Invalid value: --focus .: is a directory, not a file",
            id="focus-is-a-directory",
        ),
        pytest.param(
            ("cost", "--results", ".", "--focus", "missing/x.csv"),
            "--focus missing/x.csv: its directory does not exist",
            id="focus-without-its-directory",
        ),
    ],
)
def test_a_wrong_command_line_is_one_line_and_exit_2(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    done = gpufleet(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr  # one line: no usage box, no traceback
    assert message in done.stderr
    assert done.stdout == ""


BOMB = "\n".join(
    [
        'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]',
        *(
            f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]"
            for a, b in zip("abcdefgh", "bcdefghi", strict=True)
        ),
    ]
)
"""604 bytes that stand for 9**9 strings through aliases."""


def limited(
    args: tuple[str, ...], cwd: Path, address_space: int
) -> subprocess.CompletedProcess[str]:
    """``gpufleet ARGS`` under an address-space limit (bytes), as a hostile input's test."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    return gpufleet(*args, cwd=cwd, preexec=limit)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(BOMB, "its aliases expand one document to more than", id="alias-bomb"),
        pytest.param("a: &a [*a]\n", "an alias refers to a value that contains it", id="recursive"),
    ],
)
def test_an_input_that_would_exhaust_the_machine_is_refused(
    tmp_path: Path, text: str, message: str
) -> None:
    (tmp_path / "bomb.yaml").write_text(text)
    done = limited(("schedule", "-f", "bomb.yaml"), tmp_path, 200 * 1024 * 1024)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stderr.count("\n") == 1


def test_a_device_is_no_input_file(tmp_path: Path) -> None:
    for args in (("schedule", "-f", "/dev/zero"), ("simulate", "--nodes", "/dev/zero")):
        done = limited(args, tmp_path, 400 * 1024 * 1024)
        assert done.returncode == 2, done.stderr
        assert "/dev/zero: is not a regular file" in done.stderr


@pytest.mark.parametrize(
    ("cell", "field"),
    [
        pytest.param("1_0", "cpu_milli", id="underscore"),
        pytest.param("٣", "cpu_milli", id="arabic"),
    ],
)
def test_numbers_are_ascii_digits_as_kubernetes_writes_them(
    tmp_path: Path, cell: str, field: str
) -> None:
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        f"deletion_time,scheduled_time\np0,{cell},1024,1,1000,,BE,Running,0,,\n",
        encoding="utf-8",
    )
    done = gpufleet("simulate", "--workload", str(pods), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"field '{field}': expected a non-negative integer, got '{cell}'" in done.stderr


def test_a_price_beyond_reason_is_refused(tmp_path: Path) -> None:
    sheet = tmp_path / "prices.yaml"
    sheet.write_text(
        "apiVersion: gpufleet.io/v1alpha1\nkind: PriceSheet\nmetadata: {name: s}\n"
        "spec:\n  title: a test\n  currency: USD\n  default:\n    category: on-demand\n"
        "    prices: {gpuHour: 1.0e+308, vcpuHour: 0, ramGiBHour: 0}\n"
    )
    done = gpufleet("schedule", "-f", LIMIT_BLOCKS, "--prices", str(sheet), NOW, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "expected a price from 0 to 1,000,000 per hour" in done.stderr


def test_a_job_larger_than_the_cluster_never_starts_and_costs_nothing_to_read(
    tmp_path: Path,
) -> None:
    """A Philly row of 1e15 GPUs is a job that waits for good (counted, never started); no
    pod of it is made, so the replay runs within a small memory limit."""
    trace = tmp_path / "philly.csv"
    trace.write_text(
        "timestamp,duration,num_gpus,gpu_time,cluster\n"
        "2017-10-09 07:01:55,66.0,1e15,66.0,c1\n"
        "2017-10-09 07:02:55,66.0,1,66.0,c1\n"
    )
    args = ("simulate", "--protocol", "replay", "--workload", str(trace), "--out", "out")
    done = limited(args, tmp_path, 1024 * 1024 * 1024)
    assert done.returncode == 0, done.stderr
    for run in json.loads((tmp_path / "out" / "results.json").read_text())["runs"]:
        assert (run["jobs"], run["finished_jobs"], run["pending_jobs"]) == (2, 1, 1)


def hostile_selector_snapshot(expression: str) -> str:
    """One node with one device, a DeviceClass selecting by ``expression``, a pod claiming
    one device of it."""
    return (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '8', memory: 8Gi}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\n"
        f"spec: {{selectors: [{{cel: {{expression: {json.dumps(expression)}}}}}]}}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: s}\n"
        "spec: {driver: d, nodeName: n1, pool: {name: n1}, devices: [{name: gpu-0}]}\n---\n"
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\n"
        "metadata: {name: one, namespace: ml}\n"
        "spec: {spec: {devices: {requests: [{name: r, exactly: {deviceClassName: g}}]}}}\n---\n"
        "apiVersion: v1\nkind: Pod\n"
        "metadata: {name: p, namespace: ml, creationTimestamp: '2026-01-01T00:00:00Z'}\n"
        "spec:\n  schedulerName: gpufleet\n"
        "  containers: [{name: main, resources: {requests: {cpu: '1'}}}]\n"
        "  resourceClaims: [{name: gpu, resourceClaimTemplateName: one}]\n"
    )


@pytest.mark.parametrize(
    "expression",
    [
        pytest.param(
            '"x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x".split(",").exists(a, '
            '"x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x".split(",").exists(b, '
            '"x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x".split(",").exists(c, '
            '"x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x,x".split(",").exists(e, '
            'a + b + c + e == "z"))))',
            id="nested-macros",
        ),
        pytest.param(
            '"aaaaaaaaaa"' + '.replace("a", "aaaaaaaaaa")' * 12 + ' != ""', id="replace-chain"
        ),
    ],
)
def test_a_selector_beyond_the_cel_cost_limit_keeps_its_pod_pending(
    tmp_path: Path, expression: str
) -> None:
    (tmp_path / "snapshot.yaml").write_text(hostile_selector_snapshot(expression))
    args = ("schedule", "-f", "snapshot.yaml", "-o", "json", NOW)
    done = limited(args, tmp_path, 400 * 1024 * 1024)
    assert done.returncode == 0, done.stderr
    [pending] = json.loads(done.stdout)["pending"]
    assert pending["pod"] == "ml/p"
    assert "exceeded the cost limit of 1,000,000 units" in json.dumps(pending)


def ageless_snapshot(created: str) -> str:
    """A node whose one GPU is taken, and a pod waiting for it, ``created`` as given (empty:
    no creationTimestamp)."""
    stamp = f", creationTimestamp: '{created}'" if created else ""
    return (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status: {allocatable: {cpu: '8', memory: 8Gi, nvidia.com/gpu: '1'}}\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: busy, namespace: ml, "
        "creationTimestamp: '2026-01-01T00:00:00Z'}\n"
        "spec:\n  schedulerName: gpufleet\n  nodeName: n1\n  priority: 100\n"
        "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: '1'}}}]\n"
        "status: {phase: Running, startTime: '2026-01-01T00:00:00Z'}\n---\n"
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: waits, namespace: ml{stamp}}}\n"
        "spec:\n  schedulerName: gpufleet\n"
        "  containers: [{name: c, resources: {limits: {nvidia.com/gpu: '1'}}}]\n"
    )


@pytest.mark.parametrize(("created", "starving"), [("", False), ("2026-01-01T00:00:00Z", True)])
def test_a_pod_without_creation_time_has_an_unknown_age_not_one_since_1970(
    tmp_path: Path, created: str, starving: bool
) -> None:
    (tmp_path / "snapshot.yaml").write_text(ageless_snapshot(created))
    done = gpufleet(
        "explain", "-f", "snapshot.yaml", "ml/waits", "--now", "2026-01-02T00:00:00Z",
        "--starvation-after", "30m", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert ("Waiting 86400s" in done.stdout) is starving, done.stdout
    assert "reserved for it" in done.stdout if starving else "reserved" not in done.stdout


DRA_SCENARIO = Path(__file__).parents[1] / "scenarios" / "dra-per-device-node-selection.yaml"
TEMPLATE_SPEC = """spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.nvidia.com, count: 1}"""


def test_a_claim_template_without_its_spec_is_refused_naming_the_field(tmp_path: Path) -> None:
    text = DRA_SCENARIO.read_text()
    assert TEMPLATE_SPEC in text
    (tmp_path / "snapshot.yaml").write_text(text.replace(TEMPLATE_SPEC, ""))
    done = gpufleet("schedule", "-f", "snapshot.yaml", NOW, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert (
        "ResourceClaimTemplate one: field 'spec.spec': expected a ResourceClaimSpec (required)"
        in done.stderr
    )
    assert "Traceback" not in done.stderr


def test_a_claim_of_no_devices_is_allocated_nothing(tmp_path: Path) -> None:
    """The API allows a ResourceClaimSpec without requests: the pod binds, its claim
    allocated no device (this crashed the cycle: one result list per claim was missing)."""
    text = DRA_SCENARIO.read_text().replace(TEMPLATE_SPEC, "spec: {spec: {}}")
    (tmp_path / "snapshot.yaml").write_text(text)
    done = gpufleet("schedule", "-f", "snapshot.yaml", "-o", "json", NOW, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    [binding] = json.loads(done.stdout)["bindings"]
    assert binding["claims"] == {"ml/p-gpu": []}


def test_a_fill_of_tiny_gpu_shares_is_refused_before_it_runs(tmp_path: Path) -> None:
    """One pod of a thousandth of a GPU would take millions of copies to fill the bundled
    cluster: refused by the fill's pod bound, in one line, under 400 MB."""
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\np0,1000,1024,1,1,,BE,Running,0,,\n",
        encoding="utf-8",
    )
    done = limited(("simulate", "--workload", str(pods), "--seeds", "42"), tmp_path, 400 * 2**20)
    assert done.returncode == 2, done.stderr
    assert "takes more than 200,000 pods of this workload (its pods ask 0.001 GPU" in done.stderr
    assert done.stderr.count("\n") == 1


PHILLY_HEADER = "jobid,user,cluster,num_gpus,timestamp,duration,status\n"


@pytest.mark.parametrize(
    ("name", "text", "args", "message"),
    [
        pytest.param(
            "long.csv",
            PHILLY_HEADER + "j1,u,c1,1," + "x" * 100_000 + ",60,Pass\n",
            ("--protocol", "replay", "--format", "philly"),
            "field 'timestamp': expected a time like",
            id="philly-long-field",
        ),
        pytest.param(
            "huge.csv",
            PHILLY_HEADER + "j1,u,c1,1,2017-10-09 07:01:55," + "9" * 200_000 + ",Pass\n",
            ("--protocol", "replay", "--format", "philly"),
            "not a CSV row: field larger than field limit",
            id="philly-field-over-the-csv-limit",
        ),
        pytest.param(
            "pods.csv",
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
            "deletion_time,scheduled_time\np0," + "9" * 100_000 + ",1024,1,1000,,BE,Running,0,,\n",
            (),
            "field 'cpu_milli': expected a non-negative integer",
            id="openb-long-field",
        ),
    ],
)
def test_an_error_shows_a_bounded_part_of_the_input(
    tmp_path: Path, name: str, text: str, args: tuple[str, ...], message: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    done = gpufleet("simulate", "--workload", name, *args, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert len(done.stderr) < 500
    assert "Traceback" not in done.stderr


def test_a_results_document_nested_too_deeply_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text("[" * 100_000 + "]" * 100_000)
    done = gpufleet("cost", "--results", "run", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "nested too deeply" in done.stderr


@pytest.mark.parametrize(("value", "ok"), [("2h", True), ("0", False)])
def test_the_default_expected_duration_is_a_positive_duration(
    tmp_path: Path, value: str, ok: bool
) -> None:
    (tmp_path / "snapshot.yaml").write_text(ageless_snapshot("2026-01-01T00:00:00Z"))
    done = gpufleet(
        "explain", "-f", "snapshot.yaml", "ml/waits", "--now", "2026-01-02T00:00:00Z",
        "--expected-duration", value, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == (0 if ok else 2), done.stderr
    if not ok:
        assert "--expected-duration" in done.stderr
