"""Chunk sets: the hand-off from the notebooks that write chunks (02-04, import-chunks) to those scoring them."""
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

#: evaluation and table order of the chunk sets: the registry's methods
METHOD_ORDER: tuple[str, ...] = ALL_METHODS + (LITSEG_METHOD, LITE_METHOD)
FALLBACK_NAME = "fallback-sent5"
FALLBACK_NOTE = f" | NO chunk artifacts found: '{FALLBACK_NAME}' (5-sentence windows) computed here"


class EvaluationError(LitsegError, ValueError):
    """An evaluation that would score nothing (no question in scope, an empty chunk set)."""


def chunk_set_path(profile: str, name: str) -> Path:
    return artifact_path(profile, "chunks", f"{name}.jsonl")


def discover(profile: str, methods: Sequence[str] = ()) -> tuple[dict[str, Path], list[str]]:
    """``({method: path}, missing)`` for the chunk sets of ``profile``; a named set must exist."""
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
    """``(chunk sets with chunks of the books, names of sets without any)``; a Lite set with a trained unit raises."""
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


def sentence_windows(books: Sequence[Any], n_sentences: int = 5, method: str = FALLBACK_NAME) -> list[Chunk]:
    return [make_sentence_chunk(b, u, method, i, lo, min(u.n_sentences, lo + n_sentences - 1))
            for b in books for u in b.units for i, lo in enumerate(range(1, u.n_sentences + 1, n_sentences))]


def for_retrieval(profile: str, methods: Sequence[str], books: Sequence[Any]
                  ) -> tuple[dict[str, list[Chunk]], dict[str, Any]]:
    """Notebook 05's ``(chunk_sets, info)``: ``methods`` (empty = every set found) with chunks of ``books``."""
    paths, missing = discover(profile, methods)
    chunk_sets, no_books = load_evaluable(paths, [b.book_id for b in books], required=methods)
    note = ""
    if not chunk_sets:
        chunk_sets = {FALLBACK_NAME: sentence_windows(books)}
        note = FALLBACK_NOTE
    return chunk_sets, {"paths": paths, "missing": missing, "no_chunks_here": no_books, "note": note}


def for_segment_quality(profile: str, methods: Sequence[str], books: Sequence[Any]
                        ) -> tuple[dict[str, list[Chunk]], dict[str, Any]]:
    """Notebook 06's ``(chunk_sets, info)``; imported chunks not aligned to the text are left out and counted."""
    paths, missing = discover(profile, methods)
    chunk_sets, no_books = load_evaluable(paths, {b.book_id for b in books})
    present = {m: p for m, p in paths.items() if m in chunk_sets}
    info: dict[str, Any] = {"paths": present, "missing": missing,
                            "no_chunks_here": sorted(no_books), "note": "", "unaligned": {}}
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

