"""The module import graph of host/torchmcu has no cycle, counting function-local imports.

The graph is read from the source with ast, not by importing: every `import` and `from ...
import` anywhere in a module (top level, functions, methods, try/except) is an edge to the
torchmcu module it names; imports of other packages (torch, torchao, Vela, TOSA...) are not
edges, so lazy imports of those for start-up time stay free. `from P import name` is an edge
to the submodule P.name when it exists, else to P. Python runs a package's __init__ before
any of its submodules, so an import also has an edge to each enclosing package of its target
- except the importer's own enclosing packages, which are already importing when it runs
(lower/lowering.py importing lower/context.py does not re-enter lower/__init__.py).
Imports under `if TYPE_CHECKING:` never run and are left out. The compiled extension
(torchmcu._native, built by CMake, not in the source tree) is a module without edges.

    python tests/test_import_graph.py        # lists each cycle (strongly connected component)
                                             # with its edges, `local` marking function-local ones
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_DIR = ROOT / "host" / "torchmcu"
EXTENSIONS = ("_native",)  # compiled submodules of the package (CMakeLists.txt builds them)


@dataclass(frozen=True)
class Edge:
    """One import statement of `importer` that makes Python import `target`."""

    importer: str
    target: str
    line: int
    local: bool  # inside a function or method body: runs when called, not at import time
    implicit: bool = False  # the target is an enclosing package of the module named


def module_names(package_dir: Path = PACKAGE_DIR,
                 extensions: tuple[str, ...] = ()) -> dict[str, Path | None]:
    """Dotted module name -> source file, for every .py under the package directory (and
    None for each compiled extension, a dotted name relative to the package)."""
    base = package_dir.name
    names: dict[str, Path | None] = {f"{base}.{e}": None for e in extensions}
    for path in sorted(package_dir.rglob("*.py")):
        parts = [base, *path.relative_to(package_dir).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """(module named, line, local) for each import of one module."""

    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.package = module if is_package else module.rpartition(".")[0]
        self.depth = 0  # function nesting
        self.found: list[tuple[str, str | None, int, bool]] = []  # (module, name or None, ...)

    def _function(self, node: ast.AST) -> None:
        self.depth += 1
        self.generic_visit(node)
        self.depth -= 1

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for child in node.orelse:
                self.visit(child)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self.found.append((alias.name, None, node.lineno, self.depth > 0))

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.package.split(".")
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        for alias in node.names:
            self.found.append((module, alias.name, node.lineno, self.depth > 0))

    def visit_Call(self, node: ast.Call) -> None:
        # importlib.import_module("torchmcu.x") with a literal name
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if (name == "import_module" and node.args and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)):
            self.found.append((node.args[0].value, None, node.lineno, self.depth > 0))
        self.generic_visit(node)


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts))]


def import_graph(package_dir: Path = PACKAGE_DIR,
                 extensions: tuple[str, ...] = EXTENSIONS) -> dict[str, list[Edge]]:
    """Module -> its import edges to other modules of the package (all modules are keys;
    one edge per statement and target)."""
    modules = module_names(package_dir, extensions)
    graph: dict[str, list[Edge]] = {name: [] for name in modules}
    for name, path in modules.items():
        if path is None:
            continue
        visitor = _Imports(name, path.name == "__init__.py")
        visitor.visit(ast.parse(path.read_text(), filename=str(path)))
        own = set(_ancestors(name))
        for module, item, line, local in visitor.found:
            target = f"{module}.{item}" if item and f"{module}.{item}" in modules else module
            if target not in modules:
                continue  # another package, or `from pkg import *` of an unknown module
            edges = [Edge(name, target, line, local)] if target != name else []
            edges += [Edge(name, parent, line, local, implicit=True)
                      for parent in _ancestors(target)
                      if parent in modules and parent not in own and parent != name]
            graph[name] += [e for e in edges if e not in graph[name]]
    return graph


def cycles(graph: dict[str, list[Edge]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted,
    largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0

    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted({e.target for e in graph[root]})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted({e.target for e in graph[succ]}))))
                    advanced = True
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


def describe(graph: dict[str, list[Edge]], components: list[list[str]],
             package_dir: Path = PACKAGE_DIR) -> str:
    """Each cycle with the edges that stay inside it, one line per importer and target:
    the importing lines, `(local)` after a function-local one, `(package)` after an edge to
    an enclosing package of the module named."""
    files = module_names(package_dir)
    lines = []
    for k, component in enumerate(components, start=1):
        members = set(component)
        lines.append(f"cycle {k} ({len(component)} modules):")
        for module in component:
            path = files[module]
            where = path.relative_to(package_dir.parents[1]) if path else module
            by_target: dict[str, list[str]] = {}
            for e in graph[module]:
                if e.target in members:
                    tag = "".join(t for t, on in ((" (local)", e.local), (" (package)", e.implicit))
                                  if on)
                    by_target.setdefault(e.target, []).append(f"{e.line}{tag}")
            for target, at in by_target.items():
                lines.append(f"  {module} -> {target}  [{where}:{', '.join(at)}]")
    return "\n".join(lines)


def _write_package(root: Path, spec: str) -> Path:
    """A package `pkg` under root from `spec`: each `## <path>` line starts a file."""
    for chunk in spec.split("## ")[1:]:
        rel, _, text = chunk.partition("\n")
        path = root / "pkg" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_graph_counts_function_local_imports(tmp_path: Path) -> None:
    graph = import_graph(_write_package(tmp_path, """\
