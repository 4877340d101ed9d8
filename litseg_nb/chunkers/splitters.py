"""The rule-based splitters: token windows, paragraphs, LangChain's recursive character splitter.

Token windows (LitSeg App. H, "Token splitter") of ``size`` tokens advance by ``size - overlap``; a
window's span runs from its first token's start to the next token's start, so characters the
tokenizer skips are never lost. The recursive splitter's chunk texts come from LangChain and are
located in the unit by construction bounds (:func:`locate_chunks`), never by a guess.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..config import ConfigError, Options, at_least
from ..core.schema import Book, Chunk, Span, Unit
from .base import ChunkerError, Tokenizer, TokenizerOption, chunks_from_spans, unit_paragraphs, where


# --------------------------------------------------------------------------- token windows
def token_windows(n_tokens: int, size: int, overlap: int) -> list[tuple[int, int]]:
    """``[i, j)`` token index windows covering ``n_tokens`` tokens."""
    if size <= 0 or not 0 <= overlap < size:
        raise ChunkerError(f"token splitter: need size > 0 and 0 <= overlap < size, got {size}, {overlap}")
    if n_tokens == 0:
        return []
    out, i, step = [], 0, size - overlap
    while True:
        j = min(i + size, n_tokens)
        out.append((i, j))
        if j >= n_tokens:
            return out
        i += step


def token_chunks(book: Book, unit: Unit, tokenizer: Tokenizer, size: int, overlap: int,
                 method: str = "token") -> list[Chunk]:
    text = unit.text(book.text)
    offs = tokenizer.offsets(text)
    if not offs:
        if text.strip():
            raise ChunkerError(f"{method}: tokenizer {tokenizer.name} gives no tokens for {where(book, unit)}")
        return []
    windows = token_windows(len(offs), size, overlap)
    spans = []
    for i, j in windows:
        a = unit.start + (0 if i == 0 else offs[i][0])
        b = unit.start + (offs[j][0] if j < len(offs) else len(text))
        spans.append((a, b))
    return chunks_from_spans(book, unit, method, spans, [{"tokens": j - i} for i, j in windows])


@dataclass(frozen=True)
class TokenOptions(TokenizerOption):
    """The ``token`` method: windows of ``token_chunk_size`` tokens of the statistics tokenizer,
    ``token_chunk_overlap`` tokens shared by neighbours."""

    token_chunk_size: int = at_least(400, 1)  # tokens per window
    token_chunk_overlap: int = at_least(40, 0)  # < token_chunk_size

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.token_chunk_overlap >= self.token_chunk_size:
            raise ConfigError(f"{type(self).__name__}.token_chunk_overlap: {self.token_chunk_overlap} must be below "
                              f"token_chunk_size ({self.token_chunk_size})")


# --------------------------------------------------------------------------- paragraphs
def paragraph_chunks(book: Book, unit: Unit, method: str = "paragraph") -> list[Chunk]:
    """One chunk per paragraph of the unit (a row of LumberChunker's Table 1)."""
    return chunks_from_spans(book, unit, method, unit_paragraphs(book, unit))


@dataclass(frozen=True)
class ParagraphOptions(Options):
    """The ``paragraph`` method has no knob: one chunk per paragraph of the unit."""


# --------------------------------------------------------------------------- recursive
def make_recursive_splitter(chunk_size: int, chunk_overlap: int, separators: Sequence[str]):
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    return RecursiveCharacterTextSplitter(
        chunk_size=chunk_size, chunk_overlap=chunk_overlap, separators=list(separators),
        keep_separator="end", strip_whitespace=True, length_function=len,
    )


def locate_chunks(text: str, pieces: Sequence[str], overlap: int) -> list[Span]:
    """Exact ``[start, end)`` of each piece in ``text``: pieces come in order, each starts after the
    previous start and no earlier than the previous end minus the overlap; any non-whitespace text
    left between or after the pieces raises instead of being lost."""
    spans: list[Span] = []
    prev_start, prev_end = -1, 0
    for k, piece in enumerate(pieces):
        if not piece:
            continue
        lo = max(prev_start + 1, prev_end - overlap, 0)
        pos = text.find(piece, lo)
        if pos < 0:
            raise ChunkerError(f"recursive: chunk {k} ({piece[:40]!r}...) not found after offset {lo}")
        if text[prev_end:pos].strip() and pos > prev_end:
            raise ChunkerError(f"recursive: text between chunks {k - 1} and {k} would be lost: "
                               f"{text[prev_end:pos][:60]!r}")
        spans.append((pos, pos + len(piece)))
        prev_start, prev_end = pos, max(prev_end, pos + len(piece))
    if text[prev_end:].strip():
        raise ChunkerError(f"recursive: trailing text would be lost: {text[prev_end:][:60]!r}")
    return spans


def recursive_chunks(book: Book, unit: Unit, splitter, chunk_overlap: int,
                     method: str = "recursive") -> list[Chunk]:
    text = unit.text(book.text)
    pieces = splitter.split_text(text)
    try:
        spans = locate_chunks(text, pieces, chunk_overlap)
    except ChunkerError as e:
        raise ChunkerError(f"{e} ({where(book, unit)})") from e
    return chunks_from_spans(book, unit, method, [(unit.start + a, unit.start + b) for a, b in spans])


@dataclass(frozen=True)
class RecursiveOptions(Options):
    """The ``recursive`` method (LangChain's RecursiveCharacterTextSplitter, sizes in characters)."""

    recursive_chunk_size: int = at_least(1800, 1)  # characters (LangChain measures len())
    recursive_chunk_overlap: int = at_least(200, 0)  # < recursive_chunk_size
    # LitSeg App. H: "paragraph breaks, newlines, punctuation, and whitespace"
    recursive_separators: tuple[str, ...] = ("\n\n", "\n", ". ", "! ", "? ", "; ", ", ", " ", "")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.recursive_chunk_overlap >= self.recursive_chunk_size:
            raise ConfigError(f"{type(self).__name__}.recursive_chunk_overlap: {self.recursive_chunk_overlap} must be "
                              f"below recursive_chunk_size ({self.recursive_chunk_size})")
