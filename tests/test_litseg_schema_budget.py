"""Constrained-decoding schemas are sized so that a complete reply fits the stage's token budget."""
import json

import pytest

from litseg_nb.litseg.prompting import stage_json_schema
from litseg_nb.llm.models import load_tokenizer

WORDS = "Emma walks to Hartfield and talks with her father about the wedding of Miss Taylor ".split()


def _english(n_chars: int) -> str:
    out, i = "", 0
    while len(out) + len(WORDS[i % len(WORDS)]) + 1 <= n_chars:
        out += ("" if not out else " ") + WORDS[i % len(WORDS)]
        i += 1
    return out


def _largest_instance(schema):
    """The longest reply the schema allows: every array full, every string at maxLength."""
    t = schema["type"]
    if t == "object":
        return {k: _largest_instance(v) for k, v in schema["properties"].items()}
    if t == "array":
        return [_largest_instance(schema["items"]) for _ in range(schema["maxItems"])]
    if t == "string":
        return _english(schema["maxLength"])
    if t == "integer":
        return schema.get("maximum", 123)
    raise AssertionError(t)


@pytest.mark.parametrize("stage,budget,n", [("stage1", 48, None), ("stage2", 48, None), ("stage3", 192, None),
                                            ("stage3", 1024, None), ("stage3", 192, 17), ("stage3", 1024, 250)])
def test_largest_reply_fits_the_budget(stage, budget, n):
    tok = load_tokenizer("smollm2-135m-instruct")
    reply = json.dumps(_largest_instance(stage_json_schema(stage, budget, n)), separators=(",", ":"))
    n = len(tok(reply, add_special_tokens=False).input_ids)
    assert n <= budget, f"{stage}: the largest allowed reply takes {n} tokens > budget {budget}"


def test_budget_scales_segment_count():
    small = stage_json_schema("stage3", 192)["properties"]["segments"]["maxItems"]
    large = stage_json_schema("stage3", 4096)["properties"]["segments"]["maxItems"]
    assert 1 <= small < large
    with pytest.raises(ValueError, match="unknown LitSeg stage"):
        stage_json_schema("stage4", 10)


@pytest.mark.parametrize("budget", [192, 512])
def test_largest_single_pass_reply_fits_the_budget(budget):
    from litseg_nb.litseg.prompting import single_pass_json_schema

    tok = load_tokenizer("smollm2-135m-instruct")
    reply = json.dumps(_largest_instance(single_pass_json_schema(budget, 40)), separators=(",", ":"))
    assert len(tok(reply, add_special_tokens=False).input_ids) <= budget
