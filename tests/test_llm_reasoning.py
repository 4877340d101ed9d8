"""Reasoning models: the chat template's thinking switch reaches the template in
the hf, vLLM and openai backends (off by default), and reasoning tokens are counted apart."""
from __future__ import annotations

import sys
import types

import pytest
from fakes import LoopbackServer

from litseg_nb.config import LLMConfig
from litseg_nb.llm import SamplingParams, UsageLedger, UsageTag, make_backend
from litseg_nb.llm.base import (Generation, reasoning_text_split, reasoning_token_count,
                                think_token_ids)
from litseg_nb.llm.models import load_tokenizer
from litseg_nb.llm.openai_backend import OpenAIBackend

# a Qwen3-like template: with thinking off the generation prompt carries an empty think block
QWEN_LIKE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
             "{% if add_generation_prompt %}<|im_start|>assistant\n"
             "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
             "{% endif %}{% endif %}")
CONV = [{"role": "user", "content": "Segment this."}]


def thinking_tokenizer():
    tok = load_tokenizer("tiny-random")
    tok.add_tokens(["<think>", "</think>"], special_tokens=False)
    tok.chat_template = QWEN_LIKE
    return tok


def test_think_token_counting():
    tok = thinking_tokenizer()
    start, end = think_token_ids(tok)
    assert start is not None and end is not None and start != end
    body = tok("<think> let me see </think> {\"a\": 1}", add_special_tokens=False).input_ids
    n = reasoning_token_count(body, (start, end))
    assert body[n - 1] == end and 0 < n < len(body)
    assert reasoning_token_count([start, 5, 6], (start, end)) == 3  # cut before closing: all of it
    assert reasoning_token_count([5, 6], (start, end)) == 0
    assert think_token_ids(load_tokenizer("tiny-random")) == (None, None)  # SmolLM2 has none
    assert reasoning_text_split("<think>a b</think> rest") == ("<think>a b</think>", " rest")
    assert reasoning_text_split("plain") == ("", "plain")


def test_ledger_counts_reasoning_tokens_separately():
    led = UsageLedger()
    led.record(UsageTag("m"), Generation("x", 10, 8, 0.1, reasoning_tokens=5))
    led.record(UsageTag("m"), Generation("y", 10, 3, 0.1))
    row = led.rows()[0]
    assert (row["completion_tokens"], row["reasoning_tokens"]) == (11, 5)
    assert "reasoning_tokens" in led.to_frame().columns


@pytest.mark.parametrize("thinking", [False, True])
def test_hf_backend_passes_the_switch_to_the_template(thinking):
    cfg = LLMConfig(backend="hf", model="tiny-random", device="cpu", use_cache=False,
                    enable_thinking=thinking)
    b = make_backend(cfg)
    assert b.enable_thinking is thinking and LLMConfig().enable_thinking is False
    b.tokenizer = thinking_tokenizer()
    text = b.render_prompt(CONV)
    assert text.endswith("<|im_start|>assistant\n" + ("" if thinking else "<think>\n\n</think>\n\n"))


def test_vllm_backend_passes_the_switch_and_counts_reasoning(monkeypatch):
    fake = types.ModuleType("vllm")
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    from litseg_nb.llm.vllm_backend import VLLMBackend

    tok = thinking_tokenizer()
    start, end = think_token_ids(tok)
    reply = tok("<think> plan </think> {}", add_special_tokens=False).input_ids

    class Engine:
        prompts: list = []

        def get_tokenizer(self):
            return tok

        def generate(self, prompts, sampling, use_tqdm=False):
            self.prompts.extend(prompts)
            return [types.SimpleNamespace(
                prompt_token_ids=p["prompt_token_ids"], num_cached_tokens=3,
                outputs=[types.SimpleNamespace(text=tok.decode(reply), token_ids=reply,
                                               finish_reason="stop")]) for p in prompts]

    for thinking in (False, True):
        eng = Engine()
        b = VLLMBackend("some/model", engine=eng, enable_thinking=thinking)
        g = b.chat([CONV], SamplingParams(max_new_tokens=16), UsageTag("m"))[0]
        sent = tok.decode(eng.prompts[-1]["prompt_token_ids"])
        assert sent.endswith("<think>\n\n</think>\n\n") is (not thinking)
        assert g.reasoning_tokens == reply.index(end) + 1 and g.cached_prompt_tokens == 3
        assert b.ledger.rows()[0]["reasoning_tokens"] == g.reasoning_tokens


@pytest.fixture
def chat_server():
    """Replies in turn: usage with reasoning_tokens, a reasoning_content field, a <think> text."""
    bodies: list[dict] = []
    replies = [
        ({"content": "A"}, {"completion_tokens_details": {"reasoning_tokens": 7}}),
        ({"content": "B", "reasoning_content": "one two three"}, {}),
        ({"content": "<think>x y</think>C"}, {}),
        ({"content": "D"}, {}),
        ({"content": None, "reasoning_content": "still thinking"}, {}),
    ]

    class Replies(LoopbackServer):
        def respond(self, handler, body):
            bodies.append(body)
            msg, usage = replies[int(body["messages"][-1]["content"])]
            self.send(handler, 200, {"choices": [{"message": msg, "finish_reason": "stop"}],
                                     "usage": {"prompt_tokens": 4, "completion_tokens": 20, **usage}})

    with Replies() as srv:
        yield srv.url, bodies


@pytest.mark.timeout(60)
def test_openai_backend_sends_the_switch_and_reads_reasoning(chat_server):
    url, bodies = chat_server
    tok = load_tokenizer("tiny-random")
    for thinking in (False, True):
        b = OpenAIBackend("m", base_urls=[url], tokenizer=tok, enable_thinking=thinking,
                          max_concurrency=1, max_retries=0)
        gens = b.chat([[{"role": "user", "content": str(i)}] for i in range(4)])
        assert all(x["chat_template_kwargs"] == {"enable_thinking": thinking} for x in bodies[-4:])
    # text left to the reply parsers; a separate reasoning field is put back as a think block
    assert [g.text for g in gens] == ["A", "<think>one two three</think>B", "<think>x y</think>C", "D"]
    want = [7, len(tok("one two three", add_special_tokens=False).input_ids),
            len(tok("<think>x y</think>", add_special_tokens=False).input_ids), 0]
    assert [g.reasoning_tokens for g in gens] == want
    assert b.ledger.rows()[0]["reasoning_tokens"] == sum(want)
    cut = b.chat([[{"role": "user", "content": "4"}]])[0]  # cut off inside its reasoning
    assert cut.text == "<think>still thinking" and cut.reasoning_tokens > 0


def test_request_cache_key_depends_on_the_switch(tmp_path):
    from litseg_nb.llm.request_cache import CachedBackend, RequestCache

    class Inner:
        name, model_id, ledger, structured_output = "x", "m", UsageLedger(), False

        def __init__(self, thinking):
            self.enable_thinking = thinking

    off = CachedBackend(Inner(False), RequestCache(tmp_path / "c.sqlite"))._base_payload("chat")
    on = CachedBackend(Inner(True), RequestCache(tmp_path / "c.sqlite"))._base_payload("chat")
    assert "thinking" not in off and on["thinking"] is True  # old keys unchanged when off
