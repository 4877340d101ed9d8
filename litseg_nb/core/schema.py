"""The data model shared by every dataset, preprocessing step and segmenter."""
from __future__ import annotations

import functools
import json
import typing
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import pydantic
import typing_extensions

from ..errors import LitsegError, UsageError
from .safe_io import atomic_path

Span = tuple[int, int]


@dataclass(frozen=True)
class Sentence:
    index: int  # 1-based within its unit
    start: int
    end: int


@dataclass(frozen=True)
class Unit:
    """A top-level narrative unit (chapter, stave, letter, ...) or a recursive split of one."""

    book_id: str
    unit_id: str  # unique within the book, e.g. "u0003" or "u0003.2" for a recursive part
    ordinal: int  # 0-based position in the book
    title: str
    start: int
    end: int
    sentences: tuple[Sentence, ...]
    paragraphs: tuple[Span, ...] = ()
    split: str = "structure"  # structure | recursive | whole | dataset
    sections: tuple[tuple[int, str], ...] = ()  # (start offset, title) of numbered sections inside the unit

    def text(self, book_text: str) -> str:
        return book_text[self.start:self.end]

    def sentence_text(self, book_text: str, index: int) -> str:
        s = self.sentences[index - 1]
        return book_text[s.start:s.end]

    @property
    def n_sentences(self) -> int:
        return len(self.sentences)

    def indexed_text(self, book_text: str) -> str:
        """The unit as the LitSeg prompt expects it: one ``[i] sentence`` per line."""
        return "\n".join(f"[{s.index}] {book_text[s.start:s.end]}" for s in self.sentences)


@dataclass(frozen=True)
class Question:
    qid: str
    book_id: str
    question: str
    answers: tuple[str, ...]
    evidence: str | None = None  # GutenQA's "Chunk Must Contain"; None for LiteraryQA
    dataset: str = ""


@dataclass
class Book:
    book_id: str
    title: str
    dataset: str  # gutenqa | gutenberg | literaryqa
    text: str  # the cleaned text every offset points into
    paragraphs: list[Span] = field(default_factory=list)
    units: list[Unit] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    source: str = ""  # file or hub dataset the text came from
    # cleaned paragraph i came from source lines [a, b) (raw Gutenberg books); empty otherwise
    source_map: list[Span] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    def unit(self, unit_id: str) -> Unit:
        for u in self.units:
            if u.unit_id == unit_id:
                return u
        raise KeyError(f"book {self.book_id!r} has no unit {unit_id!r}")


@dataclass
class Chunk:
    """One chunk in the shared result schema: main sentence range ``from_idx`` to ``to_idx`` (1-based, inclusive),
    LitSeg's ``context_idx``, character ``spans`` of the main text (source paragraphs when ``is_source_span`` is
    False), ``text`` (subtitle, context, main text) and the plain ``main_text``."""

    book_id: str
    unit_id: str
    chunk_id: str
    method: str
    from_idx: int
    to_idx: int
    spans: list[Span]
    text: str
    main_text: str
    context_idx: list[int] = field(default_factory=list)
    subtitle: str | None = None
    is_source_span: bool = True
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "spans": [list(s) for s in self.spans]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Chunk":
        return cls(**{**d, "spans": [tuple(s) for s in d["spans"]]})


@dataclass(frozen=True)
class CoverageReport:
    unit_id: str
    n_sentences: int
    missing: tuple[int, ...]  # sentence indices in no main range
    out_of_range: tuple[int, ...]  # indices referenced by a chunk that the unit does not have

    @property
    def ok(self) -> bool:
        return not self.missing and not self.out_of_range


class CoverageError(LitsegError, AssertionError):
    pass


def check_coverage(unit: Unit, chunks: Sequence[Chunk]) -> CoverageReport:
    """Which sentences of ``unit`` lie in no chunk's main range (and which indices are invalid)."""
    n = unit.n_sentences
    covered = [False] * (n + 1)
    bad: set[int] = set()
    for c in chunks:
        if c.unit_id != unit.unit_id:
            continue
        for i in (c.from_idx, c.to_idx, *c.context_idx):
            if not 1 <= i <= n:
                bad.add(i)
        for i in range(max(1, c.from_idx), min(n, c.to_idx) + 1):
            covered[i] = True
    missing = tuple(i for i in range(1, n + 1) if not covered[i])
    return CoverageReport(unit.unit_id, n, missing, tuple(sorted(bad)))


def assert_full_coverage(book: Book, chunks: Sequence[Chunk], method: str = "") -> None:
    """Raise :class:`CoverageError` naming book, unit and sentences when anything is uncovered."""
    by_unit: dict[str, list[Chunk]] = {}
    for c in chunks:
        by_unit.setdefault(c.unit_id, []).append(c)
    problems = []
    for u in book.units:
        rep = check_coverage(u, by_unit.get(u.unit_id, []))
        if not rep.ok:
            problems.append(
                f"unit {u.unit_id}: missing sentences {list(rep.missing)[:20]}"
                + (f", invalid indices {list(rep.out_of_range)[:20]}" if rep.out_of_range else "")
            )
    if problems:
        raise CoverageError(f"{method or 'segmenter'} on book {book.book_id!r}: " + "; ".join(problems))


def word_count(text: str) -> int:
    """Whitespace-separated words of ``text`` (unit-size caps of the selection, LumberChunker's token estimate)."""
    return len(text.split())


