"""Assembling the evaluation corpus: datasets → cleaned books → narrative units → indexed sentences."""
from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..core.cache import StepCache
from ..core.progress import bar
from ..config import CorpusConfig, StageConfig, UnitSelection
from ..data.gutenberg import CleanedText, GutenbergFormatError, clean_gutenberg_file, read_manifest
from ..data.gutenqa import load_gutenqa
from ..data.literaryqa import LoadReport, load_literaryqa
from ..core.paths import data_dir, require_dataset_folder
from ..preprocess.structure import FRONT_MATTER, StructureReport, build_units
from ..core.schema import Book, Question, Sentence, Unit, word_count
from ..errors import UsageError
from ..metrics.retrieval import normalize_for_match

log = logging.getLogger(__name__)

CORPUS_CACHE_VERSION = "corpus-v4"  # raised when unit building changes, so cached corpora are rebuilt


class CorpusError(UsageError, ValueError):
    """A corpus request that cannot be served (unknown dataset or book, missing data)."""


@dataclass
class CorpusReport:
    """What :func:`load_corpus` did: per-dataset load reports and timing."""

    loads: dict[str, LoadReport] = field(default_factory=dict)
    seconds: float = 0.0
    from_cache: bool = False

    def summary(self) -> str:
        parts = [r.summary() for r in self.loads.values()]
        return "; ".join(parts) + f" ({self.seconds:.1f}s{', cached' if self.from_cache else ''})"


class Corpus(list):
    """The books :func:`load_corpus` returns (a ``list[Book]``) with its :class:`CorpusReport` as ``.report``."""

    def __init__(self, books: Iterable[Book] = (), report: CorpusReport | None = None):
        super().__init__(books)
        self.report = report if report is not None else CorpusReport()


@dataclass(frozen=True)
class PreprocessConfig(StageConfig):
    """Notebook 01: which corpus to load (``corpus``) and how much of a unit to render."""

    render_sentences: int = 60  # sentences of the example chapter shown as HTML
    benchmark: bool = True  # run the preprocessing benchmark over all local raw books (fresh interpreter)
    benchmark_big_mb: float = 20.0  # size of the one-body book the benchmark indexes (20 MB < 15 s)


def data_files(corpus_cfg: CorpusConfig, root: Path | None = None) -> list[Path]:
    """The data files a corpus config reads (for cache keys and run manifests)."""
    root = root or data_dir()
    files: list[Path] = []
    for ds in corpus_cfg.datasets:
        if ds == "gutenqa":
            folder = root / "gutenqa"
            files += [p for p in (folder / "GutenQA_paragraphs.parquet", folder / "questions.parquet")
                      if p.is_file()]
        elif ds == "gutenberg":
            folder = root / "gutenberg"
            files += sorted(folder.glob("*.txt")) + [p for p in [folder / "MANIFEST.tsv"] if p.is_file()]
        else:  # literaryqa (CorpusConfig accepts no other dataset)
            folder = root / "literaryqa"
            split = corpus_cfg.literaryqa_split
            ann = folder / "annotations" / f"{split}.jsonl"
            files += ([ann] if ann.is_file() else []) + sorted((folder / "texts" / split).glob("*.txt"))
    return files


def _wanted(book_id: str, books: Sequence[str]) -> bool:
    """Whether ``book_id`` is named in ``books`` (full id, or the part after the colon)."""
    return book_id in books or book_id.split(":", 1)[1] in books


def _load_gutenberg(root: Path, cfg: CorpusConfig) -> tuple[list[Book], LoadReport]:
    folder = root / "gutenberg"
    if not folder.is_dir():
        raise CorpusError(f"Gutenberg folder {folder} does not exist (data root {root})")
    names = read_manifest(folder)
    files = sorted(folder.glob("*.txt"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.stem))
    report = LoadReport("gutenberg")
    books = []
    for path in files:
        bid = f"gutenberg:{path.stem}"
        if cfg.books and not _wanted(bid, cfg.books):
            continue  # a books= filter never cleans the other books
        try:
            cleaned = clean_gutenberg_file(path)
        except GutenbergFormatError as err:  # one bad file never aborts the dataset
            if cfg.strict:
                raise CorpusError(f"{err} (strict=True)") from err
            log.warning("skipping %s: %s", bid, err)
            report.skipped[bid] = str(err)
            continue
        books.append(cleaned_book(cleaned, bid, names.get(path.stem, path.stem), str(path),
                                  gutenqa_name=names.get(path.stem)))
        report.loaded.append(bid)
    return books, report


