"""The narrative boundary model: training data disjoint from every evaluation book, deterministic
rebuilds, the chunker's exact spans and scores, hostile input."""
import gzip
import json
import random
from pathlib import Path

import pytest

from litseg_nb.chunkers import boundary_model as bm
from litseg_nb.evaluation import boundary_train as bt
from litseg_nb.chunkers.boundary_features import DENSE_NAMES, document_features
from litseg_nb.errors import LitsegError
from litseg_nb.core.paths import data_dir
from litseg_nb.core.schema import check_coverage

ROMAN = ["I", "II", "III", "IV", "V", "VI", "VII", "VIII"]


def _synthetic_book(i: int, rng: random.Random) -> str:
    """A raw Gutenberg-style book: chapters with their own vocabulary, one scene break in some."""
    out = [f"Title: Synthetic Book {i}", f"Author: Author {i % 4}", "",
           f"*** START OF THE PROJECT GUTENBERG EBOOK SYNTHETIC BOOK {i} ***", "", f"SYNTHETIC BOOK {i}", ""]
    for c in range(6):
        out += [f"CHAPTER {ROMAN[c]}.", ""]
        for scene in range(2 if c % 2 else 1):
            if scene:
                out += ["* * *", ""]
            vocab = [f"{w}{c}{scene}{i}" for w in ("river", "lamp", "horse", "letter", "garden", "storm", "bell")]
            opener = rng.choice(["The next morning", "Years later", "At dawn", "That night"])
            for p in range(5):
                words = [rng.choice(vocab) for _ in range(12)]
                start = opener if p == 0 else rng.choice(["He", "She", "They", "Then"])
                out += [f"{start} saw the {' '.join(words[:6])}. It was {' '.join(words[6:])} again.", ""]
    out += [f"*** END OF THE PROJECT GUTENBERG EBOOK SYNTHETIC BOOK {i} ***", ""]
    return "\n".join(out)


