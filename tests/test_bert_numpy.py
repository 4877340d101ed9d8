"""The ``numpy`` embedding backend computes what sentence-transformers computes for a BERT folder: the same
vectors (mean or [CLS] pooling, with or without the folder's Normalize module, texts cut at max_seq_length),
read from a folder or from the hub cache, and a clear error for what it cannot compute."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from litseg_nb.config import EmbeddingConfig
from litseg_nb.llm.bert_numpy import BertEncoder
from litseg_nb.llm.embeddings import load_embedder
from litseg_nb.llm.models import EmbeddingError, packaged_model_dir

MINILM = packaged_model_dir("all-MiniLM-L6-v2")
TEXTS = ["Emma Woodhouse, handsome, clever, and rich, had lived nearly twenty-one years.", "a", "",
         "Mr. Knightley, a sensible man about seven or eight-and-thirty, was a very old and intimate friend. " * 30,
         "“Poor Miss Taylor!—I wish she were here again.” Ça va? 1816."]


def _copy(tmp_path: Path, pooling: str | None = None, normalize: bool = True, **config) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(MINILM, folder)
    if pooling:
        modes = {k: False for k in json.loads((folder / "1_Pooling" / "config.json").read_text()) if "mode" in k}
        (folder / "1_Pooling" / "config.json").write_text(json.dumps(
            {"word_embedding_dimension": 384, **modes, f"pooling_mode_{pooling}": True}))
    if not normalize:
        modules = [m for m in json.loads((folder / "modules.json").read_text()) if not m["type"].endswith("Normalize")]
        (folder / "modules.json").write_text(json.dumps(modules))
    if config:
        (folder / "config.json").write_text(json.dumps({**json.loads((folder / "config.json").read_text()), **config}))
    return folder


@pytest.mark.parametrize("pooling,normalize", [(None, True), ("cls_token", False)])
def test_the_vectors_are_sentence_transformers_vectors(tmp_path, pooling, normalize):
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = _copy(tmp_path, pooling, normalize) if pooling else MINILM
    ours = BertEncoder(folder)
    theirs = sentence_transformers.SentenceTransformer(str(folder), device="cpu")
    assert len(ours.tokenizer(TEXTS[3]).input_ids) > ours.max_seq_length == theirs.max_seq_length == 256
    want = theirs.encode(TEXTS, convert_to_numpy=True, show_progress_bar=False)
    got = ours.encode(TEXTS)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, atol=2e-5)
    # batched with other lengths (padding) gives the same vector as alone
    np.testing.assert_allclose(ours.encode(TEXTS[:1])[0], got[0], atol=2e-6)


def test_the_backend_goes_through_the_embedder_and_its_chunk_limit_report(tmp_path):
    emb = load_embedder(EmbeddingConfig(backend="numpy"), cache_root=tmp_path)
    vecs = emb.encode(TEXTS[:2])
    assert vecs.shape == (2, 384) and np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-5)
    assert "numpy" in str(emb.cache.path)  # its own cache: vectors of another backend are never reused
    from types import SimpleNamespace

    from litseg_nb.llm.embeddings import limit_report

    row = limit_report({"m": [SimpleNamespace(text=TEXTS[3])]}, emb).iloc[0]
    assert row["embedder limit"] == 256 and row["over embedder limit"] == 1


@pytest.mark.parametrize("change,words", [({"model_type": "xlm-roberta"}, "'xlm-roberta'"),
                                          ({"hidden_act": "relu"}, "GELU"),
                                          ({}, "pooling ['max_tokens']")])
def test_what_it_cannot_compute_is_refused_naming_the_folder(tmp_path, change, words):
    folder = _copy(tmp_path, None if change else "max_tokens", **change)
    with pytest.raises(EmbeddingError, match=str(folder.name)) as e:
        BertEncoder(folder)
    assert words in str(e.value)


def test_a_hub_id_is_read_from_the_hub_cache_and_an_unknown_one_is_named(tmp_path):
    """The hub path (huggingface_hub.snapshot_download) on a local copy: a hub-cache folder, offline."""
    snap = tmp_path / "hub" / "models--acme--minilm-copy" / "snapshots" / ("0" * 40)
    shutil.copytree(MINILM, snap)
    (snap.parents[1] / "refs").mkdir()
    (snap.parents[1] / "refs" / "main").write_text("0" * 40)
    code = ("from litseg_nb.config import EmbeddingConfig\n"
            "from litseg_nb.llm.embeddings import load_embedder, EmbeddingError\n"
            "e = load_embedder(EmbeddingConfig(backend='numpy', model='acme/minilm-copy'), use_cache=False)\n"
            "print('DIM', e.encode(['x']).shape[1])\n"
            "try:\n"
            "    load_embedder(EmbeddingConfig(backend='numpy', model='acme/missing'), use_cache=False)\n"
            "except EmbeddingError as err:\n"
            "    print('ERR', err)\n")
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "DIM 384" in r.stdout and "ERR embedding model 'acme/missing'" in r.stdout
