"""ARCHITECTURE.md names only files, modules and sections that exist, so it cannot rot silently.

Checked: every path under a top-level folder of the repository (``src/...``, ``bench/...``,
``tests/...``, ``docs/...``, ``examples/...``), every backticked path of a gpufleet package
(``scheduler/cycle/cycle.py``, ``load/``), every bare file name and every room
(sub-package) in a package's bullet of the "Layers" list (``- `kube/` — ... `read/` ...``),
every backticked dotted module path (``gpufleet.plugins.registry``), and every section of
ARCHITECTURE.md that a module docstring, the README or a documentation page points at
(``(ARCHITECTURE.md, "Cycle")``).
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "ARCHITECTURE.md"
PACKAGE = ROOT / "src" / "gpufleet"
PACKAGES = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())
TOP = ("src", "bench", "tests", "docs", "examples")

BACKTICKED = re.compile(r"`([^`\n]+)`")
REPO_PATH = re.compile(rf"(?<![\w./-])((?:{'|'.join(TOP)})/(?:[\w./-]*[\w/])?)")
PACKAGE_PATH = re.compile(rf"(?:{'|'.join([*PACKAGES, 'data'])})/[\w./-]*")
FILE_NAME = re.compile(r"[\w-]+\.(?:py|md|yaml|csv|toml)")
ROOM = re.compile(r"\w+/")
MODULE = re.compile(r"gpufleet(?:\.\w+)+")
BULLET = re.compile(r"^- `(\w+)/`")
POINTER = re.compile(r'ARCHITECTURE\.md,?\s+\(?"([^"]+)"')
ANCHOR = re.compile(r"ARCHITECTURE\.md#([\w-]+)", re.IGNORECASE)  # docs/architecture.md too


def doc_lines() -> list[str]:
    """The document's lines; none when it is missing (the first test then says so, and the
    others still collect)."""
    return DOC.read_text(encoding="utf-8").splitlines() if DOC.is_file() else []


def exists(path: str, *, package: str | None = None) -> bool:
    bases = [ROOT, PACKAGE] if package is None else [PACKAGE / package]
    return any((base / path).exists() for base in bases)


def named_paths() -> list[tuple[int, str, str | None]]:
    """(line, path, enclosing package of a Layers bullet) for every path the doc names."""
    found: list[tuple[int, str, str | None]] = []
    package: str | None = None
    for number, line in enumerate(doc_lines(), start=1):
        bullet = BULLET.match(line)
        if bullet:
            package = bullet.group(1)
        elif not line.startswith("  "):
            package = None  # a bullet's continuation lines are indented
        found += [(number, m.group(1), None) for m in REPO_PATH.finditer(line)]
        for token in BACKTICKED.findall(line):
            if REPO_PATH.fullmatch(token):
                continue  # already found above
            if PACKAGE_PATH.fullmatch(token):
                found.append((number, token, None))
            elif FILE_NAME.fullmatch(token) or (package is not None and ROOM.fullmatch(token)):
                found.append((number, token, package))
    return found


def test_the_architecture_document_exists() -> None:
    assert DOC.is_file(), "ARCHITECTURE.md is missing from the repository root"
    assert doc_lines()[0].startswith("# ")


def test_it_names_paths_in_every_form_it_checks() -> None:
    """The checks below are not vacuous: each form of path occurs."""
    paths = [path for _, path, _ in named_paths()]
    assert any(p.startswith("src/") for p in paths)
    assert any(p.startswith("bench/") for p in paths)
    assert "scheduler/cycle/cycle.py" in paths
    assert "read/" in paths  # a room of a package, in its bullet


@pytest.mark.parametrize(("line", "path", "package"), named_paths())
def test_every_named_path_exists(line: int, path: str, package: str | None) -> None:
    where = f"under src/gpufleet/{package}/" if package else "from the root or src/gpufleet/"
    assert exists(path, package=package), f"ARCHITECTURE.md:{line}: {path} does not exist {where}"


def modules() -> list[str]:
    tokens = {token for line in doc_lines() for token in BACKTICKED.findall(line)}
    return sorted(token for token in tokens if MODULE.fullmatch(token))


@pytest.mark.parametrize("dotted", modules())
def test_every_backticked_module_path_imports(dotted: str) -> None:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(obj, attribute), f"{dotted}: no {attribute}"
            obj = getattr(obj, attribute)
        return
    pytest.fail(f"{dotted} is not a module")


def headings() -> list[str]:
    return [line.lstrip("#").strip() for line in doc_lines() if line.startswith("#")]


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to ``-``."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def pointers() -> list[tuple[str, str]]:
    """(file, section) for every ``ARCHITECTURE.md, "Section"`` and ``ARCHITECTURE.md#anchor``
    in the README, the documentation pages (whose ``architecture.md`` includes ARCHITECTURE.md)
    and the package's modules."""
    found = []
    pages = sorted((ROOT / "docs").glob("*.md"))
    for path in [ROOT / "README.md", *pages, *sorted(PACKAGE.rglob("*.py"))]:
        text = path.read_text(encoding="utf-8")
        name = str(path.relative_to(ROOT))
        found += [(name, section) for section in POINTER.findall(text)]
        found += [(name, f"#{anchor}") for anchor in ANCHOR.findall(text)]
    return found


def test_sections_that_code_points_at_are_found() -> None:
    found = pointers()
    assert any(section.startswith("#") for _, section in found)
    assert any(not section.startswith("#") for _, section in found)


@pytest.mark.parametrize(("source", "section"), pointers())
def test_every_pointer_names_a_section(source: str, section: str) -> None:
    if section.startswith("#"):
        assert section[1:] in {slug(h) for h in headings()}, f"{source}: no anchor {section}"
    else:
        assert section in headings(), f"{source} points at ARCHITECTURE.md section {section!r}"
