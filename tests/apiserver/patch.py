"""The three patch formats of a PATCH request (API concepts, "Patch and Apply").

* ``application/merge-patch+json`` — RFC 7386: maps merge key by key, ``null`` deletes a key,
  any other value (lists included) replaces.
* ``application/strategic-merge-patch+json`` — the merge patch plus the list strategies the
  Go types declare ("Update API Objects in Place Using kubectl patch": "Notes on the
  strategic merge patch"). Lists of maps with a ``patchMergeKey`` merge item by item on that
  key (``STRATEGIES``: pod ``status.conditions`` by ``type``, ``metadata.ownerReferences`` by
  ``uid``, containers by ``name``, ...); lists with ``patchStrategy: merge`` of scalars
  (``metadata.finalizers``) are a union; other lists replace. The directives a client may
  send are honoured: ``$patch: delete``/``replace`` in a map or list item,
  ``$deleteFromPrimitiveList/<field>``; ``$setElementOrder/<field>`` and ``$retainKeys`` are
  accepted and ignored (order only). Custom resources refuse it (415), as apiserver does.
* ``application/json-patch+json`` — RFC 6902 operations ``add``, ``remove``, ``replace``,
  ``move``, ``copy``, ``test`` (a failed ``test`` or a missing path is a 422 in apiserver;
  here a 422 ``Invalid`` too).
"""

from __future__ import annotations

import copy
from typing import Any

from tests.apiserver.errors import ApiError

JSON = dict[str, Any]

MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"
JSON_PATCH = "application/json-patch+json"

# The merge key of each list whose Go field declares ``patchStrategy:"merge"``, by field name
# (None: a list of scalars merged as a set). Only the fields a scheduler or kubectl apply
# writes; another list is replaced whole.
STRATEGIES: dict[str, str | None] = {
    "conditions": "type",
    "ownerReferences": "uid",
    "finalizers": None,
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "taints": "key",
}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch(target, patch)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """The strategic merge patch of a map onto a map (see the module's docstring)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if patch.get("$patch") == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(("$setElementOrder/", "$retainKeys", "$patch")):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            result[name] = [item for item in result.get(name) or [] if item not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in STRATEGIES:
            result[key] = _merge_list(result.get(key) or [], value, STRATEGIES[key])
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_list(target: list[Any], patch: list[Any], key: str | None) -> list[Any]:
    if key is None:
        return [*target, *(item for item in patch if item not in target)]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    result = [copy.deepcopy(item) for item in target]
    for item in patch:
        if not isinstance(item, dict) or key not in item:
            result.append(copy.deepcopy(item))
            continue
        at = next((i for i, old in enumerate(result) if old.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if at is not None:
                del result[at]
        elif at is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[at] = strategic_merge_patch(result[at], item)
    return result


def _invalid(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise _invalid(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise _invalid(f"the path {'/'.join(parts)!r} does not exist") from None
    return node


def _get(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    if not parts:
        return doc
    parent = _parent(doc, parts)
    try:
        return parent[int(parts[-1])] if isinstance(parent, list) else parent[parts[-1]]
    except (KeyError, IndexError, ValueError, TypeError):
        raise _invalid(f"the path {path!r} does not exist") from None


def _remove(doc: Any, path: str) -> Any:
    parts = _pointer(path)
    parent = _parent(doc, parts)
    try:
        return parent.pop(int(parts[-1]) if isinstance(parent, list) else parts[-1])
    except (KeyError, IndexError, ValueError, TypeError):
        raise _invalid(f"unable to remove nonexistent key: {parts[-1]}") from None


def _add(doc: Any, path: str, value: Any, *, replace: bool = False) -> Any:
    parts = _pointer(path)
    if not parts:
        return copy.deepcopy(value)
    parent = _parent(doc, parts)
    last = parts[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if replace:
            parent[index] = copy.deepcopy(value)
        else:
            parent.insert(index, copy.deepcopy(value))
    elif isinstance(parent, dict):
        if replace and last not in parent:
            raise _invalid(f"replace operation does not apply: doc is missing key: {path}")
        parent[last] = copy.deepcopy(value)
    else:
        raise _invalid(f"the path {path!r} does not exist")
    return doc


def json_patch(target: JSON, operations: Any) -> Any:
    """RFC 6902 applied to a copy of ``target``."""
    if not isinstance(operations, list):
        raise ApiError(400, "BadRequest", "json patch must be a list of operations")
    doc: Any = copy.deepcopy(target)
    for op in operations:
        kind, path = op.get("op"), op.get("path", "")
        if kind == "add":
            doc = _add(doc, path, op.get("value"))
        elif kind == "replace":
            doc = _add(doc, path, op.get("value"), replace=True)
        elif kind == "remove":
            _remove(doc, path)
        elif kind in {"move", "copy"}:
            value = _get(doc, op.get("from", ""))
            if kind == "move":
                _remove(doc, op["from"])
            doc = _add(doc, path, value)
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise _invalid(f"testing value {path} failed")
        else:
            raise _invalid(f"Unexpected kind: {kind}")
    return doc


def apply(content_type: str, target: JSON, body: Any) -> Any:
    """The patched object; ``content_type`` is one of the three formats above."""
    if content_type == JSON_PATCH:
        return json_patch(target, body)
    if content_type == STRATEGIC:
        return strategic_merge_patch(target, body)
    return merge_patch(target, body)
