"""No import cycle in ``litseg_nb`` (between modules, and between its packages), and no import that
climbs a layer.

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

The **layers**: :data:`LAYERS` is the one place that declares the package's architecture, bottom to
top; every top-level subpackage and root module of ``litseg_nb`` belongs to exactly one layer. A module
may import its own layer and the layers below it; an import that climbs a layer (function-level ones
included) fails :func:`test_no_import_climbs_a_layer`, naming the importing module, the imported one
and both layers. A new top-level package or root module fails until it is given a layer here.
"""
from __future__ import annotations

import ast
from collections import deque
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "litseg_nb"
PACKAGE = "litseg_nb"

#: the architecture, bottom to top: (layer, the top-level packages and root modules in it). A module
#: imports only from its own layer and the ones below (the cycle tests above keep a layer's members
#: from importing each other both ways). ``litseg_nb`` is the package's ``__init__``.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("ground", ("_version", "errors", "redact")),  # the error root, the version, secrets out of URLs
    ("configuration", ("config",)),                  # the profile table, frozen stage configs
    ("core", ("core",)),                             # paths, safe writes, records with spans, caches, artifacts
    ("engines", ("llm",)),                           # LLM backends, embeddings, request cache, replies
    ("metrics", ("metrics",)),                       # retrieval, generation, pairwise and RAGAS scores
    ("data", ("data", "preprocess", "corpus")),      # loaders, cleaning and structure, the cached corpus
    ("methods", ("litseg", "lite", "chunkers", "chunk_sets")),  # the segmenters and the sets they write
    ("segmenters", ("segmenters",)),                 # one contract and the registry, above every method
    ("evaluation", ("rag", "evaluation")),           # RAG, segment quality, boundaries, ablations, efficiency
    ("public API", ("api",)),                        # litseg_nb.segment, load_text
    ("front", ("front", "integrations")),            # batch segmenting, notebook runs, framework adapters
    ("entry points", ("cli", "__main__", PACKAGE)),  # the command line (and the API reference build), __init__
)

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


# ------------------------------------------------------------------ layers
def layer_index(layers=LAYERS) -> dict[str, int]:
    """Top-level package or root module -> its layer's position (0 = bottom)."""
    out: dict[str, int] = {}
    for i, (_, members) in enumerate(layers):
        for m in members:
            assert m not in out, f"{m} is in two layers"
            out[m] = i
    return out


def unplaced(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """The top-level packages and root modules no layer names."""
    known = layer_index(layers)
    return sorted({package_of(m) for m in graph} - set(known))


def climbing_imports(graph: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """One line per import that climbs a layer: ``a (layer) imports b (higher layer)``."""
    index = layer_index(layers)
    names = [name for name, _ in layers]
    out = []
    for mod in sorted(graph):
        src = index.get(package_of(mod))
        for dep in sorted(graph[mod]):
            dst = index.get(package_of(dep))
            if src is not None and dst is not None and dst > src:
                out.append(f"{mod} ({names[src]}) imports {dep} ({names[dst]})")
    return out


def test_every_package_has_a_layer(graph):
    missing = unplaced(graph)
    assert not missing, ("top-level package(s)/module(s) of litseg_nb in no layer (add them to LAYERS in "
                         "tests/test_import_graph.py): " + ", ".join(missing))


def test_no_import_climbs_a_layer(graph):
    found = climbing_imports(graph)
    assert not found, ("import(s) that climb a layer (move the shared name down or the user up):\n"
                       + "\n".join(found))


def test_root_holds_few_modules():
    root = sorted(p.stem for p in ROOT.glob("*.py"))
    assert len(root) <= 8, f"{len(root)} modules at the root of litseg_nb (at most 8): {', '.join(root)}"


def test_checker_finds_a_planted_upward_import(tmp_path):
    # a layered toy package: low -> mid -> high; one planted function-level import climbs from low to high
    layers = (("bottom", ("low",)), ("middle", ("mid",)), ("top", ("high", PACKAGE)))
    pkg = _write(tmp_path, {
        "litseg_nb/__init__.py": "from .high import api\n",
        "litseg_nb/low/__init__.py": "", "litseg_nb/low/base.py": "def f():\n    from ..high.api import g\n",
        "litseg_nb/mid/__init__.py": "", "litseg_nb/mid/work.py": "from ..low.base import f\n",
        "litseg_nb/high/__init__.py": "", "litseg_nb/high/api.py": "from ..mid import work\ndef g(): pass\n",
        "litseg_nb/stray.py": "",
    })
    g = module_graph(discover(pkg))
    assert climbing_imports(g, layers) == ["litseg_nb.low.base (bottom) imports litseg_nb.high.api (top)"]
    assert unplaced(g, layers) == ["stray"]
    # the same import under TYPE_CHECKING (annotations only) does not climb
    (pkg / "low" / "base.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..high.api import g\n")
    assert climbing_imports(module_graph(discover(pkg)), layers) == []


def test_planted_upward_import_in_the_real_package_fails(tmp_path):
    # the real package with one planted upward import: core (ground files) importing the front
    import shutil

    shutil.copytree(ROOT, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__", "templates"))
    target = tmp_path / PACKAGE / "core" / "paths.py"
    target.write_text(target.read_text(encoding="utf-8") + "\n\ndef _planted():\n    from ..front import runner\n",
                      encoding="utf-8")
    g = module_graph(discover(tmp_path / PACKAGE))
    assert climbing_imports(g) == ["litseg_nb.core.paths (core) imports litseg_nb.front.runner (front)"]


# ------------------------------------------------------------------ deferred imports
def internal_imports(root: Path = ROOT) -> list[tuple[str, int, bool, str]]:
    """``(module, line, deferred, the line above)`` for every import statement of litseg_nb's own modules;
    deferred = inside a function or class body (module-level if/try blocks are module level)."""
    out = []
    modules = discover(root)
    for mod, path in modules.items():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        tree = ast.parse(text, filename=str(path))
        stack = [(n, False) for n in tree.body]
        while stack:
            node, deferred = stack.pop()
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                stack.extend((c, deferred) for c in node.orelse)
                continue
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    names = [_resolve_from(mod, path.name == "__init__.py", node)]
                if any(n == PACKAGE or n.startswith(PACKAGE + ".") for n in names):
                    above = lines[node.lineno - 2] if node.lineno >= 2 else ""
                    out.append((mod, node.lineno, deferred, above))
                continue
            inner = deferred or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            stack.extend((c, inner) for c in ast.iter_child_nodes(node))
    return out


def test_deferred_imports_are_few_and_explained():
    # a file's top shows what it depends on: an import stays in a function only for a stated reason
    # (an optional heavy dependency, the package root kept light, a test seam), said on the line above
    rows = internal_imports()
    deferred = [r for r in rows if r[2]]
    assert len(rows) > 300  # the parser sees the package
    assert len(deferred) <= 0.15 * len(rows), f"{len(deferred)} of {len(rows)} internal imports are deferred"
    unexplained = [f"{m}:{line}" for m, line, _, above in deferred if "# deferred:" not in above]
    assert not unexplained, ("deferred import(s) without a `# deferred: <reason>` comment on the line above: "
                             + ", ".join(unexplained))