def cleaned_book(cleaned: CleanedText, book_id: str, fallback_title: str, source: str,
                 dataset: str = "gutenberg", **meta: Any) -> Book:
    """A :class:`Book` (no units yet) from a cleaned text: titled by its Gutenberg header (else
    ``fallback_title``), its clean report (with the header's author, which :func:`index_book` gives to unit
    building) in ``meta["clean"]``. :func:`load_corpus` and :func:`litseg_nb.api.load_text` both build their
    books here, so one file gets the same units either way."""
    return Book(book_id=book_id, title=cleaned.report.title or fallback_title, dataset=dataset, text=cleaned.text,
                paragraphs=cleaned.paragraphs, source=source, source_map=cleaned.source_map,
                meta={**meta, "clean": asdict(cleaned.report)})


def index_book(book: Book, max_unit_words: int | None, sentence_splitter: str = "nupunkt") -> Book:
    """Fill ``book.units`` (structure or dataset chapters, recursive splits, sentence indices)."""
    report = StructureReport()
    sections = None
    if book.dataset == "gutenqa" and book.meta.get("chapters"):
        sections = [(c[3], c[0]) for c in book.meta["chapters"]]
    try:
        book.units = build_units(book.book_id, book.text, book.paragraphs, max_unit_words,
                                 sentence_splitter=sentence_splitter, report=report,
                                 sections=sections, whole_title=book.title,
                                 author=(book.meta.get("clean") or {}).get("author") or book.meta.get("author"))
    except ValueError as err:
        raise CorpusError(f"book {book.book_id} ({book.source}): {err}") from err
    book.meta["structure"] = asdict(report)
    return book


def cap_units(book: Book, max_units: int, selection: str = "first") -> Book:
    """Keep ``max_units`` narrative units (front matter only if nothing else), in book order:
    ``"first"`` the first ones, ``"questions"`` those holding a question's evidence first."""
    if selection not in ("first", "questions"):
        raise CorpusError(f"unknown unit_selection {selection!r} (first | questions) for book {book.book_id}")
    if max_units and len(book.units) > max_units:
        # never front matter, nor its recursive pieces ("Front matter [1/2]")
        narrative = [u for u in book.units if not u.title.startswith(FRONT_MATTER)] or book.units
        chosen = narrative[:max_units]
        if selection == "questions":
            preferred = [u for u in narrative if question_cover(book, u)][:max_units]
            rest = [u for u in narrative if u not in preferred][:max_units - len(preferred)]
            chosen = sorted(preferred + rest, key=lambda u: u.ordinal)
        book.meta["units_total"] = len(book.units)
        book.units = chosen
    return book


def book_to_json(book: Book) -> dict[str, Any]:
    d = {k: v for k, v in book.__dict__.items() if k not in ("units", "questions")}
    d["units"] = [{**{k: v for k, v in u.__dict__.items() if k not in ("sentences", "paragraphs")},
                   "sentences": [[s.index, s.start, s.end] for s in u.sentences],
                   "paragraphs": u.paragraphs} for u in book.units]
    d["questions"] = [asdict(q) for q in book.questions]
    return d


def book_from_json(d: dict[str, Any]) -> Book:
    d = dict(d)
    units = [Unit(**{**u, "sentences": tuple(Sentence(*s) for s in u["sentences"]),
                     "paragraphs": tuple(tuple(p) for p in u["paragraphs"]),
                     "sections": tuple(tuple(x) for x in u.get("sections", ()))}) for u in d.pop("units")]
    questions = [Question(**{**q, "answers": tuple(q["answers"])}) for q in d.pop("questions")]
    d["paragraphs"] = [tuple(p) for p in d["paragraphs"]]
    d["source_map"] = [tuple(p) for p in d["source_map"]]
    return Book(**d, units=units, questions=questions)


def _build(cfg: CorpusConfig, root: Path, progress: bool) -> tuple[list[Book], CorpusReport]:
    report = CorpusReport()
    out: list[Book] = []
    for ds in cfg.datasets:
        if ds == "gutenqa":  # never a hub download at run time: a missing folder says what to fetch and how
            books = load_gutenqa(require_dataset_folder("gutenqa", root / "gutenqa"))
            report.loads[ds] = LoadReport("gutenqa", loaded=[b.book_id for b in books])
        elif ds == "gutenberg":
            books, report.loads[ds] = _load_gutenberg(root, cfg)
        else:  # load_corpus logs the report
            books, report.loads[ds] = load_literaryqa(require_dataset_folder("literaryqa", root / "literaryqa"),
                                                      split=cfg.literaryqa_split, books=cfg.books, strict=cfg.strict)
        if cfg.books:
            books = [b for b in books if _wanted(b.book_id, cfg.books)]
        if cfg.max_books:
            books = books[:cfg.max_books]
        for book in bar(books, progress=progress, desc=f"indexing {ds}"):
            index_book(book, cfg.max_unit_words, cfg.sentence_splitter)
            cap_units(book, cfg.max_units_per_book, cfg.unit_selection)
            out.append(book)
    missing = [w for w in cfg.books if not any(_wanted(b.book_id, (w,)) for b in out)]
    if missing:
        raise CorpusError(f"book(s) {missing} not found in datasets {list(cfg.datasets)}")
    return out, report


