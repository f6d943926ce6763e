"""Write a benchmark's table into its marked section of ``docs/benchmarks.md``.

A section is the text between ``<!-- NAME:start -->`` and ``<!-- NAME:end -->``; the rest
of the document (the prose around the tables) is left as it is.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCHMARKS = ROOT / "docs" / "benchmarks.md"


def publish(name: str, table: str, *, write_docs: bool) -> None:
    """Print a benchmark's table and, unless told not to, put it into docs/benchmarks.md."""
    print(table)
    if write_docs:
        replace_section(BENCHMARKS, name, table)


def publish_table(module: str, section: str, lines: list[str], *, write_docs: bool) -> int:
    """Finish a benchmark: its lines plus how to reproduce them, published; exit code 0."""
    publish(
        section, "\n".join([*lines, "", f"Reproduce: `python -m {module}`."]), write_docs=write_docs
    )
    return 0


def replace_section(path: Path, name: str, body: str) -> None:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    block = f"{start}\n{body}\n{end}"
    if start in text and end in text:
        before, rest = text.split(start, 1)
        _, after = rest.split(end, 1)
        text = before + block + after
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block + "\n"
    path.write_text(text, encoding="utf-8")
