"""Non-LLM baselines: coverage, exact spans, determinism; recursive spans with repeated text;
dynamic merge properties (hypothesis)."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litseg_nb.chunkers import BaselinesConfig, ChunkerError, load_tokenizer
from litseg_nb.segmenters import get_method, run_chunker
from litseg_nb.chunkers.base import merge_groups, merge_unit_chunks
from litseg_nb.chunkers.splitters import locate_chunks, make_recursive_splitter, percentile_breakpoints, token_windows
from fakes import toy_book
from litseg_nb.core.schema import assert_full_coverage, make_sentence_chunk

TEXT = (
    "It was a dark night. The wind howled! Emma sat by the fire.\n\nShe thought of Mr Knightley. "
    "He was kind, and he was wise; she knew it.\nThe clock struck ten.\n###\nMorning came. "
    "\"Good day,\" said Harriet.\n\nThey walked to Highbury. The sun shone brightly on the road. "
    "A cart passed them, loaded with hay.\n\nAt the vicarage Mr Elton waited. He bowed."
)
REPEAT = ("The rain fell. " * 40 + "\n\n" + "Ha ha ha. " * 30).strip()


@pytest.fixture(scope="module")
def cfg():
    return BaselinesConfig.for_profile("test", token_chunk_size=12, token_chunk_overlap=3,
                                       recursive_chunk_size=60, recursive_chunk_overlap=20)


@pytest.fixture(scope="module")
def embedder(cfg):
    from litseg_nb.llm.embeddings import load_embedder

    return load_embedder(cfg.embedding)


def _check_exact(book, chunks):
    for c in chunks:
        assert c.is_source_span
        (a, b), = c.spans
        assert book.text[a:b] == c.text == c.main_text
        assert c.text and c.text == c.text.strip()
        u = book.unit(c.unit_id)
        sent = [s.index for s in u.sentences if s.start < b and s.end > a]
        assert (c.from_idx, c.to_idx) == (sent[0], sent[-1])


@pytest.mark.parametrize("method", ["token", "recursive", "semantic", "paragraph"])
@pytest.mark.parametrize("text", [TEXT, REPEAT], ids=["story", "repeated"])
def test_non_llm_methods_cover_exactly_and_deterministically(method, text, cfg, embedder, fresh_dirs):
    book = toy_book(text)
    a = run_chunker(method, [book], cfg, embedder=embedder)
    assert a and all(c.method == method for c in a)
    assert_full_coverage(book, a, method)
    _check_exact(book, a)
    # every non-whitespace character of each unit lies in some chunk
    for u in book.units:
        covered = set()
        for c in a:
            if c.unit_id == u.unit_id:
                covered.update(range(*c.spans[0]))
        assert all(i in covered for i in range(u.start, u.end) if not book.text[i].isspace())
    b = run_chunker(method, [book], cfg, embedder=embedder)  # from the cache
    assert [c.to_json() for c in a] == [c.to_json() for c in b]


def test_token_windows_overlap_and_size(cfg):
    assert token_windows(10, 4, 1) == [(0, 4), (3, 7), (6, 10)]
    assert token_windows(3, 4, 1) == [(0, 3)]
    with pytest.raises(ChunkerError):
        token_windows(5, 4, 4)
    book = toy_book(TEXT)
    tok = load_tokenizer(cfg.tokenizer)
    chunks = run_chunker("token", [book], cfg)
    assert max(tok.count(c.text) for c in chunks) <= cfg.token_chunk_size + 1


def test_recursive_matches_langchain_texts_and_handles_repeats(cfg):
    sp = make_recursive_splitter(60, 20, cfg.recursive_separators)
    pieces = sp.split_text(REPEAT)
    spans = locate_chunks(REPEAT, pieces, 20)
    assert [REPEAT[a:b] for a, b in spans] == pieces
    starts = [a for a, _ in spans]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    # no gap: each chunk starts at or before the previous end (+ whitespace)
    for (a0, b0), (a1, _) in zip(spans, spans[1:]):
        assert not REPEAT[b0:a1].strip()
    with pytest.raises(ChunkerError):
        locate_chunks("abc def", ["abc", "xyz"], 0)


def test_semantic_breakpoints_strictly_above_percentile():
    import numpy as np

    d = np.array([0.1, 0.5, 0.2, 0.9, 0.3])
    assert percentile_breakpoints(d, 95) == [3]
    assert percentile_breakpoints(d, 50) == [1, 3]
    assert percentile_breakpoints(np.array([0.4]), 95) == []


def test_unknown_method_and_missing_embedder(cfg):
    with pytest.raises(ChunkerError, match="unknown chunker"):
        get_method("nope")
    with pytest.raises(ChunkerError, match="embedder"):
        run_chunker("semantic", [toy_book(TEXT, book_id="x2")], cfg)


# ------------------------------------------------------------------ dynamic merge
@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(1, 30), min_size=1, max_size=25), st.integers(1, 60))
def test_merge_groups_properties(lengths, target):
    def length_of(i, j):
        return sum(lengths[i:j])

    groups = merge_groups(length_of, len(lengths), target)
    assert groups[0][0] == 0 and groups[-1][1] == len(lengths)
    for (a, b), (c, _) in zip(groups, groups[1:]):
        assert b == c  # contiguous, nothing lost
    for a, b in groups:
        assert b > a  # never empty
        assert length_of(a, b) <= target or b - a == 1  # only single oversize inputs exceed
    # greedy: a group could not have absorbed the next input
    for (a, b), _ in zip(groups, groups[1:]):
        assert length_of(a, b + 1) > target


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=8), st.integers(3, 40))
def test_merge_unit_chunks_covers_and_respects_target(sizes, target):
    book = toy_book(TEXT)
    unit = book.units[1]
    n = unit.n_sentences
    starts, s = [], 1
    for k in sizes:
        if s > n:
            break
        starts.append(s)
        s += k
    ends = [x - 1 for x in starts[1:]] + [n]
    base = [make_sentence_chunk(book, unit, "x", i, a, b) for i, (a, b) in enumerate(zip(starts, ends))]
    tok = load_tokenizer("all-MiniLM-L6-v2")
    merged = merge_unit_chunks(book, unit, base, target, tok.count, "x+merge")
    covered = sorted(i for c in merged for i in range(c.from_idx, c.to_idx + 1))
    assert covered == list(range(1, n + 1))
    for c in merged:
        assert c.text.strip()
        assert book.text[c.spans[0][0]:c.spans[0][1]] == c.text
        if tok.count(c.text) > target:
            assert len(c.metadata["merged_from"]) == 1


def test_semantic_units_embedded_together_equal_one_call_per_unit(cfg, embedder):
    """The registry embeds every unit's windows in one call; the chunks equal per-unit calls."""
    from litseg_nb.chunkers.splitters import semantic_chunks_many

    book = toy_book(TEXT, book_id="sem-many")
    items = [(book, u) for u in book.units]
    many = semantic_chunks_many(items, embedder, 50, 1)
    one = [semantic_chunks_many([(b, u)], embedder, 50, 1)[0] for b, u in items]
    assert [[(c.from_idx, c.to_idx) for c in cs] for cs in many] == \
        [[(c.from_idx, c.to_idx) for c in cs] for cs in one]
    assert sum(len(cs) for cs in many) > len(items)  # some unit really was split


