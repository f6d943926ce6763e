"""Discovery documents: what clients such as kubectl read before they make a request.

"Discovering the Kubernetes API" (concepts, "Kubernetes API" / "Discovery API"): ``/api``
(``APIVersions``), ``/api/v1`` and ``/apis/<group>/<version>`` (``APIResourceList``, one
entry per resource, with its ``shortNames`` and ``categories`` from ``resources.py``, and per
subresource, ``pods/status``), ``/apis`` (``APIGroupList``) and
``/apis/<group>`` (``APIGroup``), plus ``/version``. This is the unaggregated form: a client
asking for aggregated discovery (``Accept: ...;as=APIGroupDiscoveryList``) gets it too, as
``application/json``, and falls back to the per-version documents (kubectl 1.37 does, as
client-go's discovery client does whenever the answer is not the aggregated kind).
No OpenAPI document is served: ``/openapi/v2`` and ``/openapi/v3`` are 404, which kubectl
accepts when run with ``--validate=false`` (see ``kubectl.py``).
"""

from __future__ import annotations

from typing import Any

from tests.apiserver.resources import RESOURCES, VERBS, Resource

JSON = dict[str, Any]

VERSION: JSON = {
    "major": "1",
    "minor": "37",
    "emulationMajor": "1",
    "emulationMinor": "37",
    "gitVersion": "v1.37.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.26.0",
    "compiler": "gc",
    "platform": "linux/amd64",
}

# Subresource name -> (kind, verbs, group and version when not the parent's)
SUBRESOURCES: dict[str, tuple[str, list[str], str, str]] = {
    "status": ("", ["get", "patch", "update"], "", ""),
    "binding": ("Binding", ["create"], "", ""),
    "eviction": ("Eviction", ["create"], "policy", "v1"),
}


def group_versions() -> dict[str, list[str]]:
    """Each group ("" for core) and its versions, in table order."""
    found: dict[str, list[str]] = {}
    for resource in RESOURCES:
        versions = found.setdefault(resource.group, [])
        if resource.version not in versions:
            versions.append(resource.version)
    return found


def api_versions(host: str) -> JSON:
    return {
        "kind": "APIVersions",
        "versions": group_versions()[""],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
    }


def api_group(group: str) -> JSON:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in group_versions()[group]]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": group,
        "versions": versions,
        "preferredVersion": versions[0],
    }


def api_group_list() -> JSON:
    groups = [api_group(group) for group in group_versions() if group]
    for group in groups:
        del group["kind"], group["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def _entry(resource: Resource) -> JSON:
    entry: JSON = {
        "name": resource.plural,
        "singularName": resource.kind.lower(),
        "namespaced": resource.namespaced,
        "kind": resource.kind,
        "verbs": (
            ["create"]
            if resource.review
            else [*VERBS, "deletecollection"]
            if resource.namespaced
            else VERBS
        ),
    }
    if resource.short_names:
        entry["shortNames"] = list(resource.short_names)
    if resource.categories:
        entry["categories"] = list(resource.categories)
    return entry


def api_resource_list(group: str, version: str) -> JSON | None:
    """The ``APIResourceList`` of one group version; None when the emulator has no such."""
    resources: list[JSON] = []
    for resource in RESOURCES:
        if (resource.group, resource.version) != (group, version):
            continue
        resources.append(_entry(resource))
        for sub in resource.subresources:
            kind, verbs, sub_group, sub_version = SUBRESOURCES[sub]
            entry: JSON = {
                "name": f"{resource.plural}/{sub}",
                "singularName": "",
                "namespaced": resource.namespaced,
                "kind": kind or resource.kind,
                "verbs": verbs,
            }
            if sub_group:
                entry.update(group=sub_group, version=sub_version)
            resources.append(entry)
    if not resources:
        return None
    group_version = f"{group}/{version}" if group else version
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }
