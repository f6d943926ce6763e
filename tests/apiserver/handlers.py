"""The REST verbs on resource paths (API concepts, "Standard API terminology" and "API
verbs"), from the path to the store.

Paths: ``/api/v1/<plural>[/<name>[/<sub>]]`` and ``/api/v1/namespaces/<ns>/<plural>...`` for
the core group, ``/apis/<group>/<version>/...`` for the others; a namespaced resource listed
without a namespace is listed across all of them.

* GET a collection: a list (``<Kind>List`` with ``metadata.resourceVersion``) or, with
  ``watch=1``, a watch (``watch.py``). ``labelSelector`` and ``fieldSelector`` filter it
  (``selectors.py``). ``resourceVersion`` (API concepts, "Semantics for get and list"):
  unset is the most recent state; ``"0"`` any state (the most recent here); ``N`` with
  ``resourceVersionMatch=NotOlderThan`` (the default) the most recent state, or 504 when N
  is ahead of the server; ``N`` with ``resourceVersionMatch=Exact`` the state at N, or 410
  ``Gone`` when N has left the window. ``limit``/``continue`` ("Retrieving large results sets
  in chunks") page a consistent snapshot: every page is read at the first page's revision,
  and a token whose revision left the window is 410 ``Expired``.
* GET one object; POST creates (201); PUT replaces (200); PATCH in the three formats of
  ``patch.py`` (200); DELETE (200 with the object for pods and namespaces, else a Status of
  success; 202 while finalizers hold it) with ``preconditions`` from the body's
  DeleteOptions; DELETE of a collection deletes what the selectors select.
* ``/status`` subresources: GET, PUT and PATCH of the status alone; ``pods/binding`` and
  ``pods/eviction``: ``subresources.py``.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from tests.apiserver import errors, patch, subresources, tables
from tests.apiserver.resources import Resource, find
from tests.apiserver.selectors import field_selector, label_selector
from tests.apiserver.store import Store

JSON = dict[str, Any]
NOT_FOUND = errors.ApiError(404, "NotFound", "the server could not find the requested resource")
PATCH_TYPES = (patch.JSON_PATCH, patch.MERGE, patch.STRATEGIC)


@dataclass(frozen=True, slots=True)
class Target:
    """What a resource path names."""

    resource: Resource
    namespace: str
    name: str
    sub: str


def parse(path: str) -> Target | None:
    """The resource a path names, or None when it is not a resource path."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        inner = find(group, version, rest[2])
        if inner is not None and inner.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    resource = find(group, version, rest[0])
    if resource is None:
        return None
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if sub and sub not in resource.subresources:
        return None
    return Target(resource, namespace, name, sub)


async def body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read() or b"{}")
    except json.JSONDecodeError as error:
        raise errors.bad_request(f"the body of the request could not be decoded: {error}") from None


def reply(obj: JSON, code: int = 200) -> web.Response:
    return web.json_response(obj, status=code)


def _continue_token(revision: int, start: str) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": revision, "start": start})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def _read_token(token: str) -> tuple[int, str]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token.encode()))
        return int(data["rv"]), str(data["start"])
    except (ValueError, KeyError, TypeError):
        raise errors.bad_request(f"continue key is not valid: {token}") from None


def list_objects(store: Store, target: Target, query: dict[str, str]) -> JSON:
    """A list response (see the module docstring)."""
    resource = target.resource
    version, match = query.get("resourceVersion", ""), query.get("resourceVersionMatch", "")
    if match and not version:
        raise errors.bad_request(
            "resourceVersionMatch is forbidden unless resourceVersion is provided"
        )
    if match and match not in {"Exact", "NotOlderThan"}:
        raise errors.bad_request(f'resourceVersionMatch: Unsupported value: "{match}"')
    at: int | None = None
    if version not in {"", "0"}:
        try:
            requested = int(version)
        except ValueError:
            raise errors.bad_request(f'resourceVersion: Invalid value: "{version}"') from None
        if match == "Exact":
            at = requested
        elif requested > store.revision:
            raise errors.too_large(requested, store.revision)
    start = ""
    if query.get("continue"):
        if version:
            raise errors.bad_request(
                "specifying resource version is not allowed when using continue"
            )
        at, start = _read_token(query["continue"])
        if at < store.compacted:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list "
                "result. You can start a new list without the continue parameter, or use the "
                "continue token in this response to retrieve the remainder of the results."
            )
    items, revision = store.list(resource, target.namespace, at=at)
    labels = label_selector(query.get("labelSelector"))
    fields = field_selector(query.get("fieldSelector"), resource)
    chosen = [item for item in items if labels(item) and fields(item) and _key(item) > start]
    meta: JSON = {"resourceVersion": str(revision)}
    limit = int(query.get("limit") or 0)
    if limit and len(chosen) > limit:
        meta["continue"] = _continue_token(revision, _key(chosen[limit - 1]))
        meta["remainingItemCount"] = len(chosen) - limit
        chosen = chosen[:limit]
    if not resource.custom:
        for item in chosen:
            item.pop("kind"), item.pop("apiVersion")
    return {
        "kind": resource.list_kind,
        "apiVersion": resource.api_version,
        "metadata": meta,
        "items": chosen,
    }


