"""What the import-linter contracts in pyproject.toml cannot say about the package's code.

* No module of gpufleet reaches itself through its imports, type-only imports included: a
  loop of annotations is still a loop between modules, and it is what makes the layers of
  ARCHITECTURE.md ("Layers") hard to keep.
* The pure core does no I/O, reads no clock and draws no global randomness. The contract
  "The core is pure" forbids its packages the modules for that; what an import contract
  cannot see is a call: the builtins ``open``, ``print``, ``input`` and ``__import__``, and
  numpy's global generator (``np.random.rand``, ``np.random.seed``, ...). Randomness in the
  core is a ``numpy.random.Generator`` passed in, or one built from an explicit seed.
* Nor does it keep an unbounded process-wide cache (``functools.cache``,
  ``lru_cache(maxsize=None)``): keyed on what a snapshot holds, it would grow for as long as
  a process reads new input.
"""

from __future__ import annotations

import ast
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grimp
import pytest

PACKAGE = "gpufleet"
ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "src"
PURE_CONTRACT = "The core is pure: no files, network, wall clock, processes or global randomness"


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
        importer="gpufleet.scheduler.queues.backlog", imported="gpufleet.scheduler.api.job"
    )


def test_no_module_imports_itself_through_others() -> None:
    loops = import_cycles(import_graph())
    assert not loops, "import cycles:\n" + "\n".join(" -> ".join(loop) for loop in loops)


# -- the pure core ---------------------------------------------------------------------------

IMPURE_BUILTINS = frozenset({"open", "print", "input", "__import__"})
SEEDED = frozenset({"default_rng", "Generator", "SeedSequence"})
"""What the core may use of ``numpy.random``: generators, and seeds to build them."""
NEEDS_SEED = frozenset({"default_rng", "SeedSequence"})
"""Without an argument these draw their seed from the operating system."""


def pure_contract() -> dict[str, Any]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    return next(c for c in contracts if c["name"] == PURE_CONTRACT)


def impure_modules() -> frozenset[str]:
    """The modules the pure core may not import: the contract's, one list for both checks."""
    return frozenset(pure_contract()["forbidden_modules"])


def pure_packages() -> list[Path]:
    """The directories of the contract's source modules (``gpufleet.cost.**``: a package
    declared before it exists, checked once it does)."""
    names = [m.removesuffix(".**").removesuffix(".*") for m in pure_contract()["source_modules"]]
    return [SOURCE.joinpath(*name.split(".")) for name in names]


@dataclass(frozen=True, slots=True)
class Impurity:
    line: int
    what: str


