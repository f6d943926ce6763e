"""Read Dynamic Resource Allocation objects (``resource.k8s.io/v1``) from a snapshot.

DeviceClasses (their CEL selectors), ResourceSlices (grouped into pools: the newest
generation of each pool, complete when all ``resourceSliceCount`` slices are there),
ResourceClaims (requests, constraints, and an existing allocation) and
ResourceClaimTemplates (a pod's claim ``<pod>-<name>`` made from the template). Selectors
are compiled by the allocator, which reports a broken one against the claims that use it.
A DeviceClass may say how many GPUs one of its devices counts as toward a queue
(annotation ``gpufleet.io/gpus-per-device``, see model/devices.py).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from gpufleet.dra.cel import Semver
from gpufleet.load.objects.reader import INT64_MAX, Reader
from gpufleet.model.devices import (
    GPUS_PER_DEVICE,
    Claim,
    Constraint,
    Device,
    DeviceAllocation,
    DeviceClass,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    OpaqueConfig,
    Pool,
    Request,
    Subrequest,
)

MAX_SLICE_DEVICES = 128
"""Devices in one ResourceSlice: the limit the API server enforces (``resource.k8s.io/v1``)."""


def _selectors(r: Reader, path: str, raw: object = None) -> tuple[str, ...]:
    """The CEL expressions of a ``selectors`` list (read at ``path`` unless given)."""
    items = r.sequence(path) if raw is None else raw
    if not isinstance(items, list):
        raise r.fail(path, "a list of selectors", items)
    out = []
    for i, selector in enumerate(items):
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        expression = cel.get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(expression, str) or not expression:
            raise r.fail(f"{path}[{i}].cel.expression", "a CEL expression", expression)
        out.append(expression)
    return tuple(out)


def _config(r: Reader, path: str, *, with_requests: bool) -> tuple[OpaqueConfig, ...]:
    out = []
    for i, raw in enumerate(r.sequence(path)):
        opaque = raw.get("opaque") if isinstance(raw, Mapping) else None
        if not isinstance(opaque, Mapping) or not isinstance(opaque.get("driver"), str):
            raise r.fail(f"{path}[{i}].opaque.driver", "opaque driver configuration", raw)
        requests = tuple(str(x) for x in raw.get("requests") or []) if with_requests else ()
        parameters = json.dumps(opaque.get("parameters"), sort_keys=True, default=str)
        out.append(OpaqueConfig(opaque["driver"], parameters, requests))
    return tuple(out)


def device_class(r: Reader) -> DeviceClass:
    return DeviceClass(
        r.name,
        _selectors(r, "spec.selectors"),
        _config(r, "spec.config", with_requests=False),
        _gpus_per_device(r),
    )


def _gpus_per_device(r: Reader) -> float | None:
    """The class's ``gpufleet.io/gpus-per-device`` annotation (model/devices.py's rule)."""
    raw = r.strings("metadata.annotations").get(GPUS_PER_DEVICE)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise r.fail(
            f"metadata.annotations.{GPUS_PER_DEVICE}",
            'a non-negative number of GPUs one device counts as ("1", "0.5", "0")',
            raw,
        )
    return value


def _qualified(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


def _attribute(r: Reader, path: str, raw: object) -> object:
    if not isinstance(raw, Mapping) or len(raw) != 1:
        raise r.fail(path, "one of int, bool, string or version", raw)
    kind, value = next(iter(raw.items()))
    if kind == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "string" and isinstance(value, str):
        return value
    if kind == "version" and isinstance(value, str):
        return Semver(value)
    raise r.fail(f"{path}.{kind}", "an int, bool, string or version value", value)


def _device(
    r: Reader, path: str, raw: object, *, driver: str, pool: str, placement: dict[str, Any]
) -> Device:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise r.fail(f"{path}.name", "a device name", raw)
    attributes = {
        _qualified(str(k), driver): _attribute(r, f"{path}.attributes.{k}", v)
        for k, v in (raw.get("attributes") or {}).items()
    }
    capacity = {}
    for k, v in (raw.get("capacity") or {}).items():
        value = v.get("value") if isinstance(v, Mapping) else None
        capacity[_qualified(str(k), driver)] = r.quantity(f"{path}.capacity.{k}.value", value)
    taints = []
    for j, t in enumerate(raw.get("taints") or []):
        if not isinstance(t, Mapping) or not t.get("key"):
            raise r.fail(f"{path}.taints[{j}].key", "a taint with a key", t)
        taints.append(
            DeviceTaint(
                str(t["key"]), str(t.get("value") or ""), str(t.get("effect", "NoSchedule"))
            )
        )
    consumes = []
    for j, c in enumerate(raw.get("consumesCounters") or []):
        if not isinstance(c, Mapping) or not isinstance(c.get("counterSet"), str):
            raise r.fail(f"{path}.consumesCounters[{j}].counterSet", "a counter set name", c)
        amounts = tuple(
            (
                str(name),
                r.quantity(f"{path}.consumesCounters[{j}].counters.{name}", (v or {}).get("value")),
            )
            for name, v in (c.get("counters") or {}).items()
        )
        consumes.append((c["counterSet"], amounts))
    return Device(
        driver,
        pool,
        raw["name"],
        placement["node"],
        placement["all_nodes"],
        placement["nodes"],
        attributes,
        capacity,
        tuple(taints),
        tuple(consumes),
        raw.get("allowMultipleAllocations") is True,
    )


def pools(slices: list[Reader], node_labels: Mapping[str, Mapping[str, str]]) -> tuple[Pool, ...]:
    """The pools of the slices: per (driver, pool) the newest generation's devices."""
    grouped: dict[tuple[str, str], list[tuple[int, int, Reader]]] = defaultdict(list)
    for r in slices:
        driver = r.string("spec.driver")
        name = r.string("spec.pool.name")
        if not driver or not name:
            raise r.fail("spec.driver" if not driver else "spec.pool.name", "a name", None)
        grouped[driver, name].append(
            (
                r.integer("spec.pool.generation", 0, minimum=0, maximum=INT64_MAX),  # int64
                r.integer("spec.pool.resourceSliceCount", 1, minimum=1, maximum=INT64_MAX),
                r,
            )
        )
    out = []
    for (driver, name), entries in sorted(grouped.items()):
        newest = max(g for g, _, _ in entries)
        current = [(count, r) for g, count, r in entries if g == newest]
        devices: list[Device] = []
        counters: dict[str, dict[str, Decimal]] = {}
        for _, r in current:
            per_device = r.get("spec.perDeviceNodeSelection") is True
            spec = r.mapping("spec")
            placement = None if per_device else _placement(r, spec, "spec", node_labels)
            listed = r.sequence("spec.devices")
            if len(listed) > MAX_SLICE_DEVICES:
                raise r.fail(
                    "spec.devices",
                    f"at most {MAX_SLICE_DEVICES} devices (Kubernetes' limit per slice)",
                    f"{len(listed)} devices",
                )
            for i, raw in enumerate(listed):
                if per_device:
                    if not isinstance(raw, Mapping):
                        raise r.fail(f"spec.devices[{i}]", "a device", raw)
                    placement = _placement(r, raw, f"spec.devices[{i}]", node_labels)
                assert placement is not None
                devices.append(
                    _device(
                        r, f"spec.devices[{i}]", raw, driver=driver, pool=name, placement=placement
                    )
                )
            for j, shared in enumerate(r.sequence("spec.sharedCounters")):
                if not isinstance(shared, Mapping) or not isinstance(shared.get("name"), str):
                    raise r.fail(f"spec.sharedCounters[{j}].name", "a counter set name", shared)
                counters[shared["name"]] = {
                    str(k): r.quantity(
                        f"spec.sharedCounters[{j}].counters.{k}", (v or {}).get("value")
                    )
                    for k, v in (shared.get("counters") or {}).items()
                }
        names = [d.name for d in devices]
        invalid = None
        if len(set(names)) != len(names):
            twice = sorted({n for n in names if names.count(n) > 1})
            invalid = f"device name(s) {', '.join(twice)} appear in more than one slice"
        elif len({count for count, _ in current}) > 1:
            invalid = "its slices disagree on resourceSliceCount"
        out.append(
            Pool(
                driver,
                name,
                newest,
                current[0][0],
                len(current),
                tuple(devices),
                counters,
                invalid,
            )
        )
    return tuple(out)


