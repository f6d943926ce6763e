"""Every field of Kubernetes 1.37's PodSpec has a decision (gpufleet.load.objects.pod_fields).

The schema is the one ``kubernetes-validate`` ships (a dev dependency). A field that a later
Kubernetes adds to the PodSpec, or under a part gpufleet reads field by field, fails this
test until someone decides whether it changes where a pod may go.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from gpufleet.load.objects.pod_fields import (
    IMPLEMENTED,
    NOT_PLACEMENT,
    PREFERENCES,
    REFUSED,
    decided,
    used_fields,
    used_fields_of,
)

SCHEMAS = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
DEFINITIONS = json.loads((SCHEMAS / "v1.37.0-local" / "_definitions.json").read_text())["$defs"]


def _resolve(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    return DEFINITIONS[ref.rsplit("/", 1)[-1]] if ref else schema


def field_paths(schema: Mapping[str, Any], path: str, seen: frozenset[str]) -> Iterator[str]:
    """Every field below ``schema``, ``[]`` marking a list's items."""
    schema = _resolve(schema)
    if "items" in schema:
        yield from field_paths(schema["items"], f"{path}[]", seen)
        return
    for name, sub in (schema.get("properties") or {}).items():
        here = f"{path}.{name}"
        yield here
        ref = sub.get("$ref") or (sub.get("items") or {}).get("$ref") or ""
        if ref not in seen:
            yield from field_paths(sub, here, seen | {ref})


POD_SPEC_FIELDS = sorted(
    field_paths(DEFINITIONS["io.k8s.api.core.v1.PodSpec"], "spec", frozenset())
)


def test_the_schema_is_walked() -> None:
    assert len(POD_SPEC_FIELDS) > 500
    assert (
        "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[].topologyKey"
        in POD_SPEC_FIELDS
    )


def test_every_pod_spec_field_is_decided() -> None:
    undecided = [p for p in POD_SPEC_FIELDS if decided(p) is None]
    assert undecided == []


def test_every_entry_names_a_field_of_the_schema() -> None:
    known = set(POD_SPEC_FIELDS)
    for table in (IMPLEMENTED, REFUSED, PREFERENCES, NOT_PLACEMENT):
        assert sorted(set(table) - known) == []


def test_each_field_is_decided_once() -> None:
    tables = (set(IMPLEMENTED), set(REFUSED), set(PREFERENCES), set(NOT_PLACEMENT))
    for i, a in enumerate(tables):
        for b in tables[i + 1 :]:
            assert a & b == set()


def test_a_field_added_under_a_part_read_field_by_field_is_undecided() -> None:
    assert decided("spec.topologySpreadConstraints[].newKnob") is None
    assert (
        decided(
            "spec.affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[].newKnob"
        )
        is None
    )
    assert decided("spec.newField") is None
    assert decided("spec.containers[].securityContext.newField") == "not placement"
    assert decided("spec.volumes[].awsElasticBlockStore.readOnly") == "refused"
    assert decided("spec.volumes[].persistentVolumeClaim.claimName") == "implemented"


@pytest.mark.parametrize(
    ("obj", "path", "found"),
    [
        (
            {"spec": {"volumes": [{"name": "a"}, {"persistentVolumeClaim": {"claimName": "x"}}]}},
            "spec.volumes[].persistentVolumeClaim",
            ["spec.volumes[1].persistentVolumeClaim"],
        ),
        ({"spec": {"schedulingGroup": {}}}, "spec.schedulingGroup", []),
        ({"spec": {"schedulingGroup": None}}, "spec.schedulingGroup", []),
        ({"spec": {"volumes": "nope"}}, "spec.volumes[].ephemeral", []),
    ],
)
def test_used_fields_finds_set_fields(obj: Mapping[str, Any], path: str, found: list[str]) -> None:
    assert list(used_fields(obj, path)) == found


def test_one_walk_finds_what_each_field_s_own_walk_finds() -> None:
    """used_fields_of, which reads a pod once for every refused and preferred field, finds
    the same paths in the same order as used_fields field by field, on random objects."""
    paths = (*REFUSED, *PREFERENCES)
    keys = sorted({part.removesuffix("[]") for path in paths for part in path.split(".")})
    rng = random.Random(7)

    def value(depth: int) -> Any:
        roll = rng.random()
        if depth > 4 or roll < 0.3:
            return rng.choice([None, "", 0, 1, "x", {}, []])
        if roll < 0.6:
            return [value(depth + 1) for _ in range(rng.randint(0, 3))]
        return {rng.choice([*keys, "other"]): value(depth + 1) for _ in range(rng.randint(0, 4))}

    found = 0
    for _ in range(20_000):
        obj = {"spec": value(1)}
        want = [hit for path in paths for hit in used_fields(obj, path)]
        assert used_fields_of(obj, paths) == want, obj
        found += bool(want)
    assert found > 100  # the objects did set such fields
