"""import-chunks: reading formats, alignment quality (exact / normalised / anchored / not found), errors,
the CLI, and an independent re-implementation of LumberChunker's dense evaluation on an xlsx chunk set."""
from __future__ import annotations

import json
import math
import random

import numpy as np
import pandas as pd
import pytest

from litseg_nb.core.chunk_align import ChunkImportError, import_chunks, normalize_with_map
from litseg_nb.front.chunk_import import import_chunk_file, load_book, read_chunk_texts
from litseg_nb.core.schema import Book, Sentence, Unit

EMMA = "gutenqa:Emma_-_Jane_Austen"


def _book() -> Book:
    paras = ["\u201cWell,\u201d said Emma, \u201cthat is settled.\u201d She smiled at her father.",
             "Mr. Knightley came in \u2014 late, as always \u2014 and sat by the fire.",
             "Harriet had never seen such a fine house; she looked at everything twice."]
    text = "\n\n".join(paras)
    spans, pos = [], 0
    for p in paras:
        spans.append((pos, pos + len(p)))
        pos += len(p) + 2
    sents = []
    for a, b in spans:  # one sentence per paragraph is enough here
        sents.append(Sentence(len(sents) + 1, a, b))
    unit = Unit("x", "u0000", 0, "I", 0, len(text), tuple(sents), tuple(spans), "dataset")
    return Book("x", "X", "gutenqa", text, spans, [unit])


def test_normalisation_maps_back_to_source_offsets():
    text = "A \u201cquote\u201d\n\n  and\u2014dash"
    norm, pos = normalize_with_map(text)
    assert norm == 'a "quote" and-dash'
    assert len(pos) == len(norm) and all(a <= b for a, b in zip(pos, pos[1:]))
    assert text[pos[norm.index("and")]:pos[norm.index("and")] + 3] == "and"


def test_alignment_qualities_spans_and_flags():
    book = _book()
    p = book.text.split("\n\n")
    texts = [p[0],  # exact
             '"Well," said Emma, "that is settled."  She smiled at her father. ' + p[1].replace("\u2014", "--"),
             p[2].replace("a", "", 2),  # dropped characters
             "Completely unrelated words about spaceships and quarks that occur nowhere."]
    chunks, rep = import_chunks(book, texts, "ext")
    q = [c.metadata["alignment"] for c in chunks]
    assert q == ["exact", "fuzzy", "fuzzy", "not_found"]
    assert chunks[0].spans == [book.paragraphs[0]] and chunks[0].main_text == p[0]
    assert chunks[0].from_idx == chunks[0].to_idx == 1
    # chunk 1 spans paragraphs 1-2 (quotes straightened, dash replaced): anchored fuzzy match
    a, b = chunks[1].spans[0]
    assert a == 0 and b >= book.paragraphs[1][1] - 3 and chunks[1].metadata["alignment_score"] >= 0.8
    assert (chunks[1].from_idx, chunks[1].to_idx) == (1, 2)
    assert chunks[2].metadata["alignment_method"] == "anchored"
    assert chunks[2].spans[0][0] == book.paragraphs[2][0] and chunks[2].spans[0][1] == book.paragraphs[2][1]
    # unaligned chunks are kept with their text, flagged, never dropped
    nf = chunks[3]
    assert nf.text == texts[3] and nf.spans == [] and not nf.is_source_span and nf.unit_id == ""
    assert rep.n_exact == 1 and rep.n_fuzzy == 2 and rep.n_not_found == 1 and rep.not_found_indices == [3]
    assert rep.coverage == pytest.approx(1.0) and rep.overlap > 0  # chunks 0 and 1 overlap
    for c in chunks[:3]:
        assert book.text[c.spans[0][0]:c.spans[0][1]] == c.main_text
    assert "not found 1" in rep.summary()


def test_normalised_match_of_rejoined_paragraphs_is_exact_in_offsets():
    book = _book()
    joined = " ".join(book.text.split("\n\n"))  # LumberChunker-style: paragraphs joined by a space
    chunks, rep = import_chunks(book, [joined], "j")
    assert chunks[0].metadata["alignment_method"] == "normalised" and chunks[0].metadata["alignment_score"] == 1.0
    assert chunks[0].spans == [(0, len(book.text))]


def test_chunk_set_covering_nothing_is_an_error():
    with pytest.raises(ChunkImportError, match="none of the 2 chunks could be aligned"):
        import_chunks(_book(), ["nothing of this is in the book at all, really", "nor this one either, no"], "bad")