def _placement(
    r: Reader, obj: Mapping[str, Any], path: str, node_labels: Mapping[str, Mapping[str, str]]
) -> dict[str, Any]:
    """Where a slice's devices (or, with ``perDeviceNodeSelection``, one device) can be used."""
    node = obj.get("nodeName")
    if node is not None and not isinstance(node, str):
        raise r.fail(f"{path}.nodeName", "a node name", node)
    all_nodes = obj.get("allNodes") is True
    selector = obj.get("nodeSelector")
    nodes = None
    if selector is not None:
        nodes = frozenset(
            name for name, labels in node_labels.items() if _selects(r, selector, labels)
        )
    if sum(x is not None and x is not False for x in (node, all_nodes or None, selector)) != 1:
        raise r.fail(path, "exactly one of nodeName, allNodes or nodeSelector", None)
    return {"node": node, "all_nodes": all_nodes, "nodes": nodes}


def _selects(r: Reader, selector: object, labels: Mapping[str, str]) -> bool:
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, Mapping) else None
    if not isinstance(terms, list):
        raise r.fail("spec.nodeSelector.nodeSelectorTerms", "a list of terms", selector)
    for term in terms:
        exprs = term.get("matchExpressions") or [] if isinstance(term, Mapping) else []
        if exprs and all(
            isinstance(e, Mapping)
            and e.get("operator") == "In"
            and labels.get(str(e.get("key"))) in [str(v) for v in e.get("values") or []]
            for e in exprs
        ):
            return True
    return False


