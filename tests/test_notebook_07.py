import pandas as pd
import pytest

from litseg_nb.evaluation import ablation


def test_variant_selection_names_unknown_keys():
    assert [v.key for v in ablation.select_variants([])] == [v.key for v in ablation.VARIANTS]
    with pytest.raises(ablation.AblationError, match="wo-gpro"):
        ablation.select_variants(["wo-gpro"])


def test_missing_adapters_are_named(fresh_dirs):
    with pytest.raises(ablation.AblationError, match="adapters not found.*notebook 03"):
        ablation.adapter_dirs("test")


def test_prompt_table_shows_what_each_variant_removes():
    """Notebook 07's toy example: each variant's prompt for one unit, built as the run builds it."""
    from litseg_nb.front import walkthrough

    _, book = walkthrough.toy_book()
    t = ablation.prompt_table(book, book.units[0]).set_index("variant")
    assert list(t.index) == [v.name for v in ablation.VARIANTS]
    assert t.loc["LitSeg-Lite", "steps removed"] == "-" and t.loc["LitSeg-Lite", "weights"] == "base + SFT + GRPO"
    assert t.loc["w/o GRPO", "weights"] == "base + SFT" and t.loc["w/o FT", "weights"] == "base"
    for k, step in ((1, "events"), (2, "threads"), (3, "turning points")):
        assert t.loc[f"+w/o Theo.S.{k}", "steps removed"] == f"{step} (Theo.S.{k})"
    assert t.loc["+w/o Theory", "theory steps asked"] == "none (generic prompt)"
    assert t.loc["+w/o Theory", "prompt words"] < t.loc["+w/o Theo.S.3", "prompt words"] < t.loc["w/o FT", "prompt words"]


def test_differences_against_litseg_lite_per_dataset():
    t = pd.DataFrame({"variant": ["LitSeg-Lite", "w/o FT", "LitSeg-Lite", "w/o FT"],
                      "dataset": ["a", "a", "b", "b"], "MRR": [0.683, 0.646, 0.5, None]})
    d = ablation.differences(t, "MRR")
    delta = d["delta (LitSeg-Lite - variant)"].round(3).tolist()
    assert delta[:3] == [0.0, 0.037, 0.0] and pd.isna(delta[3])
    assert ablation.differences(t[t.variant != "LitSeg-Lite"], "MRR")["delta (LitSeg-Lite - variant)"].isna().all()


@pytest.mark.slow
def test_notebook_07_runs_after_02_and_03(notebook_pipeline):
    out = notebook_pipeline("07")
    tables = out / "tables"
    validity = pd.read_csv(tables / "07_validity.csv")
    assert list(validity["variant"]) == [v.name for v in ablation.VARIANTS]
    assert (validity["units"] > 0).all()
    t6 = pd.read_csv(tables / "07_table6_boundary_similarity.csv")
    assert {"dataset", "variant", "boundary_similarity", "n_boundaries", "table2_litseg_lite"} <= set(t6.columns)
    # per dataset (the paper's Table 6): one row per dataset and variant
    assert not t6.duplicated(["dataset", "method"]).any() and t6["dataset"].notna().all()
    t5 = (tables / "07_table5_human_quality.md").read_text()
    assert "LLM ratings, not human" in t5 and "A.2 rubric" in t5
    t7 = pd.read_csv(tables / "07_table7_retrieval.csv")
    assert len(t7) == len(ablation.VARIANTS) and (t7["n_questions"] > 0).all()
    assert (out / "figures" / "07_ablation.png").is_file()
    # Table 7's CR column and Table 8 through notebook 05's generation code
    t7cr = pd.read_csv(tables / "07_table7_generation_cr.csv")
    t8 = pd.read_csv(tables / "07_table8_generation.csv")
    assert set(t7cr["variant"]) == set(t8["variant"]) == {v.name for v in ablation.VARIANTS}
    assert "CR" in t7cr and {"EM", "F1", "ROUGE_L", "METEOR"} <= set(t8.columns) and (t8["n_answers"] > 0).all()
    assert "rag-generate" in set(pd.read_csv(out / "artifacts" / "usage" / "07.csv")["method"])
    chunks = out / "artifacts" / "ablation" / "chunks"
    assert sorted(p.stem for p in chunks.glob("*.jsonl")) == sorted(v.key for v in ablation.VARIANTS)


@pytest.mark.slow
def test_lite_row_of_table7_is_its_table3_row(notebook_pipeline):
    """The ablations run through exactly notebook 05's Table 3 pipeline (same scope, fusion,
    reranker and reranked questions), so on the same units LitSeg-Lite's Table 7 row is its Table 3 row."""
    out = notebook_pipeline("05", "07")
    t3 = pd.read_csv(out / "tables" / "05_table3_retrieval.csv")
    t7 = pd.read_csv(out / "tables" / "07_table7_retrieval.csv")
    from litseg_nb.rag.report import RERANK_LABEL

    lite3 = t3[(t3["method"] == "litseg-lite") & (t3["ranking"] == RERANK_LABEL)].iloc[0]
    lite7 = t7[t7["variant"] == "LitSeg-Lite"].iloc[0]
    assert lite7["ranking"] == RERANK_LABEL
    for col in ("n_questions", "n_no_relevant_chunk", "MRR_full", "Hit@1", "Hit@5", "Hit@10"):
        assert lite7[col] == pytest.approx(lite3[col]), col
    assert lite7["MRR"] == pytest.approx(lite3["MRR@20"])


@pytest.mark.slow
def test_table6_lite_reference_is_notebook_06s_table2_value(notebook_pipeline):
    """07 computes ``table2_litseg_lite`` itself (it may run beside 06, ``run --jobs 2``); the number is
    06's Table 2 LitSeg-Lite value on that dataset, whether or not 06 has written its table yet."""
    out = notebook_pipeline("06", "07")
    t2 = pd.read_csv(out / "tables" / "06_table2_boundary_similarity.csv")
    t6 = pd.read_csv(out / "tables" / "07_table6_boundary_similarity.csv")
    lite2 = t2[t2["method"] == "litseg-lite"].set_index("dataset")["boundary_similarity"]
    assert len(lite2)  # NaN where Lite drew no inner boundary (the tiny test student): NaN on both sides then

    def same(a, b):
        return (pd.isna(a) and pd.isna(b)) or a == pytest.approx(b)

    for ds, value in t6.groupby("dataset", dropna=False)["table2_litseg_lite"].first().items():
        assert same(value, lite2[ds]), ds
    from litseg_nb.evaluation.segment_quality import table2_lite_reference

    ref = table2_lite_reference("test")  # reads 03's chunks and 06's corpus, never 06's table
    assert set(ref) == set(lite2.index) and all(same(ref[d], lite2[d]) for d in ref)
