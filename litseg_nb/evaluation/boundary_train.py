"""Training the narrative boundary model on the authors' own breaks (``train-boundary-model``).

Labels come from the benchmark's narrative stream; whole authors are held out and evaluation books refused. An L2
logistic regression fitted by L-BFGS from zeros gives byte-identical weights for the same data."""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import random
import time
import zipfile
import zlib
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..core.safe_io import OutputsNotWritable, ensure_writable
from ..errors import LitsegError, UsageError
from ..chunkers.boundary_features import DENSE_NAMES, FEATURE_VERSION, document_features, n_hashed
from ..chunkers.boundary_model import CARD_FILE, WEIGHTS_FILE, BoundaryModel, boundary_model_chunks, boundary_scores
from . import boundary_gold
from .. import preprocess
from ..data import gutenberg
from ..chunkers import base, boundary_features
from ..data.gutenberg import clean_gutenberg_text
from ..preprocess.structure import FRONT_MATTER, build_units
from ..core.schema import Book
from .boundary_gold import StreamReport, narrative_stream, local_book_files, local_book_texts, build_gold
from ..core.paths import cache_dir, data_dir
from ..core.progress import bar
from ..preprocess.gold import GOLD_FILE, load_gold
from .boundaries import BoundaryConfig, score_chunk_sets, summarize
from ..chunkers.base import chunks_from_boundaries
from ..core import text_overlap

TRAIN_FOLDER = "gutenberg_train"


class TrainingDataError(UsageError, RuntimeError):
    """The training books are missing, unreadable, or overlap an evaluation book."""


@dataclass(frozen=True)
class TrainConfig:
    """Knobs of the training run (all part of the card)."""

    seed: int = 13
    validation_share: float = 0.2
    negatives_per_positive: int = 4
    min_negatives: int = 20
    max_candidates: int = 400
    l2: float = 1.0  # on the summed loss: the penalty 0.5 * l2 * |w|^2
    max_iter: int = 300
    window_sentences: int = 60  # the validation windows: the smoke benchmark's sizes
    min_side_sentences: int = 5
    max_windows_per_book: int = 8
    target_words: int = 300  # the chunker's length target (validation of the chunker row)
    min_sentences: int = 2
    max_books: int = 0  # 0 = all (tests use a few)


def _feature_code_hash() -> str:
    """Hash of the code the cached features depend on (cleaning, units, stream, features)."""

    files = [Path(m.__file__) for m in (boundary_gold, boundary_features, gutenberg, base, text_overlap)]
    files += sorted(Path(preprocess.__file__).parent.glob("*.py"))  # modules found by import: they may move
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def book_id_of(path: Path) -> str:
    return f"{TRAIN_FOLDER}:{path.name.split('.')[0]}"


def clean_and_units(path: Path, data: bytes | None = None):
    """``(Book, narrative units)`` of one book file (``data``: its bytes), exactly as the benchmark reads books."""
    data = Path(path).read_bytes() if data is None else data
    bid = book_id_of(path)
    cleaned = clean_gutenberg_text(gzip.decompress(data) if path.name.endswith(".gz") else data, source=str(path))
    units = build_units(bid, cleaned.text, cleaned.paragraphs, max_unit_words=10**9, sentence_splitter="nupunkt",
                        whole_title="@front", author=getattr(cleaned.report, "author", None))
    units = [u for u in units if not u.title.startswith(FRONT_MATTER)]
    book = Book(book_id=bid, title=cleaned.report.title or bid, dataset=TRAIN_FOLDER, text=cleaned.text,
                paragraphs=cleaned.paragraphs, source=str(path))
    return book, units


def text_hash(text: str) -> str:
    """SHA-256 of a cleaned text with whitespace runs collapsed."""
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()


