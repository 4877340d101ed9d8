"""The shared embedder: packaged model resolution, normalisation, instructions and the cache."""
import numpy as np
import pytest

from litseg_nb.config import EmbeddingConfig
from litseg_nb.llm.embeddings import EmbeddingError, load_embedder, packaged_model_dir, resolve_model_path


@pytest.fixture(autouse=True)
def _tmp_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LITSEG_CACHE_DIR", str(tmp_path / "cache"))


def test_packaged_name_resolves_to_package_dir():
    d = packaged_model_dir("all-MiniLM-L6-v2")
    assert d is not None and (d / "config.json").is_file()
    assert resolve_model_path("sentence-transformers/all-MiniLM-L6-v2") == str(d)
    assert resolve_model_path("BAAI/bge-m3") == "BAAI/bge-m3"


def test_encode_normalised_cached_and_deterministic(tmp_path):
    cfg = EmbeddingConfig(batch_size=2, device="cpu")
    emb = load_embedder(cfg)
    texts = ["The whale surfaced.", "Emma married Mr Knightley.", "The whale surfaced.", "Rain fell."]
    a = emb.encode(texts)
    assert a.dtype == np.float32 and a.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(a[0], a[2])
    assert emb.n_encoded == 3  # duplicate encoded once
    b = emb.encode(texts[::-1])
    assert emb.n_encoded == 3  # all from the cache now
    np.testing.assert_allclose(b[::-1], a, atol=1e-6)
    # a fresh embedder reads the persistent cache
    emb2 = load_embedder(cfg)
    c = emb2.encode(texts)
    assert emb2.n_encoded == 0
    np.testing.assert_allclose(c, a, atol=1e-6)


def test_instructions_change_the_encoded_string():
    cfg = EmbeddingConfig(device="cpu", use_instructions=True)
    emb = load_embedder(cfg, use_cache=False)
    assert emb.prepare(["x"], "query") == [f"{cfg.query_instruction} x"]
    assert emb.prepare(["x"], "passage") == [f"{cfg.passage_instruction} x"]
    q = emb.encode(["Who is Emma?"], kind="query")
    p = emb.encode(["Who is Emma?"], kind="passage")
    assert not np.allclose(q, p)
    with pytest.raises(ValueError):
        emb.prepare(["x"], "document")


def test_unknown_backend_is_a_clear_error():
    from litseg_nb.config import ConfigError

    with pytest.raises(ConfigError, match="EmbeddingConfig.backend: 'nope'"):  # rejected when the config is built
        EmbeddingConfig(backend="nope")


def test_batches_are_length_sorted_and_vectors_return_in_input_order():
    """Texts are batched longest first (less padding); each vector still lands on its own text."""
    from litseg_nb.llm.embeddings import Embedder

    seen: list[list[str]] = []

    def fake_encode(batch):
        seen.append(list(batch))
        return np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in batch], dtype=np.float32)

    emb = Embedder(EmbeddingConfig(batch_size=2, device="cpu", normalize=False), None, fake_encode, "fake",
                   use_cache=False)
    texts = ["a", "a much longer text here", "mid length", "bb", "the longest text of all of them"]
    out = emb.encode(texts)
    assert [len(t) for b in seen for t in b] == sorted(map(len, texts), reverse=True)
    want = np.array([[len(t), sum(map(ord, t)) % 97, 1.0] for t in texts], dtype=np.float32)
    np.testing.assert_array_equal(out, want)


# --- FlagEmbedding reads past 512 tokens when told to -------------------------
def _long_passages():
    words = [f"word{i % 97}" for i in range(1400)]  # ~2.8k WordPiece tokens
    # the same first 300 words (~600 tokens, past 512), then another text
    return " ".join(words), " ".join(words[:300] + [f"other{i % 13}" for i in range(1100)])


@pytest.mark.slow
def test_flagembedding_lengths_are_explicit_and_read_past_512_tokens(tmp_path):
    import numpy as np

    from litseg_nb.config import EmbeddingConfig
    from litseg_nb.llm.embeddings import limit_report, load_embedder
    from litseg_nb.rag.rerank import make_reranker
    from litseg_nb.front.rehearse import tiny_bge_m3_dir, tiny_reranker_dir
    from litseg_nb.core.schema import Chunk

    a, b = _long_passages()
    m3 = str(tiny_bge_m3_dir())
    vecs = {}
    for n in (512, 8192):
        cfg = EmbeddingConfig(backend="flagembedding", model=m3, device="cpu", max_passage_tokens=n, batch_size=2)
        emb = load_embedder(cfg, use_cache=False)
        assert emb.model.passage_max_length == n
        vecs[n] = emb.encode([a, b])
    diff = {n: float(np.abs(v[0] - v[1]).max()) for n, v in vecs.items()}
    assert diff[512] == 0.0  # the defect: past token 512 nothing is read (same vector)
    assert diff[8192] > 1e-4  # read to the end: another ending, another vector
    # 0 = the model's own maximum (8192 positions of the tiny XLM-R, like BGE-M3)
    assert load_embedder(EmbeddingConfig(backend="flagembedding", model=m3, device="cpu"),
                         use_cache=False).model.passage_max_length == 8192
    rr = make_reranker("flagembedding", flag_model=str(tiny_reranker_dir()), device="cpu", max_length=0)
    assert rr.max_length == 8192 and rr.model.max_length == 8192
    s_long = rr.score("t", "question?", [a, b])
    assert abs(s_long[0] - s_long[1]) > 1e-6  # the reranker reads the different endings too
    short = make_reranker("flagembedding", flag_model=str(tiny_reranker_dir()), device="cpu", max_length=512)
    s_short = short.score("t", "question?", [a, b])
    assert s_short[0] == pytest.approx(s_short[1], abs=1e-6)
    # per method: chunks over each limit
    def chunk(text):
        return Chunk(book_id="b", unit_id="u", chunk_id="c", method="m", from_idx=1, to_idx=1, spans=[],
                     text=text, main_text=text)
    emb512 = load_embedder(EmbeddingConfig(backend="flagembedding", model=m3, device="cpu", max_passage_tokens=512),
                           use_cache=False)
    rep = limit_report({"long": [chunk(a), chunk("short text")], "short": [chunk("tiny")]}, emb512, short)
    got = rep.set_index("method")
    assert got.loc["long", "over embedder limit"] == 1 and got.loc["short", "over embedder limit"] == 0
    assert got.loc["long", "over reranker limit"] == 1 and got.loc["long", "embedder limit"] == 512
