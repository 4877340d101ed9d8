"""Chunks that fit an embedder, and no text left out: one implementation for :func:`litseg_nb.segment`, the
``segment`` command and the framework adapters.

* :func:`fit_chunks` splits every chunk over ``chunk_size`` tokens of a tokenizer (the profile's embedding
  model's unless one is chosen) at paragraph, then sentence, then token boundaries (:func:`split_chunk`;
  ``metadata["split_from"]`` names the chunk it came from, spans stay exact into the text); without a
  ``chunk_size`` it returns the token counts over the model's window (:func:`model_window`), which the
  caller reports (:class:`ChunkSizeWarning`, a summary line): an embedder would read only their start.
* :func:`outside_chunks` makes chunks (unit id :data:`OUTSIDE_UNIT_ID`) of the text no unit holds (title
  page, front or back matter, :func:`outside_units`), each at most the limit, so every word is in a chunk.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import re
import warnings
from pathlib import Path
from typing import Any, Sequence

from ..config import ConfigError, StageConfig
from ..core.schema import Book, Chunk
from ..llm.models import EmbeddingError, packaged_model_dir, shipped_tokenizer_dir
from .base import Tokenizer, load_tokenizer, trim_span
from .library import check_options, is_library_method

#: the unit id of the chunks of text outside the narrative units
OUTSIDE_UNIT_ID = "outside"
#: the smallest ``chunk_size`` (a chunk keeps room for a subtitle and a sentence's start)
MIN_CHUNK_SIZE = 16
BLANK_LINES = re.compile(r"(?:\r\n|\r|\n)[ \t]*(?:\r\n|\r|\n)")  # LF, CRLF or CR files
_SENTENCE_END = re.compile(r"(?<=[.!?;:])[\"'\u201d\u2019)\]]*\s+")
_SURROGATE = re.compile("[\ud800-\udfff]")  # unpaired (a str decoded with errors="surrogateescape")


class ChunkSizeWarning(UserWarning):
    """Chunks longer than the tokenizer's model reads (``chunk_size=N`` splits them)."""


def check_chunk_size(value: Any, name: str = "chunk_size") -> int | None:
    """``value`` when it is None or a whole number of tokens >= :data:`MIN_CHUNK_SIZE`; a
    :class:`~litseg_nb.config.ConfigError` naming ``name`` otherwise."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < MIN_CHUNK_SIZE):
        raise ConfigError(f"{name} must be a number of tokens >= {MIN_CHUNK_SIZE} (or None), got {value!r}")
    return value


def check_token_counter(value: Any, cfg: Any, name: str = "token_counter") -> str:
    """The tokenizer name: ``value``, or the embedding model of ``cfg`` (the method's config; its profile's
    stage config when the method has no embedding model)."""
    if value is None:
        embedding = getattr(cfg, "embedding", None) or StageConfig.for_profile(cfg.profile).embedding
        return embedding.model
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{name} must be a tokenizer name or path, got {value!r}")
    return value


@functools.lru_cache(maxsize=None)
def token_counter(name: str) -> Tokenizer:
    """The :class:`~litseg_nb.chunkers.base.Tokenizer` of ``name`` (loaded once per process)."""
    return load_tokenizer(name)


def model_window(name: str, tokenizer: Any) -> int | None:
    """The tokens an embedding model reads: its ``sentence_bert_config.json`` ``max_seq_length`` (packaged,
    shipped or local files), else the tokenizer's ``model_max_length`` when it is a real limit."""
    dirs = [shipped_tokenizer_dir(name), Path(name).expanduser()]
    try:
        dirs.insert(0, packaged_model_dir(name))
    except EmbeddingError:  # the model package is optional (the shipped files say the same)
        pass
    for d in dirs:
        f = d / "sentence_bert_config.json" if d is not None else None
        if f is not None and f.is_file():
            return int(json.loads(f.read_text(encoding="utf-8"))["max_seq_length"])
    limit = getattr(getattr(tokenizer, "hf", None), "model_max_length", None)
    return int(limit) if isinstance(limit, int) and 0 < limit < 1_000_000 else None


def countable(text: str) -> str:
    """``text`` as a tokenizer takes it: a lone surrogate (no valid Unicode) as U+FFFD, offsets unchanged."""
    return _SURROGATE.sub("\ufffd", text)


