"""Shared pytest fixtures.

* Every test session writes outputs and caches to a temporary folder (never into the repo's
  ``outputs/``), via ``LITSEG_OUTPUTS_DIR`` and ``LITSEG_CACHE_DIR``; the test-profile notebook runs
  share that folder so later notebooks see earlier notebooks' artifacts within one session.
* ``LITSEG_DATA_DIR`` defaults to ``<repo>/../shared/data``; tests that need data use the
  ``data_dir`` fixture, which skips with a clear reason when it is absent.
* Hub access is disabled: HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE are set.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("LITSEG_DATA_DIR", str((REPO_ROOT.parent / "shared" / "data").resolve()))


@pytest.fixture(scope="session", autouse=True)
def _session_dirs(tmp_path_factory):
    """Route outputs and caches of the whole session to a temp dir (shared by notebook tests)."""
    root = tmp_path_factory.mktemp("litseg_session")
    old = {k: os.environ.get(k) for k in ("LITSEG_OUTPUTS_DIR", "LITSEG_CACHE_DIR")}
    os.environ["LITSEG_OUTPUTS_DIR"] = str(root / "outputs")
    # the LLM request cache and model copies are reusable across sessions: keep a persistent
    # cache unless the caller pinned one; step caches under it are keyed by content.
    os.environ.setdefault("LITSEG_CACHE_DIR", str(root / "cache"))
    yield root
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def data_dir() -> Path:
    path = Path(os.environ["LITSEG_DATA_DIR"])
    if not path.is_dir():
        pytest.skip(f"evaluation data not found at {path} (set LITSEG_DATA_DIR)")
    return path


@pytest.fixture
def fresh_dirs(tmp_path, monkeypatch):
    """Per-test outputs and cache folders (for tests that must not see other tests' artifacts)."""
    monkeypatch.setenv("LITSEG_OUTPUTS_DIR", str(tmp_path / "outputs"))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


# --- LLM layer (vLLM integration opt-in) -------------------------------------------------------
# `pytest --run-vllm` enables tests marked @pytest.mark.vllm (they start `vllm serve` from the
# separate .venv-vllm created by scripts/setup_vllm_cpu.sh); without it they are skipped.
def pytest_addoption(parser):
    parser.addoption("--run-vllm", action="store_true", default=False,
                     help="run the vLLM integration tests (needs .venv-vllm, ~2-4 min on CPU)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--run-vllm"):
        return
    skip = pytest.mark.skip(reason="vLLM integration test: opt in with --run-vllm "
                                   "(after bash scripts/setup_vllm_cpu.sh)")
    for item in items:
        if "vllm" in item.keywords:
            item.add_marker(skip)
# --- end LLM layer block ------------------------------------------------------------------------


# --- shared factories and the session's notebook pipeline ---------------------------------------
def make_book(book_id: str = "b1", units: int = 3, n: int = 6, *,
              sentence: str | Callable[[int, int, str], str] = "Sentence {i} of unit {u} in {book}.",
              unit_id: str = "u{u:04d}", title: str | None = None, unit_title: str = "Chapter {u}",
              dataset: str = "synthetic", unit_sep: str = "\n\n", sentence_sep: str | Callable[[], str] = " "):
    """A synthetic :class:`~litseg_nb.core.schema.Book`: ``units`` units of ``n`` sentences each, sentence
    ``i`` of unit ``u`` being ``sentence.format(i=i, u=u, book=book_id)`` (or ``sentence(i, u,
    book_id)``), ``sentence_sep`` (a string, or a function called after each sentence) after every
    sentence, ``unit_sep`` after every unit; a unit ends one character before the next unit separator.
    ``unit_id`` and ``unit_title`` are formatted with ``u`` (0-based) and ``n`` (1-based). The one
    book factory of the test suite."""
    from litseg_nb.core.schema import Book, Sentence, Unit

    text, us = "", []
    for u in range(units):
        start, sents = len(text), []
        for i in range(1, n + 1):
            a = len(text)
            text += sentence(i, u, book_id) if callable(sentence) else sentence.format(i=i, u=u, book=book_id)
            sents.append(Sentence(i, a, len(text)))
            text += sentence_sep() if callable(sentence_sep) else sentence_sep
        us.append(Unit(book_id, unit_id.format(u=u, n=u + 1), u, unit_title.format(u=u, n=u + 1), start,
                       len(text) - 1, tuple(sents)))
        text += unit_sep
    return Book(book_id, title or f"Book {book_id}", dataset, text, units=us)


#: notebooks whose artifacts a notebook reads (run first, once per session)
NOTEBOOK_NEEDS = {"03": ("02",), "05": ("02", "03", "04"), "06": ("02", "03", "04"), "07": ("02", "03"),
                  "08": ("02", "03", "04")}


@pytest.fixture(scope="session")
def notebook_pipeline(data_dir, _session_dirs):
    """``ensure("06")`` runs notebook 06 in the test profile, after the notebooks it reads, each at most
    once per session, into the session's outputs folder; returns ``outputs/test``. A notebook that a
    test already ran in this session (its successful executed copy is in the session's folder) is not
    run again. A notebook that failed fails every later request for it (with the original error)."""
    from litseg_nb.core.paths import outputs_dir
    from litseg_nb.front.runner import discover_notebooks, run_notebooks

    done: set[str] = set()
    failed: dict[str, BaseException] = {}

    def ensure(*numbers: str):
        wanted: list[str] = []
        for nb in numbers:
            for dep in (*NOTEBOOK_NEEDS.get(nb, ()), nb):
                if dep not in wanted:
                    wanted.append(dep)
        for nb in sorted(wanted):
            if nb in failed:
                raise RuntimeError(f"notebook {nb} failed earlier in this session") from failed[nb]
            if nb in done or (outputs_dir("test") / "executed" / discover_notebooks((nb,))[0].name).is_file():
                continue
            try:
                run_notebooks("test", only=(nb,))
            except BaseException as exc:
                failed[nb] = exc
                raise
            done.add(nb)
        return outputs_dir("test")

    return ensure
