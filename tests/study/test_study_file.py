"""Study files (``kind: Study``): what they expand to, and every bad one refused in one line
naming the file, the study, the field and what was expected."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.study import load_study, parse_parameter
from gpufleet.load.traces.openb import bundled

HEAD = """apiVersion: gpufleet.io/v1alpha1
kind: Study
metadata: {name: s}
spec:
  experiments:
"""

REPLAY = """  - name: r
    protocol: replay
    traces: [{bundled: openb_pod_list_default.csv}]
    windows: [{since: 3288h, until: 3312h}, {since: 3312h}]
    clusters: [{bundled: openb-replay-cluster.yaml}]
    settings:
    - {policy: gang-backfill}
    grid:
      policy: [gpufleet]
      reserveAfter: [30m, never]
      actions: [[consolidate, preempt], none]
"""

FILL = """  - name: f
    protocol: fill
    traces: [{path: pods.csv}]
    clusters: [{path: nodes.csv}]
    grid: {policy: [best-fit, fgd], inflate: [1.0]}
    seeds: "7-9"
"""


def study(tmp_path: Path, body: str) -> Path:
    (tmp_path / "pods.csv").write_bytes(bundled("openb_pod_list_default.csv").read_bytes())
    (tmp_path / "nodes.csv").write_bytes(bundled("openb_node_list_gpu_node.csv").read_bytes())
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    path = tmp_path / "study.yaml"
    path.write_text(HEAD + body)
    return path


def test_a_study_is_the_product_of_its_inputs_settings_and_seeds(tmp_path: Path) -> None:
    s = load_study(study(tmp_path, REPLAY + FILL))
    replays = [r for r in s.runs if r.experiment == "r"]
    fills = [r for r in s.runs if r.experiment == "f"]
    assert len(replays) == 2 * (4 + 1)  # two windows x (the grid's 4, then the list's 1)
    assert len(fills) == 2 * 3  # two policies x seeds 7-9
    assert {r.seed for r in replays} == {42}  # a replay's one seed, simulate's default
    assert [r.seed for r in fills[:3]] == [7, 8, 9]
    first = replays[0]
    assert first.window == (3288 * 3600.0, 3312 * 3600.0)
    assert first.setting_label() == "gpufleet reserveAfter=30m actions=consolidate,preempt"
    assert replays[3].parameters == {"reserveAfter": math.inf, "actions": ()}
    assert replays[4].setting_label() == "gang-backfill"
    assert replays[5].window == (3312 * 3600.0, None)
    # Files are named by what they hold: the same bytes under two names are one input.
    assert fills[0].trace.digest == replays[0].trace.digest
    assert fills[0].trace.name == "pods.csv"
    assert fills[0].trace.path == str((tmp_path / "pods.csv").resolve())
    assert fills[0].parameters == {"inflate": 1.0}


BAD = [
    (
        REPLAY.replace("protocol: replay", "protocol: replay\n    seeds: [1]"),
        "field 'spec.experiments[0].seeds': applies to protocol fill and autoscale only (a "
        "replay draws no random numbers: vary its parameters)",
    ),
    (
        REPLAY.replace("reserveAfter: [30m, never]", "reserveAfter: [30m, soon]"),
        "field 'spec.experiments[0].grid.reserveAfter': expected a duration above 0 such as "
        "'90s', '30m' or '6h', or seconds or never, got 'soon'",
    ),
    (
        REPLAY.replace("[consolidate, preempt]", "[consolidate, evict]"),
        "field 'spec.experiments[0].grid.actions': expected actions among consolidate, "
        "consolidate-serving, reclaim, preempt, got 'evict'",
    ),
    (
        REPLAY.replace("{policy: gang-backfill}", "{policy: fgd}"),
        "field 'spec.experiments[0].settings[0].policy': expected a policy of the replay protocol "
        "(kube-default, "
        "fifo-gang, gang-backfill, gpufleet), got 'fgd'",
    ),
    (
        FILL.replace("inflate: [1.0]", "inflate: [0]"),
        "field 'spec.experiments[0].grid.inflate': expected a number above 0 and at most 100, "
        "got 0",
    ),
    (
        FILL.replace("inflate: [1.0]", "reserveAfter: [1h]"),
        "field 'spec.experiments[0].grid.reserveAfter': expected a parameter of the fill protocol "
        "(inflate), got 'reserveAfter'",
    ),
    (
        FILL.replace('"7-9"', '"9-7"'),
        "field 'spec.experiments[0].seeds': expected a seed range such as '42-51' or a list of "
        "distinct seeds >= 0, got '9-7'",
    ),
    (FILL.replace("pods.csv", "missing.csv"), "missing.csv: no such file"),
    (
        FILL.replace("{path: pods.csv}", "{bundled: ../../etc/passwd}"),
        "field 'spec.experiments[0].traces[0].bundled': expected one of ",
    ),
    (
        FILL.replace("{path: pods.csv}", "{path: pods.csv, bundled: x.csv}"),
        "field 'spec.experiments[0].traces[0]': expected exactly one of path and bundled",
    ),
    (
        REPLAY + REPLAY,
        "field 'spec.experiments[1].name': expected a name no other experiment has, got 'r'",
    ),
    (REPLAY.replace("windows:", "windws:"), "field 'spec.experiments[0].windws': unknown field"),
    (
        REPLAY.replace("{since: 3312h}", "{since: 3312h, until: 3300h}"),
        "field 'spec.experiments[0].windows[1].until': expected seconds or a duration after "
        "since (3312h)",
    ),
    (
        REPLAY.replace(
            "- {policy: gang-backfill}",
            "- {policy: gpufleet, reserveAfter: 1800, "
            "actions: [consolidate, preempt]}\n    - {policy: gang-backfill}",
        ),
        "the setting policy=gpufleet reserveAfter=30m actions=consolidate,preempt is given twice",
    ),
    (
        FILL.replace("{policy: [best-fit, fgd], inflate: [1.0]}", "{policy: [best-fit]}").replace(
            '"7-9"', '"0-99999"'
        )
        + FILL.replace("name: f", "name: g").replace('"7-9"', '"0-99999"'),
        "expands to 200,000 runs, and the study to more than it may hold (100,000)",
    ),
    (
        REPLAY.replace("{since: 3312h}", "{since: 11836800, until: 11923200}"),
        "field 'spec.experiments[0].windows[1]': expected each window once; entry 1 repeats "
        "entry 0",
    ),
    (
        FILL.replace(
            "clusters: [{path: nodes.csv}]", "clusters: [{path: nodes.csv}, {path: ./nodes.csv}]"
        ),
        "field 'spec.experiments[0].clusters[1]': expected each cluster file once",
    ),
    (
        REPLAY.replace("since: 3288h", "since: " + "9" * 400),
        "field 'spec.experiments[0].windows[0].since': expected seconds or a duration",
    ),
    (
        FILL.replace("inflate: [1.0]", "inflate: [" + "9" * 400 + "]"),
        "field 'spec.experiments[0].grid.inflate': expected a number above 0",
    ),
    (FILL.replace("{path: pods.csv}", "{path: loop}"), "loop: cannot be read"),
    (
        "  - name: f\n    protocol: fill\n    traces: [{path: pods.csv}]\n",
        "field 'spec.experiments[0].grid': expected a grid or settings",
    ),
]


@pytest.mark.parametrize(("body", "message"), BAD)
def test_a_bad_study_is_one_line_naming_the_file_the_field_and_what_was_expected(
    tmp_path: Path, body: str, message: str
) -> None:
    path = study(tmp_path, body)
    with pytest.raises(InputError) as error:
        load_study(path)
    text = str(error.value)
    assert message in text
    assert str(path) in text or "missing.csv" in text or "loop" in text


def test_the_kind_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    with pytest.raises(
        InputError, match=r"expected apiVersion gpufleet\.io/v1alpha1 and kind Study"
    ):
        load_study(path)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("reserveAfter=6h", ("reserveAfter", 21600.0)),
        ("reserveAfter=never", ("reserveAfter", math.inf)),
        ("actions=none", ("actions", ())),
        ("actions=consolidate,preempt", ("actions", ("consolidate", "preempt"))),
        ("topology=false", ("topology", False)),
        ("checkpointInterval=1800", ("checkpointInterval", 1800.0)),
    ],
)
def test_a_parameter_reads_the_same_from_the_command_line(
    text: str, value: tuple[str, object]
) -> None:
    assert parse_parameter(text, "replay") == value


@pytest.mark.parametrize(
    "text", ["reserveAfter", "reserveAfter=0", "topology=yes", "actions=consolidate,consolidate"]
)
def test_a_bad_parameter_on_the_command_line_says_what_was_expected(text: str) -> None:
    with pytest.raises(ValueError, match="got"):
        parse_parameter(text, "replay")
