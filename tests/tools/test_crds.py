"""gpufleet's CRDs (its own kinds' and the PodGroup CRD the chart can install): the committed
files are the generator's, each schema is one the API server takes (structural), each object
gets the same verdict from the loader and from the CRD's schema and rules, and the PodGroup
status gpufleet writes is one its CRD keeps whole.

The API server's side is modelled as it validates a create with ``kubectl``'s default
``--validate=strict``: the OpenAPI schema (``jsonschema``, with an unknown field an error),
the keys of ``x-kubernetes-list-type: map`` lists distinct, and each CEL rule on ``self``
(cel-python, with the Kubernetes quantity library of ``gpufleet.dra.cel``).
"""

from __future__ import annotations

import copy
import itertools
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import celpy
import httpx
import jsonschema
import pytest
from celpy.adapter import json_to_cel
from tools.crds import schema as crd_schema
from tools.crds.chart import files, main
from tools.crds.kinds import KINDS, PHASES, POD_GROUP, definitions
from tools.crds.schema import TYPES, spec_schema

from gpufleet.dra.cel import FUNCTIONS
from gpufleet.kube.write.podgroups import PodGroupStatus
from gpufleet.load.errors import InputError
from gpufleet.load.objects.kinds import GPUFLEET
from gpufleet.load.objects.node_pools import read_node_pool, read_topology
from gpufleet.load.objects.queues import read_group, read_queue
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.schema import STRICT, unknown_fields

JSON = dict[str, Any]
CHART = Path(__file__).parents[2] / "deploy" / "helm" / "gpufleet"
READERS: dict[str, Callable[[Reader], object]] = {
    "Queue": read_queue,
    "Topology": read_topology,
    "NodePool": read_node_pool,
    "PodGroup": read_group,
}


def test_the_committed_crds_are_the_generators() -> None:
    generated = files()
    paths = {p.relative_to(CHART).as_posix() for p in (CHART / "crds").glob("*.yaml")}
    paths |= {path for path in generated if (CHART / path).is_file()}
    written = {path: (CHART / path).read_text(encoding="utf-8") for path in sorted(paths)}
    assert written == generated, "run: python -m tools.crds --write " + str(
        (CHART / "crds").relative_to(Path(__file__).parents[2])
    )


def test_the_generator_writes_into_a_chart_only(tmp_path: Path) -> None:
    """The PodGroup CRD goes to the chart's templates/, beside the crds/ folder named."""
    with pytest.raises(SystemExit) as stopped:
        main(["--write", str(tmp_path / "crds")])
    assert stopped.value.code == 2
    (tmp_path / "Chart.yaml").write_text("name: x\n")
    main(["--write", str(tmp_path / "crds")])
    made = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.glob("*/*.yaml"))
    assert made == sorted(files())


def _definition(kind: str) -> JSON:
    (crd,) = [d for d in definitions() if d["spec"]["names"]["kind"] == kind]
    return crd


