"""One error base: every domain error is a :class:`LitsegError`, the CLI turns any of
them into one line on stderr and a non-zero exit, and no code branches on an error message's text.

Before the change: the package had no ``litseg_nb.errors`` (every test here failed on import);
``list`` let a broken notebook's ConfigError out as a traceback; ``segment`` against a dead server
printed its one error line plus the request-cache report on stderr.
"""
from __future__ import annotations

import ast
import builtins
import functools
import importlib
from pathlib import Path

import pytest

import litseg_nb
from litseg_nb import cli
from litseg_nb.front import runner
from litseg_nb.errors import LitsegError, UsageError

from fakes import stderr_lines

PKG = Path(litseg_nb.__file__).parent
_BUILTIN_EXC = {n for n, o in vars(builtins).items() if isinstance(o, type) and issubclass(o, BaseException)}


@functools.lru_cache(maxsize=1)
def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        out[name] = ast.parse(path.read_text(encoding="utf-8"))
    return out


def _exception_classes() -> list[tuple[str, str]]:
    """(module, class) of every class defined in the package that derives from an exception, by
    name through the package's own classes (found without importing every module)."""
    classes = [(mod, node.name, {b.attr if isinstance(b, ast.Attribute) else getattr(b, "id", "")
                                 for b in node.bases})
               for mod, tree in _modules().items() for node in ast.walk(tree) if isinstance(node, ast.ClassDef)]
    exc_names = set(_BUILTIN_EXC)
    while True:
        more = {name for _, name, bases in classes if bases & exc_names} - exc_names
        if not more:
            break
        exc_names |= more
    return [(mod, name) for mod, name, bases in classes if bases & exc_names]


def test_every_exception_class_of_the_package_derives_from_litseg_error():
    found = _exception_classes()
    assert len(found) >= 25, found  # the walk finds them (not a vacuous pass)
    bad = []
    for mod, name in found:
        cls = getattr(importlib.import_module(mod), name)
        if issubclass(cls, Warning) or not issubclass(cls, Exception):
            continue  # CacheWarning is a warning; runner.Interrupted is a KeyboardInterrupt (exit 130)
        if not issubclass(cls, LitsegError):
            bad.append(f"{mod}.{name}")
    assert not bad, f"domain errors without the LitsegError base: {bad}"


def test_errors_module_imports_nothing_from_the_package():
    tree = ast.parse((PKG / "errors.py").read_text(encoding="utf-8"))
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert all(isinstance(n, ast.ImportFrom) and n.module == "__future__" for n in imports)


def _text_tests(tree: ast.AST) -> list[int]:
    """Lines that test an exception's text: ``"..." in str(exc)``, ``str(exc).startswith(...)``,
    where ``exc`` is bound by ``except ... as exc`` or annotated as an exception parameter."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.name:
            names.add(node.name)
        if isinstance(node, ast.arg) and node.annotation is not None and \
                ast.unparse(node.annotation).split(".")[-1] in _BUILTIN_EXC:
            names.add(node.arg)

    def is_text(e: ast.AST) -> bool:
        while isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):  # str(exc).lower()
            e = e.func.value
        return (isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id in ("str", "repr")
                and len(e.args) == 1 and isinstance(e.args[0], ast.Name) and e.args[0].id in names)

    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare) and any(isinstance(op, (ast.In, ast.NotIn, ast.Eq, ast.NotEq))
                                                 for op in node.ops):
            if any(is_text(e) for e in (node.left, *node.comparators)):
                lines.append(node.lineno)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr in ("startswith", "endswith", "find", "count") and is_text(node.func.value):
            lines.append(node.lineno)
    return lines


def test_no_code_branches_on_an_error_message_text():
    bad = {mod: lines for mod, tree in _modules().items() if (lines := _text_tests(tree))}
    assert not bad, f"decide by the error's class or attributes, not its message: {bad}"
    # the check sees the patterns it forbids
    assert _text_tests(ast.parse('try:\n    f()\nexcept ValueError as err:\n    if "x" not in str(err): pass'))
    assert _text_tests(ast.parse('def full(exc: Exception):\n    return "full" in str(exc).lower()'))


# ------------------------------------------------------------------ the CLI: one line, an exit code
def _broken_notebooks(tmp_path: Path, monkeypatch) -> None:
    import nbformat

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])  # no `parameters` cell
    nbformat.write(nb, tmp_path / "01_broken.ipynb")
    monkeypatch.setattr(runner, "NOTEBOOKS_DIR", tmp_path)


STORY = "The Lighthouse\n\nIt was a cold morning. The wind pushed against the glass. She had not slept.\n"
DEAD = "http://127.0.0.1:9/v1"

CASES = {  # id: (argv, expected exit status, text the one line names)
    "config: ConfigError": (["config", "--notebook", "99"], 2, "no notebook numbered 99"),
    "list: ConfigError of a notebook": (["list"], 2, "01_broken.ipynb"),
    "segment: ChunkerError": (["segment", "{book}", "--method", "nosuch", "--profile", "test"], 2, "'nosuch'"),
    "segment: SegmentUsageError": (["segment", "{book}", "--profile", "test", "--llm-backend", "openai"], 2,
                                   "--base-url"),
    "segment: BackendUnavailableError": (["segment", "{book}", "--method", "litseg", "--profile", "test",
                                          "--llm-backend", "openai", "--base-url", DEAD, "--llm-model", "m",
                                          "--set", "llm.max_retries=0", "-o", "{out}"], 1, "127.0.0.1:9"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_domain_error_in_any_subcommand_is_one_line_and_a_nonzero_exit(case, tmp_path, fresh_dirs, monkeypatch,
                                                                          capsys):
    argv, code, names = CASES[case]
    book = tmp_path / "story.txt"
    book.write_text(STORY, encoding="utf-8")
    if case.startswith("list"):
        (tmp_path / "nb").mkdir()
        _broken_notebooks(tmp_path / "nb", monkeypatch)
    argv = [a.format(book=book, out=tmp_path / "out.jsonl") for a in argv]
    assert cli.main(argv) == code
    err = stderr_lines(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("[litseg_nb] ") and names in err[0], err
    assert "Traceback" not in err[0]


@pytest.mark.parametrize("error, code", [(UsageError, 2), (LitsegError, 1)])
def test_main_reports_an_escaping_domain_error_as_one_line(error, code, monkeypatch, capsys):
    def handler(args):
        raise error("first line\n  second line")

    monkeypatch.setitem(cli.COMMANDS, "list", (cli.COMMANDS["list"][0], handler))
    assert cli.main(["list"]) == code
    assert capsys.readouterr().err == "[litseg_nb] list: first line second line\n"


def test_a_bug_keeps_its_traceback(monkeypatch):
    def handler(args):
        raise KeyError("a bug")

    monkeypatch.setitem(cli.COMMANDS, "list", (cli.COMMANDS["list"][0], handler))
    with pytest.raises(KeyError, match="a bug"):
        cli.main(["list"])


def test_one_table_lists_every_subcommand_of_the_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    assert "{" + ",".join(cli.COMMANDS) + "}" in out


def test_output_into_a_closed_pipe_is_no_traceback():
    """`python -m litseg_nb methods | head`: the reader goes away; no BrokenPipeError traceback, exit 1."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "litseg_nb", "methods"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=str(Path(litseg_nb.__file__).parents[1]))
    proc.stdout.close()  # the reader is gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1 and "Traceback" not in err and "BrokenPipe" not in err, err
