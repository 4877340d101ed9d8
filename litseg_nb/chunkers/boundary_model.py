"""The narrative boundary model as a chunker (method ``boundary-model``): a logistic regression trained on
authors' chapter and scene breaks (``train-boundary-model``; weights in ``litseg_nb/weights/``) scores each
paragraph start; the chunker cuts at the top-scored ones under a length target."""
from __future__ import annotations

import hashlib
import itertools
import json
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..config import Options, at_least
from ..core.paths import PACKAGE_DIR
from ..errors import LitsegError
from ..core.schema import Book, Chunk, Unit, word_count
from .base import blank_line_spans, chunks_from_boundaries, unit_paragraphs, trim_span
from .boundary_features import DENSE_NAMES, FEATURE_VERSION, HASH_BUCKETS, HASH_SPACES, document_features, n_hashed
from .scores import attach_scores
from ..preprocess.structure import build_units

METHOD = "boundary-model"
WEIGHTS_FILE = PACKAGE_DIR / "weights" / "boundary_model.json"
CARD_FILE = WEIGHTS_FILE.with_name("boundary_model.card.json")


@dataclass(frozen=True)
class BoundaryModelOptions(Options):
    """The ``boundary-model`` method's options (``boundary_model_weights`` ``""``: the packaged file)."""

    boundary_target_words: int = at_least(300, 1)
    boundary_min_sentences: int = at_least(2, 1)
    boundary_model_weights: str = ""


def with_digest(weights: str) -> str:
    """``weights#<sha256 of the file>`` (``#unreadable``: loading it then raises)."""
    try:
        digest = weights_digest(weights or None)
    except BoundaryModelError:
        digest = "unreadable"
    return f"{weights}#{digest}"


def weights_path(weights_with_digest: str) -> str | None:
    return weights_with_digest.rsplit("#", 1)[0] or None


class BoundaryModelError(LitsegError, ValueError):
    """The boundary model's weights are missing, unreadable or of another feature version."""


@dataclass(frozen=True)
class BoundaryModel:
    """Standardisation and logistic-regression weights over :mod:`.boundary_features`."""

    mean: np.ndarray
    std: np.ndarray
    coef_dense: np.ndarray
    coef_hashed: np.ndarray
    intercept: float
    digest: str = ""

    def score_features(self, dense: np.ndarray, hashed: Sequence[Sequence[int]]) -> np.ndarray:
        if not len(dense):
            return np.zeros(0)
        z = (dense - self.mean) / self.std @ self.coef_dense + self.intercept
        z = z + np.array([self.coef_hashed[list(h)].sum() if h else 0.0 for h in hashed])
        return 1.0 / (1.0 + np.exp(-z))

    def to_json(self) -> dict[str, Any]:
        r = lambda a: [round(float(x), 6) for x in a]  # noqa: E731 - fixed precision: byte-identical rebuilds
        return {"feature_version": FEATURE_VERSION, "dense_names": list(DENSE_NAMES), "hash_spaces": list(HASH_SPACES),
                "hash_buckets": HASH_BUCKETS, "mean": r(self.mean), "std": r(self.std),
                "coef_dense": r(self.coef_dense), "coef_hashed": r(self.coef_hashed),
                "intercept": round(float(self.intercept), 6)}

    @classmethod
    def from_json(cls, d: dict[str, Any], digest: str = "", where: str = "weights") -> "BoundaryModel":
        if d.get("feature_version") != FEATURE_VERSION or d.get("dense_names") != list(DENSE_NAMES) \
                or d.get("hash_spaces") != list(HASH_SPACES) or d.get("hash_buckets") != HASH_BUCKETS:
            raise BoundaryModelError(f"{where}: trained for other features (feature version "
                                     f"{d.get('feature_version')!r}, this code {FEATURE_VERSION}); rebuild with "
                                     f"`python -m litseg_nb train-boundary-model`")
        arr = {k: np.asarray(d[k], dtype=float) for k in ("mean", "std", "coef_dense", "coef_hashed")}
        if arr["coef_hashed"].shape != (n_hashed(),) or any(arr[k].shape != (len(DENSE_NAMES),)
                                                             for k in ("mean", "std", "coef_dense")):
            raise BoundaryModelError(f"{where}: weight arrays of the wrong shape")
        return cls(arr["mean"], np.where(arr["std"] > 0, arr["std"], 1.0), arr["coef_dense"], arr["coef_hashed"],
                   float(d["intercept"]), digest)


def weights_digest(path: Path | str | None = None) -> str:
    """SHA-256 of the weights file (part of the chunk cache key: new weights, new chunks)."""
    p = Path(path) if path else WEIGHTS_FILE
    try:
        return hashlib.sha256(p.read_bytes()).hexdigest()[:16]
    except OSError as exc:
        raise BoundaryModelError(f"boundary model weights {p}: {exc.strerror or exc}; rebuild with "
                                 f"`python -m litseg_nb train-boundary-model`") from None


@lru_cache(maxsize=4)
def _load(path: str, digest: str) -> BoundaryModel:
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BoundaryModelError(f"boundary model weights {path}: unreadable ({exc})") from None
    if not isinstance(d, dict):
        raise BoundaryModelError(f"boundary model weights {path}: not a JSON object")
    try:
        return BoundaryModel.from_json(d, digest, where=f"boundary model weights {path}")
    except (KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, BoundaryModelError):
            raise
        raise BoundaryModelError(f"boundary model weights {path}: malformed ({exc})") from None


