"""Import an external chunk set (a paper's released chunks, another tool's output) aligned to the cleaned
book text, so notebooks 05 and 06 evaluate it like our own chunkers::

    chunks, report = import_chunk_file("gutenqa:Emma_-_Jane_Austen", "lumber-published", "Emma.xlsx")

or ``python -m litseg_nb import-chunks --book ID --name NAME --from FILE``. The set is written to
``outputs/<profile>/artifacts/chunks/<name>.jsonl`` beside ``<name>.import.json`` (the alignment report,
which also marks the set as imported); an import never replaces a method's or a notebook's own set.
"""
from __future__ import annotations

import contextlib
import json
import re
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from ..api import load_text
from ..core.chunk_align import ChunkImportError, ImportReport, import_chunks
from ..chunk_sets import METHOD_ORDER, chunk_set_path
from ..core import schema
from ..core.schema import Book, Chunk, load_chunks
from ..corpus import load_corpus
from ..rag.config import RagConfig
from ..core.artifacts import artifact_dir
from ..core.safe_io import NAME_PATTERN, OutputsNotWritable, ensure_writable, write_json_atomic

# --------------------------------------------------------------------------- reading
def read_chunk_texts(path: Path | str, text_column: str = "Chunk") -> tuple[list[str], int]:
    """Chunk texts of ``path`` (JSONL, JSON, CSV, parquet, xlsx) in file order, and the number of empty rows skipped."""
    import pandas as pd

    path = Path(path)
    if not path.is_file():
        raise ChunkImportError(f"chunk file {path} does not exist")
    suf = path.suffix.lower()
    readers = {".jsonl": lambda p: pd.DataFrame.from_records(_jsonl_rows(p)), ".json": pd.read_json,
               ".csv": lambda p: pd.read_csv(p, keep_default_na=False), ".parquet": pd.read_parquet,
               ".xlsx": lambda p: pd.read_excel(p, engine="openpyxl")}
    if suf not in readers:
        raise ChunkImportError(f"{path}: unsupported format {suf!r}; expected one of {', '.join(readers)}")
    try:
        df = readers[suf](path)
    except ChunkImportError:
        raise
    except Exception as e:  # pandas/openpyxl parse errors: name the file
        raise ChunkImportError(f"{path}: cannot read as {suf} ({type(e).__name__}: {e})") from e
    if df.empty and not len(df.columns):
        raise ChunkImportError(f"{path}: the file holds no rows (an empty chunk file)")
    if text_column not in df.columns:
        raise ChunkImportError(f"{path}: no column {text_column!r}; columns are {list(df.columns)} "
                               f"(choose one with --text-column)")
    texts, empty = [], 0
    strict = suf in (".jsonl", ".json")  # JSON types its values: a chunk text is a string there
    for row, v in enumerate(df[text_column].tolist(), start=1):
        if v is None or (isinstance(v, float) and v != v):
            s = ""
        elif isinstance(v, str):
            s = v
        elif isinstance(v, (dict, list, tuple, bytes, bytearray)) or strict:
            raise ChunkImportError(f"{path}: row {row}: {text_column!r} is a {type(v).__name__}, not a text "
                                   f"({str(v)[:60]!r}); give the chunk text itself (or another --text-column)")
        else:  # a spreadsheet cell holding a number
            s = str(v)
        if s.strip():
            texts.append(s)
        else:
            empty += 1
    return texts, empty


def _jsonl_rows(path: Path) -> list[dict[str, Any]]:
    """The objects of a JSONL file, one per non-blank line (else a :class:`ChunkImportError` naming the line)."""
    rows = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise ChunkImportError(f"{path}: line {n} is not JSON ({e.msg} at column {e.colno})") from None
            if not isinstance(obj, dict):
                raise ChunkImportError(f"{path}: line {n} is a JSON {type(obj).__name__}, not an object "
                                       f"such as {{\"Chunk\": \"...\"}}")
            rows.append(obj)
    return rows


