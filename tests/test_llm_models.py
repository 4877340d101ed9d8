"""Model resolution: the tiny random model is deterministic and cached; the SmolLM2 copy is a plain
safetensors model without ``quantization_config``; unknown models fail clearly."""
from __future__ import annotations

import json

import pytest

from litseg_nb.llm import LLMError, SamplingParams
from litseg_nb.llm.models import (SMOLLM2, TINY_RANDOM_CONFIG, load_model_and_tokenizer,
                                  model_revision, resolve_model_path, smollm2_dir, tiny_random_dir)


def test_tiny_random_model_shape_and_tokenizer():
    model, tok, device = load_model_and_tokenizer("tiny-random", device="cpu")
    cfg = model.config
    assert cfg.model_type == "llama" and cfg.num_hidden_layers == 2 and cfg.hidden_size == 64
    assert cfg.num_attention_heads == 4 and cfg.vocab_size == len(tok)
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    assert "<|im_start|>assistant" in tok.apply_chat_template(
        [{"role": "user", "content": "x"}], tokenize=False, add_generation_prompt=True)
    assert resolve_model_path("tiny-random") == str(tiny_random_dir())
    assert model_revision("tiny-random").startswith("tiny-random@")


def test_tiny_random_weights_follow_the_seed(tmp_path, monkeypatch):
    """A rebuild in a fresh models dir gives bit-identical weights (fixed seed)."""
    import torch

    ref, _, _ = load_model_and_tokenizer("tiny-random", device="cpu")
    monkeypatch.setenv("LITSEG_MODELS_DIR", str(tmp_path / "models"))
    # reuse the extracted tokenizer (slow to extract from the GGUF) by linking it in
    from litseg_nb.llm import models as m
    default = m.default_cache_root() / "models" / f"smollm2-tokenizer-{m.SMOLLM2_REVISION}"
    monkeypatch.setattr(m, "smollm2_tokenizer_dir", lambda: default)
    if not m.smollm2_tokenizer_dir().is_dir():
        pytest.skip("tokenizer not extracted in the default models dir")
    rebuilt_dir = tiny_random_dir()
    assert str(rebuilt_dir).startswith(str(tmp_path))
    rebuilt, _, _ = load_model_and_tokenizer("tiny-random", device="cpu")
    for (n1, p1), (n2, p2) in zip(ref.state_dict().items(), rebuilt.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)
    assert TINY_RANDOM_CONFIG["hidden_size"] == 64


def test_unknown_local_path_fails_with_clear_message(tmp_path):
    with pytest.raises(LLMError, match=r"cannot load model .*missing"):
        load_model_and_tokenizer(str(tmp_path / "missing"), device="cpu")


@pytest.mark.smollm2
@pytest.mark.slow
def test_smollm2_copy_is_plain_safetensors_and_generates():
    path = smollm2_dir()
    cfg = json.loads((path / "config.json").read_text())
    assert "quantization_config" not in cfg and cfg["model_type"] == "llama"
    assert (path / "model.safetensors").is_file()
    from litseg_nb.llm.hf import HFBackend

    b = HFBackend(SMOLLM2, device="cpu", batch_size=2)
    g = b.chat([[{"role": "user", "content": "What is the capital of France?"}]],
               SamplingParams(max_new_tokens=12))[0]
    assert "paris" in g.text.lower()  # the de-quantised weights are the real model
