"""Dynamic Resource Allocation objects as watches deliver them, read for the live cache.

:class:`~gpufleet.kube.read.objects.ObjectStore` translates one object at a time; what is read
of the DRA kinds (``resource.k8s.io/v1``) lives here, with the snapshot's readers
(``load/objects/devices.py``) doing the reading, so that a live cluster and its snapshot say the
same of the same objects:

* a **DeviceClass** is read as a snapshot reads it, and its CEL selectors are compiled
  here: live, a class whose selector does not compile is reported once, against the class
  (the field and the compiler's words), rather than against every claim that uses it;
* the **ResourceSlices** of one driver's pool are one ``ResourcePool`` of the cache, read
  again from all its slices whenever one of them changes (the newest generation, complete
  when all ``resourceSliceCount`` slices are there, as the snapshot loader merges them). A
  slice that cannot be read is left out of its pool — which is then incomplete, as it is
  while its driver publishes it — and reported;
* a **ResourceClaim** carries its ``status.allocation``, so that a restart knows which
  devices are taken;
* a pod names its claims directly (``resourceClaimName``) or through a template: the
  resourceclaim controller creates the pod's claim from the template and records its name
  in the pod's ``status.resourceClaimStatuses`` (``load/objects/pods.py``). A pending pod whose
  claim does not exist yet, or whose template was not turned into a claim yet, waits
  (:func:`waiting_for_claims`), as kube-scheduler's DRA plugin keeps it unschedulable.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from gpufleet.dra.cel import SelectorError, compile_selector
from gpufleet.load.errors import InputError
from gpufleet.load.objects.devices import allocation, claim_spec, device_class, pools
from gpufleet.load.objects.pods import generated_claims
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.model.devices import DeviceClass, Pool
from gpufleet.scheduler.state.changes import ClaimObject

NodeLabels = Mapping[str, Mapping[str, str]]


def read_device_class(r: Reader) -> DeviceClass:
    """A DeviceClass, its selectors compiled (one that does not is an error of its field)."""
    made = device_class(r)
    for i, expression in enumerate(made.selectors):
        try:
            compile_selector(expression)
        except SelectorError as error:
            raise r.fail(
                f"spec.selectors[{i}].cel.expression", "a CEL expression that compiles", str(error)
            ) from None
    return made


def read_claim(r: Reader) -> ClaimObject:
    """A ResourceClaim and its allocation (``status.allocation``, None: not allocated)."""
    return ClaimObject(claim_spec(r, "spec", r.key), allocation(r), r.identity()[0])


def pool_key(obj: Obj) -> str | None:
    """The cache key of the pool a raw ResourceSlice belongs to (``driver/pool``), or None
    where it names none (the slice's read says why)."""
    spec = obj.get("spec")
    if not isinstance(spec, Mapping):
        return None
    driver = spec.get("driver")
    pool = spec.get("pool")
    name = pool.get("name") if isinstance(pool, Mapping) else None
    if isinstance(driver, str) and driver and isinstance(name, str) and name:
        return f"{driver}/{name}"
    return None


def selects_nodes(obj: Obj) -> bool:
    """Whether a raw ResourceSlice places devices by node labels (its pool is read again
    when a node's labels change)."""
    spec = obj.get("spec")
    return isinstance(spec, Mapping) and (
        spec.get("nodeSelector") is not None or spec.get("perDeviceNodeSelection") is True
    )


def read_pool(
    slices: list[Reader], node_labels: NodeLabels
) -> tuple[Pool | None, list[tuple[Obj, str]]]:
    """The pool of ``slices`` (all of one driver's pool), and the slices that cannot be
    read with why: each slice is read alone first, so that an error names its own slice,
    and the pool is merged from the others (None when none is left)."""
    good: list[Reader] = []
    bad: list[tuple[Obj, str]] = []
    for r in slices:
        try:
            pools([r], node_labels)
        except InputError as error:
            bad.append((r.obj, str(error)))
            continue
        except (TypeError, ValueError, AttributeError, KeyError, ArithmeticError) as exc:
            bad.append((r.obj, f"{r.where}: unexpected structure: {exc}"))
            continue
        good.append(r)
    merged = pools(good, node_labels) if good else ()
    return (merged[0] if merged else None), bad


def claim_reads(obj: Obj) -> tuple[set[str], set[str]]:
    """The claims (keys) and templates (keys) a raw pod reads, whether or not it can be
    read: the claims it names, those made for it from templates, and the templates whose
    claims are not made yet."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    claims: set[str] = set()
    templates: set[str] = set()
    refs = (obj.get("spec") or {}).get("resourceClaims")
    if not isinstance(refs, list) or not refs:
        return claims, templates
    made: dict[str, Any] = {}
    statuses = (obj.get("status") or {}).get("resourceClaimStatuses")
    for entry in statuses if isinstance(statuses, list) else ():
        if isinstance(entry, Mapping) and isinstance(entry.get("resourceClaimName"), str):
            made[str(entry.get("name"))] = entry["resourceClaimName"]
    for ref in refs:
        if not isinstance(ref, Mapping):
            continue
        if isinstance(ref.get("resourceClaimName"), str):
            claims.add(f"{namespace}/{ref['resourceClaimName']}")
        elif isinstance(ref.get("resourceClaimTemplateName"), str):
            generated = made.get(str(ref.get("name")))
            if generated is not None:
                claims.add(f"{namespace}/{generated}")
            else:
                templates.add(f"{namespace}/{ref['resourceClaimTemplateName']}")
    return claims, templates


def waiting_for_claims(r: Reader, claims: Collection[str], templates: Collection[str]) -> str:
    """Why a pending pod waits for its claims (empty: it does not): a template whose claim
    the resourceclaim controller has not made yet (or that does not exist), a claim that
    does not exist. ``claims`` and ``templates`` are the keys that exist."""
    generated = generated_claims(r)
    for i, ref in enumerate(r.sequence("spec.resourceClaims")):
        if not isinstance(ref, Mapping):
            continue  # the pod's read reported it
        name = ref.get("resourceClaimName")
        template = ref.get("resourceClaimTemplateName")
        if isinstance(template, str) and name is None:
            name = generated.get(str(ref.get("name")))
            if name is None:
                if f"{r.namespace}/{template}" not in templates:
                    return (
                        f"ResourceClaimTemplate {r.namespace}/{template} "
                        f"(spec.resourceClaims[{i}]) does not exist: the pod waits for it"
                    )
                return (
                    f"the ResourceClaim of spec.resourceClaims[{i}] (template {template}) is "
                    "not created yet: the pod waits for the resourceclaim controller to "
                    "create it (status.resourceClaimStatuses)"
                )
        if isinstance(name, str) and f"{r.namespace}/{name}" not in claims:
            return (
                f"ResourceClaim {r.namespace}/{name} (spec.resourceClaims[{i}]) does not "
                "exist: the pod waits for it to be created"
            )
    return ""
