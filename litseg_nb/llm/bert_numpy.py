"""A BERT sentence encoder in numpy: the torch-free ``numpy`` embedding backend.

It reads a sentence-transformers folder (``config.json``, ``model.safetensors``, the tokenizer, ``1_Pooling``)
such as all-MiniLM-L6-v2 and computes what sentence-transformers computes for it, on the CPU, with the
core install's own libraries (transformers' tokenizer, safetensors, numpy). One layer of the encoder is

$$h' = \\mathrm{LN}(h + \\mathrm{Attn}(h)), \\qquad
  h'' = \\mathrm{LN}(h' + W_2\\,\\mathrm{GELU}(W_1 h' + b_1) + b_2), \\qquad
  \\mathrm{Attn}(h) = W_o \\big[\\mathrm{softmax}(Q_i K_i^\\top / \\sqrt{d} + M)\\,V_i\\big]_{i=1..H}$$

and the sentence vector is the mean of the last layer over the real (unpadded) tokens, or the ``[CLS]``
vector when the folder's pooling says so."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from .models import EmbeddingError


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * w + b


def _gelu(x: np.ndarray) -> np.ndarray:
    """The exact GELU, x·Φ(x), with erf from Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7), in place on
    temporaries (the activations are the encoder's largest array)."""
    z = np.abs(x)
    z *= 1.0 / math.sqrt(2.0)
    np.minimum(z, 6.0, out=z)  # erf(6) is 1 in float32; the cap keeps exp() off denormals
    t = z * 0.3275911
    t += 1.0
    np.reciprocal(t, out=t)
    poly = t * 1.061405429
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += c
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z  # 1 - erf(|x| / sqrt 2)
    sign = np.sign(x)
    poly *= -sign
    poly += sign
    poly += 1.0  # 1 + erf(x / sqrt 2)
    poly *= x
    poly *= 0.5
    return poly


class BertEncoder:
    """``encode(texts) -> (n, hidden)`` float32 for a BERT folder; ``tokenizer`` and ``max_seq_length`` as
    sentence-transformers names them (texts longer than ``max_seq_length`` tokens are cut, as there)."""

    def __init__(self, folder: str | Path):
        from safetensors.numpy import load_file
        from transformers import AutoTokenizer

        self.folder = Path(folder)
        try:
            conf = json.loads((self.folder / "config.json").read_text())
            weights = load_file(str(self.folder / "model.safetensors"))
        except (OSError, ValueError) as e:
            raise EmbeddingError(f"{self.folder}: not a BERT model folder with config.json and "
                                 f"model.safetensors ({e})") from e
        if conf.get("model_type") != "bert" or conf.get("hidden_act", "gelu") != "gelu" \
                or conf.get("position_embedding_type", "absolute") != "absolute":
            raise EmbeddingError(f"{self.folder}: the numpy backend reads BERT encoders with GELU and absolute "
                                 f"positions (all-MiniLM-L6-v2 is one); this is a {conf.get('model_type')!r} "
                                 "model: use the sentence-transformers backend")
        self.pooling = self._pooling()
        modules = self.folder / "modules.json"
        self.normalize = modules.is_file() and any(m.get("type", "").endswith(".Normalize")
                                                   for m in json.loads(modules.read_text()))
        self.weights = {k.removeprefix("bert."): v for k, v in weights.items()}
        self.heads = int(conf["num_attention_heads"])
        self.layers = int(conf["num_hidden_layers"])
        self.eps = float(conf.get("layer_norm_eps", 1e-12))
        st = self.folder / "sentence_bert_config.json"
        limit = json.loads(st.read_text()).get("max_seq_length") if st.is_file() else None
        self.max_seq_length = int(limit or conf["max_position_embeddings"])
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.folder))

    def _pooling(self) -> str:
        path = self.folder / "1_Pooling" / "config.json"
        modes = json.loads(path.read_text()) if path.is_file() else {"pooling_mode_mean_tokens": True}
        chosen = [m for m in ("mean_tokens", "cls_token", "max_tokens", "mean_sqrt_len_tokens")
                  if modes.get(f"pooling_mode_{m}")]
        if chosen not in (["mean_tokens"], ["cls_token"]):
            raise EmbeddingError(f"{path}: pooling {chosen} is not one the numpy backend computes (mean or cls)")
        return chosen[0]

    def _dense(self, x: np.ndarray, name: str) -> np.ndarray:
        return x @ self.weights[f"{name}.weight"].T + self.weights[f"{name}.bias"]

    def _norm(self, x: np.ndarray, name: str) -> np.ndarray:
        return _layer_norm(x, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"], self.eps)

    def encode(self, texts: list[str]) -> np.ndarray:
        enc = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_seq_length,
                             return_tensors="np")
        ids, mask = enc["input_ids"], enc["attention_mask"]
        types = enc.get("token_type_ids", np.zeros_like(ids))
        # groups of about 512 tokens: each array stays small enough for the allocator to reuse its memory
        step = max(1, 512 // ids.shape[1])
        out = np.concatenate([self._forward(ids[i:i + step], mask[i:i + step], types[i:i + step])
                              for i in range(0, len(ids), step)]) if len(ids) else np.zeros((0, 0))
        if self.normalize:  # the folder's Normalize module
            out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out.astype(np.float32)

    def _forward(self, ids: np.ndarray, mask: np.ndarray, types: np.ndarray) -> np.ndarray:
        length = int(mask.sum(1).max())  # this group's own padding
        ids, types, mask = ids[:, :length], types[:, :length], mask[:, :length].astype(np.float32)
        w = self.weights
        n = len(ids)
        h = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
             + w["embeddings.token_type_embeddings.weight"][types])
        h = self._norm(h, "embeddings.LayerNorm")
        d = h.shape[-1] // self.heads
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]  # padding gets no attention

        def split(x: np.ndarray) -> np.ndarray:  # (n, L, hidden) -> (n, heads, L, d), contiguous for BLAS
            return np.ascontiguousarray(x.reshape(n, length, self.heads, d).transpose(0, 2, 1, 3))

        for i in range(self.layers):
            p = f"encoder.layer.{i}."
            q, k, v = (split(self._dense(h, p + f"attention.self.{m}")) for m in ("query", "key", "value"))
            q *= 1.0 / math.sqrt(d)
            scores = q @ np.ascontiguousarray(k.transpose(0, 1, 3, 2))
            scores += bias
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = scores @ v
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n, length, -1)
            h = self._norm(h + self._dense(ctx, p + "attention.output.dense"), p + "attention.output.LayerNorm")
            inner = _gelu(self._dense(h, p + "intermediate.dense"))
            h = self._norm(h + self._dense(inner, p + "output.dense"), p + "output.LayerNorm")
        if self.pooling == "cls_token":
            return h[:, 0]
        return (h * mask[:, :, None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