def test_out_of_order_chunks_are_found_and_flagged():
    book = _book()
    p = book.text.split("\n\n")
    chunks, rep = import_chunks(book, [p[2], p[0]], "rev")
    assert [c.metadata["out_of_order"] for c in chunks] == [False, True]
    assert rep.n_out_of_order == 1


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".parquet", ".xlsx"])
def test_readers_keep_order_and_skip_empty_rows(tmp_path, suffix):
    df = pd.DataFrame({"Chunk": ["first chunk", "", "third, with \u201cquotes\u201d"], "Chapter": [1, 1, 2]})
    path = tmp_path / f"c{suffix}"
    if suffix == ".jsonl":
        df.to_json(path, orient="records", lines=True, force_ascii=False)
    elif suffix == ".csv":
        df.to_csv(path, index=False)
    elif suffix == ".parquet":
        df.to_parquet(path)
    else:
        df.to_excel(path, index=False)
    texts, empty = read_chunk_texts(path, "Chunk")
    assert texts == ["first chunk", "third, with \u201cquotes\u201d"] and empty == 1
    with pytest.raises(ChunkImportError, match="no column 'text'"):
        read_chunk_texts(path, "text")


def test_unknown_format_and_missing_file(tmp_path):
    (tmp_path / "c.txt").write_text("x")
    with pytest.raises(ChunkImportError, match="unsupported format"):
        read_chunk_texts(tmp_path / "c.txt")
    with pytest.raises(ChunkImportError, match="does not exist"):
        read_chunk_texts(tmp_path / "none.xlsx")


# --------------------------------------------------------------------------- Emma, end to end
def _emma_paragraph_windows(data_dir, size: int) -> list[str]:
    paras = pd.read_parquet(data_dir / "gutenqa" / "GutenQA_paragraphs.parquet")
    paras = paras[paras["Book Name"] == "Emma_-_Jane_Austen"].sort_values("Chunk ID")["Chunk"].tolist()
    return [" ".join(paras[i:i + size]) for i in range(0, len(paras), size)]


def test_import_on_emma_aligns_everything_and_cli_writes_artifact(data_dir, fresh_dirs, capsys):
    from litseg_nb.core.paths import outputs_dir
    from litseg_nb.cli import main
    from litseg_nb.core.schema import load_chunks

    texts = _emma_paragraph_windows(data_dir, 6)
    rnd = random.Random(1)
    texts[10] = "".join(ch for ch in texts[10] if rnd.random() > 0.03)  # a tool that dropped characters
    texts.insert(20, "This sentence was never written by Jane Austen, it is an invented line.")
    path = fresh_dirs / "emma.xlsx"
    pd.DataFrame({"Chunk": texts}).to_excel(path, index=False)
    assert main(["import-chunks", "--book", EMMA, "--name", "emma-w6", "--from", str(path), "--profile", "test"]) == 0
    out = capsys.readouterr().out
    assert "not found 1" in out and "book coverage" in out
    art = outputs_dir("test") / "artifacts" / "chunks" / "emma-w6.jsonl"
    chunks = load_chunks(art)
    assert len(chunks) == len(texts) and [c.text for c in chunks] == texts
    rep = json.loads(art.with_suffix(".import.json").read_text())
    assert rep["n_not_found"] == 1 and rep["n_exact"] + rep["n_fuzzy"] == len(texts) - 1 and rep["coverage"] > 0.99
    book = load_book(EMMA, "test")
    for c in chunks:
        if c.spans:
            assert book.text[c.spans[0][0]:c.spans[0][1]] == c.main_text
            unit = book.unit(c.unit_id)
            assert 1 <= c.from_idx <= c.to_idx <= unit.n_sentences
    assert chunks[10].metadata["alignment_method"] == "anchored"
    # a wrong book is an error with a non-zero exit code, nothing written
    assert main(["import-chunks", "--book", "gutenqa:No_Such_Book", "--name", "x", "--from", str(path),
                 "--profile", "test"]) == 2


def _independent_norm(s: str) -> str:
    table = {0x2018: "'", 0x2019: "'", 0x201c: '"', 0x201d: '"', 0xa0: " "}
    return " ".join(s.translate(table).lower().split())


