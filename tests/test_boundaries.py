"""Gold narrative boundaries from the books (chapter and scene breaks) and their scorer."""
import random
from pathlib import Path

import numpy as np
import pytest

from fakes import chunks_at, window_books

from litseg_nb.evaluation import boundary_gold as bg
from litseg_nb.config import ConfigError
from litseg_nb.evaluation import boundaries as B
from litseg_nb.preprocess.structure import build_units
from litseg_nb.core.schema import Book, make_sentence_chunk

SHAPES = ["* * *", "*****", "—————", "§", "x x x", "X  X  X", "-------", "⁂", "* * * * * * *", "~~~", "• • •"]
NOT_SHAPES = ["XXX", "XX", "...", ". . .", "-", "]", "|", "**", "* x *", "CHAPTER I", "§ 3", "* * *\nMore text."]


def check_window_book(book: Book) -> None:
    """Raise ``AssertionError`` if a window's text keeps an ornament line or a sentence is off."""
    for u in book.units:
        for ln in u.text(book.text).split("\n"):
            if bg.is_ornament(ln):
                raise AssertionError(f"{book.book_id}/{u.unit_id}: ornament line {ln!r} left")
        for a, b in u.paragraphs:
            if bg.is_ornament(book.text[a:b]):
                raise AssertionError(f"{book.book_id}/{u.unit_id}: ornament paragraph {book.text[a:b]!r} left")
        for s in u.sentences:
            if not u.start <= s.start < s.end <= u.end or bg.is_ornament(book.text[s.start:s.end]):
                raise AssertionError(f"{book.book_id}/{u.unit_id}: sentence {s.index} off or an ornament")
        g = bg.window_gold(book, u.unit_id)
        if not all(1 < i <= u.n_sentences for i in g["gold"]) or not set(g["gold"]) <= set(g["paragraph_starts"]):
            raise AssertionError(f"{book.book_id}/{u.unit_id}: gold {g['gold']} not at paragraph starts")


@pytest.mark.parametrize("s", SHAPES)
def test_every_ornament_shape_is_a_scene_break(s):
    assert bg.is_ornament(s) and bg.is_ornament(f"      {s}   ")


@pytest.mark.parametrize("s", NOT_SHAPES)
def test_numerals_ellipses_and_text_are_not_ornaments(s):
    assert not bg.is_ornament(s)


def _sent(i, scene):
    return f"Sentence {i} of the {scene} goes on here."


