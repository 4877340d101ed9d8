"""TextTiling and C99 as registered chunkers (exact spans, every sentence covered, the score hook),
and the boundary benchmark's statistics on cases whose answer is known (B, permutation p, bootstrap CI)."""
import random

import numpy as np
import pytest

from fakes import chunks_at, window_books

from litseg_nb.chunkers import scores
from litseg_nb.chunkers import topic as classic
from litseg_nb.chunkers.config import BaselinesConfig
from litseg_nb.segmenters.registry import chunk_units, get_method
from litseg_nb.evaluation import boundaries as B
from litseg_nb.preprocess.structure import build_units
from litseg_nb.core.schema import Book, check_coverage, make_sentence_chunk

TOPIC_A = ["The ship sailed across the stormy sea while the sailors hauled the ropes and watched the waves.",
           "The captain steered the ship through the waves and the wind tore at the sails and the mast.",
           "Sailors climbed the mast, furled the sails and cursed the sea, the storm and the cold wind."]
TOPIC_B = ["In the quiet garden the old gardener planted roses, tulips and lilies along the stone path.",
           "The gardener watered the roses each morning and pulled weeds from between the tulips and lilies.",
           "Bees hummed over the lilies while the gardener pruned the roses beside the garden wall."]


def _book(paragraphs, book_id="tt"):
    text = "\n\n".join(paragraphs)
    spans, pos = [], 0
    for p in paragraphs:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    units = build_units(book_id, text, spans, 10**9)
    return Book(book_id, "Topics", "gutenberg", text, spans, units=units)


def _topic_book(n_paras=8):
    rng = random.Random(0)
    paras = [" ".join(rng.sample(TOPIC_A, 3)) for _ in range(n_paras)] + \
            [" ".join(rng.sample(TOPIC_B, 3)) for _ in range(n_paras)]
    return _book(paras), n_paras


def _check_exact(book, unit, chunks):
    assert check_coverage(unit, chunks).ok
    for c in chunks:
        for a, b in c.spans:
            assert unit.start <= a < b <= unit.end
        assert c.text == "".join(book.text[a:b] for a, b in c.spans)


def test_texttiling_finds_the_topic_change_at_a_paragraph_start_and_tiles_the_unit():
    book, k = _topic_book()
    unit = book.units[0]
    chunks = classic.texttiling_chunks(book, unit, w=20, k=10)
    _check_exact(book, unit, chunks)
    # the chunks tile the unit: consecutive, nothing between them but whitespace
    for c1, c2 in zip(chunks, chunks[1:]):
        assert book.text[c1.spans[-1][1]:c2.spans[0][0]].strip() == ""
    para_first = {unit.paragraphs[i][0] for i in range(len(unit.paragraphs))}
    assert all(c.spans[0][0] in para_first for c in chunks[1:])
    topic_start = [s.index for s in unit.sentences if s.start == unit.paragraphs[k][0]][0]
    assert topic_start in [c.from_idx for c in chunks]
    sc = scores.unit_scores(chunks, unit.n_sentences, "texttiling")
    assert len(sc) == unit.n_sentences - 1
    assert scores.top_k(sc, 1) == [topic_start]  # the deepest gap is the topic change