def count_tokens(tokenizer: Any, texts: Sequence[str]) -> list[int]:
    """The token count of each of ``texts`` (:func:`countable`)."""
    return tokenizer.count_many([countable(t) for t in texts])


def over_window(chunks: Sequence[Chunk], tokenizer: Any, window: int | None) -> list[int]:
    """The token counts of the chunks longer than ``window`` (none when the window is unknown)."""
    if not window or not chunks:
        return []
    return [n for n in count_tokens(tokenizer, [c.text for c in chunks]) if n > window]


def over_window_message(where: str, over: Sequence[int], n_chunks: int, window: int, name: str,
                        option: str = "chunk_size=") -> str:
    """The one report of chunks an embedder would truncate (``option``: how the caller spells the fix)."""
    return (f"{where}: {len(over)} of {n_chunks} chunk(s) are longer than the {window} tokens {name} reads "
            f"(up to {max(over)}); an embedder reads only their start: {option}{window} splits them")


def outside_units(book: Any) -> list[tuple[int, int, int]]:
    """``(start, end, words)`` of each stretch of the text that no unit of ``book`` holds and that has words in
    it (front matter, back matter, matter between units)."""
    out, pos = [], 0
    for start, end in sorted((u.start, u.end) for u in book.units) + [(len(book.text), len(book.text))]:
        if start > pos:
            words = len(book.text[pos:start].split())
            if words:
                out.append((pos, start, words))
        pos = max(pos, end)
    return out


def outside_chunks(book: Book, method: str, tokenizer: Any, limit: int | None) -> list[Chunk]:
    """Chunks (unit :data:`OUTSIDE_UNIT_ID`, ``metadata["outside_units"]``) of the text outside the units, at
    most ``limit`` tokens each (None: a stretch each)."""
    out = []
    for a, b, _ in outside_units(book):
        a, b = trim_span(book.text, a, b)
        for pa, pb in (pack_spans(book.text, a, b, tokenizer, limit) if limit else [(a, b)]):
            piece = book.text[pa:pb]
            out.append(Chunk(book_id=book.book_id, unit_id=OUTSIDE_UNIT_ID,
                             chunk_id=f"{OUTSIDE_UNIT_ID}.{len(out) + 1:03d}", method=method, from_idx=0, to_idx=-1,
                             spans=[(pa, pb)], text=piece, main_text=piece, metadata={"outside_units": True}))
    return out


def in_text_order(book: Book, chunks: Sequence[Chunk]) -> list[Chunk]:
    """``chunks`` sorted by where they start in the text (stable: a unit's chunks keep their order)."""
    starts = {u.unit_id: u.start for u in book.units}
    return sorted(chunks, key=lambda c: c.spans[0][0] if c.unit_id == OUTSIDE_UNIT_ID else starts.get(c.unit_id, 0))


def fit_chunks(book: Book, chunks: Sequence[Chunk], tokenizer: Any, chunk_size: int) -> list[Chunk]:
    """``chunks`` with each one over ``chunk_size`` tokens split (:func:`split_chunk`)."""
    units = {u.unit_id: u for u in book.units}
    out: list[Chunk] = []
    for c, n in zip(chunks, count_tokens(tokenizer, [c.text for c in chunks])):
        out.extend([c] if n <= chunk_size else split_chunk(book, c, units.get(c.unit_id), tokenizer, chunk_size))
    return out


def _cuts(text: str, a: int, b: int, pattern: re.Pattern) -> list[tuple[int, int]]:
    """``text[a:b]`` cut after each match of ``pattern`` (trimmed, non-empty pieces)."""
    cuts = [a, *(m.end() for m in pattern.finditer(text, a, b)), b]
    return [t for x, y in zip(cuts, cuts[1:]) if (t := trim_span(text, x, y)) and t[0] < t[1]]