def _schema(kind: str) -> JSON:
    schema: JSON = _definition(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _strict(schema: JSON) -> JSON:
    """``schema`` with an unknown field an error, as ``--validate=strict`` makes it."""
    out = copy.deepcopy(schema)
    stack = [out]
    while stack:
        node = stack.pop()
        if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
            node.setdefault("additionalProperties", False)
        stack.extend(node.get("properties", {}).values())
        if isinstance(node.get("items"), dict):
            stack.append(node["items"])
    out["properties"]["metadata"] = {"type": "object"}
    return out


def _walk(schema: JSON, value: Any) -> Iterator[tuple[JSON, Any]]:
    """Each (schema, value) pair of an object, its root first."""
    yield schema, value
    if isinstance(value, dict):
        for key, item in value.items():
            if key in schema.get("properties", {}):
                yield from _walk(schema["properties"][key], item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            yield from _walk(schema["items"], item)


_ENV = celpy.Environment()


def _rule_holds(rule: str, value: Any) -> bool:
    program = _ENV.program(_ENV.compile(rule), functions=FUNCTIONS)
    result = program.evaluate({"self": json_to_cel(value)})
    assert isinstance(result, celpy.celtypes.BoolType), (rule, result)
    return bool(result)


def crd_accepts(obj: JSON) -> bool:
    schema = _schema(obj["kind"])
    if not jsonschema.Draft4Validator(_strict(schema)).is_valid(obj):
        return False
    for node, value in _walk(schema, obj):
        keys = node.get("x-kubernetes-list-map-keys")
        if keys and isinstance(value, list):
            seen = [tuple(item.get(k) for k in keys) for item in value]
            if len(set(seen)) != len(seen):
                return False
        for rule in node.get("x-kubernetes-validations", ()):
            if not _rule_holds(rule["rule"], value):
                return False
    return True


def loader_accepts(obj: JSON) -> bool:
    """Whether the loader reads ``obj``: an unknown field of a PodGroup (a Kubernetes kind,
    to the loader) is a warning, not a refusal."""
    if obj["kind"] in STRICT and any(unknown_fields(obj, STRICT[obj["kind"]])):
        return False
    try:
        READERS[obj["kind"]](Reader("crds.yaml", obj))
    except InputError:
        return False
    return True


def _obj(kind: str, spec: JSON | None) -> JSON:
    obj: JSON = {"apiVersion": GPUFLEET, "kind": kind, "metadata": {"name": "x"}}
    if spec is not None:
        obj["spec"] = spec
    return obj


def group(**spec: Any) -> JSON:
    return {
        "apiVersion": POD_GROUP,
        "kind": "PodGroup",
        "metadata": {"name": "x", "namespace": "ml"},
        "spec": spec,
    }


def queue(**resources: JSON) -> JSON:
    return _obj("Queue", {"resources": resources})


def queue_spec(**spec: Any) -> JSON:
    return _obj("Queue", spec)


def levels(*labels: Any) -> JSON:
    return _obj("Topology", {"levels": [{"nodeLabel": label} for label in labels]})


TEMPLATE: JSON = {"status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8"}}}


def pool(count: Any = 16, *domains: tuple[Any, Any], **extra: Any) -> JSON:
    spec: JSON = {"count": count, "template": TEMPLATE, **extra}
    if domains:
        spec["domains"] = [{"label": label, "size": size} for label, size in domains]
    return _obj("NodePool", spec)


