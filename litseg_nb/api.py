"""The public segmenter API: any method of the registry on your own book::

    import litseg_nb
    chunks = litseg_nb.segment("my_book.txt", method="litseg", profile="smoke")
    chunks = litseg_nb.segment(text=text, method="lumber", llm={"backend": "openai", "base_urls": ["http://host:8000/v1"]})

:func:`load_text` cleans the text, finds its units and indexes sentences; :func:`segment` runs the method
with the profile's models and checks that every sentence of every unit is covered.
"""
from __future__ import annotations

import dataclasses
import logging
import os
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from .config import ConfigError
from .core.schema import Book, Chunk

DEFAULT_PROFILE = "smoke"


_FILE_SUFFIX_RE = re.compile(r"\.(?:txt|text|md|rst|epub|html?|xhtml|pdf|rtf|docx?|odt|xml|jsonl?|csv|gz|bz2|xz|zip)$",
                             re.I)


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
    # a one-line string that names a file rather than holding a text: one word without whitespace (no text
    # of a book is one word) or a line ending in a file suffix (``Moby Dick.epub``)
    s = source.strip()
    if s and "\n" not in s and len(s) <= 4096 and (_FILE_SUFFIX_RE.search(s) or not re.search(r"\s", s)):
        raise FileNotFoundError(f"text file {source} does not exist (to segment a string itself, pass text=...)")
    return None, source


def load_text(source: str | Path | None = None, book_id: str | None = None, title: str | None = None,
              max_unit_words: int | None = 2000, sentence_splitter: str = "nupunkt", *, text: str | None = None,
              headings: bool | None = None) -> Book:
    """A cleaned, unit-split, sentence-indexed :class:`Book` from a file (``source``: a path or a str naming
    a file) or a text (``text=``; a str that looks like a path but names no file is a FileNotFoundError).

    ``headings`` (heading detection: chapters become units, front matter is dropped) is on for a file and
    off for a text (``None``), where the whole text is one narrative unit. Either way a unit longer than
    ``max_unit_words`` is split recursively. A file's decoded text is ``book.meta["source_text"]``.
    """
    # deferred: keeps `import litseg_nb` light
    from .corpus import CorpusError, cleaned_book, index_book
    # deferred: keeps `import litseg_nb` light
    from .data.gutenberg import GutenbergFormatError, NoStartMarker, clean_gutenberg_text, decode_gutenberg
    # deferred: keeps `import litseg_nb` light
    from .preprocess.structure import StructureReport, build_units

    path, given = _resolve_source(source, text)
    where = str(path) if path is not None else "<text>"
    decoded, how = decode_gutenberg(path.read_bytes(), where) if path is not None else (given, "str")
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
    is_gutenberg = cleaned.report.markers_found
    name = path.stem if path is not None else "text"
    # the same Book, and so the same units, as load_corpus builds from this file
    book = cleaned_book(cleaned, book_id or f"{'gutenberg' if is_gutenberg else 'text'}:{name}", name, where,
                        dataset="gutenberg" if is_gutenberg else "text")
    book.title = title or book.title
    # the ``encoding=`` for ``Path(file).read_text`` that reads the file as decode_gutenberg did (``raw_spans``)
    how = cleaned.report.decode.split(" ", 1)[0]  # "cp1252 (declared:iso-8859-1; ...)" -> "cp1252"
    encoding = {"utf-8": "utf-8-sig", "utf-16": "utf-16"}.get(how, how.split(":", 1)[-1])
    book.meta["clean"]["encoding"] = encoding if path is not None else None
    if path is not None:
        book.meta["source_text"] = raw
    if headings is None:
        headings = path is not None
    if not isinstance(headings, bool):
        raise TypeError(f"headings= takes True, False or None, got {headings!r}")
    book.meta["headings"] = headings
    if headings:
        return index_book(book, max_unit_words, sentence_splitter)
    report = StructureReport()  # one narrative section, split recursively where longer than max_unit_words
    try:
        units = build_units(book.book_id, book.text, book.paragraphs, max_unit_words,
                            sentence_splitter=sentence_splitter, report=report, sections=[(0, book.title)])
    except ValueError as err:
        raise CorpusError(f"{book.source or book.book_id}: {err}") from err
    # build_units labels the units of given sections "dataset"; here they are the whole text
    book.units = [dataclasses.replace(u, split="whole") if u.split == "dataset" else u for u in units]
    book.meta["structure"] = dataclasses.asdict(report)
    return book


def count_fallbacks(chunks: Sequence[Chunk]) -> dict[str, int]:
    """Units with a fallback (``whole_unit``, ``retry`` ...; LitSeg's ``"none"`` is none), by kind (a unit counts
    once per kind)."""
    seen: dict[str, set[tuple[str, str]]] = {}
    for c in chunks:
        value = c.metadata.get("fallback")
        if value not in (None, False, 0, "", "none"):
            seen.setdefault("fallback" if value is True else str(value), set()).add((c.book_id, c.unit_id))
    return {k: len(v) for k, v in sorted(seen.items())}


class LLMNotChosenError(ConfigError):
    """An LLM method was asked to run and no LLM was chosen (``llm=...`` or a built ``backend``)."""