class _Checker(ast.NodeVisitor):
    """One module's impurities. Names are resolved through the module's imports (``np``,
    ``from numpy import random``, ``from numpy.random import rand``), wherever they are."""

    def __init__(self, tree: ast.Module, banned: frozenset[str]) -> None:
        self.banned = banned
        self.found: list[Impurity] = []
        self.aliases: dict[str, str] = {}
        self.bound: set[str] = set()
        """Names the module binds itself (a variable called ``input`` is not the builtin)."""
        self.parents: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(tree):
            for child in ast.iter_child_nodes(node):
                self.parents[child] = node
            self._bind(node)

    def _bind(self, node: ast.AST) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    self.aliases[a.asname] = a.name
                else:
                    top = a.name.partition(".")[0]
                    self.aliases[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                self.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            self.bound.add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self.bound.add(node.name)
        elif isinstance(node, ast.arg):
            self.bound.add(node.arg)

    def qualified(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.qualified(node.value)
            return None if base is None else f"{base}.{node.attr}"
        return None

    def report(self, node: ast.stmt | ast.expr, what: str) -> None:
        self.found.append(Impurity(node.lineno, what))

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            if a.name.partition(".")[0] in self.banned:
                self.report(node, f"import {a.name}")

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = node.module or ""
        if node.level:
            return  # relative: inside gpufleet
        if module.partition(".")[0] in self.banned:
            self.report(node, f"from {module} import ...")
        elif module == "numpy.random":
            for a in node.names:
                if a.name not in SEEDED:
                    self.report(node, f"numpy.random.{a.name}")

    def visit_Name(self, node: ast.Name) -> None:
        self._unbounded(node)
        if (
            isinstance(node.ctx, ast.Load)
            and node.id in IMPURE_BUILTINS
            and node.id not in self.aliases
            and node.id not in self.bound
        ):
            self.report(node, f"{node.id}()")
        self._whole_module(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self._unbounded(node)
        if self.qualified(node.value) == "numpy.random" and node.attr not in SEEDED:
            self.report(node, f"numpy.random.{node.attr}")
        self._whole_module(node)
        self.generic_visit(node)

    def _unbounded(self, node: ast.Name | ast.Attribute) -> None:
        if self.qualified(node) == "functools.cache":
            self.report(node, "functools.cache")

    def _whole_module(self, node: ast.Name | ast.Attribute) -> None:
        """``numpy.random`` itself handed on (``r = np.random``): its every use is unseen."""
        parent = self.parents.get(node)
        used = isinstance(parent, ast.Attribute) and parent.value is node
        if not used and self.qualified(node) == "numpy.random":
            self.report(node, "numpy.random")

    def visit_Call(self, node: ast.Call) -> None:
        name = self.qualified(node.func) or ""
        size = [*node.args[:1], *(k.value for k in node.keywords if k.arg == "maxsize")]
        if name == "functools.lru_cache" and any(
            isinstance(s, ast.Constant) and s.value is None for s in size
        ):
            self.report(node, "functools.lru_cache(maxsize=None)")
        seedable = name.startswith("numpy.random.") and name.rpartition(".")[2] in NEEDS_SEED
        if seedable and not node.args and not node.keywords:
            self.report(node, f"{name}() without a seed")
        self.generic_visit(node)


def impurities(source: str) -> list[Impurity]:
    """I/O, clocks, threads, processes and global randomness in one module's ``source``."""
    tree = ast.parse(source)
    checker = _Checker(tree, impure_modules())
    checker.visit(tree)
    return sorted(checker.found, key=lambda i: (i.line, i.what))


PROBE = """\
import os

import numpy as np


def load(path: str) -> object:
    with open(path) as f:
        return f.read(), os.getpid()


def noise() -> object:
    return np.random.rand()
"""


def test_the_purity_check_catches_a_probe() -> None:
    assert impurities(PROBE) == [
        Impurity(1, "import os"),
        Impurity(7, "open()"),
        Impurity(12, "numpy.random.rand"),
    ]


@pytest.mark.parametrize(
    ("source", "what"),
    [
        ("import time", "import time"),
        ("import os.path", "import os.path"),
        ("from datetime import datetime", "from datetime import ..."),
        ("from concurrent.futures import ThreadPoolExecutor", "from concurrent.futures import ..."),
        ("def f():\n    import threading", "import threading"),
        ("import sys", "import sys"),
        ("import importlib", "import importlib"),
        ("print('x')", "print()"),
        ("input()", "input()"),
        ("f = open", "open()"),
        ("__import__('os')", "__import__()"),
        ("import numpy as np\nnp.random.seed(0)", "numpy.random.seed"),
        ("import numpy\nnumpy.random.choice([1, 2])", "numpy.random.choice"),
        ("import numpy.random as npr\nnpr.shuffle([])", "numpy.random.shuffle"),
        ("from numpy import random\nrandom.normal()", "numpy.random.normal"),
        ("from numpy.random import rand", "numpy.random.rand"),
        ("import numpy as np\nnp.random.RandomState(1)", "numpy.random.RandomState"),
        ("import numpy as np\nr = np.random", "numpy.random"),
        ("from functools import cache\n@cache\ndef f(x): ...", "functools.cache"),
        ("import functools\n@functools.cache\ndef f(x): ...", "functools.cache"),
        (
            "from functools import lru_cache\n@lru_cache(maxsize=None)\ndef f(x): ...",
            "functools.lru_cache(maxsize=None)",
        ),
        (
            "import functools\nf = functools.lru_cache(None)(len)",
            "functools.lru_cache(maxsize=None)",
        ),
        (
            "import numpy as np\nnp.random.default_rng()",
            "numpy.random.default_rng() without a seed",
        ),
        (
            "from numpy.random import SeedSequence\nSeedSequence()",
            "numpy.random.SeedSequence() without a seed",
        ),
    ],
)
def test_the_purity_check_names_each_kind(source: str, what: str) -> None:
    assert [i.what for i in impurities(source)] == [what]


def test_the_purity_check_allows_seeded_generators_and_look_alikes() -> None:
    source = """\
from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.random import Generator, default_rng


@lru_cache(maxsize=64)
def bounded(x: int) -> int:
    return x


def draw(rng: np.random.Generator, seed: int, input: list[int], book: object) -> object:
    other: Generator = default_rng(seed)
    book.open()
    return rng.choice(input), np.random.default_rng(seed=seed), np.random.SeedSequence(seed), other
"""
    assert impurities(source) == []


def test_the_check_covers_the_packages_of_the_contract() -> None:
    names = {p.name for p in pure_packages()}
    assert {"model", "framework", "dra", "plugins", "scheduler", "metering", "cost"} <= names
    assert {"os", "time", "random", "threading", "pathlib"} <= impure_modules()


def pure_modules() -> list[Path]:
    return sorted(
        f for package in pure_packages() if package.is_dir() for f in package.rglob("*.py")
    )


def test_the_pure_core_does_no_io_and_draws_no_global_randomness() -> None:
    modules = pure_modules()
    assert len(modules) > 40
    found = [
        f"{module.relative_to(ROOT)}:{i.line}: {i.what}"
        for module in modules
        for i in impurities(module.read_text(encoding="utf-8"))
    ]
    assert not found, "impure code in the pure core:\n" + "\n".join(found)
