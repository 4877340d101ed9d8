"""``rehearse --estimate``: the scaling arithmetic on a toy ledger, engine memory, errors."""
from __future__ import annotations

import json

import pytest

from litseg_nb.front import rehearse as re_
from litseg_nb.errors import UsageError

TOY = [{"notebook / piece": "FlagEmbedding BGE-M3 + reranker (tiny)", "LLM calls": 0},
       {"notebook / piece": "01", "LLM calls": 0, "prompt tokens": 0, "completion tokens": 0},
       {"notebook / piece": "02", "LLM calls": 10, "prompt tokens": 30_000, "completion tokens": 2_000},
       {"notebook / piece": "05", "LLM calls": 4, "prompt tokens": 8_000, "completion tokens": 400}]
REH = {"eval_units": 2.0, "eval_words": 500.0, "train_units": 2.0, "train_words": 500.0, "questions": 4.0}
FULL = {"eval_units": 400.0, "eval_words": 1_000_000.0, "train_units": 1000.0, "train_words": 3_000_000.0,
        "questions": 400.0}


def test_scale_factors_are_full_over_rehearsal_per_driver():
    s = re_.scale_factors(REH, FULL)
    assert s["02"]["units"] == pytest.approx(1400 / 4) and s["02"]["words"] == pytest.approx(4_000_000 / 1000)
    assert s["02"]["extra_words_per_unit"] == pytest.approx(4_000_000 / 1400 - 250)
    assert s["03"]["units"] == pytest.approx(500) and s["03"]["words"] == pytest.approx(6000)
    assert s["04"]["units"] == pytest.approx(200) and s["04"]["extra_words_per_unit"] == pytest.approx(2500 - 250)
    assert s["05"] == {"units": 100.0, "words": 100.0, "extra_words_per_unit": 0.0,
                       "basis": "questions: full 400 / rehearsal 4"}
    assert s["01"]["basis"] == "no LLM" and "words: full 4,000,000 / rehearsal 1,000" in s["02"]["basis"]


def test_estimate_scales_counts_and_prices_them_at_the_stated_rates():
    s = re_.scale_factors(REH, FULL)
    rates = {80: {"Qwen/Qwen3-32B": (1000.0, 100.0), "Qwen/Qwen3-8B": (2000.0, 200.0)}}
    rows = {r["notebook"]: r for r in re_.estimate(TOY, s, 80, rates, tokens_per_word=1.0)}
    assert set(rows) == {"01", "02", "05", "total"}  # the engine pieces are not notebooks
    calls = 10 * 350  # x units
    prompt = calls * (3000 + (4_000_000 / 1400 - 250))  # per call: the rehearsal's 3,000 + the longer unit text
    assert rows["02"]["LLM calls"] == calls and rows["02"]["prompt tokens"] == round(prompt)
    assert rows["02"]["completion tokens"] == 2000 * 4000  # x words
    assert rows["02"]["GPU-h (80 GB)"] == pytest.approx((prompt / 1000 + 8e6 / 100) / 3600, abs=0.01)
    assert rows["05"]["LLM calls"] == 400 and rows["05"]["prompt tokens"] == 800_000
    assert rows["05"]["GPU-h (80 GB)"] == pytest.approx((800_000 / 2000 + 40_000 / 200) / 3600, abs=0.01)
    assert rows["01"]["GPU-h (80 GB)"] == 0 and rows["total"]["LLM calls"] == calls + 400
    with pytest.raises(UsageError, match="no stated throughput for a 48 GB card"):
        re_.estimate(TOY, s, 48, rates)


def test_nothing_to_scale_from_is_an_error():
    with pytest.raises(UsageError, match="questions is 0"):
        re_.scale_factors({**REH, "questions": 0.0}, FULL)
    with pytest.raises(UsageError, match="train units/words are 0.0/500.0"):
        re_.scale_factors({**REH, "train_units": 0.0}, FULL)


