"""The public segmenter API: any method of the registry on your own book.

::

    import litseg_nb
    chunks = litseg_nb.segment("my_book.txt", method="litseg", profile="smoke")
    chunks = litseg_nb.segment(text, method="lumber", llm={"backend": "openai", "base_urls": ["http://host:8000/v1"]})

and on the command line::

    python -m litseg_nb segment my_book.txt --method litseg --profile smoke -o chunks.jsonl

:func:`load_text` cleans the file (a Project Gutenberg book: header, licence, credits and notes
removed, wrapped lines joined; a plain text: blank-line paragraphs, wrapped lines joined), detects
its units (headings, else the whole text; units longer than the profile's ``max_unit_words`` are
split recursively) and indexes sentences. :func:`segment` then runs the method through
:func:`litseg_nb.chunkers.registry.chunk_units` with the profile's models (or the given endpoint)
and checks that every sentence of every unit is covered. Each chunk carries exact character spans
into the cleaned text, its sentence range, LitSeg's subtitle and context sentences.
"""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from .config import ConfigError
from .params import parse_key_value
from .schema import Book, Chunk

DEFAULT_PROFILE = "smoke"


def load_text(source: str | Path, book_id: str | None = None, title: str | None = None,
              max_unit_words: int = 2000, sentence_splitter: str = "nupunkt") -> Book:
    """A cleaned, unit-split, sentence-indexed :class:`Book` from a ``.txt`` file or a string.

    A string naming an existing file is read as that file; any other string is the text itself.
    """
    from .corpus import index_book
    from .data.gutenberg import GutenbergFormatError, clean_gutenberg_text, gutenberg_title

    path = Path(source) if isinstance(source, Path) or (len(str(source)) < 4096 and "\n" not in str(source)
                                                         and Path(str(source)).is_file()) else None
    if isinstance(source, Path) and not source.is_file():
        raise FileNotFoundError(f"text file {source} does not exist")
    raw: str | bytes = path.read_bytes() if path is not None else str(source)
    where = str(path) if path is not None else "<text>"
    try:
        cleaned = clean_gutenberg_text(raw, source=where)
    except GutenbergFormatError as err:
        if "no '*** START" not in str(err):  # a Gutenberg book missing its END marker: keep it, warn
            cleaned = clean_gutenberg_text(raw, source=where, missing_markers="keep")
        else:  # plain text: no licence to strip, so no warning
            log = logging.getLogger(clean_gutenberg_text.__module__)
            level = log.level
            log.setLevel(logging.ERROR)
            try:
                cleaned = clean_gutenberg_text(raw, source=where, missing_markers="keep")
            finally:
                log.setLevel(level)
    head = (raw[:4000].decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw[:4000])
    is_gutenberg = cleaned.report.markers_found
    name = path.stem if path is not None else "text"
    title = title or (gutenberg_title(head.replace("\r\n", "\n")) if is_gutenberg else None) or name
    book = Book(book_id=book_id or f"{'gutenberg' if is_gutenberg else 'text'}:{name}", title=title,
                dataset="gutenberg" if is_gutenberg else "text", text=cleaned.text,
                paragraphs=cleaned.paragraphs, source=where, source_map=cleaned.source_map,
                meta={"clean": {"markers_found": is_gutenberg, "decode": cleaned.report.decode,
                                "dropped_chars": cleaned.report.dropped_chars}})
    return index_book(book, max_unit_words, sentence_splitter)


def segment(book_or_text: Book | str | Path, method: str = "litseg", *, profile: str = DEFAULT_PROFILE,
            max_units: int = 0, backend: Any = None, embedder: Any = None, **options: Any) -> list[Chunk]:
    """Segment a book (a :class:`Book`, a ``.txt`` path or a text) with ``method``.

    ``method`` is any name of :data:`litseg_nb.chunkers.registry.METHOD_NAMES` (``litseg``,
    ``litseg-lite``, ``lumber``, ``token``, ...). ``options`` are overrides of the method's config
    for ``profile`` (:class:`~litseg_nb.litseg.config.LitSegConfig` for LitSeg,
    :class:`~litseg_nb.lite.config.LiteConfig` for LitSeg-Lite, else
    :class:`~litseg_nb.chunkers.config.BaselinesConfig`), e.g. ``llm={"backend": "openai",
    "base_urls": ["http://localhost:8000/v1"], "model": "Qwen/Qwen3-8B"}`` or
    ``lumber_budget_tokens=400``; unknown keys raise :class:`~litseg_nb.config.ConfigError`.
    ``max_units`` segments only the first units (0 = all). ``backend`` / ``embedder`` reuse
    already-built models. Returns the chunks, coverage checked for every segmented unit.

    ``litseg`` calibrates its soft length reference on the first ``calibration_units`` units when the
    profile says so (``calibrate=False`` keeps ``length_reference``). ``litseg-lite`` runs the profile's
    student model with the Lite prompt; for the distilled segmenter point ``llm={"model": ...}`` at a
    Lite model with notebook 03's adapters merged in (:func:`litseg_nb.ablation.variant_model`). Fallbacks (the paper's whole-unit
    fallback, LumberChunker's retries, ...) are recorded in each chunk's ``metadata``.
    """
    from .chunkers.registry import chunk_units, get_chunker

    spec = get_chunker(method)
    cfg = spec.config_class().for_profile(profile, **options)
    if isinstance(book_or_text, Book):
        book = book_or_text
        if not book.units:
            from .corpus import index_book

            book = index_book(book, cfg.corpus.max_unit_words, cfg.corpus.sentence_splitter)
    else:
        book = load_text(book_or_text, max_unit_words=cfg.corpus.max_unit_words,
                         sentence_splitter=cfg.corpus.sentence_splitter)
    items = [(book, u) for u in book.units if u.n_sentences]
    if max_units:
        items = items[:max_units]
    if not items:
        raise ValueError(f"{book.source or book.book_id}: no text to segment")
    if backend is None and spec.needs_llm:
        from .llm import make_backend

        backend = make_backend(cfg.llm)
    if embedder is None and spec.needs_embedder:
        from .embeddings import load_embedder

        embedder = load_embedder(cfg.embedding)
    chunks, _ = chunk_units(method, items, cfg, backend=backend, embedder=embedder)
    return chunks