def _synthetic(ornaments=SHAPES, per_scene=6, chapters=3, n_paras=2):
    """A book of `chapters` chapters; chapter 2 holds one scene break of every ornament shape."""
    paras, firsts = [], {"chapter": [], "scene": []}
    for c in range(1, chapters + 1):
        paras.append(f"CHAPTER {['I', 'II', 'III', 'IV'][c - 1]}.")
        marks = list(ornaments) if c == 2 else []
        for s in range(len(marks) + 1):
            for p in range(n_paras):
                sents = [_sent(10 * p + i, f"chapter {c} scene {s}") for i in range(per_scene // n_paras)]
                if p == 0:
                    firsts["scene" if s else "chapter"].append(sents[0]) if (s or c > 1) else None
                paras.append(" ".join(sents))
            if s < len(marks):
                paras.append(f"        {marks[s]}")
    text = "\n\n".join(paras)
    spans, pos = [], 0
    for p in paras:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    units = build_units("syn", text, spans, None)
    return Book("syn", "Synthetic", "gutenberg", text, spans), units, firsts


def _gold_texts(book, kind=None):
    out = []
    for u in book.units:
        g = book.meta["boundary_gold"][u.unit_id]
        if kind in (None, g["kind"]):
            out += [u.sentence_text(book.text, i) for i in g["gold"]]
    return out


def test_stream_removes_headings_and_every_ornament_and_marks_the_next_sentence():
    book, units, firsts = _synthetic()
    assert [u.title for u in units] == ["CHAPTER I.", "CHAPTER II.", "CHAPTER III."]
    rep = bg.StreamReport()
    stream = bg.narrative_stream(book.text, units, rep)
    assert rep.ornaments == len(SHAPES) and rep.scene_marks == len(SHAPES) and rep.chapter_marks == 2
    assert rep.heading_paragraphs == 3
    kept = " ".join(book.text[p.span[0]:p.span[1]] for p in stream)
    assert "CHAPTER" not in kept and not any(s in kept for s in ("* * *", "§", "x x x", "—————", "⁂"))
    gs = bg.build_gold([(book, units)], window_sentences=1000, min_side_sentences=2, seed=0)
    wb = gs.books[0]
    check_window_book(wb)
    assert _gold_texts(wb, "chapter") == firsts["chapter"]
    assert _gold_texts(wb, "scene") == firsts["scene"]
    row = gs.counts[0]
    assert row["chapter_gold"] == 2 and row["scene_gold"] == len(SHAPES)
    assert sum(gs.shapes.values()) == len(SHAPES)
    # the window text is exactly the kept paragraphs, and no ornament or heading is a sentence of its own
    for u in wb.units:
        text = u.text(wb.text)
        assert "CHAPTER" not in text
        assert all(not bg.is_ornament(wb.text[s.start:s.end]) for s in u.sentences)
        assert all(wb.text[s.start:s.end].startswith("Sentence") for s in u.sentences)


def test_chapter_windows_cross_no_scene_break_and_have_the_size_budget():
    book, units, _ = _synthetic(ornaments=["* * *"], per_scene=10, chapters=4)
    gs = bg.build_gold([(book, units)], window_sentences=12, min_side_sentences=3, seed=1)
    wb = gs.books[0]
    check_window_book(wb)
    kinds = [wb.meta["boundary_gold"][u.unit_id]["kind"] for u in wb.units]
    assert kinds.count("chapter") == 3 and kinds.count("scene") == 1
    for u in wb.units:
        g = wb.meta["boundary_gold"][u.unit_id]
        assert u.n_sentences <= 12 and g["gold"] and all(3 < i <= u.n_sentences - 2 for i in g["gold"])
        assert u.split == bg.WINDOW_SPLIT and u.unit_id[0] == g["kind"][0]
    # a scene window never holds a chapter break: its sentences come from one chapter
    scene = [u for u in wb.units if wb.meta["boundary_gold"][u.unit_id]["kind"] == "scene"][0]
    assert all("chapter 2" in wb.text[s.start:s.end] for s in scene.sentences)


def test_inline_ornament_line_in_verse_is_removed_without_a_mark():
    text = "CHAPTER I.\n\nSome prose here. More of it.\n\nThe verse goes on,\n* * * * *\nand then resumes.\n\nEnd here."
    spans, pos = [], 0
    for p in text.split("\n\n"):
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    units = build_units("v", text, spans, None)
    rep = bg.StreamReport()
    stream = bg.narrative_stream(text, units, rep)
    assert rep.inline_ornaments == 1 and rep.scene_marks == 0
    assert all("*" not in text[a:b] for p in stream for a, b in p.sentences)


def test_window_position_of_the_break_is_drawn_not_fixed():
    book, units, _ = _synthetic(ornaments=[], per_scene=40, chapters=4, n_paras=20)
    stream = bg.narrative_stream(book.text, units)
    lefts = set()
    for seed in range(8):
        ws, _ = bg.make_windows(stream, "chapter", 30, 3, random.Random(seed))
        lefts.add(sum(len(stream[i].sentences) for i in range(ws[0].first, ws[0].marks[0])))
    assert len(lefts) > 1


# ------------------------------------------------------------------ scorer
def test_match_count_hand_worked():
    assert B.match_count([5, 10], [5, 11], 0) == 1
    assert B.match_count([5, 10], [5, 11], 1) == 2
    # one hypothesis boundary finds one gold boundary only
    assert B.match_count([5, 6], [5], 1) == 1
    assert B.match_count([5, 6], [4, 7], 1) == 2
    assert B.prf(1, 2, 4) == (0.5, 0.25, pytest.approx(1 / 3))


def test_pk_windowdiff_hand_worked_and_equal_to_nltk():
    from nltk.metrics.segmentation import pk as npk, windowdiff as nwd

    # n=8, gold before sentence 5: gaps "0001000"; k = round(8 / 4) = 2
    assert B.gap_string(8, [5]) == "0001000" and B.pk_k(8, 1) == 2
    # hypothesis before 6: windows of 2 gaps: 00 00 01 10 00 00 vs 00 00 00 01 10 00 -> 2 of 6 differ
    assert B.pk(8, [5], [6]) == pytest.approx(2 / 6)
    assert B.windowdiff(8, [5], [6]) == pytest.approx(2 / 6)
    rng = np.random.default_rng(3)
    for _ in range(50):
        n = int(rng.integers(6, 60))
        gold = sorted(set(rng.integers(2, n + 1, size=int(rng.integers(1, 4))).tolist()))
        hyps = np.zeros((5, n - 1), dtype=int)
        k = B.pk_k(n, len(gold))
        for row in hyps:
            row[rng.choice(n - 1, size=int(rng.integers(0, n - 1)), replace=False)] = 1
        p, w = B.pk_wd_many(n, gold, hyps, k)
        ref = B.gap_string(n, gold)
        for row, pv, wv in zip(hyps, p, w):
            hyp = "".join(map(str, row))
            assert pv == pytest.approx(npk(ref, hyp, k=k)) and wv == pytest.approx(nwd(ref, hyp, k))


def test_expected_tp_exact_matches_draws():
    gold, cand = [10, 30], list(range(2, 41))
    e = B.expected_tp(gold, cand, 4, 1)
    # hand-worked: 39 candidates, 3 near each gold; P(miss) = C(36,4)/C(39,4)
    from math import comb
    assert e == pytest.approx(2 * (1 - comb(36, 4) / comb(39, 4)))
    d = B.draws_tp(gold, B.random_draws(cand, 4, 20000, np.random.default_rng(0)), 1)
    assert d.mean() == pytest.approx(e, abs=0.01)
    assert B.expected_tp([10, 11], cand, 4, 1) is None  # neighbourhoods overlap: draws only


def _windows(n_books=6, per_book=5, n=40, seed=0):
    return window_books(n_books, per_book, n, seed, gold_per_window=2)


_chunks = chunks_at


def test_respecting_paragraphs_alone_earns_no_lift_but_finding_breaks_does():
    cfg = B.BoundaryConfig.for_profile("test")
    books = _windows()
    rng = random.Random(1)
    sets = {"paragraph-random": [], "oracle-ish": [], "sentence-random": []}
    for b in books:
        for u in b.units:
            g = b.meta["boundary_gold"][u.unit_id]
            ps = [p for p in g["paragraph_starts"] if p > 1]
            sets["paragraph-random"] += _chunks(b, u, rng.sample(ps, 3), "paragraph-random")
            sets["oracle-ish"] += _chunks(b, u, g["gold"] + [rng.choice(ps)], "oracle-ish")
            sets["sentence-random"] += _chunks(b, u, rng.sample(range(2, u.n_sentences + 1), 3), "sentence-random")
    t = B.summarize(B.score_chunk_sets(sets, books, cfg), cfg).set_index("method")
    pr = t.loc["paragraph-random"]
    assert pr["random_positions"] == "paragraph"
    # against random *paragraph* positions it is chance: the interval holds 1, the p-value is large
    assert pr["lift@1_lo"] <= 1.0 <= pr["lift@1_hi"] and pr["p_value@1"] > 0.05
    # against random sentence positions it would look better than chance: why the baseline follows it
    assert pr["R@0"] > 2 * pr["R_random_sentence@0"] and pr["lift@0"] < 1.5
    assert t.loc["oracle-ish", "lift@1_lo"] > 1.5 and t.loc["oracle-ish", "p_value@1"] < 0.01
    assert t.loc["oracle-ish", "R@0"] == 1.0
    assert t.loc["sentence-random", "random_positions"] == "sentence"
    assert 0.9 * t.loc["sentence-random", "Pk_random"] < t.loc["sentence-random", "Pk"] < 1.1 * t.loc["sentence-random", "Pk_random"]


def test_the_paragraph_chunker_gets_lift_one_exactly():
    cfg = B.BoundaryConfig.for_profile("test")
    books = _windows(n_books=2, per_book=2)
    from litseg_nb.chunkers.splitters import paragraph_chunks
    sets = {"paragraph": [c for b in books for u in b.units for c in paragraph_chunks(b, u)]}
    row = B.summarize(B.score_chunk_sets(sets, books, cfg), cfg).iloc[0]
    assert row["R@0"] == 1.0 and row["lift@0"] == 1.0 and row["lift@1"] == 1.0


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="unknown key"):
        B.BoundaryConfig.for_profile("smoke", windows=3)
    with pytest.raises(ConfigError):
        B.BoundaryConfig.for_profile("smoke", random_draws=10)
    with pytest.raises(ConfigError, match="headline_tolerance"):
        B.BoundaryConfig.for_profile("smoke", headline_tolerance=5)
    with pytest.raises(ConfigError):
        B.BoundaryConfig.for_profile("smoke", llm_methods=("nope",))


def test_partial_chunk_set_is_an_error_naming_the_window():
    cfg = B.BoundaryConfig.for_profile("test")
    books = _windows(n_books=1, per_book=1)
    b, u = books[0], books[0].units[0]
    with pytest.raises(ValueError, match="windows:b0/c0000"):
        B.score_chunk_sets({"x": [make_sentence_chunk(b, u, "x", 0, 1, 5)]}, books, cfg)


# ------------------------------------------------------------------ local books
@pytest.mark.slow
def test_local_books_gold_counts_and_ornament_census(data_dir):
    """Counts on all hand-checked local books (>= 300 gold boundaries at the smoke window size) and the
    census of letterless lines in every local book: every accepted shape is one the rule names."""
    src, rows = bg.hand_checked_books(data_dir)
    assert len(src) >= 45
    cfg = B.BoundaryConfig.for_profile("smoke")
    gs = bg.build_gold(src, cfg.window_sentences, cfg.min_side_sentences, cfg.seed, cfg.max_windows_per_book,
                       True, rows)
    for b in gs.books:
        check_window_book(b)
    n_ch = sum(r.get("chapter_gold", 0) for r in gs.counts if r["used"])
    n_sc = sum(r.get("scene_gold", 0) for r in gs.counts if r["used"])
    print(f"\nhand-checked books {len(src)}: chapter gold {n_ch}, scene gold {n_sc}; shapes {gs.shapes}")
    assert n_ch + n_sc >= 300 and n_sc >= 50
    census = bg.ornament_census(bg.local_book_texts(data_dir))
    print(census.to_string())
    accepted = census[census.scene_break]
    assert {"* * * * *", "*****"} <= set(accepted["shape"])
    assert not census[census["shape"].isin(["XX", "XXX", "...", "]", "|"])]["scene_break"].any()


# ------------------------------------------------------------------ benchmark path (test profile, 2 books)
@pytest.mark.slow
def _score_chunk_file(path, cfg, name=None):
    """Score one chunk file against the gold of ``cfg``, as ``boundaries --chunks`` does; the summary table."""
    gold = B.load_gold(cfg)
    sets = {}
    for c in B._read_external(Path(path), gold.books, name or Path(path).stem):
        sets.setdefault(name or c.method, []).append(c)
    return B.summarize(B.score_chunk_sets(B.benchmark_sets(sets, gold.books, cfg), gold.books, cfg), cfg)


def test_windows_segment_through_the_registry_cached_and_an_exported_chunker_scores(data_dir, tmp_path):
    """Windows are units like any other: run_chunker segments them (cached per method and book), and a
    user's chunk texts for the exported windows score through `boundaries --chunks`."""
    import json

    from litseg_nb.core.schema import Chunk, load_chunks, save_chunks

    cfg = B.BoundaryConfig.for_profile("test", methods=("paragraph",), llm_methods=())
    gold = B.load_gold(cfg)
    assert gold.books and all(b.book_id.startswith("windows:") for b in gold.books)
    sets = B.segment_windows(gold.books, cfg)
    assert {(c.book_id, c.unit_id) for c in sets["paragraph"]} == {(b.book_id, u.unit_id) for b in gold.books
                                                                  for u in b.units}
    from litseg_nb.segmenters.book_runs import RunReport

    rep = RunReport()
    again = B.segment_windows(gold.books, cfg, report=rep)
    assert rep.rows and all(r.cached for r in rep.rows) and again["paragraph"] == sets["paragraph"]
    # a lib: splitter (or a segmenter) beside a baseline: each takes its own path
    picked = B.segment_windows(gold.books, cfg.replace(segmenters=(), library_methods=("lib:semchunk",)))
    assert set(picked) == {"paragraph", "lib:semchunk"} and picked["paragraph"] == sets["paragraph"]
    assert {(c.book_id, c.unit_id) for c in picked["lib:semchunk"]} == {(b.book_id, u.unit_id) for b in gold.books
                                                                      for u in b.units if u.n_sentences}
    # exported windows chunked "by someone else" (two halves per paragraph list) come back and score
    out = tmp_path / "windows.jsonl"
    n = B.export_windows(out, cfg)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert n == len(rows) == sum(len(b.units) for b in gold.books)
    mine = tmp_path / "mine.jsonl"
    with mine.open("w") as fh:
        for r in rows:
            paras = r["text"].split("\n\n")
            for part in (paras[: len(paras) // 2], paras[len(paras) // 2:]):
                if part:
                    fh.write(json.dumps({"book_id": r["book_id"], "text": "\n\n".join(part)}) + "\n")
    t = _score_chunk_file(mine, cfg, name="halves")
    assert set(t["method"]) == {"halves", *B.REFERENCE_ROWS}  # the file's rows beside the reference rows
    t = t[t["method"] == "halves"]
    assert t["n_windows"].sum() == n
    ours = tmp_path / "ours.jsonl"
    save_chunks(ours, sets["paragraph"])
    t2 = _score_chunk_file(ours, cfg)
    assert (t2[t2["method"] == "paragraph"]["lift@1"] == 1.0).all()
    assert isinstance(load_chunks(ours)[0], Chunk)


def test_boundaries_command_errors_in_one_line(tmp_path, capsys):
    from litseg_nb.cli import main

    assert main(["boundaries", "--profile", "test", "--chunks", str(tmp_path / "none.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "none.jsonl" in err and err.count("\n") == 1


def test_byline_and_dedication_under_a_heading_are_removed_with_it():
    text = ("CHAPTER I.\n\nBY THOMAS HARDY\n\nIt was a day like any other day in the year. Another sentence here.\n\n"
            "More text follows now, and it goes on for a good while longer.\n\n"
            "CHAPTER II.\n\nTO\n\nMRS. WILLIAM H. GRENFELL\n\nShe came home through the rain that evening. It rained on and on.\n\n"
            "The end of the story came a long while after that evening.")
    spans, pos = [], 0
    for p in text.split("\n\n"):
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    units = build_units("h", text, spans, None)
    rep = bg.StreamReport()
    stream = bg.narrative_stream(text, units, rep)
    kept = [text[p.span[0]:p.span[1]] for p in stream]
    assert rep.heading_paragraphs == 5
    assert kept[0].startswith("It was") and stream[2].mark == "chapter" and kept[2].startswith("She came")


# ------------------------------------------------------------------ gold cleaning (the leaks found in the local books)
def _units(text):
    spans, pos = [], 0
    for p in text.split("\n\n"):
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    return build_units("c", text, spans, 10**9)


LEAKS = ["I", "XIV.", "1818.", "ACT II.", "ACT III. SCENE I.", "ACT_3|SC_1", "I. _He Meets a Shy Gentleman_",
         "[Picture: The Selfish Giant]", "OVER AND UNDER.", "BY CAPTAIN R. M. HAWTHORNE.", "TO", "_TO_", "TO H.S.H.",
         "L. FRANK BAUM'S", "JOHN DOUGH AND THE CHERUB", "END OF VOL. I.", "THE LAND OF OZ\nBY L. FRANK BAUM"]
PROSE = ["MARLEY was dead: to begin with.", "YES! and the bedpost was his own.", "I am by birth a Genevese.",
         "London.", "“Yes.”", "September 16th.", "Then the boy asked:", "I. said he, was there.",
         "He was black, but comely.\nAnd tall."]


@pytest.mark.parametrize("s", LEAKS)
def test_leftover_heading_text_is_recognised(s):
    assert bg.leftover_heading(s)


@pytest.mark.parametrize("s", PROSE)
def test_prose_is_not_heading_text(s):
    assert not bg.leftover_heading(s)


def _prose(tag, n=3):
    return " ".join(f"The {tag} story goes on in sentence {i} of it." for i in range(n))


def _manual_units(groups):
    """Units of whole paragraph groups ``[(title, [paragraph, ...]), ...]``; one sentence per line end
    or sentence end (the detector is not under test here)."""
    import re

    from litseg_nb.core.schema import Sentence, Unit

    paras = [p for _, g in groups for p in g]
    text = "\n\n".join(paras)
    units, pos = [], 0
    for k, (title, g) in enumerate(groups):
        start, sents, spans = pos, [], []
        for p in g:
            spans.append((pos, pos + len(p)))
            for m in re.finditer(r"[^.!?\n]+[.!?]*", p):
                if m.group().strip():
                    a = pos + m.start() + (len(m.group()) - len(m.group().lstrip()))
                    sents.append(Sentence(len(sents) + 1, a, pos + m.end()))
            pos += len(p) + 2
        units.append(Unit("c", f"u{k}", k, title, start, pos - 2, tuple(sents), tuple(spans)))
    return text, units


def test_cleaning_removes_section_numerals_bylines_and_a_volume_title_page():
    text, units = _manual_units([
        ("THE BOLTED DOOR", ["THE BOLTED DOOR", "I", _prose("first"), _prose("first more"),
                             "* * *", "OVER AND UNDER.", "BY CAPTAIN R. M. HAWTHORNE.", _prose("second"),
                             _prose("second more"), "END OF VOL. I.", "FRANKENSTEIN;", "OR,", "THE MODERN PROMETHEUS."]),
        # a volume title page and its epigraph, then an unmarked copy of the heading
        ("VOL. II. / CHAPTER I.", ["VOL. II.", "IN THREE VOLUMES.\nVOL. II.", "London:", "1818.", "* * * * *",
                                   "Did I request thee, Maker, from my clay\nTo mould me man?", "Paradise Lost.",
                                   "CHAPTER I.", _prose("third"), _prose("third more")]),
        ("ACT III", ["ACT III", "ACT_3|SC_1", _prose("fourth"), _prose("fourth more"),
                     "* * * * * *", "L. FRANK BAUM'S\nNew Oz Book\nIS\nVERY OZZY", "A new story for you to read now.",
                     "OZMA OF OZ", "Price, - - $1.25", "THE LAND OF OZ\nBY L. FRANK BAUM",
                     "A SEQUEL TO THE WIZARD OF OZ"]),
    ])
    before = bg.narrative_stream(text, units, clean=False)
    rep = bg.StreamReport()
    after = bg.narrative_stream(text, units, rep)
    kept = [text[p.span[0]:p.span[1]] for p in after]
    assert all(k.startswith("The ") for k in kept), kept
    assert [p.mark for p in after] == [None, None, "scene", None, "chapter", None, "chapter", None]
    assert rep.front_matter_paragraphs_removed == 7  # title page (3), ornament, epigraph, "Paradise Lost.", "CHAPTER I."
    assert rep.back_matter_paragraphs_removed == 7  # the advertisement: its ornament and 6 paragraphs
    assert rep.leftover_headings_removed + rep.heading_paragraphs == (2 + 2 + 4) + 1 + 2  # unit 1, 2, 3
    # without cleaning the leaks stay, and some are gold (the first sentence after a break is heading text)
    kept_before = [text[p.span[0]:p.span[1]] for p in before]
    assert {"I", "OVER AND UNDER.", "CHAPTER I.", "OZMA OF OZ"} <= set(kept_before)
    src = Book("c", "C", "gutenberg", text, [], units=units)
    gs = bg.build_gold([(src, units)], 1000, 2, 0)
    for b in gs.books:
        check_window_book(b)
    assert gs.books and bg.heading_like_gold(gs.books) == []
    dirty = bg.build_gold([(src, units)], 1000, 2, 0, clean=False)
    leaks = {r["text"] for r in bg.heading_like_gold(dirty.books)}
    assert "OVER AND UNDER." in leaks and any(t.startswith("IN THREE VOLUMES") for t in leaks), leaks


def test_book_forms_and_left_out_forms():
    assert bg.book_form("play, old licence") == "play"
    assert bg.book_form("stories with numbered sections") == "collection"
    assert bg.book_form("tales, mixed-case headings") == "collection"
    assert bg.book_form("anthology") == "collection"
    assert bg.book_form("single tale") == "narrative" and bg.book_form("nested novel") == "narrative"
    assert bg.book_form("letters + nested novel") == "narrative"
    assert bg.book_form("poetry (cantos), old licence") == "poetry"
    assert bg.book_form("non-fiction lectures") == "non-fiction" and bg.book_form("essays") == "non-fiction"
    book, units, _ = _synthetic(ornaments=["* * *"])
    play = Book("play", "P", "gutenberg", book.text, book.paragraphs, meta={"form": "play"})
    gs = bg.build_gold([(book, units), (play, units)], 1000, 2, 0, forms=("narrative",))
    assert [b.meta["source_book"] for b in gs.books] == ["syn"]
    row = [r for r in gs.counts if r["book_id"] == "play"][0]
    assert not row["used"] and "play" in row["why"]
    with pytest.raises(ConfigError):
        B.BoundaryConfig.for_profile("smoke", forms=("novel",))


# ------------------------------------------------------------------ --chunks names, rows and --name
def _export(cfg, tmp_path):
    import json

    out = tmp_path / "windows.jsonl"
    B.export_windows(out, cfg)
    return [json.loads(line) for line in out.read_text().splitlines()]


def _write_rows(path, rows):
    import json

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_chunk_files_with_one_name_or_a_methods_name_are_refused(data_dir, tmp_path, capsys):
    """A set takes its file's name: two files of one name are not merged into one row, and a file named after
    a method run beside it is not replaced by the method's row."""
    from litseg_nb.cli import main

    cfg = B.BoundaryConfig.for_profile("test")
    whole = [{"book_id": r["book_id"], "text": r["text"]} for r in _export(cfg, tmp_path)]
    a = _write_rows(tmp_path / "a" / "x.jsonl", whole)
    b = _write_rows(tmp_path / "b" / "x.jsonl", whole)
    assert main(["boundaries", "--profile", "test", "--chunks", str(a), "--chunks", str(b)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "both name the set 'x'" in err and str(a) in err and str(b) in err
    tok = _write_rows(tmp_path / "token.jsonl", whole)
    assert main(["boundaries", "--profile", "test", "--method", "token", "--chunks", str(tok)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "'token'" in err and "rename the file" in err
    with pytest.raises(ValueError, match="computes itself"):
        B.chunk_set_names([str(tmp_path / "one-cut.jsonl")], ())
    assert B.chunk_set_names([str(a), str(tok)], ()) == {"x": a, "token": tok}


@pytest.mark.parametrize("first_line, field", [("5", "Input should be an object"),
                                               ('{"book_id": ["w"], "text": "t"}', "book_id"),
                                               ('{"book_id": "w", "text": null}', "text"),
                                               ('{"book_id": "w", "text": 3}', "text"),
                                               ('{"book_id": "w", "from_idx": "1"}', "unit_id")])
def test_chunk_file_rows_are_checked_in_one_line(data_dir, tmp_path, capsys, first_line, field):
    from litseg_nb.cli import main

    f = tmp_path / "mine.jsonl"
    f.write_text(first_line + "\n")
    assert main(["boundaries", "--profile", "test", "--chunks", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and f"{f}: line 1" in err and field in err


def test_name_and_export_never_replace_what_exists(data_dir, fresh_dirs, capsys):
    from litseg_nb.cli import main
    from litseg_nb.core.paths import outputs_dir

    tables = outputs_dir("test") / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    (tables / "my_table.csv").write_text("a\n1\n")
    for name in ("06_boundary_ornament_census", "retrieval_benchmark_tier_a", "my_table"):
        assert main(["boundaries", "--profile", "test", "--name", name]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and name in err
    assert (tables / "my_table.csv").read_text() == "a\n1\n" and [p.name for p in tables.iterdir()] == ["my_table.csv"]
    folder = fresh_dirs / "a-folder"
    folder.mkdir()
    assert main(["boundaries", "--profile", "test", "--export-windows", str(folder)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "exists" in err
    # the benchmark's own table under a --name is replaced by a rerun
    cfg = B.BoundaryConfig.for_profile("test")
    whole = _write_rows(fresh_dirs / "whole.jsonl",
                        [{"book_id": r["book_id"], "text": r["text"]} for r in _export(cfg, fresh_dirs)])
    for _ in range(2):
        assert main(["boundaries", "--profile", "test", "--chunks", str(whole), "--name", "mine"]) == 0
    assert (tables / "mine.label.txt").read_text().startswith(B.LABEL_PREFIX)


def test_the_segmenters_start_their_own_engines_after_the_llm_methods_engine_is_released(data_dir, fresh_dirs,
                                                                                          monkeypatch):
    """vLLM holds one engine per GPU: the boundary benchmark runs the LLM methods on the caller's backend, then
    releases it, and the segmenter (LitSeg, on the teacher) starts and releases its own."""
    from types import SimpleNamespace

    events, alive = [], []

    def make_backend(llm_cfg):
        assert not alive, f"a second engine ({llm_cfg.model}) while {alive} is alive"
        alive.append(llm_cfg.model)
        events.append(f"start {llm_cfg.model}")
        return SimpleNamespace(model=llm_cfg.model)

    def release_backend(backend):
        if backend is not None and backend.model in alive:
            alive.remove(backend.model)
            events.append(f"release {backend.model}")

    def chunk_units(name, items, rcfg, backend, embedder):
        assert backend.model in alive
        events.append(f"{name} on {backend.model}")
        return [], None

    monkeypatch.setattr(B, "make_backend", make_backend)
    monkeypatch.setattr(B, "release_backend", release_backend)
    monkeypatch.setattr(B, "chunk_units", chunk_units)
    monkeypatch.setattr(B, "run_chunker", lambda m, books, cfg, backend=None, **kw: events.append(f"{m} on {backend.model}") or [])
    from litseg_nb.config import config_sets

    with config_sets([("LitSegConfig.llm.model", "teacher")]):
        cfg = B.BoundaryConfig.for_profile("test", methods=(), llm_methods=("perplexity",), segmenters=("litseg",),
                                           segmenter_max_windows=1)
        passed = make_backend(SimpleNamespace(model="student"))
        B.segment_windows(B.load_gold(cfg).books, cfg, backend=passed)
    assert events == ["start student", "perplexity on student", "release student", "start teacher",
                      "litseg on teacher", "release teacher"]
