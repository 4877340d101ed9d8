"""Proposition-level chunks (LumberChunker's "Proposition-Level" row): an LLM rewrites each
paragraph into short self-contained statements (prompt ``baselines/proposition``, written for this
project since neither paper prints one).

Propositions are *not* spans of the source: each chunk has ``is_source_span=False``, its text is
the proposition, and ``spans`` / ``from_idx..to_idx`` are those of the **source paragraph** (so
coverage still proves that every sentence was rewritten by some call). A reply without any ``- ``
line is retried (sampling, bounded); after that the paragraph itself is kept as one chunk
(``is_source_span=True``, ``metadata["fallback"]=True``) and counted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from ..config import Options
from ..llm.base import SamplingParams, UsageTag
from ..core.prompts import fill_prompt, load_prompt
from ..llm.replies import list_items
from ..core.schema import Book, Chunk, Unit, chunk_id
from .base import chunks_from_spans, unit_paragraphs


def parse_propositions(reply: str) -> list[str]:
    """The proposition lines of a reply (``- ``/``* ``/``1.`` items of its answer, reasoning removed)."""
    return list_items(reply)


def proposition_chunks_batch(items: Sequence[tuple[Book, Unit]], backend: Any, max_new_tokens: int = 512,
                             max_retries: int = 1, stage: str = "04",
                             method: str = "proposition") -> tuple[list[list[Chunk]], int]:
    """Proposition chunks for several units (paragraph calls batched); also the fallback count."""
    template = load_prompt("baselines/proposition")
    paras = []  # (item index, paragraph chunk)
    for k, (b, u) in enumerate(items):
        for p in chunks_from_spans(b, u, "paragraph", unit_paragraphs(b, u)):
            paras.append((k, p))
    results: dict[int, list[str]] = {}
    todo = list(range(len(paras)))
    for attempt in range(max_retries + 1):
        if not todo:
            break
        params = SamplingParams(max_new_tokens=max_new_tokens, temperature=0.0 if attempt == 0 else 0.7,
                                seed=attempt)
        by_book: dict[str, list[int]] = {}
        for i in todo:
            by_book.setdefault(items[paras[i][0]][0].book_id, []).append(i)
        for book_id, idxs in by_book.items():
            convs = [[{"role": "user", "content": fill_prompt(template, paragraph=paras[i][1].text)}] for i in idxs]
            gens = backend.chat(convs, params, UsageTag(method, book_id, stage))
            for i, g in zip(idxs, gens):
                props = parse_propositions(g.text)
                if props:
                    results[i] = props
        todo = [i for i in todo if i not in results]
    out: list[list[Chunk]] = [[] for _ in items]
    for i, (k, p) in enumerate(paras):
        b, u = items[k]
        props = results.get(i)
        texts = props if props else [p.text]
        for t in texts:
            out[k].append(Chunk(
                book_id=b.book_id, unit_id=u.unit_id, chunk_id=chunk_id(u.unit_id, len(out[k])), method=method,
                from_idx=p.from_idx, to_idx=p.to_idx, spans=list(p.spans), text=t, main_text=t,
                is_source_span=not props,
                metadata={"paragraph": p.chunk_id, "fallback": not props},
            ))
    return out, len(todo)


@dataclass(frozen=True)
class PropositionOptions(Options):
    """Options of proposition chunking (Chen et al.'s propositionizer prompt)."""

    proposition_max_new_tokens: int = 512
    proposition_max_retries: int = 1