def load_corpus(corpus_cfg: CorpusConfig, use_cache: bool = True, progress: bool = False,
                root: Path | None = None) -> Corpus:
    """Cleaned, unit-split, sentence-indexed books for ``corpus_cfg`` (cached); a :class:`Corpus` whose
    ``.report`` says what was loaded and skipped."""
    t0 = time.perf_counter()
    root = root or data_dir()
    cache = StepCache("corpus", config=corpus_cfg,
                      inputs={"files": data_files(corpus_cfg, root), "version": CORPUS_CACHE_VERSION},
                      required=("books", "loads"))
    if use_cache and cache.exists():
        stored = cache.load()
        books = [book_from_json(b) for b in stored["books"]]
        report = CorpusReport(loads={k: LoadReport(**v) for k, v in stored["loads"].items()},
                              from_cache=True)
    else:
        books, report = _build(corpus_cfg, root, progress)
        if use_cache:
            cache.save({"books": [book_to_json(b) for b in books],
                        "loads": {k: asdict(v) for k, v in report.loads.items()}})
    report.seconds = time.perf_counter() - t0
    for ds, r in report.loads.items():
        if r.skipped:
            log.warning(r.summary())
    return Corpus(books, report)


def unit_table(books: Sequence[Book], tokenizer: Any = None):
    """One row per unit: dataset, book, unit id, title, split, paragraphs, sentences, words, tokens."""
    import pandas as pd

    if tokenizer is not None and not callable(tokenizer):
        raise TypeError(f"tokenizer must be a HF tokenizer or a callable; got {type(tokenizer).__name__}")
    rows = []
    for b in books:
        texts = [u.text(b.text) for u in b.units]
        if tokenizer is None:
            toks = [None] * len(texts)
        elif hasattr(tokenizer, "encode"):  # HF tokenizer: one batch call
            toks = [len(x) for x in tokenizer(texts, add_special_tokens=False)["input_ids"]]
        else:
            toks = [int(tokenizer(t)) for t in texts]
        for u, t, k in zip(b.units, texts, toks):
            rows.append({"dataset": b.dataset, "book_id": b.book_id, "unit_id": u.unit_id,
                         "title": u.title, "split": u.split, "paragraphs": len(u.paragraphs),
                         "sentences": u.n_sentences, "words": len(t.split()), "tokens": k})
    return pd.DataFrame(rows, columns=["dataset", "book_id", "unit_id", "title", "split", "paragraphs",
                                       "sentences", "words", "tokens"])


def corpus_statistics(books: Sequence[Book], tokenizer: Any = None):
    """Per dataset and book: units (``narrative_units`` before recursive splitting), paragraphs, sentences,
    words, tokens (with a HF tokenizer or a callable) and split counts; a ``TOTAL <dataset>`` row follows each."""
    import pandas as pd

    units = unit_table(books, tokenizer)
    cols = ["dataset", "book_id", "title", "narrative_units", "units", "paragraphs", "sentences", "words", "tokens",
            "units_structure", "units_dataset", "units_recursive", "units_whole", "split_method",
            "questions"]
    rows = []
    for ds in dict.fromkeys(b.dataset for b in books):
        ds_books = [b for b in books if b.dataset == ds]
        for b in ds_books:
            u = units[units.book_id == b.book_id]
            counts = u["split"].value_counts().to_dict()
            method = "+".join(m for m in ("structure", "dataset", "whole", "recursive") if counts.get(m))
            rows.append({"dataset": ds, "book_id": b.book_id, "title": b.title,
                         "narrative_units": u["unit_id"].str.split(".").str[0].nunique(),
                         "units": len(u),
                         "paragraphs": int(u["paragraphs"].sum()), "sentences": int(u["sentences"].sum()),
                         "words": int(u["words"].sum()),
                         "tokens": int(u["tokens"].sum()) if tokenizer is not None else None,
                         **{f"units_{m}": int(counts.get(m, 0))
                            for m in ("structure", "dataset", "recursive", "whole")},
                         "split_method": method, "questions": len(b.questions)})
        tot = pd.DataFrame(rows[-len(ds_books):])
        rows.append({"dataset": ds, "book_id": f"TOTAL {ds}", "title": f"{len(ds_books)} books",
                     **{c: (int(tot[c].sum()) if tot[c].notna().all() else None)
                        for c in cols if c not in ("dataset", "book_id", "title", "split_method")},
                     "split_method": ""})
    return pd.DataFrame(rows, columns=cols)


