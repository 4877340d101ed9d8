"""The public segmenter API: any method of the registry on your own book.

::

    import litseg_nb
    chunks = litseg_nb.segment("my_book.txt", method="litseg", profile="smoke")
    chunks = litseg_nb.segment(text=text, method="lumber", llm={"backend": "openai", "base_urls": ["http://host:8000/v1"]})

and on the command line::

    python -m litseg_nb segment my_book.txt --method litseg --profile smoke -o chunks.jsonl

:func:`load_text` cleans the file (a Project Gutenberg book: header, licence, credits and notes
removed, wrapped lines joined; a plain text: blank-line paragraphs, wrapped lines joined), detects
its units (a file: headings, else the whole text; a text: the whole text, no heading detection
unless ``headings=True``; units longer than the profile's ``max_unit_words`` are split recursively)
and indexes sentences. :func:`segment` then runs the method through
:func:`litseg_nb.segmenters.registry.segment_units` with the profile's models (or the given endpoint)
and checks that every sentence of every unit is covered. Each chunk carries exact character spans
into the cleaned text (``book.text``), its sentence range, LitSeg's subtitle and context sentences
and ``metadata["unit_title"]``; :func:`raw_offsets` / :func:`raw_span` map cleaned offsets back to
the decoded input file (the ``segment`` command writes them as ``metadata["raw_spans"]``, see
:mod:`litseg_nb.front.batch_segment`). A path is a :class:`~pathlib.Path` or a str naming a file; pass a
text as ``text=...`` (a str that looks like a path but names no file is an error, not a text).
"""
from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

from .config import ConfigError
from .core.schema import Book, Chunk

DEFAULT_PROFILE = "smoke"


_FILE_SUFFIX_RE = re.compile(r"\.(?:txt|text|md|rst|epub|html?|xhtml|pdf|rtf|docx?|odt|xml|jsonl?|csv|gz|bz2|xz|zip)$",
                             re.I)


def looks_like_path(source: str) -> bool:
    """A one-line string that names a file rather than holding a text: one word without whitespace
    (``my_book``, ``emma.epub``, ``data/my_book.txt``, ``~/books/emma``; no text of a book is one word)
    or a line ending in a file suffix (``my book.txt``, ``Moby Dick.epub``)."""
    s = source.strip()
    if not s or "\n" in s or len(s) > 4096:
        return False
    return bool(_FILE_SUFFIX_RE.search(s)) or not re.search(r"\s", s)


def _resolve_source(source: str | Path | None, text: str | None) -> tuple[Path | None, str | None]:
    """``(path, text)``: exactly one of them is set (see :func:`load_text`)."""
    if text is not None:
        if source is not None:
            raise TypeError("give either a source (a path) or text=..., not both")
        if not isinstance(text, str):
            raise TypeError(f"text= takes a str, got {type(text).__name__}")
        return None, text
    if source is None:
        raise TypeError("nothing to segment: give a path or text=...")
    if isinstance(source, os.PathLike):
        path = Path(source)
        if path.is_dir():
            raise IsADirectoryError(f"{path} is a folder, not a text file (the segment command takes folders)")
        if not path.is_file():
            raise FileNotFoundError(f"text file {path} does not exist")
        return path, None
    if not isinstance(source, str):
        raise TypeError(f"expected a path or a str, got {type(source).__name__}")
    if "\n" not in source and len(source) < 4096 and Path(source).expanduser().is_file():
        return Path(source).expanduser(), None
    if "\n" not in source and len(source) < 4096 and source.strip() and Path(source).expanduser().is_dir():
        raise IsADirectoryError(f"{source} is a folder, not a text file (the segment command takes folders)")
    if looks_like_path(source):
        raise FileNotFoundError(f"text file {source} does not exist (to segment a string itself, pass text=...)")
    return None, source


#: Python codec that reads a file the way :func:`decode_gutenberg` decoded it (``raw_spans`` index that text)
_CODECS = {"utf-8": "utf-8-sig", "utf-16": "utf-16"}