def _key(item: JSON) -> str:
    meta = item["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


NOT_ALLOWED = errors.ApiError(
    405, "MethodNotAllowed", "the server does not allow this method on the requested resource"
)


async def handle(request: web.Request, store: Store, target: Target) -> web.Response:
    """One non-watch request on a resource path."""
    if target.resource.namespaced and not target.namespace and request.method != "GET":
        raise NOT_FOUND
    if not target.name:
        return await _collection(request, store, target)
    if target.sub in {"binding", "eviction"}:
        if request.method != "POST":
            raise NOT_ALLOWED
        apply = subresources.bind if target.sub == "binding" else subresources.evict
        return reply(apply(store, target.namespace, target.name, await body(request)), 201)
    if request.method == "GET":
        obj = store.get(target.resource, target.namespace, target.name)
        return reply(_maybe_table(request, store, target.resource, [obj]) or obj)
    if request.method == "PUT":
        obj = await body(request)
        updated = store.update(
            target.resource, target.namespace, target.name, obj, subresource=target.sub
        )
        return reply(updated)
    if request.method == "PATCH":
        return reply(await _patch(request, store, target))
    if request.method == "DELETE" and not target.sub:
        return await _delete(request, store, target)
    raise NOT_ALLOWED


def _maybe_table(
    request: web.Request, store: Store, resource: Resource, items: list[JSON], revision: str = ""
) -> JSON | None:
    if not tables.wants_table(request.headers.get("Accept", "")):
        return None
    include = request.query.get("includeObject", "Metadata")
    return tables.table(resource, items, now=store.clock(), include=include, revision=revision)


async def _collection(request: web.Request, store: Store, target: Target) -> web.Response:
    resource, namespace = target.resource, target.namespace
    if request.method == "POST":
        return reply(store.create(resource, namespace, await body(request)), 201)
    if request.method not in {"GET", "DELETE"}:
        raise NOT_ALLOWED
    listed = list_objects(store, target, dict(request.query))
    if request.method == "DELETE":
        for item in listed["items"]:
            store.delete(resource, namespace, item["metadata"]["name"])
        return reply({**listed, "metadata": {"resourceVersion": str(store.revision)}})
    revision = listed["metadata"]["resourceVersion"]
    return reply(_maybe_table(request, store, resource, listed["items"], revision) or listed)


async def _delete(request: web.Request, store: Store, target: Target) -> web.Response:
    resource, name = target.resource, target.name
    preconditions = (await body(request)).get("preconditions") or {}
    obj, deleted = store.delete(
        resource,
        target.namespace,
        name,
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
    )
    if not deleted:
        return reply(obj, 202)
    if resource.returns_object_on_delete:
        return reply(obj)
    details = {
        "name": name,
        "group": resource.group,
        "kind": resource.plural,
        "uid": obj["metadata"]["uid"],
    }
    return reply(errors.success(200, details))


async def _patch(request: web.Request, store: Store, target: Target) -> JSON:
    content_type = request.content_type
    accepted = [patch.JSON_PATCH, patch.MERGE, "application/apply-patch+yaml"]
    if not target.resource.custom:
        accepted.insert(2, patch.STRATEGIC)
    if content_type not in accepted or content_type == "application/apply-patch+yaml":
        raise errors.unsupported_media_type(accepted)
    document = await body(request)

    def change(current: JSON) -> JSON:
        # A resourceVersion the patch sets is a precondition the store checks; otherwise the
        # patched object keeps the current one.
        patched = patch.apply(content_type, current, document)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch does not produce an object")
        return patched

    return store.mutate(
        target.resource, target.namespace, target.name, change, subresource=target.sub, verb="patch"
    )
