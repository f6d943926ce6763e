"""gpufleet's CRDs: the committed files are the generator's, and each object gets the same
verdict from the loader and from the CRD's schema and rules.

The API server's side is modelled as it validates a create with ``kubectl``'s default
``--validate=strict``: the OpenAPI schema (``jsonschema``, with an unknown field an error),
the keys of ``x-kubernetes-list-type: map`` lists distinct, and each CEL rule on ``self``
(cel-python, with the Kubernetes quantity library of ``gpufleet.dra.cel``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import pytest
import yaml
from celpy.adapter import json_to_cel

from gpufleet.dra.cel import FUNCTIONS
from gpufleet.load import crds
from gpufleet.load.errors import InputError
from gpufleet.load.kinds import GPUFLEET
from gpufleet.load.node_pools import read_node_pool, read_topology
from gpufleet.load.queues import read_queue
from gpufleet.load.reader import Reader
from gpufleet.load.schema import STRICT, unknown_fields

JSON = dict[str, Any]
FOLDER = Path(__file__).parents[1] / "deploy" / "helm" / "gpufleet" / "crds"
READERS: dict[str, Callable[[Reader], object]] = {
    "Queue": read_queue,
    "Topology": read_topology,
    "NodePool": read_node_pool,
}


def test_the_committed_crds_are_the_generators() -> None:
    written = {p.name: p.read_text(encoding="utf-8") for p in FOLDER.glob("*.yaml")}
    assert written == crds.files(), "run: python -m gpufleet.load.crds --write " + str(
        FOLDER.relative_to(Path(__file__).parents[1])
    )


def _schema(kind: str) -> JSON:
    crd = next(yaml.safe_load(t) for t in crds.files().values() if f"kind: {kind}\n" in t)
    schema: JSON = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
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
    if any(unknown_fields(obj, STRICT[obj["kind"]])):
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
    types = {k: dict(v) for k, v in crds.TYPES.items()}
    del types["Queue"]["spec.priority"]
    monkeypatch.setattr(crds, "TYPES", types)
    with pytest.raises(KeyError, match=r"no type for field spec\.priority"):
        crds.spec_schema("Queue")


def test_a_type_for_a_field_the_loader_does_not_read_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    types = {k: dict(v) for k, v in crds.TYPES.items()}
    types["Queue"]["spec.weight"] = {"type": "number"}
    monkeypatch.setattr(crds, "TYPES", types)
    with pytest.raises(KeyError, match="does not read"):
        crds.spec_schema("Queue")


def test_short_names_do_not_take_kubernetes_or_volcano_ones() -> None:
    taken = {"q", "queue-v1beta1", "pg", "no", "po", "pc", "np", "cq", "lq"}
    names = [n for k in crds.KINDS for n in k.short_names]
    assert len(set(names)) == len(names)
    assert not taken & set(names)
