"""Boundary similarity pairs and chunk statistics on a hand-made unit."""
import numpy as np
import pytest

from litseg_nb.chunkers.stats import chunk_statistics
from litseg_nb.evaluation.segment_quality import boundary_pairs, boundary_similarities, boundary_similarity_table
from litseg_nb.core.schema import Book
from litseg_nb.core.schema import Chunk, Sentence, Unit

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
    """One table for notebooks 04 and 06 (whitespace words, a callable, or a Tokenizer)."""
    sets = {"m": [_c("m", 0, 1, 2), _c("m", 1, 3, 4, ctx=[1])]}
    st = chunk_statistics(sets).iloc[0]
    assert st.total_chunks == 2 and st.mean_tokens == 4 and st.max_tokens == 4 and st.mean_chars == (15 + 18) / 2
    assert st.mean_sentences == 2 and st.chunks_with_context == 1 and st.units == 1
    assert chunk_statistics(sets, lambda t: len(t)).iloc[0].max_tokens == 18


def test_boundary_similarity_table_per_dataset_and_per_method():
    book = Book("b", "B", "gutenqa", TEXT, units=[UNIT])
    sets = {"m": [_c("m", 0, 1, 2), _c("m", 1, 3, 4)], "whole": [_c("whole", 0, 1, 4)]}
    t2 = boundary_similarity_table(sets, [book], FakeEmbedder())
    assert list(t2.columns) == ["dataset", "method", "boundary_similarity", "sd", "n_boundaries"]
    assert t2.method.tolist() == ["m", "whole"] and t2.boundary_similarity.iloc[0] == pytest.approx(1 / np.sqrt(2))
    assert t2.n_boundaries.tolist() == [1, 0] and np.isnan(t2.boundary_similarity.iloc[1])  # kept, not dropped
    t6 = boundary_similarity_table(sets, [book], FakeEmbedder(), by=("method",), names={"m": "M", "whole": "W"})
    assert t6.variant.tolist() == ["M", "W"] and t6.n_boundaries.tolist() == [1, 0]


def test_load_evaluated_chunk_sets_names_what_it_leaves_out(fresh_dirs):
    from litseg_nb.core.artifacts import artifact_path
    from litseg_nb.chunk_sets import for_segment_quality as load_evaluated_chunk_sets
    from litseg_nb.core.schema import save_chunks

    book = Book("b", "B", "gutenqa", TEXT, units=[UNIT])
    unaligned = Chunk("b", "", "import.c00000", "imported", 0, 0, [], "lost text", "", metadata={"alignment": "not_found"})
    save_chunks(artifact_path("test", "chunks", "imported.jsonl"), [_c("imported", 0, 1, 4), unaligned])
    save_chunks(artifact_path("test", "chunks", "other.jsonl"), [Chunk("z", "u0", "u0.c0000", "other", 1, 1, [(0, 3)],
                                                                        "Aa ", "Aa ")])
    sets, info = load_evaluated_chunk_sets("test", (), [book])
    assert list(sets) == ["imported"] and len(sets["imported"]) == 1
    assert info["unaligned"] == {"imported": 1} and "imported 1 chunk(s)" in info["note"]
    assert info["no_chunks_here"] == ["other"]
