"""No import cycle in ``litseg_nb``: between modules, and between its packages.

Every module of the package is parsed with :mod:`ast` (nothing is imported). An import anywhere in a
module counts — at module level and inside a function (a function-level import is a dependency all the
same, only deferred) — except the ones under ``if TYPE_CHECKING:`` (annotations only, never executed).
``import a.b`` and ``from a import b`` resolve to the package's own module they name (``from pkg import
name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``); imports of other
distributions are ignored, and so are ``importlib.import_module`` strings (not visible to ``ast``).

Two graphs are checked:

* the **module graph** (one node per module, ``__init__`` as the package's name);
* the **package graph**: one node per top-level subpackage (``chunkers``, ``rag``, ...) or top-level
  module (``config``, ``runner``, ...) of ``litseg_nb``, an edge where a module of one imports a module
  of another.

A failure names every cycle it finds (one per strongly connected component), e.g.
``litseg_nb.a -> litseg_nb.b -> litseg_nb.a``. Nothing is exempt: a cycle is broken by moving the
shared name down (or the high-level user up), not by a function-level import.
"""
from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "litseg_nb"
PACKAGE = "litseg_nb"

def module_name(path: Path, root: Path = ROOT) -> str:
    rel = path.relative_to(root.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def discover(root: Path = ROOT) -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    return {module_name(p, root): p for p in sorted(root.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every Import/ImportFrom node, skipping the bodies of ``if TYPE_CHECKING:`` (their ``else`` counts)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _resolve_from(mod: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_package else mod.split(".")[:-1]
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _owning_module(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is one of the package's modules."""
    parts = name.split(".")
    while parts:
        cand = ".".join(parts)
        if cand in modules:
            return cand
        parts.pop()
    return None


def module_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for mod, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for node in _import_nodes(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = _resolve_from(mod, is_package, node)
                for a in node.names:
                    sub = f"{base}.{a.name}"
                    targets.append(sub if sub in modules else base)
            for t in targets:
                if t != PACKAGE and not t.startswith(PACKAGE + "."):
                    continue
                owner = _owning_module(t, modules)
                if owner is not None and owner != mod:
                    graph[mod].add(owner)
    return graph


def package_of(mod: str) -> str:
    parts = mod.split(".")
    return parts[1] if len(parts) > 1 else PACKAGE


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for mod, deps in graph.items():
        src = package_of(mod)
        out.setdefault(src, set())
        for d in deps:
            dst = package_of(d)
            if dst != src:
                out[src].add(dst)
                out.setdefault(dst, set())
    return out


def _sccs(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _shortest_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """A shortest cycle through the component's first node (breadth-first inside the component)."""
    members = set(comp)
    start = comp[0]
    prev: dict[str, str] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for nxt in sorted(graph[node] & members):
            if nxt == start:
                path = [node]
                while path[-1] != start:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if nxt not in seen:
                seen.add(nxt)
                prev[nxt] = node
                queue.append(nxt)
    raise AssertionError(f"no cycle in component {comp}")  # pragma: no cover - a component has one


def cycles(graph: dict[str, set[str]]) -> list[str]:
    """One line per cycle (one per strongly connected component): ``a -> b -> a``."""
    return [" -> ".join(_shortest_cycle(graph, comp)) for comp in _sccs(graph)]


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return module_graph(discover())


def test_graph_sees_the_package(graph):
    # the parser finds the modules and their imports (an empty graph would pass the cycle checks)
    assert "litseg_nb.config" in graph and "litseg_nb.segmenters.registry" in graph
    assert "litseg_nb.config" in graph["litseg_nb.chunkers.config"]
    assert {"chunkers", "rag", "metrics", "config"} <= set(package_graph(graph))


def mutual_pairs(graph: dict[str, set[str]]) -> list[str]:
    """``a <-> b`` for every two modules that import each other (the shortest cycles, named one by one)."""
    return sorted({" <-> ".join(sorted((a, b))) for a in graph for b in graph[a] if a in graph.get(b, ())})


def test_no_module_cycle(graph):
    found = [f"{cyc}  ({len(comp)} modules in this cycle: {', '.join(comp)})"
             for cyc, comp in zip(cycles(graph), _sccs(graph))]
    assert not found, ("import cycle(s) between modules:\n" + "\n".join(found)
                       + "\nmodules importing each other:\n" + "\n".join(mutual_pairs(graph)))


def test_no_package_cycle(graph):
    pg = package_graph(graph)
    found = [" -> ".join(_shortest_cycle(pg, comp)) + f"  (packages {', '.join(comp)})"
             for comp in _sccs(pg)]
    assert not found, "import cycle(s) between packages of litseg_nb:\n" + "\n".join(found)


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root / PACKAGE


def test_checker_finds_function_level_and_skips_type_checking(tmp_path):
    pkg = _write(tmp_path, {
        "litseg_nb/__init__.py": "",
        "litseg_nb/a.py": "from .b import x\n",
        "litseg_nb/b.py": "def f():\n    from . import a\n",  # function-level: counts
        "litseg_nb/sub/__init__.py": "",
        "litseg_nb/sub/c.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..d import y\n",
        "litseg_nb/d.py": "from .sub import c\n",  # c -> d only under TYPE_CHECKING: no cycle
        "litseg_nb/e.py": "import litseg_nb.sub.c\nimport os\n",
    })
    g = module_graph(discover(pkg))
    assert cycles(g) == ["litseg_nb.a -> litseg_nb.b -> litseg_nb.a"]
    assert g["litseg_nb.d"] == {"litseg_nb.sub.c"} and g["litseg_nb.sub.c"] == set()
    assert g["litseg_nb.e"] == {"litseg_nb.sub.c"}
    assert cycles(package_graph(g)) == ["a -> b -> a"]


def test_checker_finds_package_cycle(tmp_path):
    pkg = _write(tmp_path, {
        "litseg_nb/__init__.py": "",
        "litseg_nb/p/__init__.py": "", "litseg_nb/p/x.py": "from ..q.y import f\n",
        "litseg_nb/q/__init__.py": "", "litseg_nb/q/y.py": "", "litseg_nb/q/z.py": "from ..p import x\n",
    })
    g = module_graph(discover(pkg))
    assert cycles(g) == []  # modules: p.x -> q.y, q.z -> p.x: no cycle
    assert cycles(package_graph(g)) == ["p -> q -> p"]
