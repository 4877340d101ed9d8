"""LiteraryQA (Bonomo et al., EMNLP 2025): books with question/answer pairs, no evidence spans."""
from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from ..core.schema import Book, Question
from .gutenberg import GutenbergFormatError, clean_gutenberg_file, join_paragraphs

log = logging.getLogger(__name__)

HUB_REPO = "sapienzanlp/LiteraryQA"


@dataclass
class LoadReport:
    """What a loader found: books loaded and books skipped (with the reason)."""

    dataset: str
    loaded: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # book id -> reason

    def summary(self) -> str:
        s = f"{self.dataset}: loaded {len(self.loaded)} book(s), skipped {len(self.skipped)}"
        if self.skipped:
            s += ": " + ", ".join(f"{k} ({v})" for k, v in sorted(self.skipped.items()))
        return s


def load_literaryqa(folder: Path | str, split: str = "validation", books: Iterable[str] = (),
                    strict: bool = False) -> tuple[list[Book], LoadReport]:
    """Load LiteraryQA books of ``split`` that have a text; returns ``(books, report)`` (the caller logs the
    books skipped; an id of ``books`` not in ``split`` is not an error here)."""
    folder = Path(folder)
    ann = folder / "annotations" / f"{split}.jsonl"
    if not ann.is_file():
        raise FileNotFoundError(f"LiteraryQA annotations {ann} are missing")
    wanted = {b.split(":", 1)[1] if b.startswith("literaryqa:") else b for b in books}
    report = LoadReport("literaryqa")
    out: list[Book] = []
    with ann.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{ann}:{lineno}: invalid JSON ({err})") from err
            gid = str(rec.get("gutenberg_id", "")).strip()
            if not gid:
                raise ValueError(f"{ann}:{lineno}: record without gutenberg_id")
            if wanted and gid not in wanted:
                continue
            bid = f"literaryqa:{gid}"
            meta = {"document_id": rec.get("document_id"), "summary": rec.get("summary", ""),
                    **(rec.get("metadata") or {})}
            path = folder / "texts" / split / f"{gid}.txt"
            if rec.get("text"):  # an already-cleaned text: normalised to paragraphs joined by blank lines
                raw = rec["text"].replace("\r\n", "\n").replace("\r", "\n")
                text, paragraphs = join_paragraphs(re.sub(r"[ \t]+", " ", p.strip())
                                                   for p in re.split(r"\n\s*\n", raw) if p.strip())
                source_map: list[tuple[int, int]] = []
                src = f"{ann}:{lineno}"
            elif path.is_file():
                try:
                    cleaned = clean_gutenberg_file(path)
                except GutenbergFormatError as err:
                    if strict:
                        raise
                    log.warning("LiteraryQA: skipping %s: %s", bid, err)
                    report.skipped[bid] = str(err)
                    continue
                text, paragraphs, source_map = cleaned.text, cleaned.paragraphs, cleaned.source_map
                meta["clean"] = cleaned.report.__dict__
                src = str(path)
            else:
                report.skipped[bid] = f"no text file {path.relative_to(folder)}"
                continue
            questions = [Question(qid=f"{bid}#q{qi:03d}", book_id=bid, question=str(qa["question"]),
                                  answers=tuple(str(a) for a in qa.get("answers", [])), evidence=None,
                                  dataset="literaryqa") for qi, qa in enumerate(rec.get("qas") or [])]
            out.append(Book(book_id=bid, title=str(rec.get("title") or gid), dataset="literaryqa",
                            text=text, paragraphs=paragraphs, questions=questions, source=src,
                            source_map=source_map, meta=meta))
            report.loaded.append(bid)
    return out, report