def source_codec(decode: str) -> str:
    """The ``encoding=`` for ``Path(file).read_text`` that gives the text ``raw_spans`` index."""
    how = decode.split(" ", 1)[0]  # "cp1252 (declared:iso-8859-1; ...)" -> "cp1252"
    return _CODECS.get(how, how.split(":", 1)[-1])


def load_text(source: str | Path | None = None, book_id: str | None = None, title: str | None = None,
              max_unit_words: int | None = 2000, sentence_splitter: str = "nupunkt", *, text: str | None = None,
              headings: bool | None = None) -> Book:
    """A cleaned, unit-split, sentence-indexed :class:`Book` from a ``.txt`` file or a text.

    ``headings`` switches heading detection (chapters, front matter, contents lists: what
    :mod:`litseg_nb.preprocess.structure` finds and drops). ``None`` (the default) means *on for a
    file* (a book: its chapters become units, its front matter is left out) and *off for a text*
    (``text=...`` or a str that is not a path): the whole text is narrative, one unit from its first
    paragraph to its last, and every sentence of it is segmented (a short first paragraph is a
    sentence, not a title). Either way a unit longer than ``max_unit_words`` is split recursively
    (paragraphs, then sentences), as a long chapter is.

    ``source`` is a path (a :class:`~pathlib.Path`, or a str naming an existing file); ``text=`` is
    the text itself. A str that looks like a path (ends in ``.txt``, or has a path separator and no
    whitespace) but names no file is a :class:`FileNotFoundError`, never segmented as text; any
    other str is the text itself (prefer ``text=`` to say so).

    For a file, ``book.meta["source_text"]`` holds the file as decoded (``encoding`` in
    ``book.meta["clean"]``, universal newlines): the text :func:`raw_offsets` maps into.
    """
    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .corpus import index_book
    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .data.gutenberg import (GutenbergFormatError, NoStartMarker, clean_gutenberg_text, decode_gutenberg,
                                 gutenberg_title)

    path, given = _resolve_source(source, text)
    where = str(path) if path is not None else "<text>"
    if path is not None:
        decoded, how = decode_gutenberg(path.read_bytes(), where)
    else:
        decoded, how = given, "str"
    raw = decoded.replace("\r\n", "\n").replace("\r", "\n")
    try:
        cleaned = clean_gutenberg_text(raw, source=where, decode=how)
    except NoStartMarker:  # plain text: no licence to strip, so no warning
        log = logging.getLogger(clean_gutenberg_text.__module__)
        level = log.level
        log.setLevel(logging.ERROR)
        try:
            cleaned = clean_gutenberg_text(raw, source=where, missing_markers="keep", decode=how)
        finally:
            log.setLevel(level)
    except GutenbergFormatError:  # a Gutenberg book missing its END marker: keep it, warn
        cleaned = clean_gutenberg_text(raw, source=where, missing_markers="keep", decode=how)
    head = raw[:4000]
    is_gutenberg = cleaned.report.markers_found
    name = path.stem if path is not None else "text"
    title = title or (gutenberg_title(head) if is_gutenberg else None) or name
    book = Book(book_id=book_id or f"{'gutenberg' if is_gutenberg else 'text'}:{name}", title=title,
                dataset="gutenberg" if is_gutenberg else "text", text=cleaned.text,
                paragraphs=cleaned.paragraphs, source=where, source_map=cleaned.source_map,
                meta={"clean": {"markers_found": is_gutenberg, "decode": cleaned.report.decode,
                                "encoding": source_codec(cleaned.report.decode) if path is not None else None,
                                "dropped_chars": cleaned.report.dropped_chars}})
    if path is not None:
        book.meta["source_text"] = raw
    if headings is None:
        headings = path is not None
    if not isinstance(headings, bool):
        raise TypeError(f"headings= takes True, False or None, got {headings!r}")
    book.meta["headings"] = headings
    if headings:
        return index_book(book, max_unit_words, sentence_splitter)
    return index_whole_text(book, max_unit_words, sentence_splitter)