def _subrequest(r: Reader, path: str, raw: Mapping[str, Any], name: str) -> Subrequest:
    cls = raw.get("deviceClassName")
    if not isinstance(cls, str) or not cls:
        raise r.fail(f"{path}.deviceClassName", "a DeviceClass name", cls)
    mode = raw.get("allocationMode", "ExactCount")
    if mode not in {"ExactCount", "All"}:
        raise r.fail(f"{path}.allocationMode", "ExactCount or All", mode)
    count = raw.get("count", 1)
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise r.fail(f"{path}.count", "a positive integer", count)
    tolerations = tuple(
        DeviceToleration(
            str(t.get("key") or ""),
            str(t.get("operator", "Equal")),
            str(t.get("value") or ""),
            str(t.get("effect") or ""),
        )
        for t in raw.get("tolerations") or []
        if isinstance(t, Mapping)
    )
    selectors = _selectors(r, f"{path}.selectors", raw.get("selectors") or [])
    capacity = raw.get("capacity") or {}
    asked = capacity.get("requests") if isinstance(capacity, Mapping) else None
    if asked is not None and not isinstance(asked, Mapping):
        raise r.fail(f"{path}.capacity.requests", "capacity names with quantities", asked)
    consumes = tuple(
        (str(k), r.quantity(f"{path}.capacity.requests.{k}", v)) for k, v in (asked or {}).items()
    )
    return Subrequest(
        name,
        cls,
        selectors,
        count,
        mode == "All",
        raw.get("adminAccess") is True,
        tolerations,
        consumes,
    )


def claim_spec(r: Reader, path: str, key: str) -> Claim:
    """The claim that ``path`` of ``r`` specifies (a ResourceClaim's ``spec``, a template's
    ``spec.spec``: required by the API, so a missing one is refused, never read as a claim
    of no devices)."""
    if not isinstance(r.get(path), Mapping):
        raise r.fail(path, "a ResourceClaimSpec (required)", r.get(path))
    requests = []
    for i, raw in enumerate(r.sequence(f"{path}.devices.requests")):
        where = f"{path}.devices.requests[{i}]"
        if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
            raise r.fail(f"{where}.name", "a request name", raw)
        if isinstance(raw.get("exactly"), Mapping):
            requests.append(
                Request(
                    raw["name"], (_subrequest(r, f"{where}.exactly", raw["exactly"], raw["name"]),)
                )
            )
        elif isinstance(raw.get("firstAvailable"), list) and raw["firstAvailable"]:
            subs = tuple(
                _subrequest(r, f"{where}.firstAvailable[{j}]", sub, str(sub.get("name")))
                for j, sub in enumerate(raw["firstAvailable"])
                if isinstance(sub, Mapping)
            )
            requests.append(Request(raw["name"], subs, first_available=True))
        else:
            raise r.fail(where, "exactly or firstAvailable", raw)
    constraints = []
    for i, raw in enumerate(r.sequence(f"{path}.devices.constraints")):
        if not isinstance(raw, Mapping):
            raise r.fail(f"{path}.devices.constraints[{i}]", "a constraint", raw)
        constraints.append(
            Constraint(
                tuple(str(x) for x in raw.get("requests") or []),
                raw.get("matchAttribute"),
                raw.get("distinctAttribute"),
            )
        )
    return Claim(
        key,
        tuple(requests),
        tuple(constraints),
        _config(r, f"{path}.devices.config", with_requests=True),
    )


def allocation(r: Reader) -> DeviceAllocation | None:
    """An existing ``status.allocation`` of a ResourceClaim."""
    raw = r.get("status.allocation")
    if raw is None:
        return None
    results = tuple(
        DeviceResult(
            str(x.get("request")),
            str(x.get("driver")),
            str(x.get("pool")),
            str(x.get("device")),
            x.get("adminAccess") is True,
            tuple(
                (_qualified(str(k), str(x.get("driver"))), r.quantity("consumedCapacity", v))
                for k, v in (x.get("consumedCapacity") or {}).items()
            ),
        )
        for x in r.sequence("status.allocation.devices.results")
        if isinstance(x, Mapping)
    )
    node = None
    for term in r.sequence("status.allocation.nodeSelector.nodeSelectorTerms"):
        for field in (term.get("matchFields") or []) if isinstance(term, Mapping) else []:
            if isinstance(field, Mapping) and field.get("key") == "metadata.name":
                node = str((field.get("values") or [None])[0])
    return DeviceAllocation(results, node)