@pytest.fixture()
def tiny_root(tmp_path):
    root = tmp_path / "data"
    folder = root / bt.TRAIN_FOLDER
    folder.mkdir(parents=True)
    rng = random.Random(5)
    lines = ["ebook\tauthor\ttitle\tsha256_16\tsource_path"]
    for i in range(8):
        n = 990001 + i
        (folder / f"{n}.txt.gz").write_bytes(gzip.compress(_synthetic_book(i, rng).encode(), mtime=0))
        lines.append(f"{n}\tAuthor {i % 4}\tSynthetic Book {i}\tx\tx")
    (folder / "MANIFEST.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (root / "gutenberg").mkdir()  # one evaluation book of its own: the training books are compared with it
    (root / "gutenberg" / "990050.txt").write_text(_synthetic_book(50, random.Random(50)), encoding="utf-8")
    return root


@pytest.fixture()
def eval_root(tiny_root):
    return tiny_root


CFG = bt.TrainConfig(validation_share=0.25, max_windows_per_book=2, window_sentences=30)


def test_rebuild_is_deterministic_on_a_tiny_synthetic_corpus(tiny_root, eval_root, tmp_path):
    cards, texts = [], []
    for run in ("a", "b"):  # two cold rebuilds: separate feature caches
        w = tmp_path / f"w_{run}.json"
        cards.append(bt.train(CFG, root=tiny_root, weights_file=w, progress=False, cache_root=tmp_path / f"cache_{run}",
                              evaluation_root=eval_root))
        texts.append(w.read_bytes())
    warm = tmp_path / "w_warm.json"  # and a warm one (features from cache_a)
    bt.train(CFG, root=tiny_root, weights_file=warm, progress=False, cache_root=tmp_path / "cache_a",
             evaluation_root=eval_root, validate=False)
    assert texts[0] == texts[1] == warm.read_bytes()
    a, b = cards
    assert a["weights_sha256_16"] == b["weights_sha256_16"]
    assert a["data"]["book_list_sha256_16"] == b["data"]["book_list_sha256_16"]
    assert a["data"]["positives"]["chapter"] > 0 and a["data"]["positives"]["scene"] > 0
    assert set(a["data"]["validation_ids"]).isdisjoint(a["data"]["train_ids"]) and a["data"]["validation_ids"]
    assert a["validation"]["benchmark_rows"] and a["validation"]["auc_all"] > 0.5
    # another seed: another split or sample, other weights
    other = tmp_path / "w_other.json"
    bt.train(bt.TrainConfig(**{**CFG.__dict__, "seed": 99}), root=tiny_root, weights_file=other, progress=False,
             cache_root=tmp_path / "cache_a", evaluation_root=eval_root, validate=False)
    assert other.read_bytes() != texts[0]
    # the model it wrote loads and scores the synthetic chapter openings above the other paragraph starts
    model = bm.load_model(tmp_path / "w_a.json")
    book, units = bt.clean_and_units(tiny_root / bt.TRAIN_FOLDER / "990001.txt.gz")
    from litseg_nb.evaluation.boundary_gold import narrative_stream

    stream = narrative_stream(book.text, units)
    dense, hashed = document_features([tuple(book.text[a:b] for a, b in p.sentences) for p in stream])
    s = model.score_features(dense, hashed)
    labels = [p.mark is not None for p in stream[1:]]
    assert sum(labels) == 8 and bt.roc_auc(labels, s) > 0.9  # 5 chapter breaks, 3 scene breaks


def test_training_refuses_an_evaluation_book_by_number_and_by_text(tiny_root, tmp_path):
    root = data_dir()
    eval_raw = sorted((root / "gutenberg").glob("*.txt"))
    if not eval_raw:
        pytest.skip(f"no evaluation books in {root / 'gutenberg'}")
    folder = tiny_root / bt.TRAIN_FOLDER
    # an evaluation book under a training number: caught by its text
    (folder / "990100.txt.gz").write_bytes(gzip.compress(eval_raw[0].read_bytes(), mtime=0))
    with pytest.raises(bt.TrainingDataError, match="990100.*same text as an evaluation book"):
        bt.train(CFG, root=tiny_root, weights_file=tmp_path / "w.json", progress=False, cache_root=tmp_path / "c",
                 evaluation_root=root, validate=False)
    assert not (tmp_path / "w.json").exists()
    (folder / "990100.txt.gz").unlink()
    # a synthetic book under an evaluation book's number: caught by its number
    (folder / f"{eval_raw[0].stem}.txt.gz").write_bytes((folder / "990001.txt.gz").read_bytes())
    with pytest.raises(bt.TrainingDataError, match=f"ebook number of an evaluation book \\({eval_raw[0].stem}\\)"):
        bt.train(CFG, root=tiny_root, weights_file=tmp_path / "w.json", progress=False, cache_root=tmp_path / "c",
                 evaluation_root=root, validate=False)


def test_the_packaged_model_never_saw_an_evaluation_book():
    """Every book of the packaged card is compared by ebook number and cleaned-text hash with every
    book the benchmark and the notebooks read (gutenberg, gutenberg_dev, LiteraryQA texts and ids of
    all splits, the hand-read gold books, GutenQA's Emma); a few card hashes are recomputed from the files."""
    card = json.loads(bm.CARD_FILE.read_text(encoding="utf-8"))
    root = data_dir()
    ids, hashes, _ = bt.evaluation_fingerprints(root.resolve())
    assert len(ids) > 50 and len(hashes) > 50  # the evaluation books were found
    used = card["data"]["train_ids"] + card["data"]["validation_ids"]
    assert len(used) == card["data"]["books"] == len(card["data"]["text_sha256_16"])
    assert not set(used) & ids
    short = {h[:16] for h in hashes}
    assert not set(card["data"]["text_sha256_16"].values()) & short
    folder = root / bt.TRAIN_FOLDER
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here: the card's hashes cannot be recomputed")
    for n in sorted(used)[:: max(1, len(used) // 3)][:3]:
        book, _ = bt.clean_and_units(folder / f"{n}.txt.gz")
        assert bt.text_hash(book.text)[:16] == card["data"]["text_sha256_16"][n]
    # the weights the card describes are the packaged ones
    import hashlib

    assert hashlib.sha256(bm.WEIGHTS_FILE.read_bytes()).hexdigest()[:16] == card["weights_sha256_16"]


def test_the_packaged_weights_were_trained_on_the_labels_todays_code_finds(tmp_path):
    """The card records every training book's label counts; a sample of books (spread over the list,
    the same each run) recomputed with today's cleaning, unit and ornament rules must match, else the
    packaged weights no longer rebuild (retrain: ``python -m litseg_nb train-boundary-model``)."""
    card = json.loads(bm.CARD_FILE.read_text(encoding="utf-8"))
    per_book = card["data"]["labels_per_book"]
    assert len(per_book) == card["data"]["books"]
    train = set(card["data"]["train_ids"])
    assert sum(per_book[n][0] for n in train) >= card["data"]["positives"]["chapter"]  # sampling keeps every positive
    assert sum(per_book[n][0] for n in train) == card["data"]["positives"]["chapter"]
    assert sum(per_book[n][1] for n in train) == card["data"]["positives"]["scene"]
    folder = data_dir() / bt.TRAIN_FOLDER
    if not folder.is_dir():
        pytest.skip(f"{folder} is not here: the labels cannot be recomputed")
    ids = sorted(per_book, key=int)
    sample = ids[:: max(1, len(ids) // 8)][:8]
    labels = {n: bt.book_features(folder / f"{n}.txt.gz", tmp_path)["labels"] for n in sample}
    moved = {n: (per_book[n], [int((lab == 1).sum()), int((lab == 2).sum())]) for n, lab in labels.items()}
    moved = {n: v for n, v in moved.items() if v[0] != v[1]}
    assert not moved, (f"labels moved since the packaged weights were trained ({{book: [card], [today]}}: {moved}); "
                       "retrain with `python -m litseg_nb train-boundary-model` and re-run the rows of "
                       "docs/guide/boundary-benchmark.md")


# ------------------------------------------------------------------ the chunker
def _unit_book(tiny_root):
    book, units = bt.clean_and_units(tiny_root / bt.TRAIN_FOLDER / "990003.txt.gz")
    book.units = units
    return book, units[1]


def test_chunker_spans_are_exact_and_cover_every_sentence(tiny_root):
    book, unit = _unit_book(tiny_root)
    chunks = bm.boundary_model_chunks(book, unit, target_words=60, min_sentences=2)
    assert check_coverage(unit, chunks).ok
    for c in chunks:
        a, b = c.spans[0]
        assert book.text[a:b] == c.main_text
        assert a == unit.sentences[c.from_idx - 1].start and b == unit.sentences[c.to_idx - 1].end
    scores = bm.boundary_scores((book, unit))
    starts = {c.from_idx for c in chunks[1:]}
    assert starts <= set(scores)  # boundaries only at paragraph starts
    words = len(unit.text(book.text).split())
    assert len(starts) <= max(0, round(words / 60) - 1)
    per_pos = chunks[0].metadata["boundary_scores"]
    assert len(per_pos) == unit.n_sentences - 1
    assert {j for j in range(2, unit.n_sentences + 1) if per_pos[j - 2] is not None} == set(scores)
    # the top-scored paragraph starts (at least 2 sentences apart and from the ends) are the ones taken
    assert starts == set(bm.pick_boundaries(scores, unit.n_sentences, len(starts), 2))


def test_registered_and_run_through_the_registry(tiny_root):
    from litseg_nb.chunkers.config import ALL_METHODS, BaselinesConfig
    from litseg_nb.segmenters.registry import chunk_units, get_method

    method = get_method("boundary-model")
    assert "boundary-model" in ALL_METHODS and method.needs == "text"
    book, unit = _unit_book(tiny_root)
    cfg = BaselinesConfig.for_profile("test")
    # the weights' digest is part of the derived key (retrained weights: another key)
    assert method.options_of(cfg).boundary_model_weights == "#" + bm.weights_digest()
    chunks, _ = chunk_units("boundary-model", [(book, unit)], cfg)
    assert chunks and all(c.method == "boundary-model" for c in chunks)


def test_pick_boundaries_respects_ends_gaps_and_count():
    scores = {2: 0.9, 3: 0.8, 5: 0.7, 8: 0.6, 9: 0.95}
    assert bm.pick_boundaries(scores, 10, 3, 2) == [3, 5, 9]  # 2 is one sentence from the start
    assert bm.pick_boundaries(scores, 10, 1, 2) == [9]
    assert bm.pick_boundaries(scores, 10, 0, 2) == []
    assert bm.pick_boundaries(scores, 10, 5, 4) == [5]  # 5..7 are 4 sentences from both ends


def test_boundary_scores_of_a_plain_text():
    text = "\n\n".join(["One sentence here. Another one follows.", "The next morning it rained. She left.",
                        "A third paragraph ends it."])
    s = bm.boundary_scores(text)
    assert list(s) == [3, 5] and all(0.0 < v < 1.0 for v in s.values())
    with pytest.raises(LitsegError, match="empty"):
        bm.boundary_scores("   ")
    with pytest.raises(LitsegError, match="takes a text"):
        bm.boundary_scores(42)


def test_features_of_a_short_document():
    dense, hashed = document_features([("Only one paragraph.",)])
    assert dense.shape == (0, len(DENSE_NAMES)) and hashed == []
    dense, hashed = document_features([("A b c.",), ("D e f.",)])
    assert dense.shape == (1, len(DENSE_NAMES)) and len(hashed) == 1


# ------------------------------------------------------------------ hostile input
def test_bad_weights_are_one_line_errors(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(bm.BoundaryModelError, match="unreadable"):
        bm.load_model(bad)
    bad.write_text(json.dumps({"feature_version": -1}), encoding="utf-8")
    with pytest.raises(bm.BoundaryModelError, match="other features"):
        bm.load_model(bad)
    with pytest.raises(bm.BoundaryModelError, match="rebuild"):
        bm.load_model(tmp_path / "missing.json")


def test_cli_rejects_bad_arguments_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from litseg_nb.cli import main

    before = bm.WEIGHTS_FILE.read_bytes()
    assert main(["train-boundary-model", "--out", "../evil.json"]) == 2
    assert main(["train-boundary-model", "--out", str(tmp_path / "w.txt")]) == 2
    assert main(["train-boundary-model", "--max-books", "-1"]) == 2
    assert main(["train-boundary-model", "--out", "https://user:secret@example.org/w.json"]) == 2
    err = capsys.readouterr().err
    assert err.count("[litseg_nb] train-boundary-model:") == 4 and "Traceback" not in err and "secret" not in err
    with pytest.raises(SystemExit) as exc:
        main(["train-boundary-model", "--max-books", "many"])
    assert exc.value.code == 2
    monkeypatch.setenv("LITSEG_DATA_DIR", str(tmp_path))  # a data root without gutenberg_train
    assert main(["train-boundary-model", "--out", str(tmp_path / "w.json")]) == 2  # input errors: exit 2
    assert "no training books" in capsys.readouterr().err
    assert not (tmp_path / "w.json").exists() and bm.WEIGHTS_FILE.read_bytes() == before


def test_cli_trains_into_out(tiny_root, tmp_path, monkeypatch, capsys):
    from litseg_nb.cli import main

    monkeypatch.setenv("LITSEG_DATA_DIR", str(tiny_root))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "m.json"
    assert main(["train-boundary-model", "--out", str(out), "--no-validation"]) == 0
    assert out.is_file() and (tmp_path / "m.card.json").is_file()
    assert "boundary model:" in capsys.readouterr().out
    bm.load_model(out)


def test_card_tables_state_the_data_and_the_validation():
    statement, rows = bm.card_tables()
    items = dict(zip(statement["item"], statement["value"]))
    assert "gutenberg_train" in items["training data"] and "overlap 0" in items["evaluation books compared"]
    assert set(rows["method"]) == {"boundary-model", "boundary-model@top|G|"} and set(rows["kind"]) <= {"chapter", "scene"}
    with pytest.raises(bm.BoundaryModelError, match="unreadable"):
        bm.model_card("/nonexistent/card.json")


def test_cli_never_writes_the_package_nor_replaces_a_file_unasked(tiny_root, tmp_path, monkeypatch, capsys):
    """Without --out the weights land in the working directory; an existing file is replaced only with
    --force; the package's weights only with --packaged; an unwritable --out fails before any training."""
    from litseg_nb.cli import main

    before = (bm.WEIGHTS_FILE.read_bytes(), bm.CARD_FILE.read_bytes())
    monkeypatch.setenv("LITSEG_DATA_DIR", str(tiny_root))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    assert main(["train-boundary-model", "--no-validation"]) == 0
    assert (cwd / "boundary_model.json").is_file() and (cwd / "boundary_model.card.json").is_file()
    assert (bm.WEIGHTS_FILE.read_bytes(), bm.CARD_FILE.read_bytes()) == before
    capsys.readouterr()
    mine = cwd / "boundary_model.json"
    mine.write_text("my own file")
    assert main(["train-boundary-model", "--no-validation"]) == 2
    assert mine.read_text() == "my own file" and "--force" in capsys.readouterr().err
    assert main(["train-boundary-model", "--no-validation", "--force"]) == 0
    bm.load_model(mine)
    capsys.readouterr()

    def no_training(*a, **k):
        raise AssertionError("trained before the arguments were checked")

    monkeypatch.setattr(bt, "train", no_training)
    (tmp_path / "a-file").write_text("x")
    for argv in (["--out", str(tmp_path / "a-file" / "m.json")], ["--out", str(bm.WEIGHTS_FILE)],
                 ["--packaged", "--out", str(tmp_path / "m.json")]):
        assert main(["train-boundary-model", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "Traceback" not in err
    assert (bm.WEIGHTS_FILE.read_bytes(), bm.CARD_FILE.read_bytes()) == before


def test_truncated_feature_cache_is_recomputed_and_counted(tiny_root, eval_root, tmp_path):
    kw = dict(root=tiny_root, progress=False, cache_root=tmp_path / "c", evaluation_root=eval_root,
              validate=False)
    bt.train(CFG, weights_file=tmp_path / "a.json", **kw)
    entry = sorted((tmp_path / "c" / "boundary-model").glob("*.npz"))[0]
    entry.write_bytes(entry.read_bytes()[:100])
    card = bt.train(CFG, weights_file=tmp_path / "b.json", **kw)
    assert card["timing_s"]["features_cache_repaired"] == 1
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()


def test_validation_without_a_window_is_said_not_a_traceback(tmp_path, eval_root, capsys, monkeypatch):
    """A data folder whose held-out book has no break: the card has no validation rows, and says so."""
    from litseg_nb.cli import main

    root = tmp_path / "short_data"
    folder = root / bt.TRAIN_FOLDER
    folder.mkdir(parents=True)
    rng = random.Random(5)
    short = ("Title: X\n\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n\nA short story. It ends.\n\n"
             "The end came.\n\n*** END OF THE PROJECT GUTENBERG EBOOK X ***\n")
    lines = ["ebook\tauthor\ttitle\tsha256_16\tsource_path"]
    for i in range(4):
        text = short if i == 3 else _synthetic_book(i, rng)
        (folder / f"{990001 + i}.txt.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
        lines.append(f"{990001 + i}\tAuthor {i}\tBook {i}\tx\tx")
    (folder / "MANIFEST.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    cfg = bt.TrainConfig(seed=2)
    _, va = bt.split_books(bt.training_files(root), bt.read_authors(root), cfg.validation_share, cfg.seed)
    assert [f.name for f in va] == ["990004.txt.gz"]  # the short book is the held-out one
    card = bt.train(cfg, root=root, weights_file=tmp_path / "m.json", progress=False, cache_root=tmp_path / "c",
                    evaluation_root=eval_root)
    assert card["validation"]["benchmark_rows"] == [] and card["validation"]["benchmark_windows"]["windows"] == 0
    monkeypatch.setenv("LITSEG_DATA_DIR", str(root))
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setattr(bt, "check_disjoint", lambda *a: {})
    assert main(["train-boundary-model", "--seed", "2", "--out", str(tmp_path / "n.json")]) == 0
    assert "no validation rows" in capsys.readouterr().out