def test_engine_memory_from_the_published_shapes():
    by = {r["engine"]: r for r in re_.engine_memory(80, 32768)}
    q32, q8 = by["Qwen/Qwen3-32B"], by["Qwen/Qwen3-8B"]
    assert q32["weights GB"] == 65.6 and q8["weights GB"] == 16.4
    assert q32["KV MB/token"] == pytest.approx(0.262, abs=1e-3)  # 2 x 64 layers x 8 heads x 128 x 2 bytes
    assert q8["KV MB/token"] == pytest.approx(0.147, abs=1e-3)  # 36 layers
    # 0.9 x 80 - 65.6 - 2 = 4.4 GB < one 32k sequence (8.59 GB): the teacher does not fit at 32k on 80 GB
    assert q32["sequences that fit"] == 0 and not q32["fits"]
    assert q8["sequences that fit"] == int((72 - 16.4 - 2) // 4.832) and q8["fits"]
    big = {r["engine"]: r for r in re_.engine_memory(141, 32768)}
    assert big["Qwen/Qwen3-32B"]["fits"] and big["Qwen/Qwen3-32B"]["sequences that fit"] == 6


def test_full_quantities_from_the_stated_sizes():
    q = re_.full_quantities()
    assert q["questions"] == pytest.approx(3000 + 138 * 1417 / 47)
    assert q["train_words"] == pytest.approx(465 * 1_476_595 / 18)
    assert q["eval_units"] == pytest.approx(q["eval_words"] / re_.FULL_WORDS_PER_UNIT)


def test_format_estimate_needs_the_rehearsals_counts(tmp_path):
    with pytest.raises(UsageError, match="rehearsal_rows.json not found; run `python -m litseg_nb rehearse` first"):
        re_.format_estimate(tmp_path / "rehearsal_rows.json", rehearsal=REH)
    (tmp_path / "rehearsal_rows.json").write_text(json.dumps(TOY))
    md = re_.format_estimate(tmp_path / "rehearsal_rows.json", rehearsal=REH)
    assert "### one 80 GB GPU" in md and "### one 141 GB GPU" in md and "Estimate, not a measurement" in md


def test_cli_estimate_errors_are_one_line(tmp_path, capsys):
    from litseg_nb.cli import main

    assert main(["rehearse", "--estimate", "--work", str(tmp_path)]) == 2
    assert main(["rehearse", "--estimate", "--gpu-gb", "eighty", "--work", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not found" in err[0] and "must be integers" in err[1]


@pytest.mark.parametrize("content, word", [('[{"notebook / piece": "02", "LLM calls"', "Invalid JSON"),
                                           ('{"rows": []}', "array"),
                                           ('[["02", 10]]', "0"),
                                           ('[{"notebook / piece": "02", "LLM calls": [10]}]', "LLM calls"),
                                           ('[{"notebook / piece": "02", "prompt tokens": "many"}]', "prompt tokens")])
def test_cli_estimate_with_a_damaged_rows_file_is_one_line(tmp_path, capsys, content, word):
    from litseg_nb.cli import main

    (tmp_path / "rehearsal_rows.json").write_text(content)
    assert main(["rehearse", "--estimate", "--work", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "rehearsal_rows.json" in err and word in err


def test_cli_unwritable_work_folder_is_one_line(tmp_path, capsys):
    from litseg_nb.cli import main

    (tmp_path / "a-file").write_text("x")
    python = tmp_path / "python"
    python.write_text("")
    assert main(["rehearse", "--python", str(python), "--work", str(tmp_path / "a-file" / "w")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and "--work" in err


def test_profile_and_estimate_agree_on_the_card_and_the_teachers_weights(tmp_path):
    from litseg_nb.config import FULL_CARD_GB, FULL_TEACHER_WEIGHTS
    from litseg_nb.litseg.config import LitSegConfig

    teacher = FULL_TEACHER_WEIGHTS[LitSegConfig.for_profile("full").teacher_weights]
    by = {c: {r["engine"]: r for r in re_.engine_memory(c, 32768)} for c in (80, FULL_CARD_GB)}
    assert by[FULL_CARD_GB][teacher]["fits"]  # full's teacher fits full's card at full's max_model_len
    assert not by[80]["Qwen/Qwen3-32B"]["fits"] and by[80]["Qwen/Qwen3-32B-FP8"]["fits"]
    assert by[80]["Qwen/Qwen3-32B-FP8"]["weights GB"] == 32.8
    (tmp_path / "rehearsal_rows.json").write_text(json.dumps(TOY))
    md = re_.format_estimate(tmp_path / "rehearsal_rows.json", cards=(80, FULL_CARD_GB), rehearsal=REH)
    assert f"full is sized for one {FULL_CARD_GB} GB card" in md
    one80, big = md.split(f"### one {FULL_CARD_GB} GB GPU")
    assert "does not fit one 80 GB card" in one80 and "teacher_weights=fp8" in one80 and "does not fit" not in big