def write_jsonl(path: Path, records: Iterable[dict[str, Any]]) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False) + "\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as e:
                    raise ValueError(f"{path}:{lineno}: invalid JSON ({e})") from e


def save_chunks(path: Path, chunks: Sequence[Chunk]) -> None:
    """Write chunks as JSONL, one chunk per line (atomically)."""
    write_jsonl(Path(path), (c.to_json() for c in chunks))


class RowError(UsageError, ValueError):
    """A line of a JSONL file that is not the row it must be: the message names the file, the line and the field."""


@dataclass(frozen=True)
class TextRow:
    """A row of a user's chunker output: the chunk ``text`` of book ``book_id`` (rows in book order)."""

    book_id: str
    text: str


@functools.lru_cache(maxsize=None)
def _row_adapter(row_type: type) -> pydantic.TypeAdapter:
    """A strict validator of ``row_type``'s fields (a field with a default may be absent; others are ignored)."""
    hints = typing.get_type_hints(row_type)
    spec = {f.name: hints[f.name] if f.default is MISSING and f.default_factory is MISSING
            else typing_extensions.NotRequired[hints[f.name]] for f in fields(row_type)}
    return pydantic.TypeAdapter(pydantic.with_config(pydantic.ConfigDict(strict=True))(
        typing_extensions.TypedDict(row_type.__name__, spec)))


def _row_problem(exc: pydantic.ValidationError) -> str:
    e = exc.errors(include_url=False)[0]
    where = ".".join(str(x) for x in e["loc"])
    got = e.get("input")
    shown = "" if isinstance(got, dict) or e["type"] == "json_invalid" else f" (got {json.dumps(got, ensure_ascii=False, default=str)[:60]})"
    return f"{where + ': ' if where else ''}{e['msg']}{shown}"


def read_rows(path: Path | str, row_type: type, progress: Any = None) -> Iterator[Any]:
    """The rows of a JSONL file, each checked as ``row_type`` (strict: a text is a string, an index an int);
    the first line that is not one raises :class:`RowError` naming the file, the line and the field. The one
    validator of every row read from a JSONL file (a chunk set: :class:`Chunk`; a chunker's output:
    :class:`TextRow`). ``progress``: a callable given the bytes of each line read."""
    adapter = _row_adapter(row_type)
    with Path(path).open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            if progress is not None:
                progress(len(line))
            if not line.strip():
                continue
            try:
                yield row_type(**adapter.validate_json(line))
            except pydantic.ValidationError as exc:
                raise RowError(f"{path}: line {lineno}: not a {row_type.__name__} row: {_row_problem(exc)}") from None


def load_chunks(path: Path) -> list[Chunk]:
    """The chunks of a chunk JSONL file, each row checked (:func:`read_rows`)."""
    return list(read_rows(path, Chunk))


def chunk_id(unit_id: str, ordinal: int) -> str:
    """The id of the ``ordinal``-th chunk (0-based) of a unit: ``"u0003.c0012"`` (every segmenter)."""
    return f"{unit_id}.c{ordinal:04d}"


def _contiguous_chunk(book: Book, unit: Unit, method: str, ordinal: int, from_idx: int, to_idx: int,
                      start: int, end: int, metadata: dict[str, Any] | None) -> Chunk:
    text = book.text[start:end]
    return Chunk(
        book_id=book.book_id,
        unit_id=unit.unit_id,
        chunk_id=chunk_id(unit.unit_id, ordinal),
        method=method,
        from_idx=from_idx,
        to_idx=to_idx,
        spans=[(start, end)],
        text=text,
        main_text=text,
        metadata=dict(metadata or {}),
    )


def make_span_chunk(
    book: Book,
    unit: Unit,
    method: str,
    ordinal: int,
    start: int,
    end: int,
    metadata: dict[str, Any] | None = None,
) -> Chunk:
    """A contiguous chunk ``book.text[start:end]`` inside ``unit`` with the range of the sentences it overlaps."""
    if not unit.start <= start < end <= unit.end:
        raise ValueError(
            f"{method}: span [{start}, {end}) is outside unit {unit.unit_id} "
            f"[{unit.start}, {unit.end}) of book {book.book_id}"
        )
    idx = [s.index for s in unit.sentences if s.start < end and s.end > start]
    if not idx:
        raise ValueError(f"span [{start}, {end}) overlaps no sentence of unit {unit.unit_id}")
    return _contiguous_chunk(book, unit, method, ordinal, idx[0], idx[-1], start, end, metadata)


def make_sentence_chunk(
    book: Book,
    unit: Unit,
    method: str,
    ordinal: int,
    from_idx: int,
    to_idx: int,
    metadata: dict[str, Any] | None = None,
) -> Chunk:
    """A chunk made of whole sentences ``from_idx..to_idx`` (1-based, inclusive) of ``unit``."""
    if not 1 <= from_idx <= to_idx <= unit.n_sentences:
        raise ValueError(
            f"{method}: sentence range {from_idx}-{to_idx} invalid for unit {unit.unit_id} "
            f"of book {book.book_id} ({unit.n_sentences} sentences)"
        )
    start = unit.sentences[from_idx - 1].start
    end = unit.sentences[to_idx - 1].end
    return _contiguous_chunk(book, unit, method, ordinal, from_idx, to_idx, start, end, metadata)
