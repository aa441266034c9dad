"""The library's packages form layers: a module imports only from its own layer or those below,
and no chain of imports leads from a module back to itself.

The order, lowest first, is :data:`LAYERS`. It is read from the source (``ast``): every import
statement at any depth, relative ones resolved, so a lazy import inside a function counts as
much as one at the top of a file. Code of a higher layer is reached from below only by name
(a catalog entry's ``"package.module:attribute"`` or a paper's package, imported when used).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "focalcal"

#: Lowest first. A module of layer i may import from layers 0..i.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("core", frozenset({
        # what every layer leans on: parameter constraints, input checks, the API's types, the
        # optional extras, where the compiled kernels live, pinned CPU numerics, what a spec means
        "core",
        "paths",
        "logits_file",
        # reading and writing results files safely: atomic writes, checksum sidecars, checked
        # archives, the re-make command of each results path (a table over paths.py)
        "files",
        "catalog", "losses", "metrics", "calibration", "theory",
    })),
    ("training", frozenset({"data", "models", "training", "translation"})),
    ("results", frozenset({"pipeline", "claims"})),
    ("drawing", frozenset({"plots"})),
    ("report", frozenset({"report"})),
    # each paper's code (its page, figures, claims), reached through its entry in catalog.PAPERS
    ("papers", frozenset({"papers"})),
    # the command line and what only a command's own process does (commands.allocator: glibc's
    # allocator settings, which no library module makes); focalcal/__init__.py and __main__.py
    ("commands", frozenset({"commands", "__main__", "__init__"})),
)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def unit(module: str) -> str:
    """The name a layer lists: a module's first part below ``focalcal``."""
    parts = module.split(".")[1:]
    return parts[0] if parts else "__init__"


def layer_of(module: str) -> int:
    name = unit(module)
    for index, (_, members) in enumerate(LAYERS):
        if name in members:
            return index
    raise AssertionError(f"{module} belongs to no layer of tests/test_layers.py: declare it")


def _existing(module: str) -> str | None:
    relative = Path(*module.split(".")[1:])
    for candidate in (PACKAGE / relative.with_suffix(".py"), PACKAGE / relative / "__init__.py"):
        if module == "focalcal" or candidate.exists():
            return module
    return None


def imports_of(path: Path) -> list[tuple[str, int, bool]]:
    """(imported focalcal module, line, at import time) for every import in ``path``, at any depth."""
    tree = ast.parse(path.read_text(), filename=str(path))
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    top_level = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        eager = id(node) in top_level
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names if alias.name.startswith("focalcal.")]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "focalcal":
                source = node.module
            else:
                continue
            # "from focalcal.x import y" imports the module focalcal.x.y when there is one
            names = [_existing(f"{source}.{alias.name}") or source for alias in node.names]
        else:
            continue
        found += [(name, node.lineno, eager) for name in names if name != own]
    return found


def import_graph():
    return {module_name(path): (path, imports_of(path)) for path in sorted(PACKAGE.rglob("*.py"))}


def relative(path: Path) -> str:
    return str(path.relative_to(PACKAGE.parents[1]))


def upward_imports(graph) -> list[str]:
    found = []  # one line per importing line and imported file
    for module, (path, imports) in graph.items():
        for target, line, _ in imports:
            if target in graph and layer_of(target) > layer_of(module):
                found.append(f"{relative(path)}:{line} ({LAYERS[layer_of(module)][0]}) imports "
                             f"{relative(graph[target][0])} ({LAYERS[layer_of(target)][0]})")
    return list(dict.fromkeys(found))


def import_cycles(graph) -> list[list[str]]:
    """Cycles of imports, those inside functions included: a module that needs another which
    needs it back is one idea split in two, or a piece that belongs below both."""
    edges = defaultdict(set)
    for module, (_, imports) in graph.items():
        edges[module] |= {target for target, _, _ in imports if target in graph}
    cycles, state, stack = [], {}, []

    def visit(module):
        state[module] = "open"
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == "open":
                cycles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return cycles


