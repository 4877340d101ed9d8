"""Small fidelity items: boundary similarity embeds plain sentences (no retrieval instruction, even
when the profile's embedder uses instructions); Lite retries as LitSeg's in full."""
from __future__ import annotations

import numpy as np

from litseg_nb.config import EmbeddingConfig
from litseg_nb.llm.embeddings import Embedder
from litseg_nb.lite.config import LiteConfig
from litseg_nb.litseg.config import LitSegConfig
from litseg_nb.evaluation import segment_quality as sq


def test_boundary_similarity_embeds_sentences_without_instruction():
    cfg = EmbeddingConfig(use_instructions=True)
    emb = Embedder.__new__(Embedder)
    emb.cfg = cfg
    assert emb.prepare(["He left."], "passage") == [f"{cfg.passage_instruction} He left."]
    assert emb.prepare(["He left."], "sentence") == ["He left."]
    kinds = []

    class Fake:
        def encode(self, texts, kind="passage"):
            kinds.append(kind)
            return np.ones((len(texts), 3), dtype=np.float32)

    sq.boundary_similarities([("m", "b", "u", "left sentence", "right sentence")], Fake())
    assert kinds == ["sentence", "sentence"]


def test_lite_retries_equal_litsegs_in_full():
    assert LiteConfig.for_profile("full").infer_retries == LitSegConfig.for_profile("full").max_retries == 3