CASES = [
    # Queue
    pytest.param(_obj("Queue", None), True, id="queue-without-spec"),
    pytest.param(
        queue_spec(
            parentQueue="research",
            priority=50,
            preemptMinRuntime="1h30m",
            reclaimMinRuntime=90,
            resources={
                "gpu": {"quota": 4, "limit": 8, "overQuotaWeight": 2},
                "cpu": {"quota": "8", "limit": "16000m", "overQuotaWeight": 0.5},
                "memory": {"quota": "64Gi", "limit": -1},
            },
        ),
        True,
        id="queue-every-field",
    ),
    pytest.param(queue_spec(serving={}), True, id="queue-serving"),
    pytest.param(queue_spec(serving={"forecastGPUs": 16}), True, id="queue-serving-forecast"),
    pytest.param(queue_spec(serving={"forecastGPUs": "1Ti"}), True, id="queue-forecast-at-most"),
    pytest.param(queue_spec(serving={"forecastGPUs": "2Ti"}), False, id="queue-forecast-huge"),
    pytest.param(queue_spec(serving={"forecastGPUs": -1}), False, id="queue-forecast-negative"),
    pytest.param(queue_spec(serving={"forecastGPUs": "x"}), False, id="queue-forecast-not-number"),
    pytest.param(queue_spec(serving={"forecast": 4}), False, id="queue-serving-unknown-field"),
    pytest.param(queue_spec(serving={"forecastQuery": "max(x)"}), True, id="queue-forecast-query"),
    pytest.param(queue_spec(serving={"forecastQuery": ""}), False, id="queue-forecast-query-empty"),
    pytest.param(
        queue_spec(serving={"forecastQuery": "x" * 4097}), False, id="queue-forecast-query-long"
    ),
    pytest.param(queue_spec(serving={"forecastQuery": 4}), False, id="queue-forecast-query-number"),
    pytest.param(queue(gpu={"quota": 4, "limit": 2}), False, id="queue-limit-below-quota"),
    pytest.param(
        queue(memory={"quota": "64Gi", "limit": "32Gi"}), False, id="queue-limit-below-quota-units"
    ),
    pytest.param(
        queue(memory={"quota": "1Gi", "limit": "1024Mi"}), True, id="queue-limit-equal-quota"
    ),
    pytest.param(queue(gpu={"limit": 2}), True, id="queue-limit-without-quota"),
    pytest.param(queue(gpu={"quota": -1, "limit": 2}), True, id="queue-quota-none"),
    pytest.param(queue(gpu={"quota": 4, "limit": "-1"}), True, id="queue-limit-none-string"),
    pytest.param(queue(gpu={"quota": -2}), False, id="queue-negative-quota"),
    pytest.param(queue(cpu={"quota": "-500m"}), False, id="queue-negative-quota-string"),
    pytest.param(queue(gpu={"quota": "lots"}), False, id="queue-quota-not-a-quantity"),
    pytest.param(queue(memory={"quota": "5e15"}), False, id="queue-quota-too-large"),
    pytest.param(queue(gpu={"quota": True}), False, id="queue-quota-bool"),
    pytest.param(queue(gpu={"overQuotaWeight": -1}), False, id="queue-negative-weight"),
    pytest.param(queue(gpu={"overQuotaWeight": "2"}), False, id="queue-weight-string"),
    pytest.param(queue(gpu={"overQuotaWeight": True}), False, id="queue-weight-bool"),
    pytest.param(queue_spec(priority="high"), False, id="queue-priority-string"),
    pytest.param(queue_spec(priority=True), False, id="queue-priority-bool"),
    pytest.param(queue_spec(parentQueue=3), False, id="queue-parent-not-a-name"),
    pytest.param(queue_spec(preemptMinRuntime="10 minutes"), False, id="queue-duration-words"),
    pytest.param(queue_spec(reclaimMinRuntime=-5), False, id="queue-duration-negative"),
    pytest.param(queue_spec(reclaimMinRuntime="250ms"), True, id="queue-duration-ms"),
    pytest.param(queue(gpu={"quotaa": 4}), False, id="queue-misspelt-field"),
    pytest.param(queue(tpu={"quota": 4}), False, id="queue-unknown-resource"),
    pytest.param(queue(gpu=4), False, id="queue-resource-not-a-mapping"),  # type: ignore[arg-type]
    # Topology
    pytest.param(levels("block", "rack", "kubernetes.io/hostname"), True, id="topology"),
    pytest.param(_obj("Topology", None), False, id="topology-without-spec"),
    pytest.param(levels(), False, id="topology-no-levels"),
    pytest.param(levels("rack", "rack"), False, id="topology-repeated-level"),
    pytest.param(levels(""), False, id="topology-empty-label"),
    pytest.param(levels(5), False, id="topology-label-not-a-string"),
    pytest.param(_obj("Topology", {"levels": [{}]}), False, id="topology-level-without-label"),
    pytest.param(
        _obj("Topology", {"levels": [{"nodeLabel": "rack", "size": 2}]}),
        False,
        id="topology-unknown-field",
    ),
    # NodePool
    pytest.param(pool(), True, id="pool"),
    pytest.param(pool(64, ("block", 32), ("rack", 8), ("leaf", 2)), True, id="pool-domains"),
    pytest.param(pool(0), False, id="pool-no-nodes"),
    pytest.param(pool(100_001), False, id="pool-too-many-nodes"),
    pytest.param(pool("4"), False, id="pool-count-string"),
    pytest.param(_obj("NodePool", {"count": 4}), False, id="pool-without-template"),
    pytest.param(_obj("NodePool", {"template": TEMPLATE}), False, id="pool-without-count"),
    pytest.param(pool(4, template={}), False, id="pool-empty-template"),
    pytest.param(
        pool(4, template={**TEMPLATE, "spec": {"taintz": []}}), False, id="pool-template-typo"
    ),
    pytest.param(pool(4, ("kubernetes.io/hostname", 1)), False, id="pool-domain-hostname"),
    pytest.param(pool(8, ("rack", 4), ("rack", 2)), False, id="pool-domain-repeated"),
    pytest.param(pool(8, ("", 4)), False, id="pool-domain-empty-label"),
    pytest.param(pool(8, ("rack", 0)), False, id="pool-domain-size-zero"),
    pytest.param(pool(8, ("rack", "4")), False, id="pool-domain-size-string"),
    pytest.param(pool(8, ("block", 8), ("rack", 3)), False, id="pool-domain-not-dividing"),
    pytest.param(pool(8, ("block", 2), ("rack", 4)), False, id="pool-domain-wider-later"),
    pytest.param(pool(8, ("block", 4), ("rack", 4)), False, id="pool-domain-same-size"),
    pytest.param(
        pool(1024, *((f"l{i}", 2 ** (9 - i)) for i in range(8))), True, id="pool-eight-domains"
    ),
    pytest.param(
        pool(1024, *((f"l{i}", 2 ** (9 - i)) for i in range(9))), False, id="pool-nine-domains"
    ),
    pytest.param(pool(0, autoscaling={"maxNodes": 8}), True, id="pool-autoscaling-empty"),
    pytest.param(
        pool(
            2,
            template={"metadata": {"labels": {"karpenter.sh/capacity-type": "spot"}}, **TEMPLATE},
            autoscaling={
                "maxNodes": 8,
                "minNodes": 1,
                "provisioningDelay": "4m",
                "interruptionsPerHour": 0.05,
                "availability": 0.9,
            },
        ),
        True,
        id="pool-autoscaling-every-field",
    ),
    pytest.param(pool(4, autoscaling={}), False, id="pool-autoscaling-without-max"),
    pytest.param(pool(4, autoscaling={"maxNodes": 2}), False, id="pool-autoscaling-max-below"),
    pytest.param(
        pool(4, autoscaling={"maxNodes": 8, "minNodes": 5}), False, id="pool-autoscaling-min-above"
    ),
    pytest.param(
        pool(4, autoscaling={"maxNodes": 8, "availability": 0}),
        False,
        id="pool-autoscaling-never-available",
    ),
    pytest.param(
        pool(4, autoscaling={"maxNodes": 8, "interruptionsPerHour": 2}),
        False,
        id="pool-autoscaling-rate-above-one",
    ),
    pytest.param(
        pool(4, autoscaling={"maxNodes": 8, "delay": "5m"}), False, id="pool-autoscaling-typo"
    ),
    # PodGroup
    pytest.param(group(), True, id="podgroup-empty-spec"),
    pytest.param(
        group(
            minMember=4,
            minResources={"nvidia.com/gpu": 32, "cpu": "500m", "memory": "80Gi"},
            scheduleTimeoutSeconds=600,
        ),
        True,
        id="podgroup-every-field",
    ),
    pytest.param(group(minMember=1), True, id="podgroup-one-member"),
    pytest.param(group(minMember=0), False, id="podgroup-no-members"),
    pytest.param(group(minMember=-2), False, id="podgroup-negative-members"),
    pytest.param(group(minMember="4"), False, id="podgroup-members-string"),
    pytest.param(group(minMember=2.5), False, id="podgroup-members-fraction"),
    pytest.param(group(minMember=True), False, id="podgroup-members-bool"),
    pytest.param(
        group(minResources={"cpu": "lots"}), False, id="podgroup-resources-not-a-quantity"
    ),
    pytest.param(group(minResources={"cpu": -1}), False, id="podgroup-resources-negative"),
    pytest.param(group(minResources=[{"cpu": 1}]), False, id="podgroup-resources-not-a-map"),
    pytest.param(group(scheduleTimeoutSeconds="60s"), False, id="podgroup-timeout-string"),
    pytest.param(group(scheduleTimeoutSeconds=-1), False, id="podgroup-timeout-negative"),
]