def index_whole_text(book: Book, max_unit_words: int, sentence_splitter: str = "nupunkt") -> Book:
    """``book`` indexed as one narrative section from its first paragraph to its last (no heading
    detection, nothing dropped); split recursively where longer than ``max_unit_words``."""
    import dataclasses

    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .corpus import CorpusError
    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .preprocess.structure import StructureReport, build_units

    report = StructureReport()
    try:
        units = build_units(book.book_id, book.text, book.paragraphs, max_unit_words,
                            sentence_splitter=sentence_splitter, report=report, sections=[(0, book.title)])
    except ValueError as err:
        raise CorpusError(f"{book.source or book.book_id}: {err}") from err
    # build_units labels the units of given sections "dataset"; here they are the whole text
    book.units = [dataclasses.replace(u, split="whole") if u.split == "dataset" else u for u in units]
    book.meta["structure"] = dataclasses.asdict(report)
    return book


def raw_offsets(book: Book, raw: str) -> list[int]:
    """For each character of ``book.text``, its offset in ``raw`` (the decoded source file; -1 for the
    separators :func:`~litseg_nb.data.gutenberg.join_paragraphs` inserted, or where it cannot be mapped).

    Paragraph *i* came from raw lines ``book.source_map[i]``; inside it the cleaning only joins
    lines and collapses whitespace (and may drop characters), so every non-space character is
    matched, in order, to the same character of those lines.
    """
    out = [-1] * len(book.text)
    if not book.source_map or len(book.source_map) != len(book.paragraphs):
        return out
    starts = [0]
    for line in raw.split("\n"):
        starts.append(starts[-1] + len(line) + 1)
    text = book.text
    for (ps, pe), (la, lb) in zip(book.paragraphs, book.source_map):
        r, r_end = starts[la], starts[lb] - 1
        mapped = []
        ok = True
        for c in range(ps, pe):
            ch = text[c]
            if ch.isspace():
                mapped.append(r)
                continue
            while r < r_end and raw[r].isspace():
                r += 1
            if r >= r_end or raw[r] != ch:
                j = raw.find(ch, r, r_end)  # characters the cleaning dropped: skip them
                if j < 0:
                    ok = False
                    break
                r = j
            mapped.append(r)
            r += 1
        if ok:
            out[ps:pe] = mapped
    return out


def raw_span(offsets: Sequence[int], text: str, start: int, end: int) -> tuple[int, int] | None:
    """The raw-file span of cleaned span ``[start, end)`` (its first and last non-space character)."""
    a, b = start, end
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    if a >= b or offsets[a] < 0 or offsets[b - 1] < 0:
        return None
    return offsets[a], offsets[b - 1] + 1


def raw_spans(book: Book, offsets: Sequence[int], start: int, end: int,
              para_starts: Sequence[int] | None = None) -> list[tuple[int, int]] | None:
    """The raw-file spans of cleaned span ``[start, end)``, one per paragraph it touches (between two
    paragraphs the raw file may hold matter the cleaning dropped: notes, credits), so each raw span
    holds exactly the words of its piece; None if a piece cannot be mapped."""
    from bisect import bisect_right

    paras = book.paragraphs or [(0, len(book.text))]
    starts = para_starts if para_starts is not None else [p[0] for p in paras]
    i = max(0, bisect_right(starts, start) - 1)
    out = []
    while i < len(paras) and paras[i][0] < end:
        a, b = max(start, paras[i][0]), min(end, paras[i][1])
        if a < b and book.text[a:b].strip():
            span = raw_span(offsets, book.text, a, b)
            if span is None:
                return None
            out.append(span)
        i += 1
    return out or None


def fallback_kind(metadata: dict[str, Any]) -> str | None:
    """The fallback a chunk's metadata records (``whole_unit``, ``raw_passthrough``, ``retry``...), or
    None when it records none: LitSeg writes ``fallback: "none"`` (a truthy string) for a clean unit."""
    value = metadata.get("fallback")
    if value in (None, False, 0, "", "none"):
        return None
    return "fallback" if value is True else str(value)