def require_llm(spec: Any, cfg: Any, options: Any, backend: Any = None) -> None:
    """An LLM method runs only on an LLM the caller chose (``llm=`` or ``backend=``), never silently on the
    profile's default model: an :class:`LLMNotChosenError` naming both ways to choose one otherwise."""
    if spec.needs_llm and backend is None and not options.get("llm"):
        raise LLMNotChosenError(
            f"{spec.name} calls an LLM and none is chosen: pass llm={{'backend': 'openai', 'base_urls': "
            f"['http://localhost:8000/v1'], 'model': '...'}} (an OpenAI-compatible server), or llm={{'backend': "
            f"'hf'}} to run the {cfg.profile} profile's local model {cfg.llm.model} on this machine")


def check_count(value: Any, name: str) -> int:
    """A count option (``max_units`` ...): an int >= 0 (0 = all); negative counts are errors."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be a whole number >= 0 (0 = all), got {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be >= 0 (0 = all), got {value}")
    return value


def _method(method: Any) -> Any:
    """A registered :class:`~litseg_nb.segmenters.registry.Method`, looked up when given by name."""
    # deferred: keeps `import litseg_nb` light
    from .segmenters.registry import get_method

    return get_method(method) if isinstance(method, str) else method


def checkpoint_units(cfg: Any, needs_llm: bool) -> int:
    """Units segmented per call of ``segment_units`` (finished batches survive a failing server): enough to
    keep the backend's batches (hf/vllm) or every replica's ``max_concurrency`` requests (openai) full."""
    if not needs_llm:
        return 64
    llm = cfg.llm
    per = llm.max_concurrency * max(1, len(llm.base_urls)) if llm.backend == "openai" else llm.batch_size
    return max(8, 2 * per)


def iter_segment(method: Any, items: Sequence[tuple[Book, Any]], cfg: Any, backend: Any = None,
                 embedder: Any = None, batch_units: int | None = None) -> Iterator[list[Chunk]]:
    """Segment ``(book, unit)`` pairs in batches and yield each batch's chunks (coverage checked). The method's
    options are prepared once, on all the units (LitSeg's length calibration), so the batches give the chunks
    of one call; an :class:`~litseg_nb.llm.base.LLMError` in a batch leaves the earlier batches yielded."""
    # deferred: keeps `import litseg_nb` light
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
            headings: bool | None = None, chunk_size: int | None = None, token_counter: str | None = None,
            **options: Any) -> list[Chunk]:
    """Segment a book (a :class:`Book` with its units, a path, or ``text=`` a string; see :func:`load_text`)
    with ``method`` (any registered name: ``litseg``, ``litseg-lite``, ``lumber``, ``token`` ...).

    ``options`` override the method's config for ``profile`` (e.g. ``llm={"backend": "openai", "base_urls":
    [...], "model": ...}``, ``lumber_budget_tokens=400``, ``calibrate=False``; unknown keys are a ConfigError).
    An LLM method needs ``llm=`` (``{"backend": "hf"}``: the profile's local model) or ``backend=``.
    ``max_units`` segments the first units only (0 = all); ``backend`` / ``embedder`` reuse built models.
    Fallbacks are recorded in each chunk's ``metadata`` (:func:`count_fallbacks`); a backend that cannot
    answer raises :class:`~litseg_nb.llm.base.LLMError`, never turned into fallbacks.

    ``chunk_size=N``: no chunk has more than N tokens of ``token_counter`` (a packaged name, a local path or
    a hub id; default: the profile's embedding model, all-MiniLM-L6-v2 for test and smoke): a longer one
    is split at paragraph, then sentence, then token boundaries (``metadata["split_from"]`` names the
    chunk it came from; spans stay exact); a ``lib:`` method's splitter gets N as its own ``chunk_size``
    too. Without it, a :class:`~litseg_nb.chunkers.sizing.ChunkSizeWarning` counts the chunks longer than
    the model reads, which an embedder would truncate.
    """
    # deferred: keeps `import litseg_nb` light
    from .chunkers.sizing import check_chunk_size, check_token_counter, fit_or_report, library_options

    check_count(max_units, "max_units")
    check_chunk_size(chunk_size)
    spec = _method(method)  # looked up once
    options = library_options(spec.name, spec.config, profile, options, chunk_size)
    cfg = spec.config.for_profile(profile, **options)
    counter = check_token_counter(token_counter, cfg)
    require_llm(spec, cfg, options, backend)
    book = prepare_book(book_or_text, cfg, text=text, headings=headings)
    items = segment_items(book, max_units)
    backend, embedder = build_models(spec, cfg, backend, embedder)
    chunks = [c for batch in iter_segment(spec, items, cfg, backend, embedder, batch_units=len(items))
              for c in batch]
    return fit_or_report(book, chunks, counter, chunk_size, stacklevel=2)


def prepare_book(book_or_text: Book | str | Path | None, cfg: Any, text: str | None = None,
                 headings: bool | None = None) -> Book:
    if isinstance(book_or_text, Book):
        if text is not None:
            raise TypeError("give either a Book or text=..., not both")
        if headings is not None:
            raise TypeError("headings= applies to a file or a text; a Book keeps its units")
        if book_or_text.units:
            return book_or_text
        # deferred: keeps `import litseg_nb` light
        from .corpus import index_book

        return index_book(book_or_text, cfg.corpus.max_unit_words, cfg.corpus.sentence_splitter)
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
        # deferred: keeps `import litseg_nb` light
        from .llm import make_backend

        backend = make_backend(cfg.llm)
    if embedder is None and spec.needs_embedder:
        # deferred: keeps `import litseg_nb` light
        from .llm.embeddings import load_embedder

        embedder = load_embedder(cfg.embedding)
    return backend, embedder
