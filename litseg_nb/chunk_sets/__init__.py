"""Chunk sets: the one hand-off between the notebooks that write chunks and the ones that evaluate them.

A *chunk set* is ``outputs/<profile>/artifacts/chunks/<name>.jsonl`` (the shared chunk schema,
:func:`litseg_nb.core.schema.save_chunks`). Producers: notebook 02 (``litseg``), 03 (``litseg-lite``), 04
(the baselines and the ``lib:`` presets) and ``python -m litseg_nb import-chunks`` (an external set,
marked by its ``<name>.import.json``); notebook 07 keeps its ablation variants apart
(``artifacts/ablation/chunks``, passed to the consumers in memory). Consumers: notebook 05 (RAG,
:func:`for_retrieval`) and 06 (segment quality, :func:`for_segment_quality`).

This module owns

* :data:`METHOD_ORDER` — the order sets are evaluated and tabled in: the registry's method names
  (notebook 04's baselines in table order, :data:`litseg_nb.chunkers.config.ALL_METHODS`, then LitSeg
  and LitSeg-Lite: the names the registry registers, read from below it), other names (imported sets, ``lib:``
  presets) after them by name;
* :func:`discover` — which sets exist (and which expected ones are missing; a set asked for by name
  that does not exist is an :class:`EvaluationError`);
* :func:`load` / :func:`load_evaluable` — the chunks of the evaluated books, refusing a LitSeg-Lite
  set that holds one of its training units (:func:`litseg_nb.lite.data.refuse_trained_chunk_file`);
* :func:`sentence_windows` — the labelled fallback set (``fallback-sent5``: 5-sentence windows of
  every unit) evaluated only when no chunk set exists at all, so a notebook still runs.

Imported sets may not take a method's name (:func:`litseg_nb.front.chunk_import.check_import_name`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..core.artifacts import artifact_dir, artifact_path
from ..lite.data import refuse_trained_chunk_file
from ..chunkers.config import ALL_METHODS
from ..lite.segmenter import METHOD as LITE_METHOD
from ..litseg.segmenter import METHOD as LITSEG_METHOD
from ..core.schema import Chunk, load_chunks, make_sentence_chunk
from ..errors import LitsegError

#: evaluation and table order of the chunk sets: the registry's methods (not listed again)
METHOD_ORDER: tuple[str, ...] = ALL_METHODS + (LITSEG_METHOD, LITE_METHOD)
FALLBACK_NAME = "fallback-sent5"
FALLBACK_NOTE = f" | NO chunk artifacts found: '{FALLBACK_NAME}' (5-sentence windows) computed here"


class EvaluationError(LitsegError, ValueError):
    """An evaluation that would score nothing (no question in scope, an empty chunk set)."""


def chunk_set_path(profile: str, name: str) -> Path:
    """``outputs/<profile>/artifacts/chunks/<name>.jsonl``."""
    return artifact_path(profile, "chunks", f"{name}.jsonl")


def discover(profile: str, methods: Sequence[str] = ()) -> tuple[dict[str, Path], list[str]]:
    """``({method: path}, missing)`` for the chunk artifacts of ``profile`` (all known methods if empty).

    ``missing`` lists the expected methods without an artifact; a set named in ``methods`` that does
    not exist is an :class:`EvaluationError` listing the sets that do."""
    folder = artifact_dir(profile, "chunks")
    found = {p.stem: p for p in sorted(folder.glob("*.jsonl"))}
    wanted = list(methods) or list(METHOD_ORDER)
    present = {m: found[m] for m in wanted if m in found}
    if not methods:  # also evaluate unexpected method names that exist
        present.update({m: p for m, p in found.items() if m not in present})
    missing = [m for m in wanted if m not in found]
    if methods and missing:  # an explicitly requested set must exist (a typo must not evaluate a stand-in)
        raise EvaluationError(f"requested chunk set(s) {', '.join(missing)} not found in {folder}; chunk sets "
                              f"there: {', '.join(sorted(found)) or 'none'} (run notebooks 02-04 or "
                              "import-chunks first, or fix the name in chunkers=...)")
    order = {m: i for i, m in enumerate(METHOD_ORDER)}
    return dict(sorted(present.items(), key=lambda kv: (order.get(kv[0], 99), kv[0]))), missing


def load_evaluable(paths: Mapping[str, Path], book_ids: Iterable[str],
                   required: Iterable[str] = ()) -> tuple[dict[str, list[Chunk]], list[str]]:
    """``(chunk sets with chunks of the books, names of sets without any)``. A set named in ``required``
    (chunk sets asked for explicitly) without chunks of these books is an error; Lite sets holding a
    trained unit are refused (:func:`litseg_nb.lite.data.refuse_trained_chunk_file`)."""
    wanted, req = set(book_ids), set(required)
    out, none = {}, []
    for m, p in paths.items():
        cs = [c for c in load_chunks(p) if c.book_id in wanted]
        refuse_trained_chunk_file(m, p, cs)
        if cs:
            out[m] = cs
        elif m in req:
            raise EvaluationError(f"chunk set {m!r} ({p}) has no chunks for the evaluated books {sorted(wanted)}")
        else:
            none.append(m)
    return out, none


def load(paths: Mapping[str, Path], book_ids: Iterable[str]) -> dict[str, list[Chunk]]:
    """Chunks of the given books per method; a method with no chunk for a book is an error."""
    wanted = set(book_ids)
    out = {}
    for m, p in paths.items():
        cs = [c for c in load_chunks(p) if c.book_id in wanted]
        refuse_trained_chunk_file(m, p, cs)  # Lite is never evaluated on its training units
        if not cs:
            raise ValueError(f"chunk set {p} has no chunks for the evaluated books {sorted(wanted)}")
        out[m] = cs
    return out


def sentence_windows(books: Sequence[Any], n_sentences: int = 5, method: str = FALLBACK_NAME) -> list[Chunk]:
    """Fixed windows of ``n_sentences`` sentences per unit — used ONLY when no chunk artifact exists,
    so the notebook still runs; tables label it as computed here."""
    out = []
    for b in books:
        for u in b.units:
            for i, lo in enumerate(range(1, u.n_sentences + 1, n_sentences)):
                out.append(make_sentence_chunk(b, u, method, i, lo, min(u.n_sentences, lo + n_sentences - 1)))
    return out


def for_retrieval(profile: str, methods: Sequence[str], books: Sequence[Any]
                  ) -> tuple[dict[str, list[Chunk]], dict[str, Any]]:
    """Notebook 05's chunk sets: ``methods`` (empty = every set found) with chunks of ``books``.

    Returns ``(chunk_sets, info)``: ``info`` holds every discovered artifact path (``paths``), the
    expected methods without an artifact (``missing``), the sets with no chunk in these books
    (``no_chunks_here``) and the label ``note`` (non-empty only for the fallback set). Imported
    chunks that could not be aligned stay (retrievers index their text). A set named in ``methods``
    without chunks of these books is an :class:`EvaluationError`."""
    paths, missing = discover(profile, methods)
    chunk_sets, no_books = load_evaluable(paths, [b.book_id for b in books], required=methods)
    note = ""
    if not chunk_sets:
        chunk_sets = {FALLBACK_NAME: sentence_windows(books)}
        note = FALLBACK_NOTE
    return chunk_sets, {"paths": paths, "missing": missing, "no_chunks_here": no_books, "note": note}


def for_segment_quality(profile: str, methods: Sequence[str], books: Sequence[Any]
                        ) -> tuple[dict[str, list[Chunk]], dict[str, Any]]:
    """Notebook 06's chunk sets: the artifacts of ``profile`` (``methods``; empty = every one found)
    restricted to ``books``.

    Returns ``(chunk_sets, info)``: ``info`` names the artifact paths, the methods without an artifact
    (``missing``), the artifacts with no chunk in these books (``no_chunks_here``) and, per method, the
    imported chunks that could not be aligned to the text (``unaligned``; left out), so nothing is
    dropped silently. With no usable artifact at all, the chunk set is ``fallback-sent5`` (5-sentence
    windows computed here) and ``info["note"]`` says so for the labels.
    """
    paths, missing = discover(profile, methods)
    ids = {b.book_id for b in books}
    present = {m: p for m, p in paths.items() if any(c.book_id in ids for c in load_chunks(p))}
    info: dict[str, Any] = {"paths": present, "missing": missing,
                            "no_chunks_here": sorted(set(paths) - set(present)), "note": "", "unaligned": {}}
    chunk_sets = load(present, ids)  # refuses a Lite set holding a trained unit
    for m, cs in list(chunk_sets.items()):  # imported chunks that could not be aligned to the text
        aligned = [c for c in cs if c.unit_id and c.spans]
        if len(aligned) < len(cs):
            info["unaligned"][m] = len(cs) - len(aligned)
            chunk_sets[m] = aligned
    chunk_sets = {m: cs for m, cs in chunk_sets.items() if cs}
    if info["unaligned"]:
        info["note"] += " | not aligned to the text, left out: " + ", ".join(
            f"{m} {n} chunk(s)" for m, n in info["unaligned"].items())
    if not chunk_sets:
        chunk_sets = {FALLBACK_NAME: sentence_windows(books)}
        info["note"] = FALLBACK_NOTE
    return chunk_sets, info