@pytest.mark.parametrize(("obj", "valid"), CASES)
def test_the_loader_and_the_crd_agree(obj: JSON, valid: bool) -> None:
    assert (loader_accepts(obj), crd_accepts(obj)) == (valid, valid)


NARROWER = [
    pytest.param(queue(gpu={"quota": 2.5}), id="queue-quantity-as-a-fraction"),
    pytest.param(queue_spec(reclaimMinRuntime=90.5), id="queue-duration-as-a-fraction"),
]
"""Where the CRD is stricter than the loader, and why: a quantity or duration in a CRD is
``x-kubernetes-int-or-string`` (as Kubernetes' own quantities are), so a fraction is written
as a string ("2.5", "90.5s"); a snapshot the loader reads may have it as a number."""


@pytest.mark.parametrize("obj", NARROWER)
def test_the_crd_wants_a_fraction_as_a_string(obj: JSON) -> None:
    assert (loader_accepts(obj), crd_accepts(obj)) == (True, False)


NARROWER_POD_GROUP = [
    pytest.param(group(minMember=2, minMembers=3), id="podgroup-misspelt-field"),
]
"""Where the PodGroup CRD is stricter than the loader, and why: the loader warns of an
unknown field of a Kubernetes kind rather than refuse it (both hold ``minMember`` to
scheduler-plugins' ``int32``)."""


