"""Lite is never evaluated on a unit it was trained on (in any profile), the
teacher and the student are distinct settings (a larger teacher in full), and the student's prompt
carries the same calibrated length reference its teacher's annotations were made with."""
from __future__ import annotations

import json

import pytest

from litseg_nb.lite.config import LiteConfig
from litseg_nb.lite.data import annotation_length_reference, build_examples, lite_conversation
from litseg_nb.lite.data import (TRAINED_UNITS_FILE, TrainedUnitError, profile_record, refuse_trained_chunks,
                                    save_profile_record, trained_units_of)
from litseg_nb.lite.segmenter import LiteSegmenter, check_and_save_chunks
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.litseg.pipeline import annotate_units, records_to_chunks
from litseg_nb.litseg.prompting import system_prompt
from fakes import ScriptedBackend
from litseg_nb.core.schema import Book

from test_litseg_pipeline import good, items, make_book


def lite_reply(conv) -> str:
    import re

    n = int(re.search(r"\[(\d+)\][^\n]*$", conv[-1]["content"].rstrip()).group(1))
    return json.dumps({"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                       "step3": {"chapter_title": "c", "step_3_turning_points": [],
                                 "segments": [{"subtitle": "s", "from_idx": 1, "to_idx": n, "context_idx": []}]}})


def _annotated(book, ref=37):
    cfg = LitSegConfig.for_profile("test", max_retries=0)
    run = annotate_units(items(book), ScriptedBackend(reply_fn=good), cfg, length_reference=ref, progress=False)
    return run.records


def _clone(book: Book, new_id: str) -> Book:
    """The same text under another book id (another edition or a duplicated record)."""
    units = [type(u)(new_id, u.unit_id, u.ordinal, u.title, u.start, u.end, u.sentences) for u in book.units]
    return Book(new_id, book.title + " (copy)", book.dataset, book.text, units=units)


# ------------------------------------------------------------------ 1. never evaluated on trained units
def test_trained_student_refuses_its_training_units(tmp_path):
    train_book, eval_book = make_book("train", units=2), make_book("eval", units=2)
    examples, _ = build_examples(_annotated(train_book), [train_book])
    trained = trained_units_of(examples)
    assert len(trained) == 2
    # a merged Lite model folder carries its training units: the segmenter reads them itself
    folder = tmp_path / "merged-abc"
    folder.mkdir()
    trained.save(folder / TRAINED_UNITS_FILE)
    be = ScriptedBackend(reply_fn=lite_reply, model_id=str(folder))
    seg = LiteSegmenter(be, retries=0)
    chunks, results = seg.segment_units(items(eval_book))  # held-out units: fine
    assert len(results) == 2 and be.calls
    for pairs in (items(train_book), items(eval_book) + items(train_book)[:1],
                  items(_clone(train_book, "copy"))):  # the same text under another id is caught too
        n_calls = len(be.calls)
        with pytest.raises(TrainedUnitError, match="training data"):
            seg.segment_units(pairs)
        assert len(be.calls) == n_calls  # refused before any model call
    # given explicitly (e.g. a remote OpenAI-compatible server whose model is not a local folder)
    with pytest.raises(TrainedUnitError):
        LiteSegmenter(ScriptedBackend(reply_fn=lite_reply), trained=trained).segment_units(items(train_book))


def test_lite_chunk_sets_with_trained_units_are_refused(fresh_dirs):
    train_book, eval_book = make_book("train", units=2), make_book("eval", units=1)
    examples, _ = build_examples(_annotated(train_book), [train_book])
    save_profile_record("test", trained_units_of(examples))
    assert profile_record("test").keys == {("train", "u0000"), ("train", "u0001")}
    good_chunks, _ = LiteSegmenter(ScriptedBackend(reply_fn=lite_reply)).segment_units(items(eval_book))
    check_and_save_chunks("test", [eval_book], good_chunks)  # held out: written
    bad_chunks, _ = LiteSegmenter(ScriptedBackend(reply_fn=lite_reply)).segment_units(items(train_book))
    with pytest.raises(TrainedUnitError, match="trained on"):
        check_and_save_chunks("test", [eval_book, train_book], good_chunks + bad_chunks)
    with pytest.raises(TrainedUnitError):  # the evaluation-side guard (05/06/07 load chunk sets through it)
        refuse_trained_chunks("litseg-lite", bad_chunks, "test")
    copy = _clone(train_book, "copy")
    copy_chunks, _ = LiteSegmenter(ScriptedBackend(reply_fn=lite_reply)).segment_units(items(copy))
    with pytest.raises(TrainedUnitError):  # same unit text under another id
        refuse_trained_chunks("litseg-lite", copy_chunks, "test", [copy])
    refuse_trained_chunks("litseg", bad_chunks, "test")  # LitSeg (the teacher) is not a trained model


