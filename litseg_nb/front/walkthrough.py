"""One small example through each step, for the notebooks' walk-throughs: a toy Gutenberg book through
cleaning and unit detection, LitSeg's pipeline on one unit (prompts, replies, verdicts), and the retrieval
formulas on a hand-made ranking. Nothing is re-implemented: every number comes from the batch runs' functions.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import pandas as pd
from ..api import load_text
from ..core.paths import TEMPLATES_DIR
from ..data.gutenberg import clean_gutenberg_text
from ..litseg import pipeline
from ..litseg.prompting import stage_user_prompt
from ..litseg.validate import finalize_segments, validate_segments, validate_stage1, validate_stage2
from ..llm.replies import extract_json
from ..metrics.retrieval import dcg_at_k, hit_at_k, recall_at_k, reciprocal_rank
from ..rag.index import rrf_fuse

# Written for this project (not a real book), hard-wrapped at 60 columns as Gutenberg texts are.
TOY_BOOK = (TEMPLATES_DIR / "walkthrough" / "toy_book.txt").read_text(encoding="utf-8")
#: a hand-written annotation of the toy book in the LitSeg replies' format, per chapter title: teaching
#: material that shows what the method asks for, never a model's output
REFERENCE_FILE = TEMPLATES_DIR / "walkthrough" / "toy_reference_annotation.json"


def toy_book(max_unit_words: int = 2000, sentence_splitter: str = "nupunkt"):
    """``(raw, book)``: :data:`TOY_BOOK` and the cleaned, unit-split, sentence-indexed book."""
    book = load_text(text=TOY_BOOK, book_id="toy:lighthouse", title="The Lighthouse Keeper",
                     max_unit_words=max_unit_words, sentence_splitter=sentence_splitter,
                     headings=True)  # a whole book: find its chapters
    return TOY_BOOK, book


def preprocessing_steps(raw: str, book: Any) -> pd.DataFrame:
    """What cleaning and unit detection did to ``raw`` (one row per step), from their own reports."""
    report = clean_gutenberg_text(raw, source="<toy book>").report  # the report load_text does not keep
    structure = book.meta["structure"]
    lines = raw.splitlines()
    a, b = report.body_lines
    dropped = [book.text[s:e].split("\n")[0][:40] + f" ({why})" for s, e, why in structure["dropped"]]
    rows = [
        ("1. licence stripped", f"raw lines 1-{a} (header, licence) and {b + 1}-{len(lines)} (end marker, licence) "
                                f"removed; title {report.title!r}, author {report.author!r} read from the header"),
        ("2. paragraphs unwrapped", f"{b - a} body lines -> {report.n_paragraphs} paragraphs "
                                    f"(hard wraps at {report.wrap_width} columns joined)"),
        ("3. headings found", f"{structure['headings']} heading(s) of kind(s) {structure['heading_kinds']}; "
                              f"levels {structure['levels']}; unit level {structure['unit_level']}"),
        ("4. contents list", f"{structure['toc_entries']} entries, {structure['toc_matched']} found again in the body"),
        ("5. not narrative", "; ".join(dropped) or "nothing dropped"),
        ("6. units", f"{len(book.units)} unit(s): " + "; ".join(
            f"{u.title!r} ({u.n_sentences} sentences, {len(u.text(book.text).split())} words)" for u in book.units)),
    ]
    return pd.DataFrame(rows, columns=["step", "what it did"])


def litseg_walkthrough(book: Any, unit: Any, backend: Any, cfg: Any, length_reference: int | None) -> dict[str, Any]:
    """LitSeg's pipeline on one unit (no annotations file): the unit's annotation record."""
    return pipeline.annotate_units([(book, unit)], backend, cfg, length_reference=length_reference,
                                   method="litseg-walkthrough", progress=False).records[0]


def prompt_text(record: dict[str, Any], stage: str) -> str:
    """The user prompt of ``stage`` as the model received it (earlier stages' results filled in)."""
    st = record["stages"]
    return stage_user_prompt(stage, record["chapter_content"], record["n_sentences"],
                             st["stage1"].get("passed_on", ""), st["stage2"].get("passed_on", ""))


def stage_table(record: dict[str, Any], reply_chars: int = 300) -> pd.DataFrame:
    """One row per stage and attempt: the raw reply (cropped to ``reply_chars``), valid, the validator's errors."""
    rows = []
    for stage, st in record["stages"].items():
        attempts = st["attempts"]
        for a in attempts:
            text = a["text"] or ""
            rows.append({"stage": stage, "attempt": a["attempt"], "valid": a["valid"],
                         "errors": "; ".join(a["errors"][:3]) or "-",
                         "reply": text[:reply_chars] + (" [...]" if len(text) > reply_chars else ""),
                         "tokens in/out": f"{a['prompt_tokens']}/{a['completion_tokens']}",
                         # what the stage handed on: the valid reply ("none") or a fallback
                         "passed on": (st.get("fallback", "") if stage != "stage3" else "") if a is attempts[-1] else ""})
    return pd.DataFrame(rows)


def reference_annotation(book: Any, unit: Any) -> dict[str, Any]:
    """The hand-written reference replies for ``unit`` of the toy book (:data:`REFERENCE_FILE`) through the
    checks a model's replies get: each stage read as JSON and validated (stage 3 against the unit's sentence
    count), the fallback chain (``none`` when valid), then the reconstruction. Returns ``replies`` (a row per
    stage: reply, valid, errors), ``final`` (:class:`~litseg_nb.litseg.validate.FinalSegmentation`) and
    ``chunks``."""
    units = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))["units"]
    if unit.title not in units:
        raise KeyError(f"{REFERENCE_FILE.name}: no reference annotation for unit {unit.title!r} "
                       f"(it has {', '.join(map(repr, units))})")
    rows, result = [], None
    for stage, obj in units[unit.title].items():
        text = json.dumps(obj, ensure_ascii=False)
        got = extract_json(text)
        if stage == "stage3":
            result = validate_segments(got.obj, unit.n_sentences)
            errors = result.errors
        else:
            errors = (validate_stage1 if stage == "stage1" else validate_stage2)(got.obj)
        rows.append({"stage": stage, "valid": not errors, "errors": "; ".join(errors) or "-", "reply": text})
    final = finalize_segments(result, unit.n_sentences)
    chunks = pipeline.reconstruct_unit(book, unit, final.segments, method="reference (hand-written)")
    pipeline.assert_units_covered([book], chunks, "reference (hand-written)")
    return {"replies": pd.DataFrame(rows), "final": final, "chunks": chunks}