@pytest.mark.parametrize("obj", NARROWER_POD_GROUP)
def test_the_podgroup_crd_checks_what_the_loader_does_not_read(obj: JSON) -> None:
    assert (loader_accepts(obj), crd_accepts(obj)) == (True, False)


def test_each_rule_of_the_crds_alone_rejects_a_case() -> None:
    rules = {
        rule["rule"]
        for kind in READERS
        for node in _nodes(_schema(kind))
        for rule in node.get("x-kubernetes-validations", ())
    }
    broken = set()
    for case in CASES:
        obj, valid = case.values
        schema = _schema(obj["kind"])  # type: ignore[index]
        if valid or not jsonschema.Draft4Validator(_strict(schema)).is_valid(obj):
            continue  # a rule must be what rejects it
        for node, value in _walk(schema, obj):
            broken |= {
                r["rule"]
                for r in node.get("x-kubernetes-validations", ())
                if not _rule_holds(r["rule"], value)
            }
    assert rules
    assert broken == rules


def _nodes(schema: JSON) -> Iterator[JSON]:
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from _nodes(sub)
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"])


def test_a_field_of_the_loaders_table_without_a_type_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    types = {k: dict(v) for k, v in TYPES.items()}
    del types["Queue"]["spec.priority"]
    monkeypatch.setattr(crd_schema, "TYPES", types)
    with pytest.raises(KeyError, match=r"no type for field spec\.priority"):
        spec_schema("Queue")


def test_a_type_for_a_field_the_loader_does_not_read_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    types = {k: dict(v) for k, v in TYPES.items()}
    types["Queue"]["spec.weight"] = {"type": "number"}
    monkeypatch.setattr(crd_schema, "TYPES", types)
    with pytest.raises(KeyError, match="does not read"):
        spec_schema("Queue")


def test_short_names_do_not_take_kubernetes_or_volcano_ones() -> None:
    taken = {"q", "queue-v1beta1", "pg", "no", "po", "pc", "np", "cq", "lq"}
    names = [n for k in KINDS for n in k.short_names]
    assert len(set(names)) == len(names)
    assert not taken & set(names)


# -- the schemas are ones the API server takes ----------------------------------------------

_SCALARS: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
}
_FORMATS = {"string": {"date-time", "date", "byte", "duration"}, "integer": {"int32", "int64"}}
_IN_COMBINATORS = {"description", "type", "default", "additionalProperties", "nullable"}
_INT_OR_STRING = [{"type": "integer"}, {"type": "string"}]
_COLUMN_TYPES = {"integer", "number", "string", "boolean", "date"}


def _is_bool(value: object, kind: str) -> bool:
    """A JSON true or false where a number is wanted (Python's bool is an int)."""
    return isinstance(value, bool) and kind != "boolean"