class SelectionError(UsageError, ValueError):
    """A unit selection that matches nothing or names units the corpus does not have."""


def book_matches(book: Book, wanted: Sequence[str]) -> bool:
    """Whether ``book`` is named in ``wanted`` (its id, or a substring of its title; case-insensitive)."""
    bid, title = book.book_id.lower(), book.title.lower()
    return any(w.lower() == bid or w.lower() in title for w in wanted)


def question_cover(book: Book, unit: Unit) -> set[str]:
    """Ids of the book's questions whose evidence lies in ``unit`` (GutenQA): the containment test of
    :func:`~litseg_nb.metrics.retrieval.is_relevant`, the unit's text normalised once for all questions."""
    asked = [q for q in book.questions if q.evidence]
    if not asked:
        return set()
    text = normalize_for_match(unit.text(book.text))
    out = set()
    for q in asked:
        ev = normalize_for_match(q.evidence)
        if not ev:
            raise ValueError(f"{book.book_id}: question {q.qid} has an empty evidence string: relevance is undefined")
        if ev in text:
            out.add(q.qid)
    return out


def _fewest_covering(pairs: list[tuple[Book, Unit]], need: int) -> list[tuple[Book, Unit]]:
    """Greedy set cover: repeatedly the unit answering the most uncovered questions (fewer sentences
    first on ties, then corpus order) until ``need`` questions are covered."""
    cover = {i: {(b.book_id, q) for q in question_cover(b, u)} for i, (b, u) in enumerate(pairs)}
    cover = {i: c for i, c in cover.items() if c}
    got: set[tuple[str, str]] = set()
    chosen: list[int] = []
    while len(got) < need:
        gain = {i: len(c - got) for i, c in cover.items() if i not in chosen}
        if not gain or max(gain.values()) == 0:
            raise SelectionError(f"the selected units hold the evidence of only {len(got)} question(s); "
                                 f"min_questions={need}")
        best = min(gain, key=lambda i: (-gain[i], pairs[i][1].n_sentences, i))
        chosen.append(best)
        got |= cover[best]
    return [pairs[i] for i in sorted(chosen)]


def select_units(books: Sequence[Book], sel: UnitSelection) -> list[tuple[Book, Unit]]:
    """The ``(book, unit)`` pairs ``sel`` picks from ``books``, in corpus order (see :class:`UnitSelection`)."""
    candidates: list[tuple[Book, Unit]] = []
    for b in books:
        if sel.books and not book_matches(b, sel.books):
            continue
        units = [u for u in b.units if u.n_sentences
                 and not (sel.skip_units_over_words is not None
                          and word_count(u.text(b.text)) > sel.skip_units_over_words)]
        if sel.strategy == "questions":
            holding = [u for u in units if question_cover(b, u)]
            units = holding + [u for u in units if u not in holding]
        candidates.extend((b, u) for u in units)
    if sel.books and not candidates:
        raise SelectionError(f"selection.books={list(sel.books)} matches no unit of the books "
                             f"{[b.book_id for b in books]} (ids or title substrings; check skip_units_over_words)")
    if sel.units:
        named = {f"{b.book_id}/{u.unit_id}": (b, u) for b, u in candidates}
        missing = [k for k in sel.units if k not in named]
        if missing:
            raise SelectionError(f"selection.units not in the corpus: {missing}")
        candidates = [named[k] for k in sel.units]
    if sel.min_questions:
        candidates = _fewest_covering(candidates, sel.min_questions)
    if sel.max_units:
        candidates = candidates[:sel.max_units]
    order = {(b.book_id, u.unit_id): i for i, (b, u) in enumerate((b, u) for b in books for u in b.units)}
    return sorted(candidates, key=lambda p: order[(p[0].book_id, p[1].unit_id)])


def describe_selection(pairs: Sequence[tuple[Book, Unit]]) -> str:
    """``"8 unit(s), 147 sentences of gutenqa:Emma_-_Jane_Austen"`` for labels."""
    books = sorted({b.book_id for b, _ in pairs})
    return (f"{len(pairs)} unit(s), {sum(u.n_sentences for _, u in pairs)} sentences of "
            f"{', '.join(books) or 'no book'}")