def book_features(path: Path, cache_root: Path | None = None) -> dict[str, Any]:
    """Features, labels and the cleaned-text hash of one training book (cached by its bytes and the code)."""

    data = Path(path).read_bytes()
    key = hashlib.sha256(data + _feature_code_hash().encode()).hexdigest()[:24]
    cdir = (cache_root or cache_dir()) / "boundary-model"
    cfile = cdir / f"{book_id_of(path).split(':')[1]}-{key}.npz"
    repaired = False
    if cfile.is_file():
        try:
            z = np.load(cfile, allow_pickle=False)
            return {"dense": z["dense"], "hashed": z["hashed"], "labels": z["labels"], "text_hash": str(z["text_hash"]),
                    "fingerprint": z["fingerprint"], "chapter_marks": int(z["chapter_marks"]),
                    "scene_marks": int(z["scene_marks"]), "cached": True}
        except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile, zlib.error):
            repaired = True  # unreadable entry: recomputed, rewritten below and counted
    book, units = clean_and_units(path, data)
    rep = StreamReport()
    stream = narrative_stream(book.text, units, rep)
    paragraphs = [tuple(book.text[a:b] for a, b in p.sentences) for p in stream]
    dense, hashed = document_features(paragraphs)
    labels = np.array([{None: 0, "chapter": 1, "scene": 2}[p.mark] for p in stream[1:]], dtype=np.int8)
    hmat = np.full((len(hashed), 4), -1, dtype=np.int32)
    for i, h in enumerate(hashed):
        hmat[i, :len(h)] = h
    out = {"dense": dense.astype(np.float64), "hashed": hmat, "labels": labels, "text_hash": text_hash(book.text),
           "fingerprint": text_overlap.fingerprint(book.text), "chapter_marks": rep.chapter_marks,
           "scene_marks": rep.scene_marks}
    cdir.mkdir(parents=True, exist_ok=True)
    tmp = cfile.with_suffix(".tmp.npz")
    np.savez_compressed(tmp, **{k: np.asarray(v) for k, v in out.items()})
    tmp.replace(cfile)
    return {**out, "repaired": repaired}


def training_files(root: Path, max_books: int = 0) -> list[Path]:
    folder = Path(root) / TRAIN_FOLDER
    files = sorted(folder.glob("*.txt.gz"), key=lambda p: (len(p.name), p.name)) + sorted(folder.glob("*.txt"))
    if not files:
        raise TrainingDataError(f"no training books in {folder} (expected <ebook>.txt.gz files)")
    return files[:max_books] if max_books else files


def read_authors(root: Path) -> dict[str, str]:
    """``ebook number -> author`` from the training folder's MANIFEST.tsv (empty when absent)."""
    path = Path(root) / TRAIN_FOLDER / "MANIFEST.tsv"
    out: dict[str, str] = {}
    if path.is_file():
        for parts in (ln.split("\t") for ln in path.read_text(encoding="utf-8").splitlines()[1:]):
            if len(parts) >= 2:
                out[parts[0].strip()] = parts[1].strip()
    return out


def split_groups(files: Sequence[Path], authors: dict[str, str],
                 fingerprints: dict[str, np.ndarray] | None = None) -> dict[Path, str]:
    """Each book's group, held out whole: its author (a book without one is its own), joined with the groups of the
    books that share most of its text (:mod:`~litseg_nb.core.text_overlap`: a copy or another edition under
    another author's name never sits on the other side of the split)."""
    group = {f: authors.get(f.name.split(".")[0], f.name) for f in files}
    parent = {g: g for g in group.values()}

    def root(g: str) -> str:
        while parent[g] != g:
            g = parent[g]
        return g

    by_name = {str(f): f for f in files}
    for a, b, _ in text_overlap.overlapping({k: v for k, v in (fingerprints or {}).items() if k in by_name}):
        ra, rb = sorted((root(group[by_name[a]]), root(group[by_name[b]])))
        parent[rb] = ra
    return {f: root(g) for f, g in group.items()}


def split_books(files: Sequence[Path], authors: dict[str, str], share: float, seed: int,
                fingerprints: dict[str, np.ndarray] | None = None) -> tuple[list[Path], list[Path]]:
    """``(train, validation)``: whole groups (:func:`split_groups`) held out."""
    group = split_groups(files, authors, fingerprints)
    keys = sorted(set(group.values()))
    random.Random(f"{seed}:split").shuffle(keys)
    held = set(keys[:max(1, int(round(share * len(keys))))]) if share > 0 and len(keys) > 1 else set()
    return [f for f in files if group[f] not in held], [f for f in files if group[f] in held]


