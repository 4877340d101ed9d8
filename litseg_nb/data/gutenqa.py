"""GutenQA (Duarte et al., 2024): books as paragraphs grouped by chapter, with evidence questions."""
from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Iterable

from ..core.schema import Book, Question
from ..core.paths import DataNotFoundError, missing_dataset_message
from .gutenberg import join_paragraphs
from ..errors import UsageError

log = logging.getLogger(__name__)

PARAGRAPHS_REPO = "LumberChunker/GutenQA_Paragraphs"
PARAGRAPHS_FILE = "GutenQA_paragraphs.parquet"
QUESTIONS_REPO = "LumberChunker/GutenQA"
QUESTIONS_FILE = "questions.parquet"
PARAGRAPH_COLUMNS = ("Book Name", "Chunk ID", "Chapter", "Chunk")
QUESTION_COLUMNS = ("Book Name", "Question", "Answer", "Chunk Must Contain")


class GutenQAError(UsageError, ValueError):
    """Malformed GutenQA files (missing columns, empty book)."""


def _check_columns(df, needed: Iterable[str], path: Path) -> None:
    missing = [c for c in needed if c not in df.columns]
    if missing:
        raise GutenQAError(f"{path}: missing column(s) {missing}; found {list(df.columns)}")


def load_gutenqa(folder: Path | str) -> list[Book]:
    """Load the GutenQA books from ``folder``."""
    import pandas as pd

    folder = Path(folder)
    para_path, q_path = folder / PARAGRAPHS_FILE, folder / QUESTIONS_FILE
    for p in (para_path, q_path):
        if not p.is_file():
            raise DataNotFoundError(f"GutenQA file {p} is missing; " + missing_dataset_message("gutenqa", folder))
    paras = pd.read_parquet(para_path)
    _check_columns(paras, PARAGRAPH_COLUMNS, para_path)
    qs = pd.read_parquet(q_path)
    _check_columns(qs, QUESTION_COLUMNS, q_path)

    out = []
    for name in dict.fromkeys(paras["Book Name"]):
        rows = paras[paras["Book Name"] == name].sort_values("Chunk ID", kind="stable")
        chunks = [str(c) for c in rows["Chunk"]]
        chapters_col = [str(c) for c in rows["Chapter"]]
        if not chunks:
            raise GutenQAError(f"{para_path}: book {name!r} has no paragraphs")
        text, spans = join_paragraphs(chunks)
        chapters = []
        k = 0
        for label, run in itertools.groupby(chapters_col):
            j = k + len(list(run))
            chapters.append((label, spans[k][0], spans[j - 1][1], k, j))
            k = j
        titles = [c[0] for c in chapters]
        if len(set(titles)) != len(titles):
            log.warning("GutenQA book %s: chapter labels recur non-contiguously; each run is a unit", name)
        bid = f"gutenqa:{name}"
        questions = [Question(qid=f"{bid}#q{qi:03d}", book_id=bid, question=str(d["Question"]),
                              answers=(str(d["Answer"]),), evidence=str(d["Chunk Must Contain"]), dataset="gutenqa")
                     for qi, d in enumerate(qs[qs["Book Name"] == name].to_dict("records"))]
        title = name.split("_-_")[0].replace("_", " ")
        out.append(Book(book_id=bid, title=title, dataset="gutenqa", text=text, paragraphs=spans,
                        questions=questions, source=str(para_path),
                        meta={"chapters": chapters, "author": name.split("_-_")[-1].replace("_", " ")}))
    return out