# ---------------------------------------------------------------- command line
def add_segment_parser(sub: Any) -> None:
    """Add the ``segment`` subcommand to the CLI's subparsers (handler: :func:`segment_main`)."""
    from .config import PROFILES

    p = sub.add_parser("segment", help="segment a .txt file (Gutenberg or plain text) with any method",
                       description="Clean a .txt file, detect its units, segment it with METHOD and write the "
                                   "chunks (spans, sentence indices, subtitles, context) as JSON lines.")
    p.add_argument("file", type=Path, help="a Project Gutenberg .txt book or any plain text file")
    p.add_argument("--method", default="litseg", help="litseg, litseg-lite or a baseline (default: litseg)")
    p.add_argument("--profile", choices=PROFILES, default=DEFAULT_PROFILE,
                   help=f"models and sizes (default: {DEFAULT_PROFILE}; test = a tiny random model)")
    p.add_argument("--llm-backend", choices=("hf", "vllm", "openai"), help="override the profile's LLM backend")
    p.add_argument("--llm-model", help="model name or path (with --llm-backend openai: the served model)")
    p.add_argument("--base-url", action="append", default=[], metavar="URL",
                   help="OpenAI-compatible endpoint(s), e.g. http://localhost:8000/v1 (repeatable)")
    p.add_argument("--max-units", type=int, default=0, help="segment only the first N units (0 = all)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override of the method, e.g. lumber_budget_tokens=400 (repeatable)")
    p.add_argument("-o", "--output", type=Path, help="chunks file (default: <file stem>.<method>.jsonl "
                                                     "under outputs/<profile>/segment/)")
    p.set_defaults(handler=segment_main)


def _overrides(args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.set:
        key, value = parse_key_value(item, "--set")
        node = out
        *parents, leaf = key.strip().split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    llm = out.setdefault("llm", {})
    if args.llm_backend:
        llm["backend"] = args.llm_backend
    if args.llm_model:
        llm["model"] = args.llm_model
    if args.base_url:
        llm["base_urls"] = tuple(args.base_url)
        llm.setdefault("backend", "openai")
    if not llm:
        out.pop("llm")
    return out


def segment_main(args: Any) -> int:
    """``python -m litseg_nb segment FILE ...``: write the chunks and print a one-line summary."""
    from .paths import outputs_dir
    from .schema import save_chunks

    if not args.file.is_file():
        print(f"[litseg_nb] no such file: {args.file}", file=sys.stderr)
        return 2
    try:
        chunks = segment(args.file, args.method, profile=args.profile, max_units=args.max_units, **_overrides(args))
    except ConfigError as exc:
        print(f"[litseg_nb] configuration error: {exc}", file=sys.stderr)
        return 2
    out = args.output or outputs_dir(args.profile) / "segment" / f"{args.file.stem}.{args.method}.jsonl"
    save_chunks(Path(out), chunks)
    units = len({c.unit_id for c in chunks})
    sentences = len({(c.unit_id, i) for c in chunks if c.is_source_span for i in range(c.from_idx, c.to_idx + 1)})
    fell_back = sorted({c.unit_id for c in chunks if c.metadata.get("fallback")})
    note = f"; {len(fell_back)} unit(s) fell back to the paper's fallback (see each chunk's metadata)" if fell_back else ""
    print(f"[litseg_nb] {args.method} ({args.profile}): {len(chunks)} chunks over {units} unit(s), "
          f"{sentences} sentences covered{note} -> {out}")
    return 0