def structural_problems(schema: JSON, path: str = "") -> Iterator[str]:  # noqa: PLR0912 (a branch per rule)
    """Where ``schema`` breaks Kubernetes' rules for a structural schema ("Extend the
    Kubernetes API with CustomResourceDefinitions: Specifying a structural schema") or for
    the extensions, formats and lists it uses; nothing when the API server would take it."""
    where = path or "<root>"
    kind = schema.get("type")
    int_or_string = schema.get("x-kubernetes-int-or-string") is True
    if not kind and not int_or_string and not schema.get("x-kubernetes-preserve-unknown-fields"):
        yield f"{where}: no type"
    if int_or_string and (kind or schema.get("anyOf", _INT_OR_STRING) != _INT_OR_STRING):
        yield f"{where}: int-or-string must have no type, and anyOf only integer and string"
    for combinator in ("allOf", "anyOf", "oneOf", "not"):
        parts = schema.get(combinator, [])
        for part in parts if isinstance(parts, list) else [parts]:
            if part not in _INT_OR_STRING and _IN_COMBINATORS & set(part):
                yield f"{where}: {combinator} sets {sorted(_IN_COMBINATORS & set(part))}"
    if "properties" in schema and "additionalProperties" in schema:
        yield f"{where}: properties and additionalProperties together"
    if kind in _SCALARS:
        wanted = _SCALARS[kind]
        enum = schema.get("enum", ())
        if any(not isinstance(v, wanted) or _is_bool(v, kind) for v in enum):
            yield f"{where}: enum values not of type {kind}"
    if "format" in schema and schema["format"] not in _FORMATS.get(kind or "", set()):
        yield f"{where}: format {schema['format']} on type {kind}"
    if schema.get("minimum", -math.inf) > schema.get("maximum", math.inf):
        yield f"{where}: minimum above maximum"
    missing = set(schema.get("required", ())) - set(schema.get("properties", {}))
    if missing:
        yield f"{where}: required fields it has no schema for: {sorted(missing)}"
    list_type = schema.get("x-kubernetes-list-type")
    if list_type and kind != "array":
        yield f"{where}: x-kubernetes-list-type on a {kind}"
    if kind == "array" and not isinstance(schema.get("items"), dict):
        yield f"{where}: an array without items"
    if list_type == "map":
        items = schema.get("items", {})
        for key in schema.get("x-kubernetes-list-map-keys", ()):
            field = items.get("properties", {}).get(key, {})
            if field.get("type") not in _SCALARS or key not in items.get("required", ()):
                yield f"{where}: list-map key {key} is not a required scalar of its items"
    elif "x-kubernetes-list-map-keys" in schema:
        yield f"{where}: list-map keys without x-kubernetes-list-type: map"
    for name, sub in schema.get("properties", {}).items():
        yield from structural_problems(sub, f"{path}.{name}")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from structural_problems(schema["additionalProperties"], f"{path}.*")
    if isinstance(schema.get("items"), dict):
        yield from structural_problems(schema["items"], f"{path}[]")


def crd_problems(crd: JSON) -> Iterator[str]:
    """:func:`structural_problems` of each version's schema, and what the API server checks
    of the rest of a version: ``metadata`` left to it, printer columns of a known type at a
    field of the schema, a ``status`` for the status subresource."""
    for version in crd["spec"]["versions"]:
        root = version["schema"]["openAPIV3Schema"]
        yield from structural_problems(root)
        properties = root.get("properties", {})
        if properties.get("metadata", {"type": "object"}) != {"type": "object"}:
            yield "metadata: only the API server's schema applies"
        if "status" in version.get("subresources", {}) and "status" not in properties:
            yield "a status subresource without a status"
        names = [c["name"] for c in version.get("additionalPrinterColumns", ())]
        if len(set(names)) != len(names):
            yield "printer columns of the same name"
        for column in version.get("additionalPrinterColumns", ()):
            if column["type"] not in _COLUMN_TYPES:
                yield f"column {column['name']}: type {column['type']}"
            node: JSON = root
            for part in column["jsonPath"].removeprefix(".").split("."):
                if node is root and part == "metadata":
                    break  # the API server's ObjectMeta: any of its fields
                node = node.get("properties", {}).get(part, {})
                if not node:
                    yield f"column {column['name']}: {column['jsonPath']} is no field"
                    break


@pytest.mark.parametrize("crd", definitions(), ids=lambda d: str(d["metadata"]["name"]))
def test_each_crd_is_one_the_api_server_takes(crd: JSON) -> None:
    assert list(crd_problems(crd)) == []


