"""Entry points under scripts/ and benchmarks/ do their work under ``if __name__ == "__main__"``
: vLLM (and torch DataLoader workers, FlagEmbedding's multi-device pool) spawn
processes that re-import the main module; work at import time would run again in each of them."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
ENTRIES = sorted([*REPO.glob("scripts/*.py"), *REPO.glob("benchmarks/*.py")])
# calls harmless at import time (paths, literals, the CLI wrapper's version lookup alias)
HARMLESS = {"Path", "dict", "list", "tuple", "set", "frozenset", "range", "str", "int", "float", "re.compile",
            "sys.path.insert", "os.environ.get", "Path(__file__).resolve"}


def _calls(node: ast.AST) -> list[str]:
    out = []
    for n in ast.walk(node):
        if isinstance(n, ast.Call) and not (isinstance(n.func, ast.Attribute)
                                            and isinstance(n.func.value, ast.Constant)):  # "a b".split()
            out.append(ast.unparse(n.func))
    return out


def _is_main_guard(node: ast.AST) -> bool:
    return (isinstance(node, ast.If) and isinstance(node.test, ast.Compare)
            and ast.unparse(node.test).replace("'", '"') == '__name__ == "__main__"')


@pytest.mark.parametrize("path", ENTRIES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_entry_point_does_nothing_at_import(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    bad = []
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if _is_main_guard(node) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)):
            calls = [c for c in _calls(node) if c not in HARMLESS and not c.startswith("Path(")]
            if not calls:
                continue
        bad.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    assert not bad, f"{path.name} runs code at import time (move it under `if __name__ == '__main__':`): {bad}"
    assert any(_is_main_guard(n) for n in tree.body), f"{path.name} has no `if __name__ == '__main__':` entry"