def load_book(book_id: str, profile: str) -> Book:
    """The cleaned, unit-indexed book ``book_id`` as notebook 05 of ``profile`` loads it, or, when ``book_id``
    names a file, the user's own book as ``segment`` loads it."""

    cfg = RagConfig.for_profile(profile)
    path = Path(book_id).expanduser()
    if path.is_file():
        try:
            return load_text(path, max_unit_words=cfg.corpus.max_unit_words,
                             sentence_splitter=cfg.corpus.sentence_splitter)
        except (ValueError, UnicodeError) as e:
            raise ChunkImportError(f"{path}: cannot read the book: {e}") from e
    if ":" not in book_id and (path.suffix or "/" in book_id):
        raise ChunkImportError(f"--book {book_id!r}: no such file (a book is a file path or an id such as "
                               "'gutenqa:Emma_-_Jane_Austen')")
    datasets = (book_id.split(":", 1)[0],)
    corpus = cfg.corpus.replace(datasets=datasets, books=(book_id,), max_books=0, max_units_per_book=0)
    try:
        books = [b for b in load_corpus(corpus) if b.book_id == book_id]
    except ValueError as e:  # CorpusError / GutenQAError: unknown book or dataset
        raise ChunkImportError(f"cannot load book {book_id!r}: {e}") from e
    if not books:
        raise ChunkImportError(f"book {book_id!r} not found in datasets {datasets} (ids look like "
                               f"'gutenqa:Emma_-_Jane_Austen', 'gutenberg:158', 'literaryqa:<id>')")
    return books[0]


def import_chunk_file(book_id: str, name: str, path: Path | str, text_column: str = "Chunk",
                      profile: str = "smoke", min_score: float = 0.8, book: Book | None = None,
                      save: bool = True) -> tuple[list[Chunk], ImportReport]:
    """Read, align and (``save``) write the set and its report (module docstring); ``book`` skips loading it."""
    if not re.fullmatch(NAME_PATTERN, name):
        raise ChunkImportError(f"chunk set name {name!r}: use letters, digits and _ . + @ - only")
    if not 0.0 < min_score <= 1.0:
        raise ChunkImportError(f"--min-score {min_score}: a similarity in (0, 1]")
    if save:  # an unwritable destination fails before any work, naming the folder
        try:
            ensure_writable(artifact_dir(profile, "chunks"))
        except OutputsNotWritable as exc:
            raise ChunkImportError(str(exc)) from None
    # an imported set may not take a method's name nor replace a set a notebook wrote
    if name in METHOD_ORDER or name.split("@")[0] in METHOD_ORDER:
        raise ChunkImportError(f"chunk set name {name!r} is one of this project's methods; imported sets need "
                               f"their own name (e.g. {name}-imported or <tool>-{name})")
    out = chunk_set_path(profile, name)
    if out.is_file() and not out.with_suffix(".import.json").is_file():
        raise ChunkImportError(f"{out} exists and was not imported (a notebook wrote it); choose another --name")
    try:  # a damaged set is never rewritten (its other books' chunks would be lost): checked before any work
        existing = load_chunks(out) if save and out.is_file() else []
    except (schema.RowError, OSError) as e:
        raise ChunkImportError(f"the existing set {out} cannot be read ({e}); repair or remove it, or choose "
                               "another --name") from None
    texts, empty = read_chunk_texts(path, text_column)
    if book is None:
        book = load_book(book_id, profile)
        book_id = book.book_id  # a file path: the id segment gives it
    elif book.book_id != book_id:
        raise ChunkImportError(f"book {book.book_id!r} given for book_id {book_id!r}")
    chunks, rep = import_chunks(book, texts, name, source=str(path), min_score=min_score, n_empty_rows=empty)
    if save:
        # the chunks of other books imported under the same name stay, and so do their reports ("books")
        chunks_all = [c for c in existing if c.book_id != book_id] + chunks
        report_path = out.with_suffix(".import.json")
        books: dict[str, Any] = {}
        with contextlib.suppress(FileNotFoundError, ValueError, KeyError, TypeError, AttributeError):  # else anew
            old = json.loads(report_path.read_text(encoding="utf-8"))
            books = dict(old.get("books") or {old["book_id"]: {k: v for k, v in old.items() if k != "books"}})
        books.pop(book_id, None)
        books[book_id] = asdict(rep)
        write_json_atomic(report_path, {**asdict(rep), "books": books}, indent=1)  # first: marks the set imported
        schema.save_chunks(out, chunks_all)
    return chunks, rep


def cli(args: Any) -> int:
    """Handler of ``python -m litseg_nb import-chunks``."""
    try:
        _, rep = import_chunk_file(args.book, args.name, args.from_file, args.text_column, args.profile,
                                   args.min_score)
    except (ChunkImportError, FileNotFoundError, OSError) as e:
        print(f"[litseg_nb] import-chunks: {e}", file=sys.stderr)
        return 2
    print(rep.summary())
    print(f"written: {chunk_set_path(args.profile, args.name)}")
    return 0