def test_every_module_is_in_a_layer():
    for module in import_graph():
        layer_of(module)


def test_every_name_a_layer_lists_exists():
    """A moved or deleted module leaves no stale name behind in :data:`LAYERS`."""
    listed = {name for _, members in LAYERS for name in members}
    stale = sorted(name for name in listed
                   if not (PACKAGE / f"{name}.py").exists() and not (PACKAGE / name / "__init__.py").exists())
    assert not stale, f"LAYERS names modules that src/focalcal/ does not hold: {stale}"


#: The single files the package root holds: the modules users import by name (the catalog, the
#: results paths, the logits format) and the package's own. Everything else lives in a package
#: named for what it holds (core, files, commands, ...).
ROOT_MODULES = frozenset({"__init__", "__main__", "catalog", "paths", "logits_file"})


def test_the_package_root_holds_only_its_named_modules():
    extra = sorted(path.name for path in PACKAGE.glob("*.py") if path.stem not in ROOT_MODULES)
    assert not extra, f"modules at the root of src/focalcal/ (put each in the package of what it holds): {extra}"


def test_no_module_imports_from_a_higher_layer():
    found = upward_imports(import_graph())
    assert not found, "upward imports:\n" + "\n".join(found)


def test_no_import_cycle():
    graph = import_graph()
    cycles = import_cycles(graph)
    assert not cycles, "import cycles:\n" + "\n".join(
        " -> ".join(relative(graph[module][0]) for module in cycle) for cycle in cycles)


@pytest.mark.parametrize(("source", "expected"), [
    ("from focalcal.report.targets import PAPER_TITLES\n", ("src/focalcal/catalog.py:1 (core) imports "
                                                    "src/focalcal/report/targets.py (report)")),
    ("def f():\n    from focalcal.plots import style\n", ("src/focalcal/catalog.py:2 (core) imports "
                                                        "src/focalcal/plots/style.py (drawing)")),
    # a paper's package, its __init__ included, is code of the top floor but one
    ("from focalcal import papers\n", "src/focalcal/catalog.py:1 (core) imports src/focalcal/papers/__init__.py (papers)"),
    ("def f():\n    from focalcal.papers.mukhoti2020 import KEY\n",
     "src/focalcal/catalog.py:2 (core) imports src/focalcal/papers/mukhoti2020/__init__.py (papers)"),
])
def test_an_upward_import_is_named_with_both_files(monkeypatch, source, expected):
    graph = import_graph()
    path = graph["focalcal.catalog"][0]
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: source if self == path else
                        Path.read_bytes(self).decode())
    assert expected in upward_imports(import_graph())


def test_a_cycle_is_found(monkeypatch):
    graph = import_graph()
    path = graph["focalcal.paths"][0]
    original = path.read_text()
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: original + "\nfrom focalcal.files import remake\n"
                        if self == path else Path.read_bytes(self).decode())
    cycles = import_cycles(import_graph())
    assert ["focalcal.files.remake", "focalcal.paths", "focalcal.files.remake"] in cycles or \
        ["focalcal.paths", "focalcal.files.remake", "focalcal.paths"] in cycles


@pytest.mark.parametrize("source", [
    "\ndef f():\n    from focalcal.files import remake\n",  # closed inside a function
    "\ndef f():\n    from .files import remake\n",  # relative
])
def test_a_cycle_closed_inside_a_function_is_found(monkeypatch, source):
    graph = import_graph()
    path = graph["focalcal.paths"][0]
    original = path.read_text()
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: original + source
                        if self == path else Path.read_bytes(self).decode())
    cycles = import_cycles(import_graph())
    assert ["focalcal.files.remake", "focalcal.paths", "focalcal.files.remake"] in cycles or \
        ["focalcal.paths", "focalcal.files.remake", "focalcal.paths"] in cycles