def count_fallbacks(chunks: Sequence[Chunk]) -> dict[str, int]:
    """Units with a fallback, by kind (a unit counts once per kind)."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for c in chunks:
        kind = fallback_kind(c.metadata)
        if kind:
            seen.setdefault(kind, set()).add((c.book_id, c.unit_id))
    return {k: len(v) for k, v in sorted(seen.items())}


def check_count(value: Any, name: str) -> int:
    """A count option (``max_units`` ...): an int >= 0 (0 = all); negative counts are errors."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number >= 0 (0 = all), got {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0 (0 = all), got {value}")
    return value


def _method(method: Any) -> Any:
    """A registered :class:`~litseg_nb.segmenters.registry.Method` (looked up when given by name)."""
    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .segmenters.registry import get_method

    return get_method(method) if isinstance(method, str) else method


def segment_config(method: Any, profile: str = DEFAULT_PROFILE, **options: Any) -> Any:
    """The method's config for ``profile`` with ``options`` (unknown keys raise :class:`ConfigError`)."""
    return _method(method).config.for_profile(profile, **options)


def checkpoint_units(cfg: Any, needs_llm: bool) -> int:
    """Units segmented per call of ``segment_units``: finished batches survive a failing server.

    Large enough to keep the backend's batches (hf/vllm ``batch_size``) or every replica's
    ``max_concurrency`` requests (openai) full."""
    if not needs_llm:
        return 64
    llm = cfg.llm
    per = llm.max_concurrency * max(1, len(llm.base_urls)) if llm.backend == "openai" else llm.batch_size
    return max(8, 2 * per)


def iter_segment(method: Any, items: Sequence[tuple[Book, Any]], cfg: Any, backend: Any = None,
                 embedder: Any = None, batch_units: int | None = None) -> Iterator[list[Chunk]]:
    """Segment ``(book, unit)`` pairs in batches and yield each batch's chunks (coverage checked).

    The method's options are prepared once, on all the units (LitSeg: its length calibration on a
    seeded sample of them, per dataset), so the batches give the same chunks as one
    :func:`~litseg_nb.segmenters.registry.segment_units` call; an
    :class:`~litseg_nb.llm.base.LLMError` raised in a batch leaves the earlier batches yielded.
    """
    # deferred: keeps `import litseg_nb` light (the package root imports this module)
    from .segmenters.registry import Models, prepare, segment_units

    spec = _method(method)
    models = Models(backend, embedder)
    options = prepare(spec, list(items), cfg, models) if items else None
    size = batch_units or checkpoint_units(cfg, spec.needs_llm)
    titles = {(b.book_id, u.unit_id): u.title for b, u in items}
    for i in range(0, len(items), size):
        chunks = segment_units(spec, items[i:i + size], cfg, models, options=options).chunks
        for c in chunks:
            c.metadata.setdefault("unit_title", titles.get((c.book_id, c.unit_id)))
        yield chunks


