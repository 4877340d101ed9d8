"""Narrative-unit detection against the hand-read gold: scorer and targets."""
from pathlib import Path

import pytest

from litseg_nb.preprocess.gold import (FRONT, GoldEntry, headings_match, is_held_out, load_gold, score_book,
                                       score_gold, split_scores)

GOLD = Path(__file__).parent / "structure_gold.jsonl"


def test_heading_matching_rules():
    assert headings_match("CHAPTER I.", "CHAPTER I. Down the Rabbit-Hole")
    assert not headings_match("CHAPTER I", "CHAPTER II")
    assert headings_match("BOOK ONE / Chapter 3", "BOOK ONE / Chapter 3")
    assert headings_match("I Introduction", "I / Introduction")
    assert headings_match("[CHAPTER I]", "CHAPTER I Little Ones in Trouble")
    assert not headings_match("THE DEAD", "THE SISTERS")


def test_score_book_counts_precision_recall_and_lost_words():
    text = "Title page words\n\nOnce upon a time there was a story.\n\nCHAPTER I\n\nMore."
    entry = GoldEntry("x.txt", [FRONT, "CHAPTER I"], "Once upon a time")
    start = text.index("Once")
    good = score_book(entry, text, [("x", 0), ("CHAPTER I", text.index("CHAPTER I"))])
    assert good["count_exact"] and good["f1"] == 1.0 and good["words_lost"] == 0
    # the narrative before the first heading swallowed by front matter: 8 words lost
    bad = score_book(entry, text, [("CHAPTER I", text.index("CHAPTER I"))])
    assert bad["words_lost"] == len(text[start:text.index("CHAPTER I")].split()) == 8
    assert bad["recall"] == 0.5 and bad["precision"] == 1.0 and not bad["count_exact"]


def test_gold_file_is_well_formed_and_its_held_out_quarter_is_the_seeded_one():
    gold = load_gold(GOLD)
    assert len(gold) >= 60
    dirs = {g.file.split("/")[0] for g in gold}
    assert dirs == {"gutenberg", "gutenberg_dev", "literaryqa"}
    assert all(g.units for g in gold)
    assert [g.held_out for g in gold] == [is_held_out(g.file) for g in gold]
    assert 0.2 <= sum(g.held_out for g in gold) / len(gold) <= 0.3


def test_detection_meets_issue_targets_on_gold(data_dir):
    """Targets on the tuning books: exact unit count on >= 95% of books, heading F1 >= 0.97, no
    narrative lost; the held-out quarter within 0.02 F1 of them (only its summary is shown)."""
    gold = load_gold(GOLD)
    rows, _ = score_gold(gold, data_dir)
    parts = split_scores(gold, rows)
    held = {g.file for g in gold if g.held_out}
    bad = [r for r in rows if r["file"] not in held and (not r["count_exact"] or r["f1"] < 1 or r["words_lost"])]
    detail = "\n".join(f"{r['file']}: gold {r['gold_units']} pred {r['units']} f1 {r['f1']} "
                       f"lost {r['words_lost']}" for r in bad) + f"\nheld-out quarter: {parts['held_out']}"
    tuning = parts["tuning"]
    assert tuning["count_exact_pct"] >= 95, detail
    assert tuning["f1"] >= 0.97, detail
    assert tuning["words_lost"] == 0, detail
    assert abs(parts["held_out"]["f1"] - tuning["f1"]) <= 0.02, detail
    assert parts["held_out"]["words_lost"] == 0, detail
