"""YAML files into Kubernetes objects, one mapping each.

A file may hold many documents, and a document may be a ``kind: List`` (or any ``...List``,
lists of lists too): each comes out as one object. A mapping that repeats a key is refused,
as the YAML spec says; a file that is not YAML is an :class:`InputError` with its line.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from gpufleet.load.errors import InputError, limit_from_env, reading
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.load.objects.schema import Schema, unknown_fields
from gpufleet.load.shown import shown

MERGE_TAG = "tag:yaml.org,2002:merge"


MAX_YAML_VALUES = 2_000_000
"""The most values one YAML document may expand to through its aliases (a million-pod
snapshot is some tens of millions of values written out, not through aliases: a document
whose aliases multiply it past this is an alias bomb). ``GPUFLEET_MAX_YAML_VALUES``
overrides it."""


def max_yaml_values() -> int:
    return limit_from_env("GPUFLEET_MAX_YAML_VALUES", MAX_YAML_VALUES)


def expanded_size(root: yaml.Node, limit: int) -> int:
    """How many values the node graph ``root`` stands for once its aliases are expanded
    (counted up to ``limit + 1``), each shared node walked once. Raises ValueError for an
    alias to a node that contains it (a value without end)."""
    size: dict[int, int] = {}
    entered: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, leaving = stack.pop()
        key = id(node)
        kids: list[yaml.Node] = []
        if isinstance(node, yaml.MappingNode):
            kids = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            kids = list(node.value)
        if leaving:
            entered.discard(key)
            size[key] = min(limit + 1, 1 + sum(size[id(k)] for k in kids))
        elif key not in size:
            if key in entered:
                raise ValueError("an alias refers to a value that contains it")
            entered.add(key)
            stack.append((node, True))
            stack.extend((k, False) for k in kids if id(k) not in size)
    return size[id(root)]


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, refusing a mapping that repeats a key: the YAML spec forbids it,
    and last-wins would drop the first value (a whole pod, say) without a word — and a
    document whose aliases expand it beyond :func:`max_yaml_values`, or refer to a value
    that contains them, before anything is built from it."""

    anchored = True
    """Whether the text may hold anchors (an ``&``): without any, no alias can multiply it,
    and a large snapshot is not walked twice."""

    def construct_document(self, node: yaml.Node) -> Any:
        if not self.anchored:
            return super().construct_document(node)
        limit = max_yaml_values()
        try:
            values = expanded_size(node, limit)
        except ValueError as exc:
            line = node.start_mark.line + 1
            raise InputError(self.name, f"is refused: {exc}", line=line) from None
        if values > limit:
            raise InputError(
                self.name,
                f"is refused: its aliases expand one document to more than {limit:,} values "
                "(set GPUFLEET_MAX_YAML_VALUES to read more)",
                line=node.start_mark.line + 1,
            )
        return super().construct_document(node)

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[tuple[str, str]] = set()
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == MERGE_TAG:
                continue  # merge keys (<<) and complex keys: the constructor handles them
            key = (key_node.tag, key_node.value)
            if key in seen:
                raise InputError(
                    self.name,
                    f"mapping key {key_node.value!r} appears twice (the YAML spec forbids it; "
                    "remove one of them)",
                    line=key_node.start_mark.line + 1,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)  # type: ignore[no-any-return]


def documents(path: Path) -> Iterator[Any]:
    source = str(path)
    with reading(path, "a YAML file"):
        text = path.read_text(encoding="utf-8")
    loader = _UniqueKeyLoader(text)
    loader.name = source
    loader.anchored = "&" in text
    try:
        while loader.check_data():
            yield loader.get_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError(source, f"is not valid YAML ({exc})", line=line) from None
    finally:
        loader.dispose()


def objects_of(doc: Any, source: str) -> Iterator[Obj]:
    """The objects of one document, lists of lists flattened (without recursion: a list's
    depth is the file's to choose)."""
    stack = [doc]
    while stack:
        item = stack.pop()
        if item is None:
            continue
        if not isinstance(item, Mapping):
            raise InputError(source, f"expected Kubernetes objects (mappings), got {shown(item)}")
        kind = item.get("kind")
        if isinstance(kind, str) and kind.endswith("List"):
            items = item.get("items") or []
            if not isinstance(items, list):
                raise InputError(source, "expected a list", field="List.items")
            stack.extend(reversed(items))
            continue
        yield item


def own_kind_file(path: Path, api_version: str, kind: str, schema: Schema) -> Reader:
    """The one object of a file of one of gpufleet's own kinds (a PriceSheet, a Study),
    read strictly: one YAML document, of ``api_version`` and ``kind``, no field its
    ``schema`` does not know. ``path`` names it in errors."""
    source = str(path)
    docs = [d for d in documents(path) if d is not None]
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError(source, f"expected one YAML document, a {kind}")
    return own_kind(docs[0], source, api_version, kind, schema)


def own_kind(obj: Obj, source: str, api_version: str, kind: str, schema: Schema) -> Reader:
    """``obj`` read as :func:`own_kind_file` reads a file's object."""
    if obj.get("kind") != kind or obj.get("apiVersion") != api_version:
        raise InputError(
            source,
            f"expected apiVersion {api_version} and kind {kind}, got "
            f"{shown(obj.get('apiVersion'))} and {shown(obj.get('kind'))}",
        )
    r = Reader(source, obj)
    for field in unknown_fields(obj, schema):
        raise InputError(r.where, "unknown field", field=field)
    return r
