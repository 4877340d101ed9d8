"""LitSeg-Lite training on the tiny random model: SFT and GRPO change the LoRA weights; the saved
adapters reload and the Lite segmenter runs on them (validation, fallback, reconstruction).

The examples use a SHORT system prompt to keep these mechanics tests fast; notebook 03's test
(``tests/test_notebook_03.py``) runs the same code with the verbatim Appendix E.2 prompt.
"""
from __future__ import annotations

import json
import os

import pytest

from fakes import ScriptedBackend
from litseg_nb.lite.config import LiteConfig
from litseg_nb.lite.data import LiteExample, target_text
from litseg_nb.lite.train import build_reward_funcs, completion_text
from litseg_nb.core.schema import check_coverage

pytestmark = pytest.mark.slow


def _examples(book):
    out = []
    for u in book.units:
        segs = [{"subtitle": "all", "from_idx": 1, "to_idx": u.n_sentences, "context_idx": []}]
        target = {"step1": {"step_1_events": "e"}, "step2": {"step_2_threads": "t"},
                  "step3": {"chapter_title": u.title, "step_3_turning_points": [], "segments": segs}}
        out.append(LiteExample(book.book_id, u.unit_id, u.n_sentences, "Segment the chapter as JSON.",
                               "[Chapter Text Content]\n" + u.indexed_text(book.text), target_text(target), segs))
    return out


def _distinct_chars_reward(completions, **_):
    """Test-only reward with variance across rollouts of a random model (which never emits JSON,
    so the real rewards are all 0 and every GRPO group would be filtered as zero-variance)."""
    return [len(set(completion_text(c))) / 100.0 for c in completions]


def test_sft_then_grpo_change_lora_weights_and_adapters_reload_and_segment(tmp_path, monkeypatch, capfd):
    from peft import PeftModel

    from litseg_nb.llm.hf import HFBackend
    from litseg_nb.llm.models import load_model_and_tokenizer, model_revision
    from litseg_nb.lite import train as T
    from litseg_nb.lite.segmenter import LiteSegmenter
    from test_lite_data import make_book

    from litseg_nb.lite.data import TRAINED_UNITS_FILE, TrainedUnitError, model_record

    # grpo_soft_overlong_cache: DAPO's soft overlong punishment is added as a reward
    cfg = LiteConfig.for_profile("test", grpo_beta=0.001, grpo_max_steps=2, grpo_soft_overlong_cache=8)
    book = make_book("gutenberg:9", n_units=2, n_sent=5)
    examples = _examples(book)
    model, tok, _ = load_model_and_tokenizer("tiny-random")

    capfd.readouterr()
    sft_model, sft = T.train_sft(model, tok, examples, cfg, tmp_path / "sft")
    assert "'loss'" not in capfd.readouterr().out  # the log dicts stay in the log, not printed into a notebook
    assert sft.steps == 2 and sft.lora_change["tensors_changed"] == sft.lora_change["tensors"] > 0
    assert sft.lora_change["l2_change"] > 0
    log = sft.log_frame()
    assert {"loss", "step"} <= set(log.columns) and log["loss"].notna().all()
    meta = json.loads((sft.adapter_dir / "lite_config.json").read_text())
    assert meta["stage"] == "sft" and meta["lite_config"]["lora_r"] == cfg.lora_r
    trained = T.lora_state(sft_model)

    # the saved SFT adapter reloads with exactly the trained weights
    base, _, _ = load_model_and_tokenizer("tiny-random")
    reloaded = PeftModel.from_pretrained(base, str(sft.adapter_dir))
    again = T.lora_state(reloaded)
    assert T.lora_change(trained, again)["l2_change"] == pytest.approx(0.0, abs=1e-7)

    judge = ScriptedBackend(reply_fn=lambda conv: '{"dimension1": [4], "dimension2": [4], "dimension3": [4]}')
    funcs, narr = build_reward_funcs(judge, retries=0)
    merged = sft_model.merge_and_unload()
    grpo_model, grpo = T.train_grpo(merged, tok, examples, cfg, funcs + [_distinct_chars_reward],
                                    tmp_path / "grpo", reward_weights=[0.5, 0.5, 1.0])
    assert grpo.steps == 2
    assert grpo.lora_change["l2_change"] > 0 and grpo.lora_change["tensors_changed"] > 0
    glog = grpo.log_frame()
    for col in ("loss", "kl", "rewards/format_reward/mean", "rewards/narratological_reward/mean",
                "dynamic_sampling/filtered_group_frac"):
        assert col in glog.columns, col
    assert narr.stats.completions == 2 * cfg.grpo_num_generations  # every rollout was scored
    assert grpo.extra["groups seen"] == 2
    assert any("overlong" in c.lower() for c in glog.columns), list(glog.columns)
    steps = grpo.steps_table  # per step: truncated / masked rollouts, filtered groups
    assert list(steps["step"]) == [1, 2] and (steps["rollouts"] == cfg.grpo_num_generations).all()
    assert grpo.extra["trained completion tokens"] == int(steps["trained tokens"].sum()) > 0
    for d in (sft.adapter_dir, grpo.adapter_dir):  # each adapter records the units it learned from
        assert model_record(d).keys == {(book.book_id, u.unit_id) for u in book.units}

    # merged base + SFT + GRPO model: a plain folder any backend loads; the segmenter runs on it
    folder = T.save_merged_model("tiny-random", [sft.adapter_dir, grpo.adapter_dir], tmp_path / "merged")
    assert (folder / "config.json").is_file()
    os.utime(folder / TRAINED_UNITS_FILE, ns=(10**9, 10**9))  # a stamp a rewrite cannot keep, however fast
    revision = model_revision(str(folder))
    assert T.save_merged_model("tiny-random", [sft.adapter_dir, grpo.adapter_dir], tmp_path / "merged") == folder
    assert (folder / TRAINED_UNITS_FILE).is_file()
    # asking again leaves the folder's files alone: the same revision, so the request cache still answers
    # (a rewritten record made every request of a rerun of notebook 07 to this student a miss)
    assert model_revision(str(folder)) == revision
    backend = HFBackend(str(folder), batch_size=2)
    seg = LiteSegmenter(backend, max_new_tokens=16, retries=1)
    with pytest.raises(TrainedUnitError):  # the trained student is never run on its training units
        seg.segment_units([(book, u) for u in book.units])
    book = make_book("gutenberg:10", n_units=2, n_sent=5)  # held-out book
    pairs = [(book, u) for u in book.units]
    chunks, results = seg.segment_units(pairs)
    assert all(r.attempts == 2 for r in results)  # noise is invalid: one retry each
    assert all(r.fallback == "whole_unit" for r in results)  # ... then the paper's last resort
    for u in book.units:
        assert check_coverage(u, [c for c in chunks if c.unit_id == u.unit_id]).ok
    assert {c.method for c in chunks} == {"litseg-lite"}


