"""What the import-linter contracts in pyproject.toml cannot say about the package's imports.

No module of gpufleet reaches itself through its imports, type-only imports included: a
loop of annotations is still a loop between modules, and it is what makes the layers of
ARCHITECTURE.md ("Layers") hard to keep.
"""

from __future__ import annotations

import grimp

PACKAGE = "gpufleet"


def import_graph() -> grimp.ImportGraph:
    """The package's imports, those under ``if TYPE_CHECKING:`` and inside functions too."""
    return grimp.build_graph(PACKAGE, exclude_type_checking_imports=False, cache_dir=None)


def import_cycles(graph: grimp.ImportGraph) -> list[tuple[str, ...]]:
    """Every loop of ``graph`` as a chain ``a -> b -> ... -> a``: each import ``a -> b`` that
    lies on a loop, closed by the shortest chain from ``b`` back to ``a``. Each loop once,
    starting at its first module by name; empty when the graph has none."""
    found: set[tuple[str, ...]] = set()
    for importer in graph.modules:
        for imported in graph.find_modules_directly_imported_by(importer):
            back = graph.find_shortest_chain(importer=imported, imported=importer)
            if back is None:
                continue
            loop = (importer, *back[:-1])
            start = loop.index(min(loop))
            found.add((*loop[start:], *loop[:start], loop[start]))
    return sorted(found)


def test_import_cycles_names_every_loop_and_nothing_else() -> None:
    graph = grimp.ImportGraph()
    for importer, imported in [
        ("p.c", "p.a"),
        ("p.a", "p.b"),
        ("p.b", "p.c"),  # p.a -> p.b -> p.c -> p.a
        ("p.b", "p.d"),
        ("p.d", "p.b"),  # p.b -> p.d -> p.b, sharing p.b with the first
        ("p.e", "p.a"),  # into a loop, not on one
        ("p.f", "p.g"),
    ]:
        graph.add_import(importer=importer, imported=imported)
    assert import_cycles(graph) == [("p.a", "p.b", "p.c", "p.a"), ("p.b", "p.d", "p.b")]


def test_the_graph_holds_type_only_imports() -> None:
    """backlog.py imports the job type for its annotations only."""
    graph = import_graph()
    assert graph.direct_import_exists(
        importer="gpufleet.scheduler.backlog", imported="gpufleet.scheduler.job"
    )


def test_no_module_imports_itself_through_others() -> None:
    loops = import_cycles(import_graph())
    assert not loops, "import cycles:\n" + "\n".join(" -> ".join(loop) for loop in loops)
