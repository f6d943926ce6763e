"""A PodGroup's ``minResources`` and ``scheduleTimeoutSeconds``, as the readers take them.

scheduler-plugins' PodGroup (``scheduling.x-k8s.io/v1alpha1``) gives both; Volcano's
(``scheduling.volcano.sh/v1beta1``) gives ``minResources``, judged against its queue too.
``minResources`` is a Kubernetes resource list of which GPUs, CPU and memory are read, in
gpufleet's units; ``scheduleTimeoutSeconds`` is an int32 of seconds, 0 meaning the default.
Absent, nothing changes; a bad value is one error naming the object and field (exit 2).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.workload import UNKNOWN_AGE, GroupSpec
from tests.cli.test_app import gpufleet

NODE = """apiVersion: v1
kind: Node
metadata: {name: n1}
status: {allocatable: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "8"}}
"""


def group_doc(spec: str, api: str = "scheduling.x-k8s.io/v1alpha1") -> str:
    return f"apiVersion: {api}\nkind: PodGroup\nmetadata: {{name: g, namespace: ml}}\nspec: {spec}"


def read_group(tmp_path: Path, spec: str, api: str = "scheduling.x-k8s.io/v1alpha1") -> GroupSpec:
    path = tmp_path / "snapshot.yaml"
    path.write_text(f"{NODE}---\n{group_doc(spec, api)}\n")
    (group,) = load_snapshot(path, warn=lambda _: None).groups
    return group


@pytest.mark.parametrize(
    ("spec", "min_resources", "grace"),
    [
        pytest.param("{minMember: 3}", None, None, id="neither"),
        pytest.param(
            "{minMember: 3, scheduleTimeoutSeconds: 10}", None, 10.0, id="coscheduling-example"
        ),
        pytest.param("{scheduleTimeoutSeconds: 0}", None, None, id="timeout-0-is-the-default"),
        pytest.param(
            "{minResources: {nvidia.com/gpu: 8, cpu: 9, memory: 1500Mi}}",
            (8.0, 9000.0, 1500.0),
            None,
            id="gpus-millicores-mib",
        ),
        pytest.param(
            "{minResources: {cpu: 500m, memory: 1G}}", (0.0, 500.0, 953.0), None, id="mib-down"
        ),
        pytest.param(
            "{minResources: {pods: 4, ephemeral-storage: 10Gi}}", None, None, id="others-ignored"
        ),
        pytest.param("{minResources: {}}", None, None, id="empty-list"),
    ],
)
def test_coscheduling_pod_group_fields(
    tmp_path: Path, spec: str, min_resources: tuple[float, ...] | None, grace: float | None
) -> None:
    group = read_group(tmp_path, spec)
    assert (group.min_resources, group.stale_grace_s) == (min_resources, grace)
    assert not group.min_resources_in_queue  # coscheduling checks the cluster only


def test_volcano_pod_group_min_resources_are_judged_in_its_queue_too(tmp_path: Path) -> None:
    """Volcano's own example PodGroup (its website's PodGroup page)."""
    group = read_group(
        tmp_path,
        '{minMember: 1, minResources: {cpu: "3", memory: "2048Mi"}, '
        "priorityClassName: high-priority, queue: default}",
        "scheduling.volcano.sh/v1beta1",
    )
    assert (group.min_resources, group.min_resources_in_queue) == ((0.0, 3000.0, 2048.0), True)
    assert group.stale_grace_s is None


def test_without_the_fields_a_group_is_what_it_was(tmp_path: Path) -> None:
    # No creationTimestamp in the test's object: its age is unknown.
    assert read_group(tmp_path, "{minMember: 2}") == GroupSpec("ml/g", 2, created=UNKNOWN_AGE)


BAD = [
    pytest.param(
        "{scheduleTimeoutSeconds: -5}",
        "spec.scheduleTimeoutSeconds",
        "expected an integer >= 0, got -5",
        id="negative-timeout",
    ),
    pytest.param(
        "{scheduleTimeoutSeconds: 10s}",
        "spec.scheduleTimeoutSeconds",
        "expected an integer, got '10s'",
        id="timeout-with-a-unit",
    ),
    pytest.param(
        "{scheduleTimeoutSeconds: 1.5}",
        "spec.scheduleTimeoutSeconds",
        "expected an integer, got 1.5",
        id="fractional-timeout",
    ),
    pytest.param(
        "{scheduleTimeoutSeconds: 3000000000}",
        "spec.scheduleTimeoutSeconds",
        "expected an integer of seconds from 0 to 2147483647, got 3000000000",
        id="timeout-beyond-int32",
    ),
    pytest.param(
        "{minResources: {nvidia.com/gpu: eight}}",
        "spec.minResources.nvidia.com/gpu",
        "expected a non-negative quantity such as '500m', '4' or '80Gi', got 'eight'",
        id="not-a-quantity",
    ),
    pytest.param(
        "{minResources: {cpu: -2}}",
        "spec.minResources.cpu",
        "expected a non-negative quantity",
        id="negative-quantity",
    ),
    pytest.param(
        "{minResources: [cpu]}",
        "spec.minResources",
        "expected a mapping, got ['cpu']",
        id="not-a-resource-list",
    ),
]


@pytest.mark.parametrize(("spec", "field", "expected"), BAD)
def test_bad_values_name_the_object_and_field(
    tmp_path: Path, spec: str, field: str, expected: str
) -> None:
    with pytest.raises(InputError) as caught:
        read_group(tmp_path, spec)
    assert caught.value.field == field
    assert expected in str(caught.value)
    assert "PodGroup g" in caught.value.source
    assert "\n" not in str(caught.value)


def test_volcanos_bad_min_resources_name_its_field(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        read_group(tmp_path, "{minResources: {memory: lots}}", "scheduling.volcano.sh/v1beta1")
    assert caught.value.field == "spec.minResources.memory"


def test_the_cli_refuses_a_negative_timeout_in_one_line_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(f"{NODE}---\n{group_doc('{scheduleTimeoutSeconds: -1}')}\n")
    result = gpufleet("schedule", "-f", "s.yaml", cwd=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "gpufleet: error: s.yaml: PodGroup g: field 'spec.scheduleTimeoutSeconds': expected an "
        "integer >= 0, got -1"
    ]
