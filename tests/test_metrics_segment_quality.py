"""Boundary similarity pairs and chunk statistics on a hand-made unit."""
import numpy as np
import pytest

from litseg_nb.metrics.segment_quality import boundary_pairs, boundary_similarities, chunk_statistics
from litseg_nb.schema import Chunk, Sentence, Unit

TEXT = "Aa one. Bb two. Cc three. Dd four."
SENTS = tuple(Sentence(i + 1, s, e) for i, (s, e) in enumerate([(0, 7), (8, 15), (16, 25), (26, 34)]))
UNIT = Unit("b", "u0", 0, "t", 0, 34, SENTS)


def _c(m, i, lo, hi, ctx=()):
    s, e = SENTS[lo - 1].start, SENTS[hi - 1].end
    return Chunk("b", "u0", f"u0.c{i}", m, lo, hi, [(s, e)], TEXT[s:e], TEXT[s:e], list(ctx))


class FakeEmbedder:
    def encode(self, texts, kind="passage"):
        vecs = {"Aa one.": [1, 0], "Bb two.": [1, 1], "Cc three.": [0, 1], "Dd four.": [-1, 0]}
        return np.array([vecs[t] for t in texts], dtype=np.float32)


def test_boundaries_inside_unit_only_and_cosine():
    chunks = [_c("m", 0, 1, 2), _c("m", 1, 3, 4), _c("o", 0, 1, 3), _c("o", 1, 3, 4)]  # "o" overlaps at 3
    pairs = boundary_pairs(chunks, {("b", "u0"): UNIT}, {"b": TEXT})
    assert [(p[0], p[3], p[4]) for p in pairs] == [("m", "Bb two.", "Cc three."), ("o", "Bb two.", "Cc three.")]
    df = boundary_similarities(pairs, FakeEmbedder())
    assert df["similarity"].tolist() == pytest.approx([1 / np.sqrt(2)] * 2)
    assert boundary_pairs([_c("x", 0, 1, 4)], {("b", "u0"): UNIT}, {"b": TEXT}) == []  # no inner boundary
    with pytest.raises(KeyError, match="unit 'u0' of book 'b'"):
        boundary_pairs(chunks, {}, {"b": TEXT})


def test_chunk_statistics():
    st = chunk_statistics({"m": [_c("m", 0, 1, 2), _c("m", 1, 3, 4, ctx=[1])]}).iloc[0]
    assert st.n_chunks == 2 and st.tokens_mean == 4 and st.tokens_max == 4 and st.chars_mean == (15 + 18) / 2
    assert st.sentences_mean == 2 and st.with_context_idx == 1
