"""Benchmark: non-LLM chunkers vs LangChain's own splitters on the same unit texts.

    python benchmarks/bench_chunkers.py --profile smoke

Reports seconds for ours (spans, sentence indices, coverage included) and LangChain's text-only
splitters (imports and tokenizer loading excluded from both), and the ratio ours / LangChain.
The step cache is bypassed (a fresh temporary cache dir).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="smoke")
    args = ap.parse_args()
    os.environ["LITSEG_CACHE_DIR"] = tempfile.mkdtemp(prefix="bench_chunkers_")
    from langchain_text_splitters import CharacterTextSplitter, RecursiveCharacterTextSplitter
    from langchain_text_splitters.base import Tokenizer as LCTokenizer
    from langchain_text_splitters.base import split_text_on_tokens

    from litseg_nb.chunkers import BaselinesConfig, load_tokenizer
    from litseg_nb.chunkers.splitters import make_recursive_splitter, paragraph_chunks, recursive_chunks, token_chunks
    from litseg_nb.corpus import load_corpus

    cfg = BaselinesConfig.for_profile(args.profile)
    books = load_corpus(cfg.corpus)
    items = [(b, u) for b in books for u in b.units if u.n_sentences]
    texts = [u.text(b.text) for b, u in items]
    tok = load_tokenizer(cfg.tokenizer)
    sp = make_recursive_splitter(cfg.recursive_chunk_size, cfg.recursive_chunk_overlap, cfg.recursive_separators)
    lc_rec = RecursiveCharacterTextSplitter(chunk_size=cfg.recursive_chunk_size, chunk_overlap=cfg.recursive_chunk_overlap,
                                            separators=list(cfg.recursive_separators), keep_separator="end",
                                            add_start_index=True)
    # LangChain's token splitting core (TokenTextSplitter itself needs tiktoken files from the net)
    lc_tok = LCTokenizer(chunk_overlap=cfg.token_chunk_overlap, tokens_per_chunk=cfg.token_chunk_size,
                         decode=tok.hf.decode, encode=lambda t: tok.hf.encode(t, add_special_tokens=False))
    lc_par = CharacterTextSplitter(separator="\n\n", chunk_size=1, chunk_overlap=0)

    def timed(fn):
        t = time.perf_counter()
        fn()
        return time.perf_counter() - t

    rows = [
        ("recursive", timed(lambda: [recursive_chunks(b, u, sp, cfg.recursive_chunk_overlap) for b, u in items]),
         timed(lambda: [lc_rec.create_documents([t]) for t in texts])),
        ("token", timed(lambda: [token_chunks(b, u, tok, cfg.token_chunk_size, cfg.token_chunk_overlap) for b, u in items]),
         timed(lambda: [split_text_on_tokens(text=t, tokenizer=lc_tok) for t in texts])),
        ("paragraph", timed(lambda: [paragraph_chunks(b, u) for b, u in items]),
         timed(lambda: [lc_par.split_text(t) for t in texts])),
    ]
    print(f"{len(books)} books, {len(items)} units, {sum(map(len, texts)):,} characters")
    print(f"{'method':<10} {'ours_s':>8} {'langchain_s':>12} {'ratio':>6}")
    for m, ours, lc in rows:
        print(f"{m:<10} {ours:8.3f} {lc:12.3f} {ours / lc:6.2f}")


if __name__ == "__main__":
    main()
