"""Scoring core of the whole-book retrieval benchmark.

Budget-matched hit at B: walk down a ranking taking whole chunks while their token total stays <= B; a hit when a
taken chunk is relevant, i.e. when the tokens up to and including the first relevant chunk are <= B.
LiteraryQA relevance: a passage is relevant when it contains a kept answer (normalised, whole words); an answer is
kept when it is short and occurs at least once and only a few times in its book.
Paired comparison: per question d = score(method) - score(reference); mean d with a 95 % percentile bootstrap
interval (books resampled, then questions within each drawn book) and a two-sided sign-flip permutation p-value.
"""
from __future__ import annotations

import functools
import re
from typing import Any, Mapping, Sequence

import numpy as np

from ..metrics.retrieval import normalize_for_match

BUDGETS = (256, 512, 1024, 2048)
TIERS = ("A", "B")
# Short answers (DPR-style has-answer); a longer answer is usually a paraphrase that the book never states verbatim.
MAX_ANSWER_WORDS = 5
# A string found more than three times (a main character's name) says little about whether a passage answers.
MAX_ANSWER_OCCURRENCES = 3
_EDGE_PUNCT = " .,;:!?\"'()[]-"


def tokens_to_first_relevant(ranked_token_counts: Sequence[int], ranked_relevant: Sequence[bool]) -> float:
    """Tokens of the ranking up to and including its first relevant chunk (inf when no chunk is relevant)."""
    counts = np.asarray(ranked_token_counts, dtype=float)
    relevant = np.asarray(ranked_relevant, dtype=bool)
    if counts.shape != relevant.shape:
        raise ValueError(f"{len(counts)} token counts but {len(relevant)} relevance flags")
    if (counts < 0).any():
        raise ValueError("a token count is negative")
    hits = np.flatnonzero(relevant)
    return float(counts[: hits[0] + 1].sum()) if hits.size else float("inf")


def budget_hits(ranked_token_counts: Sequence[int], ranked_relevant: Sequence[bool],
                budgets: Sequence[int] = BUDGETS) -> dict[int, bool]:
    """Per budget B: whether whole chunks taken from the top while the token total stays <= B include a relevant one.
    A first chunk longer than B takes nothing, so it cannot be a hit (a reader with a B-token context cannot use it)."""
    needed = tokens_to_first_relevant(ranked_token_counts, ranked_relevant)
    return {int(b): bool(needed <= b) for b in budgets}


def budget_hit_matrix(tokens_needed: Sequence[float], budgets: Sequence[int] = BUDGETS) -> np.ndarray:
    """Many questions: ``tokens_needed[i]`` (:func:`tokens_to_first_relevant`) -> bool array (question, budget)."""
    return np.asarray(tokens_needed, dtype=float)[:, None] <= np.asarray(budgets, dtype=float)[None, :]


@functools.lru_cache(maxsize=8)
def _normalised_book(book_text: str) -> str:
    return normalize_for_match(book_text)


def _answer_pattern(normalised_answer: str) -> re.Pattern:
    return re.compile(r"(?<!\w)" + re.escape(normalised_answer) + r"(?!\w)")


def answer_form(answer: str) -> str:
    """The normalised answer (:func:`normalize_for_match`) without surrounding punctuation and a leading article."""
    a = normalize_for_match(answer).strip(_EDGE_PUNCT)
    return re.sub(r"^(the|an|a) ", "", a).strip(_EDGE_PUNCT)


def passage_has_answer(passage: str, answer: str) -> bool:
    """True when the answer's :func:`answer_form` occurs in the normalised passage as whole words (never if empty)."""
    a = answer_form(answer)
    return bool(a) and _answer_pattern(a).search(normalize_for_match(passage)) is not None


def answer_relevance_rule(book_text: str, answer: str, max_words: int = MAX_ANSWER_WORDS,
                          max_occurrences: int = MAX_ANSWER_OCCURRENCES) -> tuple[bool, str]:
    """``(keep, reason)``: keep an answer of at most ``max_words`` words found 1..``max_occurrences`` times in the
    book (whole words of its :func:`answer_form`, as :func:`passage_has_answer` matches)."""
    a = answer_form(answer)
    if not a:
        return False, "empty answer"
    n_words = len(a.split())
    if n_words > max_words:
        return False, f"too long ({n_words} words > {max_words})"
    n = len(_answer_pattern(a).findall(_normalised_book(book_text)))
    if n == 0:
        return False, "absent from the book"
    if n > max_occurrences:
        return False, f"too frequent ({n} occurrences > {max_occurrences})"
    return True, f"kept ({n_words} words, {n} occurrence(s))"


