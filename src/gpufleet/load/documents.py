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

from gpufleet.load.errors import InputError, reading
from gpufleet.load.reader import Obj

MERGE_TAG = "tag:yaml.org,2002:merge"


class _UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """YAML's safe loader, refusing a mapping that repeats a key: the YAML spec forbids it,
    and last-wins would drop the first value (a whole pod, say) without a word."""

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
    if doc is None:
        return
    if not isinstance(doc, Mapping):
        raise InputError(source, f"expected Kubernetes objects (mappings), got {doc!r}")
    if doc.get("kind") == "List" or (
        isinstance(doc.get("kind"), str) and str(doc.get("kind")).endswith("List")
    ):
        items = doc.get("items") or []
        if not isinstance(items, list):
            raise InputError(source, "expected a list", field="List.items")
        for item in items:
            yield from objects_of(item, source)
        return
    yield doc