def reference_single_pass(unit: Any) -> str:
    """The reference annotation of ``unit`` as one reply in LitSeg-Lite's single-pass format (Appendix E.2:
    ``step1``, ``step2``, ``step3``), the form a distilled student is trained to write."""
    ref = json.loads(REFERENCE_FILE.read_text(encoding="utf-8"))["units"][unit.title]
    return json.dumps({"step1": ref["stage1"], "step2": ref["stage2"], "step3": ref["stage3"]}, ensure_ascii=False)


def echoed_template_reply(n_sentences: int) -> str:
    """The JSON skeleton of the Lite prompt (Appendix E.2) copied back as a reply: what a model that copies the
    prompt's placeholders writes."""
    # deferred: the training stack, for notebook 03 only
    from ..lite.data import lite_system_prompt

    prompt = lite_system_prompt(n_sentences)
    obj, end = json.JSONDecoder().raw_decode(prompt[prompt.index('{ "step1"'):])
    return json.dumps(obj, ensure_ascii=False)


def reward_examples(unit: Any) -> pd.DataFrame:
    """Four single-pass replies for ``unit`` and their format reward, rule by rule (the reward GRPO trains on):
    the reference, the reference with a sentence left out, the prompt's template echoed, a reply cut off."""
    # deferred: the training stack, for notebook 03 only
    from ..lite.train import format_reward_breakdown

    ref = reference_single_pass(unit)
    gap = json.loads(ref)
    last = gap["step3"]["segments"][-1]
    last["from_idx"] += 1  # the first sentence of the last segment in no main range
    replies = {"reference (hand-written)": ref,
               f"reference, sentence {last['from_idx'] - 1} left out": json.dumps(gap, ensure_ascii=False),
               "template echoed": echoed_template_reply(unit.n_sentences),
               "reply cut off": ref[:len(ref) // 2]}
    return pd.DataFrame([{"reply": name, **format_reward_breakdown(text, unit.n_sentences)}
                         for name, text in replies.items()])


def chunk_table(chunks: Sequence[Any]) -> pd.DataFrame:
    """A row per chunk: subtitle, main range, context indices, character spans and the reconstructed text."""
    return pd.DataFrame([{"chunk": c.chunk_id, "subtitle": c.subtitle, "from_idx": c.from_idx, "to_idx": c.to_idx,
                          "context_idx": c.context_idx, "spans": c.spans, "text": c.text} for c in chunks])


def verdict_table(record: dict[str, Any]) -> pd.DataFrame:
    """The final segments and how they were obtained (fallback, repairs)."""
    segs = pd.DataFrame(record["segments"])
    segs.insert(0, "fallback", record["fallback"])
    segs["repair_actions"] = "; ".join(record.get("repair_actions") or []) or "-"
    return segs


def crop_middle(prompt: str, width: int = 1200) -> str:
    """A long prompt cropped in the middle for display (its start and its end, which hold the unit)."""
    if len(prompt) <= width:
        return prompt
    half = width // 2
    return prompt[:half] + f"\n[... {len(prompt) - width:,} characters of the verbatim prompt ...]\n" + prompt[-half:]


def retrieval_examples(k: int = 60) -> dict[str, Any]:
    """The retrieval formulas on four chunks (the relevant one: 1) and three questions (first relevant rank
    1, 3, none), computed by the package's functions."""
    dense = [(2, 0.9), (0, 0.8), (3, 0.5), (1, 0.4)]
    bm25 = [(0, 7.0), (1, 5.0), (2, 1.0), (3, 0.5)]
    fused = rrf_fuse([dense, bm25], k=k)
    rrf = pd.DataFrame([{"chunk": d, "dense rank": [x for x, _ in dense].index(d) + 1,
                         "BM25 rank": [x for x, _ in bm25].index(d) + 1, "RRF score": s,
                         "fused rank": i} for i, (d, s) in enumerate(fused, 1)])
    ranks = [1, 3, None]
    per_q = pd.DataFrame([{"question": f"q{i + 1}", "first relevant rank": r if r is not None else "none",
                           "RR": reciprocal_rank(r), "DCG@2": dcg_at_k(r, 2), "DCG@5": dcg_at_k(r, 5),
                           "Recall@2": recall_at_k(r, 2), "Hit@5": hit_at_k(r, 5)} for i, r in enumerate(ranks)])
    means = per_q[["RR", "DCG@2", "DCG@5", "Recall@2", "Hit@5"]].mean().rename({"RR": "MRR"})
    return {"rrf": rrf, "per_question": per_q, "means": means}


def one_question_stages(ev: Any, question: Any, method: str, depth: int = 5) -> pd.DataFrame:
    """Dense, BM25 and the fused top ``depth`` of one question, by the evaluator's own first stage (not timed)."""
    idx = ev.indices[method].book(question.book_id)
    q_emb = ev.embedder.encode([question.question], kind="query")[0]
    dense, sparse, fused = ev.first_stage(idx, q_emb, question.question, record=False)
    rel = idx.relevant(question.evidence) if question.evidence else set()
    rows = []
    for name, lst in (("dense", dense), ("BM25", sparse), (f"hybrid ({ev.cfg.fusion})", fused)):
        for r, (d, s) in enumerate(lst[:depth], 1):
            rows.append({"ranking": name, "rank": r, "chunk": idx.chunk_ids[d], "score": round(float(s), 4),
                         "relevant": d in rel, "text": idx.texts[d][:90].replace("\n", " ")})
    return pd.DataFrame(rows)


def demo_question(rows: Sequence[dict[str, Any]], questions: Sequence[Any], method: str) -> Any:
    """The first question some chunk of ``method`` can answer, else the first question."""
    answerable = {r["qid"] for r in rows if r["method"] == method and r.get("answerable")}
    return next((q for q in questions if q.qid in answerable), questions[0])