def test_grpo_that_trains_on_nothing_stops_with_the_counts(tmp_path):
    """With full's masking and a model that never closes its reply, every rollout
    is masked; the per-step table shows it and the run stops with a clear error (not a silent no-op)."""
    from litseg_nb.llm.models import load_model_and_tokenizer
    from litseg_nb.lite import train as T
    from test_lite_data import make_book

    examples = _examples(make_book("gutenberg:9", n_units=1, n_sent=4))
    model, tok, _ = load_model_and_tokenizer("tiny-random")
    cfg = LiteConfig.for_profile("test", grpo_mask_truncated_completions=True, grpo_allow_no_signal=False,
                                 grpo_max_steps=1)
    with pytest.raises(T.GRPONoSignalError, match=r"2 of 2 rollouts truncated at 24 tokens \(masked: 2\)") as exc:
        T.train_grpo(model, tok, examples, cfg, [_distinct_chars_reward], tmp_path / "grpo")
    row = exc.value.steps.iloc[0]  # the per-step table notebook 03 shows
    assert (row["rollouts"], row["truncated"], row["masked (no token trained)"], row["trained tokens"]) == (2, 2, 2, 0)
    assert row["truncated share"] == 1.0 and row["masked share"] == 1.0


def test_rollout_cap_is_sized_from_the_teacher_replies():
    from litseg_nb.lite import train as T
    from test_lite_data import make_book

    examples = _examples(make_book("gutenberg:9", n_units=3, n_sent=4))
    count = lambda text: len(text) // 4  # noqa: E731 - a stand-in tokenizer
    longest = max(count(e.target) + 1 for e in examples)
    full = LiteConfig.for_profile("full")
    assert full.grpo_max_completion_length == 0  # full: sized, not the old fixed 2048
    got = T.rollout_cap(examples, count, full)
    assert got["cap"] == -(-longest * 11 // 10) and got["teacher replies over the cap"] == 0
    assert got["teacher reply tokens max"] == longest
    fixed = T.rollout_cap(examples, count, full.replace(grpo_max_completion_length=5))
    assert fixed["cap"] == 5 and fixed["share of teacher replies over the cap"] == 1.0
    with pytest.raises(ValueError, match="sized from the teacher"):
        T.train_grpo(None, None, examples, full, [], "/nonexistent")
    # never above Lite's own inference cap: sized or configured
    low = T.rollout_cap(examples, count, full.replace(infer_max_new_tokens=longest - 1))
    assert low["cap"] == longest - 1 and "bounded by infer_max_new_tokens" in low["source"]
    assert low["teacher replies over the cap"] >= 1
    assert T.rollout_cap(examples, count, full.replace(grpo_max_completion_length=10 ** 6))["cap"] == 4096


def test_rollout_time_estimate_counts_decode_steps_both_ways():
    from litseg_nb.lite import train as T

    full = LiteConfig.for_profile("full")
    est = T.rollout_time_estimate(full, 1500).set_index("rollouts by")
    # hf: 2 groups decoded one after the other (2 x 1500 steps); vLLM: all 16 rollouts in one batch (1500 steps)
    assert est.loc["hf generate", "decode steps per GRPO step"] == 3000
    assert est.loc["vLLM (trl colocate)", "decode steps per GRPO step"] == 1500
    assert est.loc["hf generate", "est. rollout s per GRPO step (upper bound)"] == 90.0
    assert est.loc["vLLM (trl colocate)", "est. rollout s per GRPO step (upper bound)"] == 12.0
    assert bool(est.loc["hf generate", "used in this profile"]) and est["rollouts per step"].eq(16).all()


def test_checkpointing_argument_matches_the_installed_transformers():
    """transformers 5.19 (the GPU pins) has no `activation_checkpointing`: the rehearsal's SFT failed
    with `SFTConfig.__init__() got an unexpected keyword argument 'activation_checkpointing'`."""
    import dataclasses

    import transformers

    from litseg_nb.lite import train as T

    assert T._checkpointing_arg() in {f.name for f in dataclasses.fields(transformers.TrainingArguments)}

    @dataclasses.dataclass
    class Old:  # TrainingArguments of transformers 5.19
        output_dir: str = ""
        gradient_checkpointing: bool = False

    assert T._checkpointing_arg(Old) == "gradient_checkpointing"
