"""How an error message shows a value of the input: as the user wrote it, and bounded
(``shown``). No Kubernetes library here: every loader, CSV ones included, may use it."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

MAX_QUANTITY = Decimal(2) ** 52
"""Quantities beyond this (in bytes, cores or devices) are typos, not clusters."""

SHOWN_CHARS = 200
"""Characters of a value an error message shows at most (an input is never echoed whole)."""


def shown(value: object, limit: int = SHOWN_CHARS) -> str:
    """A value as the user wrote it: ``2.5`` for a quantity (not ``Decimal('2.500')``),
    ``'x'`` for a string, YAML-like lists and mappings — at most ``limit`` characters, then
    ``…``: written piece by piece, so a value of any size (a YAML alias bomb) costs only
    what is shown."""
    out: list[str] = []
    size = 0
    stack: list[object] = [value]
    while stack and size <= limit:
        item = stack.pop()
        if isinstance(item, _Text):
            piece = item.text
        elif isinstance(item, list):
            parts: list[object] = [_Text("[")]
            for i, v in enumerate(item):
                parts += [_Text(", ")] if i else []
                parts.append(v)
            stack.extend(reversed([*parts, _Text("]")]))
            continue
        elif isinstance(item, Mapping):
            parts = [_Text("{")]
            for i, (k, v) in enumerate(item.items()):
                parts += [_Text(f"{', ' if i else ''}{k}: "), v]
            stack.extend(reversed([*parts, _Text("}")]))
            continue
        else:
            piece = _scalar(item)
        out.append(piece)
        size += len(piece)
    text = "".join(out)
    return text if size <= limit and not stack else text[:limit] + "…"


class _Text:
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _scalar(value: object) -> str:
    if isinstance(value, Decimal):
        return format(value.normalize(), "f") if abs(value) < MAX_QUANTITY else str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "…"