def test_texttiling_boundaries_equal_nltk_own_segmentation():
    """Our mapping of NLTK's gaps to paragraphs reproduces NLTK's tokenize() on the same text."""
    from nltk.tokenize.texttiling import TextTilingTokenizer

    rng = random.Random(3)
    words = "alpha beta gamma delta river stone cloud fire night road house light dark tree".split()
    paras = []
    for i in range(30):
        topic = words[(i // 6) * 3 % len(words):][:6] or words[:6]
        paras.append(" ".join(rng.choice(topic + words[:2]) for _ in range(rng.randint(25, 60))) + ".")
    book = _book(paras)
    unit = book.units[0]
    res = classic.texttiling_analysis(book, unit)
    text, _, starts = classic.joined_text(book, unit)
    segs = TextTilingTokenizer(stopwords=list(classic.english_stopwords())).tokenize(text)
    cuts, pos = [], 0
    for s in segs[:-1]:
        pos += len(s)
        cuts.append(pos)
    # NLTK cuts at the break's first whitespace character, i.e. 2 before the next paragraph's start
    assert [starts[i] - 2 for i in res["boundaries"]] == cuts
    chunks = classic.texttiling_chunks(book, unit)
    _check_exact(book, unit, chunks)
    assert len(chunks) == len(segs)


@pytest.mark.parametrize("n_paras, k", [(30, 10), (12, 10), (6, 10), (30, 3), (9, 1)])
def test_block_comparison_equals_nltk_own_bit_for_bit(n_paras, k):
    """Our prefix-sum block comparison returns exactly NLTK's ``_block_comparison`` scores (== on floats),
    the middle gaps and the shortened windows at both ends (texts shorter than 2k pseudo-sentences too)."""
    from nltk.tokenize.texttiling import TextTilingTokenizer

    rng = random.Random(n_paras * 7 + k)
    words = "alpha beta gamma delta river stone cloud fire night road house light dark tree the a of".split()
    text = "\n\n".join(" ".join(rng.choice(words) for _ in range(rng.randint(20, 70))) + "." for _ in range(n_paras))
    tt = TextTilingTokenizer(k=k, stopwords=list(classic.english_stopwords()))
    nopunct = text.lower()  # only letters, spaces and newlines here, plus the full stops NLTK would drop
    nopunct = nopunct.replace(".", "")
    tokseqs = tt._divide_to_tokensequences(nopunct)
    for ts in tokseqs:
        ts.wrdindex_list = [wi for wi in ts.wrdindex_list if wi[0] not in tt.stopwords]
    table = tt._create_token_table(tokseqs, tt._mark_paragraph_breaks(nopunct))
    theirs = tt._block_comparison(tokseqs, table)
    ours = classic.block_comparison(tokseqs, table, k)
    assert len(theirs) == len(tokseqs) - 1 > 0 and ours == theirs
    assert classic.block_comparison(tokseqs[:1], table, k) == []


def test_block_comparison_worked_example():
    from types import SimpleNamespace as NS

    table = {"a": NS(ts_occurences=[[0, 2], [1, 1]]), "b": NS(ts_occurences=[[0, 1]]), "c": NS(ts_occurences=[[1, 1]])}
    assert classic.block_comparison([0, 1], table, 1) == [pytest.approx(2 / np.sqrt(10))]
    assert classic.block_comparison([0, 1], {"a": NS(ts_occurences=[[0, 1]])}, 1) == [0.0]  # an empty block


def test_texttiling_short_unit_is_one_chunk_and_counted():
    book = _book(["CHAPTER I.", "Just one short paragraph here. And a second sentence."])
    stats = {}
    chunks = classic.texttiling_chunks(book, book.units[0], stats=stats)
    assert len(chunks) == 1 and stats == {"too_short": 1} and check_coverage(book.units[0], chunks).ok


def test_c99_rank_transform_hand_worked():
    # the docstring's example: centre 0.5 is higher than 4 of its 8 neighbours
    sim = np.array([[0.1, 0.2, 0.9], [0.3, 0.5, 0.6], [0.4, 0.5, 0.8]])
    r = classic.rank_matrix(sim, mask=3)
    assert r[1, 1] == pytest.approx(4 / 8)
    # corner (0,0) = 0.1 has 3 neighbours (0.2, 0.3, 0.5), none lower
    assert r[0, 0] == 0.0
    # corner (0,2) = 0.9 has neighbours 0.2, 0.5, 0.6: all lower
    assert r[0, 2] == 1.0


def test_c99_clustering_recovers_planted_blocks():
    n = 12
    sim = np.full((n, n), 0.05)
    for a, b in ((0, 4), (4, 9), (9, 12)):
        sim[a:b, a:b] = 0.9
    order, density = classic.divisive_clustering(classic.rank_matrix(sim, 5))
    assert sorted(order[:2]) == [4, 9] and len(order) == n - 1 and len(density) == n
    assert density[2] > density[1] > density[0]


def test_c99_chunks_split_the_two_topics_and_cover_every_sentence():
    book, k = _topic_book(n_paras=4)
    unit = book.units[0]
    stats = {}
    chunks = classic.c99_chunks(book, unit, stats=stats)
    _check_exact(book, unit, chunks)
    change = 3 * k + 1  # three sentences per paragraph
    assert change in [c.from_idx for c in chunks] and not stats
    sc = scores.unit_scores(chunks, unit.n_sentences, "c99")
    assert scores.top_k(sc, 1) == [change]  # the first division is the topic change
    tiny = _book(["Two sentences. Only two."])
    st2 = {}
    assert len(classic.c99_chunks(tiny, tiny.units[0], stats=st2)) == 1 and st2 == {"too_short": 1}


def test_both_are_registered_rules_only_methods_with_their_knobs():
    book, _ = _topic_book(n_paras=4)
    cfg = BaselinesConfig.for_profile("test")
    for name in ("texttiling", "c99"):
        spec = get_method(name)
        assert spec.needs == "text" and spec.baseline
        chunks, extra = chunk_units(name, [(book, u) for u in book.units], cfg)
        assert chunks and all(c.method == name for c in chunks)
    # the options (and so the derived cache key) are the papers' knobs
    assert set(get_method("texttiling").options_of(cfg).to_dict()) == {"texttiling_w", "texttiling_k"}
    assert set(get_method("c99").options_of(cfg).to_dict()) == {"c99_mask", "c99_c"}
    from litseg_nb.config import ConfigError

    with pytest.raises(ConfigError):
        BaselinesConfig.for_profile("test", c99_mask=10)


def test_score_hook_top_k_and_perplexity_scores():
    assert scores.top_k([0.1, 0.9, None, 0.5], 2) == [3, 5]
    assert scores.top_k([None, None, 0.2], 2) == [2, 4]  # unscored only when the scored run out
    # perplexity: minima by their larger drop, then the rest
    book = _book(["A one. B two. C three. D four. E five. F six."])
    u = book.units[0]
    ppl = [3.0, 1.0, 2.5, 2.0, 0.5, 4.0]
    chunks = [make_sentence_chunk(book, u, "perplexity", 0, 1, 6, {"ppl": ppl})]
    sc = scores.unit_scores(chunks, 6, "perplexity")
    # minima at sentences 2 (drops 2.0, 1.5) and 5 (1.5, 3.5): boundaries before 3 and 6
    assert sc[3 - 2] == 2.0 and sc[6 - 2] == 3.5 and scores.top_k(sc, 2) == [3, 6]
    with pytest.raises(ValueError):
        scores.attach_scores(chunks, [1.0], 6)


# ------------------------------------------------------------------ B (segeval) by hand
@pytest.mark.parametrize("gold,hyp,expected", [
    ([5], [5], 1.0),  # a match
    ([5], [], 0.0),  # one addition (a miss): 1 - 1/1
    ([5], [6], 0.5),  # near miss, transposition of span 1 weighted 1/n_t: 1 - 0.5/1
    ([5, 10], [5, 20], 1 / 3),  # one match, two additions: 1 - 2/3
    ([5], [7], 0.0),  # two positions away (>= n_t): a miss and an extra, 1 - 2/2
    ([5, 12], [6, 12, 15], 1 - 1.5 / 3),  # a match, a near miss (0.5), an extra: 1 - (1 + 0.5)/3
    ([], [], 1.0),  # nothing to find, nothing found
])
def test_boundary_similarity_hand_computed(gold, hyp, expected):
    num, den = B.boundary_similarity_parts(20, gold, hyp)
    assert (num / den if den else 1.0) == pytest.approx(expected)


def test_masses():
    assert B.masses(10, [4, 8]) == (3, 4, 3) and B.masses(5, []) == (5,)


# ------------------------------------------------------------------ lift, CI and p where the answer is known
def _windows(n_books, per_book, n=40, seed=0):
    return window_books(n_books, per_book, n, seed, gold_per_window=1)


_chunks = chunks_at


def test_planted_signal_is_significant_with_ci_above_one_and_random_is_not():
    cfg = B.BoundaryConfig.for_profile("test")
    books = _windows(8, 6)
    rng = random.Random(5)
    planted, rand = [], []
    for b in books:
        for u in b.units:
            g = b.meta["boundary_gold"][u.unit_id]
            ps = [p for p in g["paragraph_starts"] if p > 1]
            # planted: the gold boundary in half the windows, else a random paragraph start; two cuts per window
            hit = g["gold"] if rng.random() < 0.5 else [rng.choice(ps)]
            planted += _chunks(b, u, hit + [rng.choice(ps)], "planted")
            rand += _chunks(b, u, rng.sample(ps, 2), "random")
    t = B.summarize(B.score_chunk_sets({"planted": planted}, books, cfg), cfg).set_index("method")
    assert t.loc["planted", "p_vs_paragraph@1"] < 0.05 and t.loc["planted", "lift_vs_paragraph@1_lo"] > 1.0
    # a random method over 20 seeds: p > 0.05 most of the time (its p is about uniform under the null)
    ps = []
    for seed in range(20):
        r = random.Random(100 + seed)
        sets = []
        for b in books:
            for u in b.units:
                cand = [p for p in b.meta["boundary_gold"][u.unit_id]["paragraph_starts"] if p > 1]
                sets += _chunks(b, u, r.sample(cand, 2), "random")
        row = B.summarize(B.score_chunk_sets({"random": sets}, books, cfg), cfg).iloc[0]
        ps.append(row["p_vs_paragraph@1"])
        if seed < 5:
            assert row["lift_vs_paragraph@1_lo"] < row["lift_vs_paragraph@1"] < row["lift_vs_paragraph@1_hi"]
    assert sum(p > 0.05 for p in ps) >= 16, ps


def test_reference_rows_top_g_rows_and_macro_columns():
    cfg = B.BoundaryConfig.for_profile("test")
    books = _windows(3, 4)
    sets = {"scored": []}
    for b in books:
        for u in b.units:
            g = b.meta["boundary_gold"][u.unit_id]
            cs = _chunks(b, u, [5, 9, 13], "scored")
            # scores that rank the gold position first
            sc = [1.0 if j in g["gold"] else 0.0 for j in range(2, u.n_sentences + 1)]
            scores.attach_scores(cs, sc, u.n_sentences)
            sets["scored"] += cs
    all_sets = B.benchmark_sets(sets, books, cfg)
    assert set(all_sets) == {"scored", "scored@top-G", "no-boundary", "one-cut"}
    t = B.summarize(B.score_chunk_sets(all_sets, books, cfg), cfg).set_index("method")
    assert t.loc["scored@top-G", "n_boundaries"] == t.loc["scored@top-G", "n_gold"]
    assert t.loc["scored@top-G", "F1@0"] == 1.0 and t.loc["scored@top-G", "B"] == 1.0
    assert t.loc["no-boundary", "n_boundaries"] == 0 and t.loc["no-boundary", "B"] == 0.0
    assert np.isnan(t.loc["no-boundary", "p_vs_paragraph@1"])
    assert t.loc["one-cut", "n_boundaries"] == t.loc["one-cut", "n_windows"]
    for col in ("F1@1_macro", "B_macro", "lift_vs_paragraph@1_macro", "Pk_random", "WindowDiff_random"):
        assert col in t.columns
    head = B.headline_table(t.reset_index(), cfg)
    assert "lift vs paragraphs@1 [95% CI]" in head.columns and head["method"].tolist()[-1] == "one-cut"
