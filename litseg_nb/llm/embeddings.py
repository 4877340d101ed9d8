"""Dense text embeddings (``sentence-transformers``, ``flagembedding`` or ``numpy``) with a persistent cache.

With ``use_instructions``, passages and queries get the configured instruction prefix (Appendix I.1.2),
applied here so the cache key (SHA-256 of the string encoded, one SQLite file per model) covers it."""
from __future__ import annotations

import contextlib
import hashlib
import re
import sqlite3
import warnings
from pathlib import Path
from typing import Any, Iterable, Literal, Sequence

import numpy as np
from ..config import EmbeddingConfig
from ..core.cache import CacheWarning, SQLiteStore
from ..core.paths import cache_dir
from ..core.progress import bar
from .bert_numpy import BertEncoder
from .models import (MODELS_EXTRA, NUMPY_EMBEDDER, PACKAGED_MODELS, EmbeddingError, model_folder,  # noqa: F401
                     packaged_model_dir, pick_device, resolve_model_path)
from .threads import follow_thread_budget

Kind = Literal["passage", "query", "sentence"]  # "sentence": never an instruction prefix (metrics)


class EmbeddingCache(SQLiteStore):
    """Persistent ``sha256(text) -> float32 vector`` store (on a full disk, one warning and no more stores)."""

    def __init__(self, path: Path):
        super().__init__(path, "embeddings cache", "emb", "key TEXT PRIMARY KEY, vec BLOB NOT NULL")
        self.full = False

    def get_many(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        try:
            rows = self.select(keys, "key, vec")
        except sqlite3.DatabaseError as exc:  # corrupted under a running process: all misses
            with self._lock:
                self._replace(exc)
            return {}
        return {k: np.frombuffer(blob, dtype=np.float32) for k, blob in rows}

    def put_many(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        rows = [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in items]
        with self._lock:
            if self.full:
                return
            for retry in (False, True):
                try:
                    self._conn.executemany("INSERT OR REPLACE INTO emb (key, vec) VALUES (?, ?)", rows)
                    self._conn.commit()
                    return
                except sqlite3.DatabaseError as exc:
                    with contextlib.suppress(sqlite3.Error):
                        self._conn.rollback()
                    if getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL or retry:
                        self.full = True
                        warnings.warn(f"embeddings cache {self.path} cannot store vectors ({exc}); "
                                      "continuing without storing new ones (they are computed each "
                                      "run): free disk space or set LITSEG_CACHE_DIR", CacheWarning,
                                      stacklevel=3)
                        return
                    self._replace(exc)


class Embedder:
    """Encodes texts with one model (instruction prefixes and cache as the module docstring says)."""

    def __init__(self, cfg: EmbeddingConfig, model: Any, encode_fn: Any, model_id: str,
                 use_cache: bool = True, cache_root: Path | None = None):
        self.cfg = cfg
        self.model = model
        self._encode_fn = encode_fn  # (list[str]) -> np.ndarray, no instruction handling
        self.model_id = model_id
        self.n_encoded = 0  # texts actually sent to the model (cache misses)
        self.cache: EmbeddingCache | None = None
        if use_cache:
            slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", model_id).strip("_")[-80:]
            tag = f"{cfg.backend}-{slug}-{'norm' if cfg.normalize else 'raw'}"
            self.cache = EmbeddingCache((cache_root or cache_dir()) / "embeddings" / f"{tag}.sqlite")

    @property
    def dim(self) -> int:
        return int(self.encode(["dimension probe"]).shape[1])

    def prepare(self, texts: Sequence[str], kind: Kind = "passage") -> list[str]:
        """The exact strings sent to the model (instruction prefix applied when configured)."""
        if kind not in ("passage", "query", "sentence"):
            raise ValueError(f"kind must be 'passage', 'query' or 'sentence', got {kind!r}")
        if not self.cfg.use_instructions or kind == "sentence":
            return list(texts)
        instr = self.cfg.passage_instruction if kind == "passage" else self.cfg.query_instruction
        return [f"{instr} {t}" if instr else t for t in texts]

    def encode(self, texts: Sequence[str], kind: Kind = "passage", show_progress: bool = False) -> np.ndarray:
        """``(len(texts), dim)`` float32 embeddings; cached texts are not re-encoded."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts, not a single string")
        prepared = self.prepare(texts, kind)
        if not prepared:
            return np.zeros((0, 0), dtype=np.float32)
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in prepared]
        found = self.cache.get_many(keys) if self.cache is not None else {}
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            by_key = dict(zip(keys, prepared))
            # longest first: batches of similar length (less padding); results are matched back by key
            missing.sort(key=lambda k: -len(by_key[k]))
            todo = [by_key[k] for k in missing]
            new: dict[str, np.ndarray] = {}
            bs = max(1, int(self.cfg.batch_size))
            for i in bar(range(0, len(todo), bs), progress=show_progress, desc=f"embed {self.model_id}",
                         leave=False):
                follow_thread_budget()  # per batch: the side-by-side runner's budget may have changed
                vecs = np.asarray(self._encode_fn(todo[i:i + bs]), dtype=np.float32)
                if vecs.ndim != 2 or len(vecs) != len(todo[i:i + bs]):
                    raise EmbeddingError(f"{self.model_id}: encoder returned shape {vecs.shape}")
                if self.cfg.normalize:
                    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
                    vecs = vecs / np.maximum(norms, 1e-12)
                new.update(zip(missing[i:i + bs], vecs))
            self.n_encoded += len(todo)
            if self.cache is not None:
                self.cache.put_many(new.items())
            found.update(new)
        return np.stack([found[k] for k in keys]).astype(np.float32, copy=False)


def _load_sentence_transformers(cfg: EmbeddingConfig):
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as e:  # pragma: no cover - dependency
        raise EmbeddingError(f"the embedder needs sentence-transformers ({e}), in {MODELS_EXTRA}; "
                             f"{NUMPY_EMBEDDER}") from e
    path = resolve_model_path(cfg.model)
    try:
        model = SentenceTransformer(path, device=pick_device(cfg.device))
    except Exception as e:  # noqa: BLE001 - re-raised with the model named
        raise EmbeddingError(f"could not load sentence-transformers model {cfg.model!r} from {path}: {e}") from e

    def encode(batch: list[str]) -> np.ndarray:
        return model.encode(batch, batch_size=len(batch), convert_to_numpy=True,
                            normalize_embeddings=False, show_progress_bar=False)

    return model, encode


def _load_numpy(cfg: EmbeddingConfig):
    model = BertEncoder(model_folder(cfg.model))
    return model, model.encode


def model_max_tokens(path: str) -> int:
    """The longest input (in tokens) an encoder reads: its position embeddings, capped by its tokenizer."""
    from transformers import AutoConfig, AutoTokenizer

    conf = AutoConfig.from_pretrained(path)
    limit = int(getattr(conf, "max_position_embeddings", 0) or 0)
    if getattr(conf, "model_type", "") in ("xlm-roberta", "roberta", "camembert"):
        limit -= int(getattr(conf, "pad_token_id", 1) or 0) + 1  # positions start after padding_idx
    tok_max = int(getattr(AutoTokenizer.from_pretrained(path), "model_max_length", 0) or 0)
    if 0 < tok_max < 10**6:
        limit = min(limit, tok_max) if limit > 0 else tok_max
    if limit <= 0:
        raise EmbeddingError(f"{path}: cannot tell the model's maximum input length; set it in the config")
    return limit


def _load_flagembedding(cfg: EmbeddingConfig):
    try:
        from FlagEmbedding import BGEM3FlagModel, FlagModel
    except ImportError as e:
        raise EmbeddingError(f"FlagEmbedding could not be imported ({e})") from e
    path = resolve_model_path(cfg.model)
    device = pick_device(cfg.device)
    fp16 = device.startswith("cuda")
    try:
        # explicit lengths: FlagEmbedding's default (512) would cut every longer chunk silently
        lengths = {"passage_max_length": cfg.max_passage_tokens or model_max_tokens(path),
                   "query_max_length": cfg.max_query_tokens or model_max_tokens(path)}
        if "m3" in cfg.model.lower():
            model = BGEM3FlagModel(path, normalize_embeddings=False, use_fp16=fp16, devices=device,
                                   batch_size=cfg.batch_size, **lengths)

            def encode(batch: list[str]) -> np.ndarray:
                return model.encode(batch, batch_size=len(batch), return_dense=True, return_sparse=False,
                                    return_colbert_vecs=False)["dense_vecs"]
        else:
            model = FlagModel(path, normalize_embeddings=False, use_fp16=fp16, devices=device,
                              batch_size=cfg.batch_size, **lengths)

            def encode(batch: list[str]) -> np.ndarray:
                return model.encode(batch, batch_size=len(batch))
    except EmbeddingError:
        raise
    except Exception as e:  # noqa: BLE001
        raise EmbeddingError(f"could not load FlagEmbedding model {cfg.model!r} from {path}: {e}") from e
    model.litseg_max_tokens = lengths["passage_max_length"]  # for limit_report
    return model, encode


def limit_report(chunk_sets: Any, embedder: Embedder, reranker: Any = None):
    """Per method of ``chunk_sets``: how many chunks exceed what the embedder (and a FlagReranker) reads."""
    import pandas as pd

    model = embedder.model  # FlagEmbedding: the configured passage_max_length; else max_seq_length
    limit = getattr(model, "litseg_max_tokens", None) or getattr(model, "max_seq_length", None)
    tok = getattr(model, "tokenizer", None)
    if tok is None or not limit:
        raise EmbeddingError(f"{embedder.model_id}: no tokenizer / input limit to check chunk lengths against")
    limit = int(limit)
    r_tok = getattr(getattr(reranker, "model", None), "tokenizer", None)
    r_limit = getattr(reranker, "max_length", None)
    rows = []
    for method, chunks in chunk_sets.items():
        texts = [c.text for c in chunks]
        emb_n = [len(ids) for ids in tok(embedder.prepare(texts, "passage"), add_special_tokens=True,
                                         truncation=False).input_ids] if texts else []
        row = {"method": method, "chunks": len(texts), "embedder": embedder.model_id, "embedder limit": limit,
               "over embedder limit": sum(n > limit for n in emb_n),
               "max chunk tokens (embedder)": max(emb_n, default=0)}
        if r_tok is not None and r_limit:
            r_n = [len(ids) for ids in r_tok(texts, add_special_tokens=True, truncation=False).input_ids] if texts else []
            row.update({"reranker limit": int(r_limit), "over reranker limit": sum(n > r_limit for n in r_n)})
        else:
            row.update({"reranker limit": None, "over reranker limit": None})
        row["share over embedder limit"] = row["over embedder limit"] / len(texts) if texts else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def load_embedder(emb_cfg: EmbeddingConfig, use_cache: bool = True, cache_root: Path | None = None) -> Embedder:
    """Build the :class:`Embedder` the config names (its ``backend``: ``sentence-transformers``,
    ``flagembedding`` or ``numpy``)."""
    load = {"sentence-transformers": _load_sentence_transformers, "flagembedding": _load_flagembedding,
            "numpy": _load_numpy}[emb_cfg.backend]
    model, fn = load(emb_cfg)
    return Embedder(emb_cfg, model, fn, model_id=emb_cfg.model, use_cache=use_cache, cache_root=cache_root)