def pack_spans(text: str, a: int, b: int, tokenizer: Any, limit: int) -> list[tuple[int, int]]:
    """``text[a:b]`` as consecutive spans of at most ``limit`` tokens each that together hold all of its words:
    whole paragraphs where they fit, else sentences, else token windows; neighbours packed greedily."""
    text = countable(text)  # the same offsets
    atoms: list[tuple[int, int]] = []
    for para in _cuts(text, a, b, BLANK_LINES):
        if tokenizer.count(text[para[0]:para[1]]) <= limit:
            atoms.append(para)
            continue
        for sent in _cuts(text, *para, _SENTENCE_END):
            if tokenizer.count(text[sent[0]:sent[1]]) <= limit:
                atoms.append(sent)
                continue
            offsets = [(sent[0] + x, sent[0] + y) for x, y in tokenizer.offsets(text[sent[0]:sent[1]])]
            starts = [offsets[i][0] for i in range(0, len(offsets), limit)] + [sent[1]]
            atoms.extend(t for x, y in zip(starts, starts[1:]) if (t := trim_span(text, x, y)) and t[0] < t[1])
    counts = tokenizer.count_many([text[x:y] for x, y in atoms])
    out: list[tuple[int, int]] = []
    i = 0
    while i < len(atoms):
        j, total = i + 1, counts[i]
        while j < len(atoms) and total + counts[j] <= limit:
            total += counts[j]
            j += 1
        while j > i + 1 and tokenizer.count(text[atoms[i][0]:atoms[j - 1][1]]) > limit:
            j -= 1  # the joined text counts more than its parts (a merge across the seam): one part less
        out.append((atoms[i][0], atoms[j - 1][1]))
        i = j
    return out


def split_chunk(book: Book, c: Chunk, unit: Any, tokenizer: Any, limit: int) -> list[Chunk]:
    """``c`` (over ``limit`` tokens) as pieces of at most ``limit`` tokens holding all of its main text, each
    headed by its subtitle (LitSeg's context sentences, copies of text that other chunks hold, are left out);
    ``metadata["split_from"]`` names ``c``."""
    header = f"{c.subtitle}\n" if c.subtitle and c.text.startswith(c.subtitle) else ""
    budget = limit - tokenizer.count(countable(header))
    if budget < limit // 2:
        header, budget = "", limit
    if c.is_source_span:
        main = [tuple(c.metadata["main_span"])] if "main_span" in c.metadata else [tuple(s) for s in c.spans]
        pieces = [(book.text, s) for x, y in main for s in pack_spans(book.text, x, y, tokenizer, budget)]
    else:  # rewritten text (propositions): split the text itself; spans stay the source's
        pieces = [(c.main_text, s) for s in pack_spans(c.main_text, 0, len(c.main_text), tokenizer, budget)]
    out = []
    for k, (src, (x, y)) in enumerate(pieces, 1):
        lo, hi = c.from_idx, c.to_idx
        if c.is_source_span and unit is not None and unit.sentences:
            inside = [s.index for s in unit.sentences if s.start < y and s.end > x]
            lo, hi = (min(inside), max(inside)) if inside else (lo, hi)
        meta = {**c.metadata, "split_from": c.chunk_id}
        if "main_span" in meta:
            meta["main_span"] = [x, y]
        out.append(dataclasses.replace(
            c, chunk_id=f"{c.chunk_id}.s{k:02d}", from_idx=lo, to_idx=hi, context_idx=[],
            spans=[(x, y)] if c.is_source_span else list(c.spans), text=header + src[x:y], main_text=src[x:y],
            metadata=meta))
    return out


def fit_or_report(book: Book, chunks: Sequence[Chunk], counter: str, chunk_size: int | None,
                  stacklevel: int = 2) -> list[Chunk]:
    """:func:`fit_chunks` with ``chunk_size``; without one, ``chunks`` as they are and a
    :class:`ChunkSizeWarning` counting those longer than the window of ``counter``'s model."""
    tok = token_counter(counter)
    if chunk_size is not None:
        return fit_chunks(book, chunks, tok, chunk_size)
    window = model_window(counter, tok)
    over = over_window(chunks, tok, window)
    if over:
        warnings.warn(over_window_message(book.book_id, over, len(chunks), window, tok.name), ChunkSizeWarning,
                      stacklevel=stacklevel + 1)
    return list(chunks)


def library_options(method: str, cfg_class: Any, profile: str, options: dict[str, Any],
                    chunk_size: int | None) -> dict[str, Any]:
    """``options`` of a ``lib:`` method with ``chunk_size`` as the library's own ``chunk_size`` too, when its
    splitter takes one and none is set (its chunks are then near the size before any is split)."""
    if chunk_size is None or "chunk_size" in options or not is_library_method(method):
        return options
    takes = check_options(method, cfg_class.for_profile(profile, **options))[3]
    return {**options, "chunk_size": chunk_size} if "chunk_size" in takes else options
