"""Notebook 04 (baselines) end to end in the test profile through the runner."""
from __future__ import annotations

import pandas as pd
import pytest

from litseg_nb.chunkers import ALL_METHODS, BaselinesConfig
from litseg_nb.corpus import select_units
from litseg_nb.corpus import load_corpus
from litseg_nb.core.paths import outputs_dir
from litseg_nb.front.runner import run_notebooks
from litseg_nb.core.schema import check_coverage, load_chunks


@pytest.mark.slow
def test_notebook_04_runs_in_test_profile(data_dir):
    run_notebooks("test", only=("04",))
    out = outputs_dir("test")
    tables = out / "tables"
    stats = pd.read_csv(tables / "04_chunk_statistics.csv")
    assert set(stats["method"]) == set(ALL_METHODS)
    assert {"total_chunks", "mean_tokens", "median_tokens", "std_tokens", "published_mean_tokens", "llm_calls",
            "prompt_tokens", "completion_tokens", "calls_per_1k_sentences", "seconds_per_book"} <= set(stats.columns)
    assert (stats["total_chunks"] > 0).all()
    llm = stats[stats["method"].isin(["margin", "lumber", "proposition", "perplexity", "perplexity+merge+completion"])]
    assert (llm["llm_calls"] > 0).all()
    pub = pd.read_csv(tables / "04_published_presets.csv")
    assert {"recursive@published", "semantic@published", "recursive", "semantic", "paragraph"} <= set(pub["chunk_set"])
    assert {"mean_tokens", "median_tokens", "p10_tokens", "p90_tokens", "published_mean_tokens",
            "mean_vs_published_pct"} <= set(pub.columns)
    cap = pd.read_csv(tables / "04_unit_cap_effect.csv")
    assert set(cap["units"]) == {"capped units", "whole chapters"} and "mean_change_vs_whole_pct" in cap
    assert (tables / "04_chunk_statistics.md").read_text().startswith("**04_chunk_statistics** — profile=test")
    matched = pd.read_csv(tables / "04_length_matched.csv")
    assert {"token", "recursive", "semantic", "paragraph"} <= set(matched["method"])
    assert (tables / "04_runs.csv").is_file()
    # the library splitters (lib: presets), run by the libraries, next to our re-implementations
    from fakes import TEST_PRESETS

    lib = pd.read_csv(tables / "04_library_splitters.csv")
    assert set(lib["method"]) == set(TEST_PRESETS)
    assert (lib["gap_chunks"] == 0).all() and (lib["not_found"] == 0).all() and (lib["library_coverage"] > 0.99).all()
    vs = pd.read_csv(tables / "04_library_vs_ours.csv").set_index("library_method")
    assert vs.loc["lib:langchain-recursive", "ours"] == "recursive"
    assert vs.loc["lib:langchain-recursive", "boundary_f1"] == 1.0  # our recursive is LangChain's, exact spans
    assert vs.loc["lib:chonkie-token", "chunks_ours"] > 0
    for m in TEST_PRESETS:
        assert (out / "artifacts" / "chunks" / f"{m}.jsonl").is_file()  # notebooks 05/06 evaluate these too
    for fig in ("04_chunk_lengths", "04_boundaries"):
        assert (out / "figures" / f"{fig}.png").is_file()
    usage = pd.read_csv(out / "artifacts" / "usage" / "04.csv")
    assert {"margin", "lumber", "proposition", "perplexity"} <= set(usage["method"])

    cfg = BaselinesConfig.for_profile("test")
    books = load_corpus(cfg.corpus)
    llm_units = {(b.book_id, u.unit_id) for b, u in select_units(books, cfg.selection)}
    for method in ALL_METHODS:
        chunks = load_chunks(out / "artifacts" / "chunks" / f"{method}.jsonl")
        for b in books:
            for u in b.units:
                if method in ("token", "recursive", "semantic", "paragraph", "texttiling", "c99") or (b.book_id, u.unit_id) in llm_units:
                    rep = check_coverage(u, [c for c in chunks if c.book_id == b.book_id and c.unit_id == u.unit_id])
                    assert rep.ok, (method, b.book_id, u.unit_id, rep)
        for c in chunks:
            if c.is_source_span:
                assert "".join(b.text[a:z] for b in books if b.book_id == c.book_id for a, z in c.spans) == c.main_text