@pytest.mark.slow
def test_imported_xlsx_dense_scores_equal_an_independent_implementation(data_dir, fresh_dirs):
    """Notebook 05's code path (import → RagEvaluator → retrieval_table, dense MiniLM, full-rank MRR,
    all 30 Emma questions) against a from-scratch implementation of LumberChunker's evaluation."""
    import openpyxl
    from sentence_transformers import SentenceTransformer

    from litseg_nb.llm.embeddings import load_embedder, resolve_model_path
    from litseg_nb.rag import pipeline
    from litseg_nb.rag.config import RagConfig

    path = fresh_dirs / "emma_w8.xlsx"
    pd.DataFrame({"Chunk": _emma_paragraph_windows(data_dir, 8)}).to_excel(path, index=False)
    chunks, rep = import_chunk_file(EMMA, "emma-w8", path, profile="test")
    assert rep.n_not_found == 0

    # --- through notebook 05's code
    cfg = RagConfig.for_profile("test", reranker="none", hyde=False, question_scope="all")
    book = load_book(EMMA, "test")
    questions = pipeline.evaluation_questions([book])
    questions, scope = pipeline.questions_in_scope(questions, {"emma-w8": chunks}, {book.book_id: book}, "all")
    assert len(questions) == 30
    ev = pipeline.RagEvaluator(cfg, load_embedder(cfg.embedding))
    ev.build_indices({"emma-w8": chunks})
    rows = ev.retrieve(questions)
    table = pipeline.retrieval_table(rows).set_index("mode")
    ours = table.loc["dense"]

    # --- independent: read the xlsx with openpyxl, embed with sentence-transformers, rank with numpy
    ws = openpyxl.load_workbook(path, read_only=True).active
    it = ws.iter_rows(values_only=True)
    col = next(it).index("Chunk")
    texts = [r[col] for r in it]
    qs = pd.read_parquet(data_dir / "gutenqa" / "questions.parquet")
    qs = qs[qs["Book Name"] == "Emma_-_Jane_Austen"]
    model = SentenceTransformer(resolve_model_path("all-MiniLM-L6-v2"), device="cpu")
    c_emb = model.encode(texts, normalize_embeddings=True, batch_size=32)
    q_emb = model.encode(qs["Question"].tolist(), normalize_embeddings=True)
    norm_texts = [_independent_norm(t) for t in texts]
    rr, rec20, dcg20, ranks = [], [], [], []
    for qv, ev_str in zip(q_emb, qs["Chunk Must Contain"]):
        order = np.argsort(-(c_emb @ qv), kind="stable")
        e = _independent_norm(ev_str)
        rank = next((i + 1 for i, d in enumerate(order) if e in norm_texts[d]), None)
        ranks.append(rank)
        rr.append(0.0 if rank is None else 1.0 / rank)
        rec20.append(float(rank is not None and rank <= 20))
        dcg20.append(1.0 / math.log2(rank + 1) if rank is not None and rank <= 20 else 0.0)
    assert ours["n_questions"] == 30 == len(rr)
    assert ours["n_no_relevant_chunk"] == sum(r is None for r in ranks)
    ours_ranks = {r["qid"]: r["rank_full"] for r in rows if r["mode"] == "dense"}
    assert [ours_ranks[q.qid] for q in questions] == ranks
    assert ours["MRR_full"] == pytest.approx(float(np.mean(rr)), abs=1e-12)
    assert ours["Recall@20"] == pytest.approx(float(np.mean(rec20)), abs=1e-12)
    assert ours["DCG@20"] == pytest.approx(float(np.mean(dcg20)), abs=1e-12)
    assert ours["MRR@20"] <= ours["MRR_full"]
    print(f"emma-w8 dense MiniLM: MRR_full={ours['MRR_full']:.6f} MRR@20={ours['MRR@20']:.6f} "
          f"Recall@20={ours['Recall@20']:.4f} DCG@20={ours['DCG@20']:.6f} (independent MRR {np.mean(rr):.6f})")


@pytest.mark.parametrize("damage", ['{"book_id": "other", "unit_id": "u0000", "chunk_id', '{"book_id": "other"}', "5"])
def test_import_over_a_damaged_set_is_one_line_and_keeps_the_set(fresh_dirs, capsys, damage):
    from litseg_nb.chunk_sets import chunk_set_path
    from litseg_nb.cli import main

    book = fresh_dirs / "book.txt"
    book.write_text("One sentence here. Another one there.\n\nA second paragraph of the book.\n")
    rows = fresh_dirs / "mine.jsonl"
    rows.write_text(json.dumps({"Chunk": "One sentence here. Another one there."}) + "\n")
    out = chunk_set_path("test", "mine")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(damage + "\n")
    out.with_suffix(".import.json").write_text("{}")
    assert main(["import-chunks", "--book", str(book), "--name", "mine", "--from", str(rows),
                 "--profile", "test"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and str(out) in err and "line 1" in err
    assert out.read_text() == damage + "\n"
