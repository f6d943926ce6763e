"""``gpufleet serve --config``: the SchedulerConfiguration file, read into ``serve``'s
option names; every fault one message naming the file and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.objects.config import read_configuration

POLICIES = ("gpufleet", "fgd", "best-fit")
HEAD = "apiVersion: gpufleet.io/v1alpha1\nkind: SchedulerConfiguration\n"

FULL = (
    HEAD
    + """\
schedulerName: gpu-east
policy: fgd
period: 500ms
starvationAfter: 1h30m
expectedDuration: 2h
staleGrace: 90
nonPreemptiblePriority: 1000
vocabularies: [kai, gpufleet, volcano]
leaderElection:
  leaderElect: false
  resourceName: east
  resourceNamespace: gpufleet-system
  leaseDuration: 30s
  renewDeadline: 20s
  retryPeriod: 4s
"""
)


def read(tmp_path: Path, text: str) -> dict[str, object]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return read_configuration(path, POLICIES, ("kai", "volcano", "capacityscheduling"))


def test_every_field_becomes_the_option_it_stands_for(tmp_path: Path) -> None:
    assert read(tmp_path, FULL) == {
        "scheduler_name": "gpu-east",
        "policy": "fgd",
        "period": 0.5,
        "starvation_after": 5400.0,
        "expected_duration": 7200.0,
        "stale_grace": 90.0,
        "non_preemptible_priority": 1000,
        "vocabulary": ["kai", "gpufleet", "volcano"],
        "leader_elect": "false",
        "leader_elect_resource_name": "east",
        "leader_elect_resource_namespace": "gpufleet-system",
        "leader_elect_lease_duration": 30.0,
        "leader_elect_renew_deadline": 20.0,
        "leader_elect_retry_period": 4.0,
    }


def test_a_field_left_out_is_left_to_the_flag_and_its_default(tmp_path: Path) -> None:
    assert read(tmp_path, HEAD) == {}
    assert read(tmp_path, HEAD + "leaderElection:\n  leaderElect: true\n") == {
        "leader_elect": "true"
    }


@pytest.mark.parametrize(
    ("text", "message"),
    [
        pytest.param(
            "apiVersion: v1\nkind: SchedulerConfiguration\n",
            "field 'apiVersion': expected 'gpufleet.io/v1alpha1', got 'v1'",
            id="wrong-api-version",
        ),
        pytest.param(
            "apiVersion: gpufleet.io/v1alpha1\nkind: KubeSchedulerConfiguration\n",
            "field 'kind': expected 'SchedulerConfiguration', got 'KubeSchedulerConfiguration'",
            id="wrong-kind",
        ),
        pytest.param(
            HEAD + "polcy: fgd\n", "field 'polcy': unknown field (known: apiVersion", id="typo"
        ),
        pytest.param(
            HEAD + "leaderElection:\n  leaseDurtion: 5s\n",
            "field 'leaderElection.leaseDurtion': unknown field",
            id="nested-typo",
        ),
        pytest.param(
            HEAD + "policy: spread\n",
            "field 'policy': expected one of gpufleet, fgd, best-fit, got 'spread'",
            id="unknown-policy",
        ),
        pytest.param(
            HEAD + "nonPreemptiblePriority: high\n",
            "field 'nonPreemptiblePriority': expected an integer, got 'high'",
            id="priority-not-an-integer",
        ),
        pytest.param(
            HEAD + "nonPreemptiblePriority: -1\n",
            "field 'nonPreemptiblePriority': expected an integer >= 0, got -1",
            id="negative-priority",
        ),
        pytest.param(
            HEAD + "period: fast\n",
            "field 'period': expected a duration such as '90s', '10m' or '1h30m', got 'fast'",
            id="duration-not-a-duration",
        ),
        pytest.param(
            HEAD + "period: 10ms\n",
            "field 'period': expected a duration of at least 0.05s, got '10ms'",
            id="period-too-short",
        ),
        pytest.param(
            HEAD + "schedulerName: 7\n",
            "field 'schedulerName': expected a string, got 7",
            id="name-not-a-string",
        ),
        pytest.param(
            HEAD + "leaderElection:\n  leaderElect: 'yes'\n",
            "field 'leaderElection.leaderElect': expected true or false, got 'yes'",
            id="elect-not-a-boolean",
        ),
        pytest.param(
            HEAD + "leaderElection: true\n",
            "field 'leaderElection': expected a mapping, got true",
            id="election-not-a-mapping",
        ),
        pytest.param(
            HEAD + "leaderElection:\n  leaseDuration: 10s\n  renewDeadline: 10s\n",
            "field 'leaderElection.renewDeadline': expected a duration shorter than "
            "leaderElection.leaseDuration (10s), got '10s'",
            id="renew-not-before-expiry",
        ),
        pytest.param(
            HEAD + "leaderElection:\n  renewDeadline: 20s\n",
            "field 'leaderElection.renewDeadline': expected a duration shorter than "
            "leaderElection.leaseDuration (15s), got '20s'",
            id="renew-alone-not-before-the-default-expiry",
        ),
        pytest.param(
            HEAD + "leaderElection:\n  leaseDuration: 5s\n",
            "field 'leaderElection.leaseDuration': expected a duration longer than "
            "leaderElection.renewDeadline (10s), got '5s'",
            id="lease-alone-not-after-the-default-deadline",
        ),
        pytest.param(
            HEAD + "vocabularies: kai\n",
            "field 'vocabularies': expected a list of vocabularies (capacityscheduling, "
            "gpufleet, kai, volcano), got 'kai'",
            id="vocabularies-not-a-list",
        ),
        pytest.param(
            HEAD + "vocabularies: [kai, kueue]\n",
            "field 'vocabularies[1]': expected one of capacityscheduling, gpufleet, kai, "
            "volcano, got 'kueue'",
            id="vocabulary-not-read-live",
        ),
        pytest.param("", "expected one YAML document, a SchedulerConfiguration, got 0", id="empty"),
        pytest.param(HEAD + "---\n" + HEAD, "expected one YAML document", id="two-documents"),
        pytest.param("- a\n", "expected a SchedulerConfiguration (a mapping)", id="a-list"),
    ],
)
def test_a_bad_file_names_the_file_and_the_field(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError) as caught:
        read(tmp_path, text)
    line = str(caught.value)
    assert line.startswith(f"{tmp_path / 'config.yaml'}: ")
    assert message in line
    assert "\n" not in line
