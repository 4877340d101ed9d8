"""`published` presets of the baselines, the unit-cap comparison, and notebook 04 on a chosen subset."""
from __future__ import annotations

import pandas as pd
import pytest

from litseg_nb.chunkers import BaselinesConfig, load_tokenizer
from litseg_nb.segmenters import run_chunker
from litseg_nb.chunkers.presets import published_comparison, run_published_presets, unit_cap_effect
from litseg_nb.corpus import load_corpus


@pytest.fixture(scope="module")
def emma(data_dir):
    cfg = BaselinesConfig.for_profile("smoke")
    whole = load_corpus(cfg.corpus.replace(datasets=("gutenqa",), max_units_per_book=0, max_unit_words=None))
    capped = load_corpus(cfg.corpus.replace(datasets=("gutenqa",), max_units_per_book=0))
    return cfg, whole, capped


def test_recursive_published_preset_reproduces_the_published_mean_on_emma(emma, fresh_dirs):
    cfg, whole, _ = emma
    tok = load_tokenizer(cfg.tokenizer)
    sets = run_published_presets(whole, cfg, run_chunker, ["recursive", "paragraph", "lumber"])
    assert list(sets) == ["recursive@published"]  # paragraph: no knob; lumber: no size knob
    native = run_chunker("recursive", whole, cfg)
    t = published_comparison({"recursive": native, **sets}, tok).set_index("chunk_set")
    assert t.loc["recursive@published", "published_mean_tokens"] == 399
    assert abs(t.loc["recursive@published", "mean_vs_published_pct"]) < 2.0  # calibrated to 1 %
    assert abs(t.loc["recursive", "mean_vs_published_pct"]) > 10  # the default does not
    assert {"median_tokens", "p10_tokens", "p90_tokens", "chunks", "note"} <= set(t.columns)


def test_unit_cap_effect_compares_the_same_text(emma, fresh_dirs):
    cfg, whole, capped = emma
    tok = load_tokenizer(cfg.tokenizer)
    eff = unit_cap_effect(capped, whole, cfg, run_chunker, ["paragraph", "recursive"], tok)
    assert set(eff["units"]) == {"capped units", "whole chapters"}
    w = eff.set_index(["method", "units"])
    # paragraphs never cross a unit border: the cap cannot change them; recursive chunks get shorter
    assert w.loc[("paragraph", "capped units"), "chunks"] >= w.loc[("paragraph", "whole chapters"), "chunks"]
    assert w.loc[("recursive", "capped units"), "mean_tokens"] < w.loc[("recursive", "whole chapters"), "mean_tokens"]
    assert w.loc[("recursive", "whole chapters"), "mean_change_vs_whole_pct"] == 0
    assert w.loc[("recursive", "capped units"), "n_units"] > w.loc[("recursive", "whole chapters"), "n_units"]


@pytest.mark.slow
def test_notebook_04_runs_a_chosen_subset(data_dir, fresh_dirs):
    from litseg_nb.core.paths import outputs_dir
    from litseg_nb.front.runner import run_notebooks

    run_notebooks("test", only=("04",), parameters={"chunkers": "token,recursive", "length_match": False})
    tables = outputs_dir("test") / "tables"
    stats = pd.read_csv(tables / "04_chunk_statistics.csv")
    assert set(stats["method"]) == {"token", "recursive"}
    chunks = {p.stem for p in (outputs_dir("test") / "artifacts" / "chunks").glob("*.jsonl")}
    assert chunks == {"token", "recursive", "recursive@published"}
    pub = pd.read_csv(tables / "04_published_presets.csv")
    assert set(pub["chunk_set"]) == {"recursive", "recursive@published"}
    cap = pd.read_csv(tables / "04_unit_cap_effect.csv")
    assert set(cap["method"]) == {"token", "recursive"}