def segment(book_or_text: Book | str | Path | None = None, method: str = "litseg", *, text: str | None = None,
            profile: str = DEFAULT_PROFILE, max_units: int = 0, backend: Any = None, embedder: Any = None,
            headings: bool | None = None, **options: Any) -> list[Chunk]:
    """Segment a book (a :class:`Book`, a ``.txt`` path, or ``text=`` a string) with ``method``.

    ``method`` is any name of :data:`litseg_nb.segmenters.registry.METHOD_NAMES` (``litseg``,
    ``litseg-lite``, ``lumber``, ``token``, ...). A path is a :class:`~pathlib.Path` or a str naming
    a file; a str that looks like a path but names no file is a :class:`FileNotFoundError` (see
    :func:`load_text`); pass a text as ``text=...``. ``options`` are overrides of the method's config
    for ``profile`` (:class:`~litseg_nb.litseg.config.LitSegConfig` for LitSeg,
    :class:`~litseg_nb.lite.config.LiteConfig` for LitSeg-Lite, else
    :class:`~litseg_nb.chunkers.config.BaselinesConfig`), e.g. ``llm={"backend": "openai",
    "base_urls": ["http://localhost:8000/v1"], "model": "Qwen/Qwen3-8B"}`` or
    ``lumber_budget_tokens=400``; unknown keys raise :class:`~litseg_nb.config.ConfigError`.
    ``headings`` (see :func:`load_text`): heading detection, on for a file and off for a text by
    default, so a text given as text loses no sentence (its units: the whole text, split recursively
    where longer than the profile's ``corpus.max_unit_words``, e.g. 900 words in ``smoke``; raise it
    with ``corpus={"max_unit_words": N}`` to keep a longer text one unit, as the boundary benchmark
    keeps each window). A :class:`Book` is segmented with the units it has.
    ``max_units`` segments only the first units (0 = all; negative is a ConfigError). ``backend`` /
    ``embedder`` reuse already-built models. Returns the chunks, coverage checked for every segmented
    unit; each chunk's ``metadata["unit_title"]`` names its unit.

    ``litseg`` calibrates its soft length reference on a seeded sample of ``calibration_units`` units when the
    profile says so (``calibrate=False`` keeps ``length_reference``). ``litseg-lite`` runs the profile's
    student model with the Lite prompt; for the distilled segmenter point ``llm={"model": ...}`` at a
    Lite model with notebook 03's adapters merged in (:func:`litseg_nb.evaluation.ablation.variant_model`). Fallbacks (the paper's whole-unit
    fallback, LumberChunker's retries, ...) are recorded in each chunk's ``metadata`` (count them
    with :func:`count_fallbacks`). A backend that cannot answer (server down, errors after its
    retries) raises :class:`~litseg_nb.llm.base.LLMError`: it is never turned into fallbacks.
    """
    check_count(max_units, "max_units")
    spec = _method(method)  # looked up once
    cfg = segment_config(spec, profile, **options)
    book = prepare_book(book_or_text, cfg, text=text, headings=headings)
    items = segment_items(book, max_units)
    backend, embedder = build_models(spec, cfg, backend, embedder)
    return [c for batch in iter_segment(spec, items, cfg, backend, embedder, batch_units=len(items))
            for c in batch]


def prepare_book(book_or_text: Book | str | Path | None, cfg: Any, text: str | None = None,
                 headings: bool | None = None) -> Book:
    if isinstance(book_or_text, Book):
        if text is not None:
            raise TypeError("give either a Book or text=..., not both")
        if headings is not None:
            raise TypeError("headings= applies to a file or a text; a Book keeps its units")
        book = book_or_text
        if not book.units:
            # deferred: keeps `import litseg_nb` light (the package root imports this module)
            from .corpus import index_book

            book = index_book(book, cfg.corpus.max_unit_words, cfg.corpus.sentence_splitter)
        return book
    return load_text(book_or_text, max_unit_words=cfg.corpus.max_unit_words,
                     sentence_splitter=cfg.corpus.sentence_splitter, text=text, headings=headings)


def segment_items(book: Book, max_units: int = 0) -> list[tuple[Book, Any]]:
    """The ``(book, unit)`` pairs to segment: units with sentences, the first ``max_units`` (0 = all)."""
    items = [(book, u) for u in book.units if u.n_sentences]
    if check_count(max_units, "max_units"):
        items = items[:max_units]
    if not items:
        raise ValueError(f"{book.source or book.book_id}: no text to segment")
    return items


def build_models(method: Any, cfg: Any, backend: Any = None, embedder: Any = None) -> tuple[Any, Any]:
    """The LLM backend / embedder ``method`` (a name or a registered method) needs (reusing the given ones)."""
    spec = _method(method)
    if backend is None and spec.needs_llm:
        # deferred: keeps `import litseg_nb` light (the package root imports this module)
        from .llm import make_backend

        backend = make_backend(cfg.llm)
    if embedder is None and spec.needs_embedder:
        # deferred: keeps `import litseg_nb` light (the package root imports this module)
        from .llm.embeddings import load_embedder

        embedder = load_embedder(cfg.embedding)
    return backend, embedder
