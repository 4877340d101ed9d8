"""``lib:`` methods (chunkers/library.py): third-party splitters run by the libraries themselves,
aligned to exact spans and sentence indices, coverage complete, through the public API and the CLI."""
from __future__ import annotations

import pytest

import litseg_nb
from litseg_nb.chunkers.base import ChunkerError
from litseg_nb.chunkers.library import (PRESETS, AlignmentCounts, LibraryConfig, align_unit,
                                        library_comparison)
from litseg_nb.config import ConfigError
from litseg_nb.core.schema import check_coverage, load_chunks

BOOK = "gutenberg/11.txt"  # Alice's Adventures in Wonderland, raw Project Gutenberg file


@pytest.fixture(scope="module")
def book(data_dir):
    # small units so the 400-token presets cut inside them too
    return litseg_nb.load_text(data_dir / BOOK, max_unit_words=300)


def _check(book, chunks, n_units):
    units = [u for u in book.units if u.n_sentences][:n_units]
    for u in units:
        rep = check_coverage(u, [c for c in chunks if c.unit_id == u.unit_id])
        assert rep.ok, (u.unit_id, rep)
    for c in chunks:
        assert c.is_source_span and c.spans
        assert "".join(book.text[a:b] for a, b in c.spans) == c.main_text == c.text
        assert c.metadata["alignment"] in ("exact", "fuzzy")


@pytest.mark.parametrize("preset", [n for n, p in PRESETS.items() if p.needs == "text"])
def test_cheap_presets_align_exactly_and_cover_every_sentence(book, preset):
    chunks = litseg_nb.segment(book, f"lib:{preset}", profile="test", max_units=3)
    _check(book, chunks, 3)
    assert {c.method for c in chunks} == {f"lib:{preset}"}
    assert all(c.metadata["library"] == PRESETS[preset].target or preset == "langchain-token" for c in chunks)


def test_semantic_presets_use_the_profile_embedder(book):
    from litseg_nb.llm.embeddings import load_embedder

    emb = load_embedder(LibraryConfig.for_profile("test").embedding)
    for preset in ("chonkie-semantic", "llamaindex-semantic", "langchain-semantic"):
        chunks = litseg_nb.segment(book, f"lib:{preset}", profile="test", max_units=1, embedder=emb)
        _check(book, chunks, 1)


def test_generic_class_with_library_options(book):
    small = litseg_nb.segment(book, "lib:chonkie.TokenChunker", profile="test", max_units=2, chunk_size=60,
                              chunk_overlap=0)
    big = litseg_nb.segment(book, "lib:chonkie.TokenChunker", profile="test", max_units=2, chunk_size=400)
    _check(book, small, 2)
    assert len(small) > len(big) >= 2
    with pytest.raises(ConfigError, match="chunk_szie"):
        litseg_nb.segment(book, "lib:chonkie.TokenChunker", profile="test", max_units=1, chunk_szie=60)
    with pytest.raises(ChunkerError, match="unknown library preset"):
        litseg_nb.segment(book, "lib:nosuchpreset", profile="test", max_units=1)


def test_unaligned_pieces_are_kept_and_dropped_text_becomes_flagged_gap_chunks(book):
    u = next(u for u in book.units if u.n_sentences >= 4)
    sents = [book.text[s.start:s.end] for s in u.sentences]
    pieces = [" ".join(sents[:2]).replace("\u2019", "'").upper(),  # re-spaced, straightened, upper-cased
              "a piece of text the library made up and that is nowhere in the book at all",
              book.text[u.sentences[3].start:u.end]]  # sentence 3 dropped by the "library"
    counts = AlignmentCounts()
    chunks = align_unit(book, u, "lib:fake", pieces, counts)
    assert counts.pieces == 3 and counts.not_found == 1 and counts.gap_chunks == 1 and counts.gap_sentences == 1
    assert counts.normalised + counts.exact == 2 and counts.coverage < 1.0
    span_chunks = [c for c in chunks if c.spans]
    assert check_coverage(u, span_chunks).ok
    gap = [c for c in chunks if c.metadata.get("gap")]
    assert len(gap) == 1 and (gap[0].from_idx, gap[0].to_idx) == (3, 3)
    lost = [c for c in chunks if c.metadata["alignment"] == "not_found"]
    assert len(lost) == 1 and not lost[0].is_source_span and lost[0].text == pieces[1]
    with pytest.raises(ChunkerError, match="fill_gaps=False"):
        align_unit(book, u, "lib:fake", pieces, AlignmentCounts(), fill_gaps=False)