def test_training_and_evaluation_units_are_other_books_in_every_profile():
    for profile in ("test", "smoke", "full"):
        lit = LitSegConfig.for_profile(profile)
        assert set(lit.train_corpus.books).isdisjoint(lit.corpus.books)
        if profile == "full":
            # the paper: trained on LitSeg annotations of the LiteraryQA TRAINING set, evaluated on test
            assert lit.train_corpus.datasets == ("literaryqa",) and lit.train_corpus.literaryqa_split == "train"
            assert lit.corpus.literaryqa_split == "test"
        else:  # only validation texts exist locally: a book-level split, and the label says so
            assert lit.train_corpus.datasets == ("gutenberg",) and "gutenqa" not in lit.train_corpus.datasets
            assert set(lit.corpus.datasets) == {"gutenqa"}
            assert "books=46" in LiteConfig.for_profile(profile).describe()


# ------------------------------------------------------------------ 2. teacher and student
def test_teacher_and_student_are_distinct_in_full_and_named_in_labels():
    lit, lite = LitSegConfig.for_profile("full"), LiteConfig.for_profile("full")
    assert lit.llm.model != lite.llm.model
    assert "32B" in lit.llm.model and "8B" in lite.llm.model  # the larger model teaches
    for label in (lit.describe(), lite.describe()):
        assert lit.llm.model in label and lite.llm.model in label
        assert "teacher" in label and "student" in label
    # overriding the student does not change the teacher, and vice versa
    assert LiteConfig.for_profile("full", llm={"model": "x"}).teacher().llm.model == lit.llm.model
    assert LitSegConfig.for_profile("full", llm={"model": "y"}).student_model() == lite.llm.model


# ------------------------------------------------------------------ 3. one length reference
def test_student_prompt_carries_the_teachers_length_reference():
    book = make_book("b", units=2)
    records = _annotated(book, ref=37)
    assert annotation_length_reference(records) == 37
    teacher_system = system_prompt(37)
    assert "is 37 sentences" in teacher_system
    examples, _ = build_examples(records, [book])
    assert examples and all(e.length_reference == 37 for e in examples)
    for e in examples:
        assert "is 37 sentences" in e.system and "is 100 sentences" not in e.system
    # inference sends exactly the training prompt
    be = ScriptedBackend(reply_fn=lite_reply)
    LiteSegmenter(be, length_reference=annotation_length_reference(records)).segment_units(items(book))
    assert [c[0]["content"] for c in be.calls] == [e.system for e in examples]
    assert lite_conversation(book, book.units[0], length_reference=37)[0]["content"] == examples[0].system
    # records from two calibrations cannot train one student
    with pytest.raises(ValueError, match="different length references"):
        annotation_length_reference(records + _annotated(make_book("c", units=1), ref=12))
    # a calibration record (no length constraint) is not training data
    with pytest.raises(ValueError, match="without a length reference"):
        build_examples([{**records[0], "length_reference": None}], [book])
    assert records_to_chunks([book], records)


def test_literaryqa_loader_reads_the_train_split(tmp_path):
    """full trains Lite on the LiteraryQA train split: the loader reads annotations/train.jsonl."""
    from litseg_nb.data.literaryqa import load_literaryqa

    (tmp_path / "annotations").mkdir()
    rec = {"document_id": "d1", "gutenberg_id": "77", "title": "A Train Book",
           "text": "First paragraph of the book.\n\nSecond paragraph.", "qas": [{"question": "Q?", "answers": ["A"]}]}
    (tmp_path / "annotations" / "train.jsonl").write_text(json.dumps(rec) + "\n", encoding="utf-8")
    books, report = load_literaryqa(tmp_path, split="train")
    assert [b.book_id for b in books] == ["literaryqa:77"] and report.loaded == ["literaryqa:77"]
    with pytest.raises(FileNotFoundError, match="test.jsonl"):
        load_literaryqa(tmp_path, split="test")


def test_saving_an_unchanged_record_leaves_the_file_and_its_stamp(tmp_path):
    """A merged model folder's file stamp is its request-cache revision: re-saving the same trained-units
    record must not touch the file (it did, at every save_merged_model, so a rerun of notebook 07 asked
    the trained students every question again); a changed record is written."""
    import os

    from litseg_nb.lite.data import TrainedUnits

    path = tmp_path / TRAINED_UNITS_FILE
    one = TrainedUnits([{"book_id": "b", "unit_id": "u1", "title": "t", "fingerprint": "f1"}])
    one.save(path)
    os.utime(path, ns=(10**9, 10**9))
    one.save(path)
    assert path.stat().st_mtime_ns == 10**9
    two = one.union(TrainedUnits([{"book_id": "b", "unit_id": "u2", "title": "t", "fingerprint": "f2"}]))
    two.save(path)
    assert path.stat().st_mtime_ns != 10**9
    assert TrainedUnits.load(path).keys == {("b", "u1"), ("b", "u2")}
    path.write_bytes(b"\xff\xfe not a record")  # unreadable as text: rewritten, not an error
    one.save(path)
    assert TrainedUnits.load(path).keys == {("b", "u1")}