def load_model(path: Path | str | None = None) -> BoundaryModel:
    p = Path(path) if path else WEIGHTS_FILE
    return _load(str(p), weights_digest(p))


def unit_document(book: Book, unit: Unit) -> tuple[list[tuple[str, ...]], list[int]]:
    """The unit's paragraphs as sentence strings and the 1-based index of each one's first sentence."""
    starts = [a for a, _ in unit_paragraphs(book, unit)]  # a sentence before the first paragraph joins it
    groups = [list(g) for _, g in itertools.groupby(unit.sentences, lambda s: max(1, bisect_right(starts, s.start)))]
    return [tuple(book.text[s.start:s.end] for s in ss) for ss in groups], [ss[0].index for ss in groups]


def _text_unit(text: str) -> tuple[Book, Unit]:
    if not text.strip():
        raise LitsegError("boundary_scores: the text is empty")
    paragraphs = [t for a, b in blank_line_spans(text, 0, len(text)) if (t := trim_span(text, a, b))]
    units = build_units("text", text, paragraphs, max_unit_words=10**9, use_structure=False)
    book = Book(book_id="text", title="text", dataset="text", text=text, paragraphs=paragraphs, units=units)
    if len(units) != 1:
        raise LitsegError(f"boundary_scores: the text gave {len(units)} units, expected 1")
    return book, units[0]


def boundary_scores(window_or_text: Any, model: BoundaryModel | None = None) -> dict[int, float]:
    """``{paragraph's first sentence: P(boundary before it)}`` of a ``(book, unit)`` pair or a plain text."""
    if isinstance(window_or_text, str):
        book, unit = _text_unit(window_or_text)
    elif isinstance(window_or_text, tuple) and len(window_or_text) == 2:
        book, unit = window_or_text
    else:
        raise LitsegError("boundary_scores takes a text or a (book, unit) pair")
    docs, starts = unit_document(book, unit)
    dense, hashed = document_features(docs)
    s = (model or load_model()).score_features(dense, hashed)
    return {starts[j]: float(v) for j, v in zip(range(1, len(starts)), s)}


def pick_boundaries(scores: dict[int, float], n: int, k: int, min_sentences: int) -> list[int]:
    """Up to ``k`` top-scored positions, each ≥ ``min_sentences`` from the ends and from one another."""
    order = sorted(scores, key=lambda j: (-scores[j], j))
    chosen: list[int] = []
    for j in order:
        if len(chosen) >= k:
            break
        if j - 1 < min_sentences or n + 1 - j < min_sentences:
            continue
        if all(abs(j - c) >= min_sentences for c in chosen):
            chosen.append(j)
    return sorted(chosen)


def boundary_model_chunks(book: Book, unit: Unit, target_words: int, min_sentences: int,
                          model: BoundaryModel | None = None, method: str = METHOD) -> list[Chunk]:
    """Chunks of one unit: ``round(words / target_words) - 1`` boundaries at the top-scored paragraph starts."""
    n = unit.n_sentences
    if n == 0:
        return []
    m = model or load_model()
    scores = boundary_scores((book, unit), model=m)
    words = word_count(unit.text(book.text))
    k = max(0, int(round(words / max(target_words, 1))) - 1)
    cuts = pick_boundaries(scores, n, k, max(min_sentences, 1))
    chunks = chunks_from_boundaries(book, unit, method, [1] + cuts,
                                    metadata={"boundary_model": m.digest, "target_words": target_words})
    attach_scores(chunks, [scores.get(j) for j in range(2, n + 1)], n)
    return chunks


def model_card(path: Path | str | None = None) -> dict[str, Any]:
    p = Path(path) if path else CARD_FILE
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BoundaryModelError(f"boundary model card {p}: unreadable ({exc})") from None


def card_tables(card: dict[str, Any] | None = None):
    """``(data statement, validation rows)`` of a card as DataFrames (notebook 06)."""
    import pandas as pd

    c = card or model_card()
    d = c["data"]
    statement = pd.DataFrame([
        ("training data", f"{d['folder']}: {d['books']} raw books, {d['train_books']} for training, "
                          f"{d['validation_books']} held out ({d['split']})"),
        ("book list sha256 (16)", d["book_list_sha256_16"]),
        ("labels", d["labels"]),
        ("positives", f"{d['positives']['total']} ({d['positives']['chapter']} chapter, {d['positives']['scene']} scene)"),
        ("negatives", f"{d['negatives']} sampled of {d['candidates_in_train_books']} paragraph starts"),
        ("evaluation books compared", f"{d['disjoint_from_evaluation']['evaluation_ids']} ebook numbers, "
                                      f"{d['disjoint_from_evaluation']['evaluation_text_hashes']} cleaned texts: "
                                      f"overlap {d['disjoint_from_evaluation']['overlap']}"),
        ("model", c["model"]),
        ("weights sha256 (16)", c["weights_sha256_16"]),
        ("held-out ROC AUC (all paragraph starts)", f"{c.get('validation', {}).get('auc_all', float('nan')):.3f}"),
    ], columns=["item", "value"])
    rows = pd.DataFrame(c.get("validation", {}).get("benchmark_rows", []))
    return statement, rows
