"""Token splitter: fixed-length token windows with overlap (LitSeg App. H, "Token splitter").

Windows of ``size`` tokens advance by ``size - overlap`` tokens. A window's character span runs
from its first token's start to the *next* token's start (the last window to the unit's end), so
characters the tokenizer skips (whitespace, characters its normaliser drops) are never lost.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..config import ConfigError, at_least
from ..core.schema import Book, Chunk, Unit
from .base import ChunkerError, Tokenizer, TokenizerOption, chunks_from_spans, where



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
    spans = []
    for i, j in token_windows(len(offs), size, overlap):
        a = unit.start + (0 if i == 0 else offs[i][0])
        b = unit.start + (offs[j][0] if j < len(offs) else len(text))
        spans.append((a, b))
    md = [{"tokens": j - i} for i, j in token_windows(len(offs), size, overlap)]
    return chunks_from_spans(book, unit, method, spans, md)


@dataclass(frozen=True)
class TokenOptions(TokenizerOption):
    """Options of the ``token`` method: windows of ``token_chunk_size`` tokens of the statistics
    tokenizer, ``token_chunk_overlap`` tokens shared by neighbours."""

    token_chunk_size: int = at_least(400, 1)  # tokens per window
    token_chunk_overlap: int = at_least(40, 0)  # < token_chunk_size

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.token_chunk_overlap >= self.token_chunk_size:
            raise ConfigError(f"{type(self).__name__}.token_chunk_overlap: {self.token_chunk_overlap} must be below "
                              f"token_chunk_size ({self.token_chunk_size})")
