"""``python -m litseg_nb docs``: the API reference, generated from the docstrings with pdoc.

Writes HTML pages of every module of :mod:`litseg_nb` to ``docs/api/`` in the checkout (ignored by
git; ``--out DIR`` elsewhere) and prints where the index is. pdoc imports every module, so it needs
the full install (``pip install -e ".[all]"``, what ``scripts/setup.sh`` installs; pdoc is in the extra
``docs``). ``--strict`` (CI) fails when pdoc warns (a module that cannot be imported, a broken
reference) and names each warning.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path
from typing import Any

from .errors import LitsegError, UsageError
from .core.paths import REPO_ROOT
from .core.safe_io import ensure_writable

DEFAULT_OUT = REPO_ROOT / "docs" / "api"


class DocsError(LitsegError):
    """The API reference could not be built (pdoc missing, or warnings under ``--strict``)."""


def modules() -> list[str]:
    """The package and its top-level modules and sub-packages, without ``__main__`` (the package's
    ``__all__`` names the public API, so pdoc would not list them by itself; it walks the
    sub-packages' own modules)."""
    import pkgutil

    # deferred: plain `import` form
    import litseg_nb

    names = ["litseg_nb"] + [f"litseg_nb.{m.name}" for m in pkgutil.iter_modules(litseg_nb.__path__)]
    return [n for n in names if not n.endswith("__main__")]


#: module aliases that annotations name as strings while the module imports them lazily ('pd.DataFrame')
_ALIASES = {"pd": "pandas", "np": "numpy"}


def _resolve_lazy_names(mod: Any) -> None:
    """Make what pdoc looks up in ``mod`` resolvable: the lazy exports of ``__all__`` (a module
    ``__getattr__``: the adapters of :mod:`litseg_nb.integrations`) and the module aliases string
    annotations name (``"pd.DataFrame"`` where pandas is imported inside the function)."""
    import importlib

    for n in getattr(mod, "__all__", ()):
        if n not in vars(mod) and hasattr(mod, "__getattr__"):
            setattr(mod, n, getattr(mod, n))
    src = getattr(mod, "__file__", None)
    text = Path(src).read_text(encoding="utf-8") if src and src.endswith(".py") else ""
    for alias, real in _ALIASES.items():
        if alias not in vars(mod) and (f"'{alias}." in text or f'"{alias}.' in text or f"-> {alias}." in text):
            setattr(mod, alias, importlib.import_module(real))


def resolve_dataclass_inits(names: list[str]) -> int:
    """Give the generated ``__init__`` of every dataclass of ``names`` (and their sub-modules) its
    resolved annotations: with ``from __future__ import annotations`` they are strings naming types of
    the base classes' modules (``LLMConfig`` in a subclass of ``StageConfig``), which pdoc cannot
    resolve in the subclass's module. The number of classes fixed."""
    import dataclasses
    import importlib
    import inspect
    import pkgutil
    import typing

    seen, fixed = set(), 0
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        mod = importlib.import_module(name)
        _resolve_lazy_names(mod)
        if hasattr(mod, "__path__"):
            todo += [f"{name}.{m.name}" for m in pkgutil.iter_modules(mod.__path__)]
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            init = vars(cls).get("__init__")
            if not (dataclasses.is_dataclass(cls) and cls.__module__ == name and inspect.isfunction(init)):
                continue
            ann = getattr(init, "__annotations__", {})
            if not any(isinstance(v, str) for v in ann.values()):
                continue
            try:
                hints = typing.get_type_hints(cls)
            except Exception:  # noqa: BLE001  (left to pdoc, which then warns by name)
                continue
            init.__annotations__ = {k: hints.get(k, v) for k, v in ann.items() if k != "return"} | {"return": None}
            fixed += 1
    return fixed


def build(out: Path | str = DEFAULT_OUT, strict: bool = False) -> tuple[Path, list[str]]:
    """Build the reference into ``out``; ``(index.html, warnings)``. ``strict``: warnings are a DocsError."""
    try:
        import pdoc
        import pdoc.render
    except ImportError as exc:
        raise DocsError(f"pdoc is not installed ({exc}); pip install -e \".[docs]\" (or scripts/setup.sh)") from None
    out = Path(out).expanduser().resolve()
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file, not a folder")

    ensure_writable(out)
    pdoc.render.configure(docformat="restructuredtext", show_source=False, footer_text="litseg_nb API reference")
    names = modules()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        resolve_dataclass_inits(names)
        pdoc.pdoc(*names, output_directory=out)
    found = [f"{w.category.__name__}: {' '.join(str(w.message).split())[:300]}" for w in caught
             if "pdoc" in (w.filename or "") or issubclass(w.category, RuntimeWarning)]
    if strict and found:
        raise DocsError(f"{len(found)} warning(s) building the API reference: " + " | ".join(found[:10]))
    return out / "index.html", found


def cli(args: argparse.Namespace) -> int:
    """Handler of ``docs``."""
    index, found = build(args.out or DEFAULT_OUT, strict=args.strict)
    for line in found:
        print(f"[litseg_nb] docs: warning: {line}", file=sys.stderr)
    print(f"[litseg_nb] API reference: {index}")
    return 0


def add_parser(sub: Any, name: str) -> argparse.ArgumentParser:
    p = sub.add_parser(name, help="build the API reference from the docstrings (pdoc) into docs/api/",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=None, help="folder of the pages (default: docs/api/ in the checkout, git-ignored)")
    p.add_argument("--strict", action="store_true", help="fail when pdoc warns (CI)")
    return p