@lru_cache(maxsize=4)
def evaluation_fingerprints(root: Path) -> tuple[frozenset[str], frozenset[str], dict[str, np.ndarray]]:
    """``(ebook numbers, cleaned-text hashes, book id -> text fingerprint)`` of every evaluation book."""
    root = Path(root)
    ids = {f.stem for f in local_book_files(root)}
    urls = root / "literaryqa" / "literaryqa_urls.tsv"
    if urls.is_file():
        for ln in urls.read_text(encoding="utf-8").splitlines()[1:]:
            parts = ln.split("\t")
            if len(parts) > 1 and parts[1].strip().isdigit():
                ids.add(parts[1].strip())
    try:
        for e in load_gold(GOLD_FILE):
            ids.add(Path(e.file).stem)
    except (ImportError, OSError):
        pass
    texts = {bid: text for bid, text, _ in local_book_texts(root)}
    hashes = {text_hash(text) for text in texts.values()}
    return frozenset(ids), frozenset(hashes), {bid: text_overlap.fingerprint(t) for bid, t in texts.items()}


def check_disjoint(files: Sequence[Path], text_hashes: dict[str, str], evaluation_root: Path,
                   fingerprints: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Raise :class:`TrainingDataError` naming a training book that is an evaluation book: by ebook number, by
    cleaned text, or by most of its text (``fingerprints``: training file -> :func:`text_overlap.fingerprint`).
    An evaluation root without any evaluation book is an error too: nothing would have been compared."""
    root = Path(evaluation_root).resolve()
    ids, hashes, eval_fps = evaluation_fingerprints(root)
    if not hashes:
        raise TrainingDataError(f"no evaluation books under {root} (gutenberg/, gutenberg_dev/, literaryqa/texts/, "
                                "gutenqa/): the training books cannot be checked against them; point the data folder "
                                "(LITSEG_DATA_DIR) at the one the benchmarks read")
    for f in files:
        n = f.name.split(".")[0]
        if n in ids:
            raise TrainingDataError(f"training book {f} has the ebook number of an evaluation book ({n})")
        if text_hashes[str(f)] in hashes:
            raise TrainingDataError(f"training book {f} has the same text as an evaluation book")
    for name, bid, share in text_overlap.overlapping(fingerprints or {}, eval_fps)[:1]:
        raise TrainingDataError(f"training book {name} shares {share:.0%} of its text with evaluation book {bid}")
    return {"evaluation_ids": len(ids), "evaluation_text_hashes": len(hashes), "overlap": 0,
            "shared_text_threshold": text_overlap.SHARED_SHARE}


def sample_candidates(labels: np.ndarray, cfg: TrainConfig, book_id: str) -> np.ndarray:
    pos = np.flatnonzero(labels > 0)
    neg = np.flatnonzero(labels == 0)
    rng = random.Random(f"{cfg.seed}:{book_id}")
    n_neg = min(len(neg), max(cfg.min_negatives, cfg.negatives_per_positive * len(pos)))
    if cfg.max_candidates:
        pos = np.array(sorted(rng.sample(list(pos), min(len(pos), cfg.max_candidates // 2))), dtype=int) \
            if len(pos) > cfg.max_candidates // 2 else pos
        n_neg = min(n_neg, cfg.max_candidates - len(pos))
    pick = sorted(rng.sample(list(neg), n_neg)) if n_neg else []
    return np.array(sorted(list(pos) + list(pick)), dtype=int)


def _design(dense: np.ndarray, hashed: np.ndarray, mean: np.ndarray, std: np.ndarray):
    from scipy import sparse

    z = (dense - mean) / std
    rows, cols = np.nonzero(hashed >= 0)
    h = sparse.csr_matrix((np.ones(len(rows)), (rows, hashed[rows, cols])), shape=(len(dense), n_hashed()))
    return sparse.hstack([sparse.csr_matrix(z), h], format="csr")


def fit_logistic(x, y: np.ndarray, l2: float, max_iter: int) -> tuple[np.ndarray, float]:
    """L2 logistic regression (intercept unpenalised) by L-BFGS from zeros; deterministic."""
    from scipy.optimize import minimize

    d = x.shape[1]
    y = y.astype(float)

    def f(w):
        z = x @ w[:d] + w[d]
        loss = np.sum(np.logaddexp(0.0, z) - y * z) + 0.5 * l2 * np.dot(w[:d], w[:d])
        p = 1.0 / (1.0 + np.exp(-z))
        g = np.empty(d + 1)
        g[:d] = x.T @ (p - y) + l2 * w[:d]
        g[d] = np.sum(p - y)
        return loss, g

    res = minimize(f, np.zeros(d + 1), jac=True, method="L-BFGS-B", options={"maxiter": max_iter, "gtol": 1e-6})
    return res.x[:d], float(res.x[d])


def roc_auc(y: np.ndarray, s: np.ndarray) -> float:
    """ROC AUC by ranks (ties averaged)."""
    from scipy.stats import rankdata

    y = np.asarray(y) > 0
    n1, n0 = int(y.sum()), int((~y).sum())
    if not n1 or not n0:
        return float("nan")
    r = rankdata(s)
    return float((r[y].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def list_hash(paths: Iterable[Path], hashes: dict[str, str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        h.update(f"{p.name}\t{hashes[str(p)]}\n".encode())
    return h.hexdigest()[:16]


def train(cfg: TrainConfig, root: Path | None = None, *, weights_file: Path, validate: bool = True,
          progress: bool = True, cache_root: Path | None = None, evaluation_root: Path | None = None
          ) -> dict[str, Any]:
    """Train on ``<root>/gutenberg_train``, write the weights to ``weights_file`` and the card beside it (the
    packaged :data:`WEIGHTS_FILE` gets the packaged :data:`CARD_FILE`); returns the card."""

    t0, c0 = time.perf_counter(), time.process_time()
    root = Path(root) if root else data_dir()
    files = training_files(root, cfg.max_books)
    feats: dict[str, dict[str, Any]] = {}
    cached = repaired = 0
    for f in bar(files, progress=progress, desc="training books: features"):
        try:
            feats[str(f)] = book_features(f, cache_root)
            cached += bool(feats[str(f)].get("cached"))
            repaired += bool(feats[str(f)].get("repaired"))
        except (OSError, EOFError, zlib.error, ValueError, LitsegError) as exc:
            raise TrainingDataError(f"training book {f}: {exc}") from None
    t_feat = time.perf_counter() - t0
    hashes = {k: v["text_hash"] for k, v in feats.items()}
    fps = {k: v["fingerprint"] for k, v in feats.items()}
    disjoint = check_disjoint(files, hashes, Path(evaluation_root) if evaluation_root else data_dir(), fps)
    authors = read_authors(root)
    tr, va = split_books(files, authors, cfg.validation_share, cfg.seed, fps)
    same_text = [[Path(a).name.split(".")[0], Path(b).name.split(".")[0], round(x, 3)]
                 for a, b, x in text_overlap.overlapping(fps)]
    d_parts, h_parts, l_parts = [], [], []
    for f in tr:
        z = feats[str(f)]
        idx = sample_candidates(z["labels"], cfg, book_id_of(f))
        if len(idx):
            d_parts.append(z["dense"][idx])
            h_parts.append(z["hashed"][idx])
            l_parts.append(z["labels"][idx])
    if not l_parts or not any((lab > 0).any() for lab in l_parts):
        raise TrainingDataError(f"no chapter or scene break in the {len(tr)} training books of {root / TRAIN_FOLDER}")
    dense = np.concatenate(d_parts)
    hashed = np.concatenate(h_parts)
    labels = np.concatenate(l_parts)
    y = labels > 0
    n_pos = {"chapter": int((labels == 1).sum()), "scene": int((labels == 2).sum())}
    mean = dense.mean(axis=0)
    std = dense.std(axis=0)
    std = np.where(std > 1e-9, std, 1.0)
    t1 = time.perf_counter()
    w, b = fit_logistic(_design(dense, hashed, mean, std), y, cfg.l2, cfg.max_iter)
    t_fit = time.perf_counter() - t1
    nd = len(DENSE_NAMES)
    model = BoundaryModel(mean, std, w[:nd], w[nd:], b)
    weights_file = Path(weights_file)
    card_file = card_path(weights_file)
    weights_text = json.dumps(model.to_json(), indent=0, sort_keys=True) + "\n"
    card: dict[str, Any] = {
        "model": "logistic regression over lexical-cohesion, continuity, shape and hashed first/last-word "
                 "features of every paragraph start (litseg_nb.chunkers.boundary_features)",
        "feature_version": FEATURE_VERSION, "dense_features": list(DENSE_NAMES),
        "hashed_features": f"{n_hashed()} buckets (first 1/2/3 words of the new paragraph, last word + punctuation before)",
        "weights_sha256_16": hashlib.sha256(weights_text.encode()).hexdigest()[:16],
        "config": cfg.__dict__,
        "data": {
            "folder": f"<data>/{TRAIN_FOLDER}", "books": len(files), "train_books": len(tr), "validation_books": len(va),
            "split": f"by author (MANIFEST.tsv; books sharing most of their text join one group), "
                     f"{cfg.validation_share:.0%} of the groups held out, seed {cfg.seed}",
            "same_text_books": same_text,
            "book_list_sha256_16": list_hash(files, hashes), "train_list_sha256_16": list_hash(tr, hashes),
            "validation_list_sha256_16": list_hash(va, hashes),
            "train_ids": [f.name.split(".")[0] for f in tr], "validation_ids": [f.name.split(".")[0] for f in va],
            "text_sha256_16": {f.name.split(".")[0]: hashes[str(f)][:16] for f in files},
            "positives": {**n_pos, "total": int(y.sum())}, "negatives": int((~y).sum()),
            "labels_per_book": {f.name.split(".")[0]: [int((feats[str(f)]["labels"] == 1).sum()),
                                                       int((feats[str(f)]["labels"] == 2).sum())] for f in files},
            "candidates_in_train_books": int(sum(len(feats[str(f)]["labels"]) for f in tr)),
            "labels": "the benchmark's narrative_stream marks (detected chapter headings, ornament lines)",
            "disjoint_from_evaluation": disjoint,
        },
        "timing_s": {"features": round(t_feat, 1), "fit": round(t_fit, 1)},
    }
    if validate and va:
        t2 = time.perf_counter()
        card["validation"] = validation_scores(va, feats, model, cfg)
        card["timing_s"]["validation"] = round(time.perf_counter() - t2, 1)
    # written last, together: a run that fails before this point leaves the previous weights and card
    weights_file.parent.mkdir(parents=True, exist_ok=True)
    weights_file.write_text(weights_text, encoding="utf-8")
    card["timing_s"]["total"] = round(time.perf_counter() - t0, 1)
    card["timing_s"]["cpu_total"] = round(time.process_time() - c0, 1)  # this process's CPU seconds
    card["timing_s"]["features_cached"] = cached
    card["timing_s"]["features_cache_repaired"] = repaired  # unreadable cache entries recomputed
    card["timing_s"]["load_average_at_end"] = round(os.getloadavg()[0], 1) if hasattr(os, "getloadavg") else None
    card_file.write_text(json.dumps(card, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return card


def validation_scores(files: Sequence[Path], feats: dict[str, dict[str, Any]], model: BoundaryModel,
                      cfg: TrainConfig) -> dict[str, Any]:
    """AUC over the held-out streams and the benchmark's table on windows of the held-out books."""

    zs = [feats[str(f)] for f in files]
    y = np.concatenate([z["labels"] for z in zs])
    s = np.concatenate([model.score_features(z["dense"], [[int(c) for c in row if c >= 0] for row in z["hashed"]])
                        for z in zs])
    out: dict[str, Any] = {"stream_candidates": int(len(y)), "stream_positives": int((y > 0).sum()),
                           "auc_all": roc_auc(y > 0, s), "auc_chapter": roc_auc(y[y != 2] == 1, s[y != 2]),
                           "auc_scene": roc_auc(y[y != 1] == 2, s[y != 1])}
    sources = [clean_and_units(f) for f in files]
    gs = build_gold(sources, cfg.window_sentences, cfg.min_side_sentences, cfg.seed, cfg.max_windows_per_book, False)
    sets: dict[str, list] = {"boundary-model": [], "boundary-model@top|G|": []}
    for b in gs.books:
        for u in b.units:
            sets["boundary-model"].extend(boundary_model_chunks(b, u, cfg.target_words, cfg.min_sentences, model))
            sc = boundary_scores((b, u), model=model)
            k = len(b.meta["boundary_gold"][u.unit_id]["gold"])
            top = sorted(sorted(sc, key=lambda j: (-sc[j], j))[:k])
            sets["boundary-model@top|G|"].extend(chunks_from_boundaries(b, u, "boundary-model@top|G|", [1] + top))
    bcfg = BoundaryConfig.for_profile("smoke", window_sentences=cfg.window_sentences,
                                      min_side_sentences=cfg.min_side_sentences, seed=cfg.seed)
    out["benchmark_windows"] = {"window_sentences": cfg.window_sentences, "min_side_sentences": cfg.min_side_sentences,
                                "max_windows_per_book": cfg.max_windows_per_book,
                                "windows": sum(len(b.units) for b in gs.books), "books": len(gs.books)}
    out["benchmark_rows"] = []
    if not out["benchmark_windows"]["windows"]:  # held-out books without a window: no benchmark rows, said so
        return out
    table = summarize(score_chunk_sets(sets, gs.books, bcfg), bcfg)
    th = bcfg.headline_tolerance
    cols = ["method", "kind", "n_windows", "n_books", "n_gold", "n_boundaries", f"F1@{th}", f"lift_vs_paragraph@{th}",
            f"lift@{th}", f"lift@{th}_lo", f"lift@{th}_hi", f"p_value@{th}"]
    out["benchmark_rows"] = [{k: (None if isinstance(v, float) and not np.isfinite(v) else v)
                              for k, v in r.items()} for r in table[[c for c in cols if c in table]].to_dict("records")]
    return out


#: where ``train-boundary-model`` writes without ``--out`` (in the working directory; never the package)
DEFAULT_OUT = "boundary_model.json"


def card_path(weights_file: Path) -> Path:
    """The card beside ``weights_file`` (the packaged weights: the packaged card)."""
    return CARD_FILE if Path(weights_file).resolve() == WEIGHTS_FILE.resolve() else \
        Path(weights_file).with_suffix(".card.json")


def output_paths(out: str, packaged: bool, force: bool) -> Path:
    """The weights file of ``--out`` (default :data:`DEFAULT_OUT`; ``--packaged``: the package's), checked
    before any training: a local .json path in a writable folder, replacing no file unless ``--force``, and
    the package's weights only with ``--packaged``."""
    if packaged:
        if out:
            raise UsageError("--packaged writes the package's weights: give it without --out")
        return WEIGHTS_FILE
    out = out or DEFAULT_OUT
    if "://" in out:  # never echoed: a URL may carry a secret
        raise UsageError("--out: a URL is not a local file path; give a local .json file path")
    path = Path(out).expanduser()
    if path.suffix != ".json" or ".." in path.parts or path.is_dir():
        raise UsageError(f"--out {out!r}: expected a local .json file path without '..'")
    if path.resolve() == WEIGHTS_FILE.resolve():
        raise UsageError(f"--out {out!r} is the package's weights: replace them with --packaged only")
    existing = [p for p in (path, card_path(path)) if p.exists()]
    if existing and not force:
        raise UsageError(f"--out {out!r}: {existing[0]} exists; choose another --out or give --force to replace it")
    try:
        ensure_writable(path.resolve().parent)
    except OutputsNotWritable:
        raise UsageError(f"--out {out!r}: its folder {path.resolve().parent} cannot be created or written") from None
    for p in existing:
        if not os.access(p, os.W_OK):
            raise UsageError(f"--out {out!r}: {p} is not writable")
    return path


def cli(args: Any) -> int:
    if args.max_books is not None and args.max_books < 0:
        raise UsageError(f"--max-books must be >= 0, got {args.max_books}")
    cfg = TrainConfig(**{k: v for k in ("seed", "max_books") if (v := getattr(args, k)) is not None})
    out = output_paths(args.out, args.packaged, args.force)
    card = train(cfg, weights_file=out, validate=not args.no_validation)
    print(f"[litseg_nb] boundary model: {card['data']['train_books']} training books, "
          f"{card['data']['positives']['total']} positives, {card['data']['negatives']} negatives, "
          f"{card['timing_s']['total']} s; weights {out}, card {card_path(out)} (sha256 {card['weights_sha256_16']})"
          + (f"; {n} unreadable feature-cache entr{'y' if n == 1 else 'ies'} recomputed"
             if (n := card["timing_s"]["features_cache_repaired"]) else ""))
    val = card.get("validation")
    if val is not None and not val["benchmark_rows"]:
        print(f"  validation: the {len(card['data']['validation_ids'])} held-out book(s) give no benchmark window "
              f"(none with a chapter or scene break inside {cfg.window_sentences}-sentence windows): "
              "no validation rows")
    for r in (val or {}).get("benchmark_rows", []):
        print(f"  validation {r['method']:<24} {r['kind']:<8} windows {r['n_windows']:>4} "
              f"lift vs paragraphs@1 {r.get('lift_vs_paragraph@1')} [{r.get('lift@1_lo')}, {r.get('lift@1_hi')}]")
    return 0