class _RecordingTokenizer:
    """Counts whitespace words and records every text it was asked to count."""

    name = "recording"

    def __init__(self):
        self.seen: list[str] = []

    def count(self, text):
        self.seen.append(text)
        return len(text.split())

    def count_many(self, texts):
        self.seen.extend(texts)
        return [len(t.split()) for t in texts]


def test_memo_tokenizer_counts_each_text_once_and_returns_the_inner_counts():
    from litseg_nb.chunkers.base import MemoTokenizer

    inner = _RecordingTokenizer()
    memo = MemoTokenizer(inner)
    texts = ["a b c", "Émma — “d”", "a b c", "", "x\ud800y z", "a b c d"]  # repeats, unicode, a lone surrogate
    assert memo.count_many(texts) == [len(t.split()) for t in texts]
    assert sorted(inner.seen) == sorted(set(texts))  # each distinct text counted once
    assert [memo.count(t) for t in texts] == [len(t.split()) for t in texts]
    assert memo.count("new words here") == 3
    assert sorted(inner.seen) == sorted(set(texts) | {"new words here"})


def test_length_matched_means_are_the_real_tokenizers_means(cfg, embedder, fresh_dirs):
    """Length matching counts through a memo; every reported mean equals a fresh count."""
    from litseg_nb.chunkers import length_matched_runs
    from litseg_nb.chunkers.stats import chunk_token_lengths

    book = toy_book(TEXT + "\n\n" + REPEAT, book_id="lm-memo")
    tok = load_tokenizer(cfg.tokenizer)
    native = {m: run_chunker(m, [book], cfg, embedder=embedder) for m in ("token", "paragraph")}
    target = 1.5 * float(chunk_token_lengths(native["paragraph"], tok).mean())
    results = length_matched_runs([book], native, cfg, target, tok, run_chunker, embedder=embedder)
    assert {r.method for r in results} == {"token", "paragraph"}
    for r in results:
        assert r.evaluations >= 1 and r.chunks
        assert r.mean_tokens == pytest.approx(float(chunk_token_lengths(r.chunks, tok).mean()))


def test_semantic_units_selection_runs_the_semantic_chunker_on_the_selected_units_only(embedder, fresh_dirs):
    """``semantic_units="selection"`` (smoke): the semantic chunker segments the shared unit
    selection, every one of its sentences covered; the rule-based methods still cover the whole book, and
    the boundary benchmark's config keeps the semantic chunker on its own windows (``"all"``)."""
    from litseg_nb.evaluation.boundaries import BoundaryConfig, baselines_config

    book = toy_book(TEXT, book_id="sem-sel")
    first, second = book.units[0], book.units[1]
    sel = {"strategy": "first", "books": (), "units": (f"sem-sel/{second.unit_id}",), "min_questions": 0,
           "max_units": 0, "skip_units_over_words": None}
    cfg = BaselinesConfig.for_profile("test", semantic_units="selection", selection=sel)
    chunks = run_chunker("semantic", [book], cfg, embedder=embedder)
    assert {c.unit_id for c in chunks} == {second.unit_id}
    covered = sorted(i for c in chunks for i in range(c.from_idx, c.to_idx + 1))
    assert covered == [s.index for s in second.sentences]
    _check_exact(book, chunks)
    token = run_chunker("token", [book], cfg)
    assert {c.unit_id for c in token} == {first.unit_id, second.unit_id}
    assert "semantic chunker on the unit selection" in cfg.describe()
    everything = BaselinesConfig.for_profile("test", selection=sel)
    assert {c.unit_id for c in run_chunker("semantic", [book], everything, embedder=embedder)} == \
        {first.unit_id, second.unit_id}
    assert baselines_config(BoundaryConfig.for_profile("smoke", llm_methods=()), [book]).semantic_units == "all"
    assert BaselinesConfig.for_profile("smoke").semantic_units == "selection"
    with pytest.raises(Exception, match="semantic_units"):
        BaselinesConfig.for_profile("test", semantic_units="some")