def _broken(change: Callable[[JSON], object]) -> JSON:
    crd = copy.deepcopy(_definition("PodGroup"))
    change(crd["spec"]["versions"][0])
    return crd


def _spec(version: JSON) -> JSON:
    spec: JSON = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("crd", "problem"),
    [
        pytest.param(
            _broken(lambda v: _spec(v)["properties"]["minMember"].pop("type")),
            ".spec.minMember: no type",
            id="no-type",
        ),
        pytest.param(
            _broken(lambda v: _spec(v).update(additionalProperties={"type": "string"})),
            ".spec: properties and additionalProperties together",
            id="properties-and-map",
        ),
        pytest.param(
            _broken(lambda v: v["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
                    ["conditions"]["items"]["required"].remove("type")),
            ".status.conditions: list-map key type is not a required scalar of its items",
            id="list-map-key-optional",
        ),
        pytest.param(
            _broken(lambda v: v["additionalPrinterColumns"][0].update(jsonPath=".status.phaze")),
            "column Phase: .status.phaze is no field",
            id="column-typo",
        ),
        pytest.param(
            _broken(lambda v: _spec(v)["properties"]["minMember"].update(format="date-time")),
            ".spec.minMember: format date-time on type integer",
            id="format-of-another-type",
        ),
        pytest.param(
            _broken(lambda v: v["schema"]["openAPIV3Schema"]["properties"].pop("status")),
            "a status subresource without a status",
            id="status-subresource-without-status",
        ),
    ],
)  # fmt: skip
def test_the_checks_find_what_the_api_server_refuses(crd: JSON, problem: str) -> None:
    assert problem in list(crd_problems(crd))


# -- the PodGroup status gpufleet writes ----------------------------------------------------

UPSTREAM_STATUS = {"phase", "occupiedBy", "running", "succeeded", "failed", "scheduleStartTime"}
"""scheduler-plugins' ``PodGroupStatus`` fields (``apis/scheduling/v1alpha1``)."""
RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def _written() -> Iterator[JSON]:
    """Statuses ``kube/write/podgroups.py`` writes: every phase, waiting and placed, first and
    later."""
    writer = PodGroupStatus(httpx.AsyncClient(), clock=lambda: 1_767_225_600.5)
    before: JSON = {}
    for min_member in (1, 3):
        for counted in itertools.product(range(4), repeat=4):
            found = dict(zip(("scheduled", "running", "succeeded", "failed"), counted, strict=True))
            why = "" if found["scheduled"] else "0/2 nodes are available: 2 Insufficient gpu."
            status = writer._status(min_member, found, why, before)
            yield status
            before = status


def test_the_podgroup_crd_keeps_whole_what_gpufleet_writes() -> None:
    """Every field gpufleet writes is in the schema (none pruned) and valid there; the schema
    has no field that neither gpufleet nor scheduler-plugins writes; its phases are the API's
    that gpufleet writes, all of them."""
    status_schema = _schema("PodGroup")["properties"]["status"]
    checker = jsonschema.FormatChecker()
    checker.checks("date-time")(lambda value: bool(RFC3339.fullmatch(str(value))))
    validator = jsonschema.Draft4Validator(_strict(status_schema), format_checker=checker)
    written = list(_written())
    for status in written:
        assert not list(validator.iter_errors(status)), status
    fields = {name for status in written for name in status}
    assert set(status_schema["properties"]) == fields | UPSTREAM_STATUS
    assert set(status_schema["properties"]["phase"]["enum"]) == {s["phase"] for s in written}
    assert set(PHASES) == {s["phase"] for s in written}


def test_a_status_beyond_the_api_is_refused() -> None:
    status_schema = _strict(_schema("PodGroup")["properties"]["status"])
    validator = jsonschema.Draft4Validator(status_schema)
    assert validator.is_valid({"phase": "Running", "running": 3})
    for wrong in (
        {"phase": "Done"},
        {"running": -1},
        {"scheduled": 2**31},
        {"conditions": [{"type": "Scheduled", "status": "Yes"}]},
        {"conditions": [{"status": "True"}]},
        {"queue": "research"},
    ):
        assert not validator.is_valid(wrong), wrong