def test_comparison_table_puts_ours_next_to_the_library(book):
    from litseg_nb.chunkers import BaselinesConfig, load_tokenizer
    from litseg_nb.segmenters.registry import chunk_units

    items = [(book, u) for u in book.units if u.n_sentences][:3]
    ours, _ = chunk_units("recursive", items, BaselinesConfig.for_profile("test"))
    lib, _ = chunk_units("lib:langchain-recursive", items, LibraryConfig.for_profile("test"))
    df = library_comparison({"lib:langchain-recursive": lib}, {"recursive": ours}, load_tokenizer("all-MiniLM-L6-v2"))
    row = df.iloc[0]
    assert row.ours == "recursive" and row.units == 3
    # our recursive splitter *is* LangChain's splitter with exact spans: same boundaries
    assert row.chunks_library == row.chunks_ours and row.boundary_f1 == 1.0


def test_cli_segment_raw_book_with_a_preset(data_dir, tmp_path, capsys):
    from litseg_nb.cli import main

    out = tmp_path / "alice.jsonl"
    rc = main(["segment", str(data_dir / BOOK), "--method", "lib:semchunk", "--profile", "test", "--max-units", "2",
               "--set", "chunk_size=120", "-o", str(out)])
    assert rc == 0, capsys.readouterr().err
    chunks = load_chunks(out)
    assert chunks and {c.method for c in chunks} == {"lib:semchunk"}
    chunks = [c for c in chunks if c.unit_id != "outside"]  # the text outside the units: not the library's pieces
    book = litseg_nb.load_text(data_dir / BOOK, max_unit_words=LibraryConfig.for_profile("test").corpus.max_unit_words)
    _check(book, chunks, 2)
    capsys.readouterr()
    for method, err in (("lib:nosuch", "unknown library preset 'nosuch'"), ("lib:chonkie.Nope", "chonkie has no 'Nope'")):
        assert main(["segment", str(data_dir / BOOK), "--method", method, "--profile", "test"]) == 2
        assert err in capsys.readouterr().err  # one line, no traceback


def test_token_counting_presets_use_the_configured_local_tokenizer_not_tiktoken():
    """No preset falls back to a library default tokenizer (tiktoken's cl100k/gpt2, which LlamaIndex
    ships and LangChain downloads): every token count is the config's tokenizer (MiniLM here)."""
    import functools

    from litseg_nb.chunkers.library import build_splitter

    def tiktoken_inside(obj, depth=0):
        if depth > 3:
            return False
        if "tiktoken" in type(obj).__module__:
            return True
        if isinstance(obj, functools.partial):
            return tiktoken_inside(getattr(obj.func, "__self__", obj.func), depth + 1)
        vals = vars(obj).values() if hasattr(obj, "__dict__") else ()
        extra = getattr(obj, "__pydantic_private__", None) or {}
        return any(tiktoken_inside(v, depth + 1) for v in [*vals, *extra.values()])

    cfg = LibraryConfig.for_profile("test")
    for name in [f"lib:{n}" for n, p in PRESETS.items() if p.needs == "text"]:
        sp = build_splitter(name, cfg)
        assert not tiktoken_inside(sp.obj), name


@pytest.mark.slow
def test_chonkie_slumber_runs_on_our_llm_backend_and_counts_its_silent_fallbacks(book):
    """chonkie's LumberChunker-style SlumberChunker with the test profile's tiny random model as its
    genie (through the request cache and usage ledger): chunks cover every sentence, every call is
    recorded, and windows chonkie kept together after invalid replies are counted as fallbacks."""
    from litseg_nb.segmenters.registry import chunk_units
    from litseg_nb.llm import make_backend

    cfg = LibraryConfig.for_profile("test", chunk_size=120)
    backend = make_backend(cfg.llm)
    items = [(book, u) for u in book.units if u.n_sentences][:1]
    chunks, extra = chunk_units("lib:chonkie-slumber", items, cfg, backend=backend)
    _check(book, chunks, 1)
    assert extra["genie_calls"] > 0
    usage = backend.ledger.to_frame()
    assert int(usage[usage.method == "lib:chonkie-slumber"]["calls"].sum()) == extra["genie_calls"]
    # the random model never answers with a valid index (greedy, deterministic): every window is a
    # fallback, asked 3 times (chonkie's max_retries), and counted as such
    assert extra["genie_fallbacks"] > 0 and extra["fallbacks"] >= extra["genie_fallbacks"]
    assert extra["invalid_replies"] == 3 * extra["genie_fallbacks"]