def kept_answers(book_text: str, answers: Sequence[str], **rule: Any) -> tuple[str, ...]:
    """The answers of one question that pass :func:`answer_relevance_rule`; the question is kept when any does and a
    passage is relevant when it has any of them."""
    return tuple(a for a in answers if answer_relevance_rule(book_text, a, **rule)[0])


def _bootstrap_interval(d: np.ndarray, groups: list[np.ndarray], n_boot: int,
                        rng: np.random.Generator) -> tuple[float, float]:
    means = np.empty(n_boot)
    for i in range(n_boot):
        drawn = rng.integers(0, len(groups), len(groups))
        idx = np.concatenate([groups[g][rng.integers(0, len(groups[g]), len(groups[g]))] for g in drawn])
        means[i] = d[idx].mean()
    lo, hi = np.percentile(means, [2.5, 97.5])
    return float(lo), float(hi)


def _sign_flip_p(d: np.ndarray, n_perm: int, rng: np.random.Generator) -> float:
    signs = rng.choice(np.array([-1.0, 1.0]), size=(n_perm, d.size))
    flipped = np.abs(signs @ d) / d.size
    return float((1 + np.sum(flipped >= abs(d.mean()) - 1e-12)) / (n_perm + 1))


def paired_difference(scores_by_method: Mapping[str, Sequence[float]], books: Sequence[Any],
                      reference: str = "recursive", n_boot: int = 2000, n_perm: int = 10000, seed: int = 0):
    """One row per method other than ``reference``: mean of its per-question score minus the reference's, 95 %
    bootstrap interval (books, then questions), sign-flip p-value, ``n_questions`` and ``n_books``."""
    import pandas as pd

    if reference not in scores_by_method:
        raise ValueError(f"reference method {reference!r} has no scores (methods: {sorted(scores_by_method)})")
    ref = np.asarray(scores_by_method[reference], dtype=float)
    books = np.asarray(books)
    if books.shape != ref.shape or ref.size == 0:
        raise ValueError(f"{books.size} book ids for {ref.size} questions of {reference!r} (need one per question)")
    groups = [np.flatnonzero(books == b) for b in dict.fromkeys(books.tolist())]
    rows = []
    for method, scores in scores_by_method.items():
        s = np.asarray(scores, dtype=float)
        if s.shape != ref.shape:
            raise ValueError(f"method {method!r} has {s.size} scores, reference {reference!r} has {ref.size}: "
                             "every method must be scored on the same questions")
        if not np.isfinite(s).all():
            raise ValueError(f"method {method!r} has a non-finite score")
        if method == reference:
            continue
        d = s - ref
        rng = np.random.default_rng(seed)  # the same draws for every method
        lo, hi = _bootstrap_interval(d, groups, n_boot, rng)
        rows.append({"method": method, "reference": reference, "mean_difference": float(d.mean()),
                     "ci_low": lo, "ci_high": hi, "p_value": _sign_flip_p(d, n_perm, rng),
                     "n_questions": int(d.size), "n_books": len(groups)})
    return pd.DataFrame(rows, columns=["method", "reference", "mean_difference", "ci_low", "ci_high", "p_value",
                                       "n_questions", "n_books"])


def ranking_table(rows: Sequence[Mapping[str, Any]], tier: str, by: str):
    """Rows of one tier (each with ``tier``, ``method`` and ``by``) sorted by ``by``, best first, with a ``rank``;
    rows of another tier raise: the tiers never share a ranking."""
    import pandas as pd

    if tier not in TIERS:
        raise ValueError(f"unknown tier {tier!r} (tiers: {TIERS})")
    other = sorted({str(r.get("tier")) for r in rows} - {tier})
    if other:
        raise ValueError(f"a tier-{tier} ranking got rows of tier {', '.join(other)}: "
                         f"tiers {tier} and {', '.join(other)} never share a ranking")
    df = pd.DataFrame(list(rows))
    if df.empty:
        raise ValueError(f"no rows to rank in tier {tier}")
    df = df.sort_values([by, "method"], ascending=[False, True], kind="stable").reset_index(drop=True)
    df.insert(0, "rank", df[by].rank(method="min", ascending=False).astype(int))
    return df