## __init__.py
## a.py
from pkg.b import f
## b.py
def f():
    from pkg import a
    return a
## c.py
from typing import TYPE_CHECKING
if TYPE_CHECKING:
    from pkg import a
## d.py
import torch
from . import c
"""))
    assert {e.target for e in graph["pkg.b"]} == {"pkg.a"}
    assert graph["pkg.b"][0].local and not graph["pkg.a"][0].local
    assert graph["pkg.c"] == []  # TYPE_CHECKING imports never run
    assert [e.target for e in graph["pkg.d"]] == ["pkg.c"]  # relative; torch is not an edge
    assert cycles(graph) == [["pkg.a", "pkg.b"]]


def test_graph_follows_package_inits(tmp_path: Path) -> None:
    graph = import_graph(_write_package(tmp_path, """\
## __init__.py
## x/__init__.py
from pkg.x.inner import g
## x/inner.py
from pkg.x import helper
from pkg.y.leaf import h
## x/helper.py
## y/__init__.py
from pkg.y.leaf import h
## y/leaf.py
def h():
    from pkg.x.helper import k
"""))
    # inner -> x (its own package, already importing) is not an edge; inner -> y is.
    assert {e.target for e in graph["pkg.x.inner"]} == {"pkg.x.helper", "pkg.y.leaf", "pkg.y"}
    # y.leaf -> x.helper runs x/__init__, which imports x.inner, which imports y (its
    # __init__ imports y.leaf) and y.leaf
    assert cycles(graph) == [["pkg.x", "pkg.x.inner", "pkg.y", "pkg.y.leaf"]]


def test_graph_covers_the_package() -> None:
    graph = import_graph()
    assert set(graph) == set(module_names(extensions=EXTENSIONS))
    assert Edge("torchmcu.native", "torchmcu._native", 17, False) in graph["torchmcu.native"]
    assert "torchmcu.lower.context" in {e.target for e in graph["torchmcu.lower.lowering"]}


def reachable(graph: dict[str, list[Edge]], start: str) -> set[str]:
    """Every module importing `start` can import, `start` included."""
    seen = {start}
    todo = [start]
    while todo:
        for e in graph[todo.pop()]:
            if e.target not in seen:
                seen.add(e.target)
                todo.append(e.target)
    return seen


def _within(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


def imports_above(graph: dict[str, list[Edge]], layer: str,
                  allowed: tuple[str, ...]) -> dict[str, list[str]]:
    """Module of package `layer` -> the modules outside `allowed` it can import, directly or
    through others (only modules with any)."""
    found = {}
    for module in graph:
        if _within(module, (layer,)):
            outside = sorted(m for m in reachable(graph, module) if not _within(m, allowed))
            if outside:
                found[module] = outside
    return found


# What torchmcu.ops may import: itself and the .pte model (docs/design/operator-registry.md 4.1)
BOTTOM_LAYER = ("torchmcu.ops", "torchmcu.pte")


def test_bottom_layer_check_follows_imports(tmp_path: Path) -> None:
    graph = import_graph(_write_package(tmp_path, """\
## __init__.py
## ops/__init__.py
from pkg.ops import core
## ops/core.py
from pkg.pte import model
## ops/defs.py
def hook():
    from pkg.pte import writer
## pte/__init__.py
## pte/model.py
## pte/writer.py
from pkg.lower import rules
## lower/__init__.py
## lower/rules.py
"""))
    # ops/defs reaches lower through pte/writer; core and the package only reach pte.model
    assert imports_above(graph, "pkg.ops", ("pkg.ops", "pkg.pte")) == {
        "pkg.ops.defs": ["pkg.lower", "pkg.lower.rules"]}


def test_ops_is_the_bottom_layer() -> None:
    graph = import_graph()
    assert {"torchmcu.ops", "torchmcu.ops.core", "torchmcu.ops.defs"} <= set(graph)
    above = imports_above(graph, "torchmcu.ops", BOTTOM_LAYER)
    assert not above, f"torchmcu.ops imports modules above {BOTTOM_LAYER}: {above}"


def test_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert not found, "import cycles in host/torchmcu:\n" + describe(graph, found)


if __name__ == "__main__":
    g = import_graph()
    c = cycles(g)
    print(describe(g, c) if c else "no import cycles")
    n_edges = sum(len(v) for v in g.values())
    n_local = sum(e.local for v in g.values() for e in v)
    print(f"\n{len(g)} modules, {n_edges} edges ({n_local} from function-local imports), "
          f"{len(c)} cycles", file=sys.stderr)
