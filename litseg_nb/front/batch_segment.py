"""``python -m litseg_nb segment FILE|DIR|GLOB [-o OUT]``: segment one book or a whole library.

* **Inputs** — files, folders (their ``*.txt`` files, sorted) and glob patterns (``'books/*.txt'``).
  One input file: ``-o`` is the chunks file (``.jsonl``) or a folder. Several: ``-o`` is a folder.
  Default: ``outputs/<profile>/segment/`` in the working directory (``LITSEG_OUTPUTS_DIR`` when set).
* **Per book, three files** (``<stem>.<method>`` unless two inputs share a stem, then
  ``<stem>-<hash of the input path>.<method>``; the default folder always adds the hash):
  ``.jsonl`` the chunks, ``.text.txt`` the cleaned text, ``.meta.json`` the record of the run.
  Each chunk's ``spans`` index the cleaned text (``.text.txt``, read as UTF-8);
  ``metadata["raw_spans"]`` index the input file as ``Path(file).read_text(encoding=meta["encoding"])``
  reads it (universal newlines), one span per paragraph the chunk touches (between paragraphs the
  file may hold matter the cleaning dropped), the same words with the file's line breaks;
  ``metadata["unit_title"]`` names the unit; ``metadata["token_count"]`` counts the chunk text's
  tokens with the tokenizer ``meta["tokenizer"]`` names (``--token-counter``; default: the profile's
  embedding model). The meta file lists the units (id, title, sentences, chunks) and the fallbacks by kind.
* **Sizes** — ``--chunk-size N``: no chunk has more than N tokens of that tokenizer; a longer one is split
  at paragraph, then sentence, then token boundaries (``metadata["split_from"]`` names the chunk it came
  from, spans stay exact). Without it, the summary counts the chunks longer than the model reads (an
  embedder would read only their start). Text outside the narrative units (title page, front or back
  matter) becomes chunks of unit ``outside`` (at most N tokens, or the model's window, each), so every
  word of the cleaned text is in a chunk; ``--no-keep-outside-units`` leaves it out, still counted.
* **Atomic, resumable** — each file is written to a temporary file and renamed; the meta file comes
  last and says ``"complete": true`` with the input's hash and the run's settings. A book whose
  complete outputs match is skipped on a rerun (resume after a kill); an existing output from
  other settings or another input is replaced only with ``--force``. An output path equal to an
  input is refused. The destination is checked for writing before any work.
* **Failures** — a book that cannot be read or segmented is listed (file and reason) and the run
  goes on; a dead LLM server (:class:`~litseg_nb.llm.base.LLMError`) stops the whole run, since
  every next book would fail too: the finished units of the current book are written (``complete:
  false``, redone on the rerun) and one line names the server and the cause.
* **Concurrency** — books are opened one after another and their units pooled into batches of
  :func:`litseg_nb.api.checkpoint_units` units (twice ``llm.max_concurrency`` per ``--base-url`` for
  an OpenAI-compatible backend, twice ``llm.batch_size`` otherwise), so requests of several books
  are in flight at once and every replica stays busy; a book is written as soon as all its units
  are done. LitSeg with length calibration (the profile default) calibrates on each book's own first
  units, so it segments one book at a time (still in batches of that size).
* **On a Ray cluster** — ``--ray [ADDRESS]`` (the extra ``ray``) runs each book on a Ray worker
  (``--ray-actors`` actors, each holding one backend for the run) and writes the same bytes here, with the
  same skip/resume rules; a worker that dies fails only its book (addresses: :mod:`litseg_nb.core.ray_cluster`).

Exit codes: 0 all books segmented (or already complete); 1 some books failed, or the run stopped on
an LLM error; 2 a usage error (bad option, no input, unwritable destination) or every book failed.
"""
from __future__ import annotations

import functools
import glob as _glob
from bisect import bisect_right
import hashlib
import itertools
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence
from urllib.parse import urlsplit

from .. import api
from ..config import ConfigError
from ..core import cache, safe_io, schema
from ..llm.request_cache import CachedBackend, cache_report
from ..core.cache import hash_file, hash_obj
from ..api import check_count, count_fallbacks, iter_segment
from ..chunkers.base import ChunkerError
from ..chunkers.sizing import (check_chunk_size, check_token_counter, count_tokens, fit_chunks, in_text_order,
                               library_options, model_window, outside_chunks, outside_units, over_window,
                               over_window_message, token_counter)
from ..segmenters.registry import get_method
from ..core.paths import cli_outputs_root
from ..core.safe_io import OutputsNotWritable, ensure_writable
from ..core.ray_cluster import cluster, parse_address, require_ray, run_on_actors
from ..llm.embeddings import EmbeddingError
from ..llm.base import LLMError
from .params import parse_key_value
from ..redact import redact_obj
from ..chunkers.library import check_options as check_library_options, is_library_method

SUFFIXES = {"chunks": ".jsonl", "text": ".text.txt", "meta": ".meta.json"}
FORMAT = "litseg_nb.segment/1"
SPANS_DOC = ("spans index the cleaned text (<name>.text.txt, UTF-8); metadata.raw_spans index the input file "
             "read with the encoding below and universal newlines, one span per paragraph of the chunk")


class SegmentUsageError(ConfigError):
    """A bad command line: no input, a bad output path, an existing output without --force."""


@dataclass
class BookResult:
    source: Path
    output: Path | None = None
    status: str = "pending"  # done | skipped | failed | stopped
    units: int = 0
    chunks: int = 0
    sentences: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    llm_calls: int = 0
    seconds: float = 0.0
    reason: str = ""
    outside_words: int = 0  # words of the cleaned text in no narrative unit (front/back matter)
    over_window: list[int] = field(default_factory=list)  # token counts of the chunks over the model's window
    input_sha: str = ""
    t0: float = 0.0  # time.perf_counter() when the book was opened


# ------------------------------------------------------------------ inputs and outputs
def expand_inputs(inputs: Sequence[str | Path]) -> tuple[list[Path], list[str]]:
    """Files named by ``inputs`` (files, folders' ``*.txt``, globs), deduplicated in order; inputs matching nothing."""
    files: list[Path] = []
    missing: list[str] = []
    for item in inputs:
        p = Path(item).expanduser()
        if p.is_dir():
            found = sorted(x for x in p.glob("*.txt") if x.is_file() and not _is_our_output(x))
        elif p.is_file():
            found = [p]
        else:  # a glob pattern (a path that does not exist matches nothing)
            found = sorted(Path(x) for x in _glob.glob(str(p), recursive=True)
                           if Path(x).is_file() and not _is_our_output(Path(x)))
        if not found:
            missing.append(str(item))
        files.extend(found)
    unique: dict[Path, Path] = {}
    for f in files:
        unique.setdefault(f.resolve(), f)
    return list(unique.values()), missing


def _is_our_output(p: Path) -> bool:
    """A cleaned text this command wrote (``<base>.text.txt`` beside ``<base>.meta.json``): not a book."""
    return p.name.endswith(SUFFIXES["text"]) and p.with_name(p.name[:-len(SUFFIXES["text"])] + SUFFIXES["meta"]).is_file()


def _path_hash(p: Path) -> str:
    return hashlib.sha256(str(p.resolve()).encode("utf-8")).hexdigest()[:8]


def output_bases(files: Sequence[Path], method: str, output: Path | None, default_dir: Path,
                 single_file: bool) -> list[Path]:
    """Each book's output base path (``.jsonl`` / ``.text.txt`` / ``.meta.json`` are added)."""
    if output is not None and single_file and output.suffix and not output.is_dir():
        if output.suffix.lower() != ".jsonl":
            raise SegmentUsageError(f"-o {output}: the chunks file is JSON lines; name it *.jsonl "
                                    "(or give a folder)")
        return [output.with_suffix("")]
    folder = output if output is not None else default_dir
    if folder.exists() and not folder.is_dir():
        raise SegmentUsageError(f"-o {folder}: with several inputs -o must be a folder")
    stems = Counter(f.stem for f in files)
    always_hash = output is None  # the shared default folder: inputs of other runs must not collide
    names = [f"{f.stem}-{_path_hash(f)}" if always_hash or stems[f.stem] > 1 else f.stem for f in files]
    return [folder / f"{n}.{method}" for n in names]


def paths_of(base: Path) -> dict[str, Path]:
    return {k: base.with_name(base.name + s) for k, s in SUFFIXES.items()}


def run_fingerprint(method: str, profile: str, options: dict[str, Any], max_units: int,
                    sizing: dict[str, Any] | None = None) -> str:
    """What makes two runs' outputs the same (``llm.base_urls`` left out: adding a replica changes no result;
    ``sizing``: chunk size, tokenizer, outside text kept)."""
    opts = {**options, "llm": {k: v for k, v in options.get("llm", {}).items() if k != "base_urls"}}
    if not opts["llm"]:
        opts.pop("llm")
    return hash_obj({"method": method, "profile": profile, "options": opts, "max_units": max_units,
                     **({"sizing": sizing} if sizing else {})})[:16]


def is_complete(base: Path, meta: dict[str, Any]) -> bool:
    """``meta`` (the meta file at ``base``) records a finished run of this code, its files intact."""
    p = paths_of(base)
    return (meta.get("format") == FORMAT and meta.get("complete") is True and meta.get("code") == cache.code_version()
            and all(p[k].is_file() and hash_file(p[k]) == meta.get("files", {}).get(k) for k in ("chunks", "text")))


def check_outputs(files: Sequence[Path], bases: Sequence[Path]) -> None:
    """Refuse an output that is an input, and two inputs writing the same output."""
    inputs = {f.resolve() for f in files}
    for base in bases:
        for path in paths_of(base).values():
            if path.resolve() in inputs:
                raise SegmentUsageError(f"output {path} is an input book; choose another -o")
    seen: dict[Path, Path] = {}
    for f, base in zip(files, bases):
        if base.resolve() in seen:
            raise SegmentUsageError(f"inputs {seen[base.resolve()]} and {f} would write the same output {base}")
        seen[base.resolve()] = f


# ------------------------------------------------------------------ one book
def _write_book(base: Path, book: Any, chunks: list[Any], meta: dict[str, Any]) -> None:
    """Chunks, cleaned text, then the meta file (last, so a complete meta means complete outputs)."""
    p = paths_of(base)
    # a claim first: a run killed while writing leaves "complete": false, redone on the rerun
    safe_io.write_json_atomic(p["meta"], {**meta, "complete": False}, indent=1, ensure_ascii=False)
    schema.save_chunks(p["chunks"], chunks)  # atomic (safe_io)
    safe_io.write_text_atomic(p["text"], book.text)
    meta["files"] = {"chunks": hash_file(p["chunks"]), "text": hash_file(p["text"])}
    safe_io.write_json_atomic(p["meta"], meta, indent=1, ensure_ascii=False)


def raw_offsets(book: Any, raw: str) -> list[int]:
    """For each character of ``book.text``, its offset in ``raw`` (the decoded file; -1 where it cannot be
    mapped). Paragraph *i* came from raw lines ``book.source_map[i]``, where the cleaning only joined lines,
    collapsed whitespace and dropped characters: each non-space character is matched in order."""
    out = [-1] * len(book.text)
    if not book.source_map or len(book.source_map) != len(book.paragraphs):
        return out
    starts = [0, *itertools.accumulate(len(line) + 1 for line in raw.split("\n"))]
    text = book.text
    for (ps, pe), (la, lb) in zip(book.paragraphs, book.source_map):
        r, r_end = starts[la], starts[lb] - 1
        mapped = []
        for c in range(ps, pe):
            ch = text[c]
            if ch.isspace():
                mapped.append(r)
                continue
            while r < r_end and raw[r].isspace():
                r += 1
            if r >= r_end or raw[r] != ch:
                j = raw.find(ch, r, r_end)  # characters the cleaning dropped: skip them
                if j < 0:
                    break
                r = j
            mapped.append(r)
            r += 1
        else:
            out[ps:pe] = mapped
    return out


def raw_spans(book: Any, offsets: Sequence[int], start: int, end: int,
              starts: Sequence[int]) -> list[tuple[int, int]] | None:
    """The raw-file spans of cleaned span ``[start, end)``, one per paragraph it touches (between paragraphs
    the file may hold matter the cleaning dropped), each from its first to its last non-space character; None if
    a piece cannot be mapped."""
    paras = book.paragraphs or [(0, len(book.text))]
    i = max(0, bisect_right(starts, start) - 1)
    out = []
    while i < len(paras) and paras[i][0] < end:
        a, b = max(start, paras[i][0]), min(end, paras[i][1])
        piece = book.text[a:b]
        if piece.strip():
            a, b = a + len(piece) - len(piece.lstrip()), b - len(piece) + len(piece.rstrip())
            if offsets[a] < 0 or offsets[b - 1] < 0:
                return None
            out.append((offsets[a], offsets[b - 1] + 1))
        i += 1
    return out or None


def _add_raw_spans(book: Any, chunks: list[Any]) -> int:
    """``metadata["raw_spans"]`` of each chunk (see the module docstring); the number left unmapped."""
    raw = book.meta.get("source_text")
    if raw is None:
        return 0
    offsets = raw_offsets(book, raw)
    starts = [p[0] for p in book.paragraphs or [(0, len(book.text))]]
    missing = 0
    for c in chunks:
        if not c.is_source_span:
            continue
        pieces = [raw_spans(book, offsets, a, b, starts) for a, b in c.spans]
        missing += None in pieces
        c.metadata["raw_spans"] = None if None in pieces else [list(s) for p in pieces for s in p]
    return missing


# ------------------------------------------------------------------ the run
def _server_name(cfg: Any) -> str:
    llm = cfg.llm
    if llm.backend == "openai":
        urls = [f"{s.scheme}://{s.hostname or ''}{':' + str(s.port) if s.port else ''}{s.path}"
                for s in map(urlsplit, llm.base_urls)]
        return f"openai server {', '.join(urls)} (model {llm.model})"
    return f"{llm.backend} backend (model {llm.model})"


def segment_main(args: Any) -> int:
    """Handler of ``python -m litseg_nb segment`` (``--ray`` too); :func:`litseg_nb.cli.main` prints usage errors."""
    try:
        return _segment_main(args)
    except KeyboardInterrupt:
        print("\n[litseg_nb] segment interrupted; finished books are complete, rerun the same command to "
              "resume", file=sys.stderr)
        return 130


def _segment_main(args: Any) -> int:
    # ---- options: every usage error before any work
    chunk_size = _chunk_size(args.chunk_size)
    try:
        check_count(args.max_units, "--max-units")
        spec = get_method(args.method)
        options = library_options(args.method, spec.config, args.profile, _overrides(args), chunk_size)
        cfg = spec.config.for_profile(args.profile, **options)
        counter = check_token_counter(args.token_counter, cfg, "--token-counter")
        if is_library_method(args.method):  # a misspelt library option: once, before any book is loaded
            check_library_options(args.method, cfg)
    except ChunkerError as exc:
        raise SegmentUsageError(f"--method {args.method}: {exc}") from None
    except ConfigError as exc:
        raise SegmentUsageError(f"configuration error: {exc}") from None
    if spec.needs_llm and cfg.llm.backend == "openai" and not cfg.llm.base_urls:
        raise SegmentUsageError("--llm-backend openai needs --base-url URL (e.g. http://127.0.0.1:8000/v1)")
    if not spec.needs_llm:  # an LLM option given to a method that calls no LLM would be ignored silently
        given = [f for f, v in (("--base-url", args.base_url), ("--llm-backend", args.llm_backend),
                                ("--llm-model", args.llm_model)) if v]
        if given:
            raise SegmentUsageError(f"--method {args.method} calls no LLM: {', '.join(given)} would be ignored; "
                                    f"leave {'them' if len(given) > 1 else 'it'} out or choose an LLM method")
    _check_ray_options(args)
    if spec.needs_llm and "llm" not in options:  # never the profile's model unasked (an hour on a CPU)
        raise SegmentUsageError(f"--method {args.method} calls an LLM and none is chosen: give --base-url URL "
                                f"[--llm-model NAME] (an OpenAI-compatible server, e.g. vLLM), or --llm-backend hf "
                                f"to run the {args.profile} profile's local model {cfg.llm.model} on this machine")
    files, missing = expand_inputs(args.inputs)
    if missing:
        raise SegmentUsageError(f"no such file, folder or matching .txt file: {', '.join(missing)}")
    if spec.needs_llm and cfg.llm.backend == "hf":
        print(local_model_notice(args.method, cfg.llm.model, files), file=sys.stderr)
    single = len(args.inputs) == 1 and len(files) == 1 and Path(args.inputs[0]).is_file()
    if not single and args.output is not None and args.output.suffix.lower() in (".jsonl", ".json") \
            and not args.output.is_dir():
        raise SegmentUsageError(f"-o {args.output} names a file, but {len(files)} book(s) are segmented "
                                f"({len(args.inputs)} input(s)): give a folder for their outputs")
    default_dir = cli_outputs_root() / args.profile / "segment" if args.output is None else Path(".")
    if args.output is not None and args.output.resolve() in {f.resolve() for f in files}:
        raise SegmentUsageError(f"-o {args.output} is an input book; refusing to write over it")
    bases = output_bases(files, args.method, args.output, default_dir, single)
    check_outputs(files, bases)
    try:
        for folder in sorted({b.parent for b in bases}):
            ensure_writable(folder)
    except OutputsNotWritable as exc:
        raise SegmentUsageError(str(exc).replace("outputs folder", "output folder")) from None

    try:
        tok = token_counter(counter)
    except Exception as exc:  # noqa: BLE001 (any loader error: one line naming the option)
        raise SegmentUsageError(f"--token-counter {counter}: cannot load that tokenizer ({type(exc).__name__}: "
                                f"{_one_line(exc)[:200]}); name a packaged one (all-MiniLM-L6-v2), a local "
                                "folder or a hub id") from None
    sizing = {"chunk_size": chunk_size, "token_counter": counter, "keep_outside_units": args.keep_outside_units}
    fingerprint = run_fingerprint(args.method, args.profile, options, args.max_units, sizing)
    run = _Run(args, cfg, spec, files, bases, fingerprint, options)
    run.tok, run.window, run.chunk_size = tok, model_window(counter, tok), chunk_size
    try:
        run.go()
    finally:
        run.ubar.close()
        run.bar.close()
    code = _report(run.results, files, run.stopped, args, single)
    over = [n for r in run.results if r.status in ("done", "skipped") for n in r.over_window]
    if over:  # never silently truncated by the embedder downstream
        n_chunks = sum(r.chunks for r in run.results if r.status in ("done", "skipped"))
        where = run.results[0].source.name if single else f"{len(files)} book(s)"
        print("[litseg_nb] warning: " + over_window_message(where, over, n_chunks, run.window, tok.name,
                                                            "--chunk-size "))
    # how many replies the request cache served (a warm cache is never silent): stdout, so that a failed
    # run's stderr is its one error line
    if run.backend is not None:
        print(f"[litseg_nb] {cache_report(run.backend)}")
    elif run.cache_line:
        print(f"[litseg_nb] {run.cache_line}")
    return code


def _check_ray_options(args: Any) -> None:
    """``--ray``'s address and its sizing options, before any work (the sizing options without ``--ray``
    would be ignored: refused)."""
    ray = args.ray
    sizing = {"--ray-actors": args.ray_actors, "--ray-cpus": args.ray_cpus, "--ray-gpus": args.ray_gpus}
    if ray is None:
        given = [f for f, v in sizing.items() if v is not None]
        if given:
            raise SegmentUsageError(f"{', '.join(given)} without --ray would be ignored; add --ray [ADDRESS]")
        return
    for flag, value in sizing.items():
        if value is not None and (value != value or value < 0 or (flag != "--ray-gpus" and value < 1)):
            raise SegmentUsageError(f"{flag} {value}: give a positive number")
    if ray not in ("", "local", "auto") and Path(ray).exists():
        raise SegmentUsageError(f"--ray {ray}: that is a file or folder, not a cluster address; put --ray after "
                                "the inputs (segment DIR --ray) or give the address (--ray local DIR)")
    address = parse_address(ray)  # RayAddressError: a usage error
    if address.kind != "local" and args.ray_cpus is not None:
        raise SegmentUsageError(f"--ray-cpus sizes a local cluster; the cluster at {address} has its own CPUs")
    require_ray()


#: what a book can fail with and the run go on (GutenbergFormatError, CorpusError, CoverageError, ChunkerError ...)
BOOK_ERRORS = (ValueError, OSError, ChunkerError, UnicodeError, AssertionError)


@dataclass
class _Book:
    """A book being segmented in this process: its units go to the backend in the shared batches."""

    res: BookResult
    book: Any
    calls0: int = 0
    chunks: list[Any] = field(default_factory=list)
    left: int = 0


class _Run:
    """The library run: opens each book (skip, refuse or claim it), writes its outputs and records the outcome.
    Two executors segment the books: :meth:`_in_process` pools units of several books into batches of
    :func:`litseg_nb.api.checkpoint_units` (LitSeg with length calibration: one book at a time, each book
    calibrating on its own first units); ``--ray``'s :meth:`_on_ray` sends a book to each free actor."""

    def __init__(self, args: Any, cfg: Any, spec: Any, files: Sequence[Path], bases: Sequence[Path],
                 fingerprint: str, options: dict[str, Any]):
        # deferred: tqdm.auto picks the notebook or terminal bar at run time
        from tqdm.auto import tqdm

        self.args, self.cfg, self.spec, self.fingerprint, self.options = args, cfg, spec, fingerprint, options
        self.tok: Any = None  # the tokenizer of --chunk-size and token_count, its model's window, --chunk-size
        self.window: int | None = None
        self.chunk_size: int | None = None
        self.on_ray = args.ray is not None
        self.todo = list(zip(files, bases))
        self.results: list[BookResult] = []
        self.stopped: str | None = None
        self.backend = self.embedder = None
        self.cache_line = ""  # --ray: the actors' request caches, summed
        self.queue: list[tuple[_Book, Any]] = []
        self.active: list[_Book] = []
        self.bar = tqdm(total=len(files), desc=f"segment {args.method}{' (ray)' if self.on_ray else ''}", unit="book",
                        disable=len(files) < 2, delay=1)
        self.ubar = tqdm(total=0, desc="units", unit="unit", leave=False, delay=1, disable=self.on_ray)

    def go(self) -> None:
        if self.on_ray:
            self._on_ray()
            return
        try:
            self._in_process()
        except (LLMError, EmbeddingError) as exc:
            why = f"{type(exc).__name__}: {_one_line(exc)}"
            self._stop(why)
            for b in list(self.active):  # the finished units of the books in flight, marked incomplete
                if b.chunks:
                    self._write(b, complete=False)
                b.res.status, b.res.reason = "stopped", why
            if not self.active and self.results and self.results[-1].status == "pending":
                self.results[-1].status, self.results[-1].reason = "stopped", why

    def _stop(self, why: str) -> None:
        """The run stops on a dead server or embedder (``why``: ``"ErrorType: message"``)."""
        what = "embedding model" if why.startswith("EmbeddingError") else _server_name(self.cfg)
        self.stopped = self.stopped or f"{what}: {why.split(': ', 1)[-1]}"

    # ---- opening a book: skip, refuse, fail or claim it
    def _open(self, f: Path, base: Path) -> BookResult | None:
        """The book's result (input hash, start time); None when it is skipped (complete) or unreadable."""
        res = BookResult(f, base)
        self.results.append(res)
        res.t0 = time.perf_counter()
        try:
            res.input_sha = input_sha = hash_file(f)
        except OSError as exc:
            self._fail(res, exc, timed=True)
            return None
        try:
            meta = json.loads(paths_of(base)["meta"].read_text(encoding="utf-8")) or {}
        except (OSError, ValueError):
            meta = {}
        # an earlier (complete, or interrupted: redone) run of this input with these settings
        ours = meta.get("input_sha256") == input_sha and meta.get("settings") == self.fingerprint
        if not self.args.force and ours and is_complete(base, meta):
            res.status, res.reason = "skipped", "already complete (use --force to redo)"
            res.units, res.chunks = meta["n_units"], meta["n_chunks"]
            res.fallbacks = meta.get("fallbacks", {})
            res.outside_words = int((meta.get("outside_units") or {}).get("words") or 0)
            res.over_window = list(meta.get("over_window") or [])
            self.bar.update(1)
            return None
        foreign = None if ours else next((x for x in paths_of(base).values() if x.exists()), None)
        if foreign is not None and not self.args.force:
            raise SegmentUsageError(f"output {foreign} exists (from another input or other settings); "
                                    "pass --force to replace it, or choose another -o")
        return res

    def _fail(self, res: BookResult, exc: BaseException | str, timed: bool = False) -> None:
        res.status, res.reason = "failed", exc if isinstance(exc, str) else f"{type(exc).__name__}: {_one_line(exc)}"
        if timed:
            res.seconds = time.perf_counter() - res.t0
        self.bar.update(1)

    # ---- the in-process executor
    def _in_process(self) -> None:
        pooled = not self.spec.whole_input(self.cfg)  # LitSeg calibrating: one book at a time
        size = api.checkpoint_units(self.cfg, self.spec.needs_llm)
        while True:
            while self.todo and (len(self.queue) < size if pooled else not self.queue):
                self._open_next()
            if not self.queue:
                return
            # not pooled: the queue holds one book, segmented whole
            self._run_batch(self._take(size if pooled else len(self.queue)), whole_book=not pooled)

    def _open_next(self) -> None:
        res = self._open(*self.todo.pop(0))
        if res is None:
            return
        try:
            book = api.prepare_book(res.source, self.cfg)
            items = api.segment_items(book, self.args.max_units)
        except BOOK_ERRORS as exc:
            self._fail(res, exc, timed=True)
            return
        if self.backend is None and self.embedder is None:
            self.backend, self.embedder = api.build_models(self.spec, self.cfg)  # LLMError: stops the run
        res.units = len(items)
        b = _Book(res, book, _book_calls(self.backend, book.book_id), left=len(items))
        self.active.append(b)
        self.queue.extend((b, it) for it in items)
        self.ubar.total += len(items)

    def _take(self, size: int) -> list[tuple[_Book, Any]]:
        """The next batch: at most ``size`` units, never two books with the same book id."""
        batch: list[tuple[_Book, Any]] = []
        owner: dict[str, _Book] = {}
        while self.queue and len(batch) < size:
            b, _ = self.queue[0]
            if owner.setdefault(b.book.book_id, b) is not b:
                break
            batch.append(self.queue.pop(0))
        return batch

    def _run_batch(self, batch: list[tuple[_Book, Any]], whole_book: bool = False) -> None:
        """Segment ``batch``; a book whose units are all done is written. ``whole_book``: one book, checkpointed
        in :func:`~litseg_nb.api.iter_segment`'s batches (its finished units survive an LLM error)."""
        books = list({id(b): b for b, _ in batch}.values())
        by_id = {b.book.book_id: b for b in books}
        try:
            for part in iter_segment(self.spec, [it for _, it in batch], self.cfg, self.backend,
                                     self.embedder, batch_units=None if whole_book else len(batch)):
                done: dict[str, set[str]] = {}
                for c in part:
                    by_id[c.book_id].chunks.append(c)
                    done.setdefault(c.book_id, set()).add(c.unit_id)
                for book_id, units in done.items():
                    by_id[book_id].left -= len(units)
                    self.ubar.update(len(units))
        except (ValueError, ChunkerError, AssertionError) as exc:
            if len(books) == 1:
                b = books[0]
                self.queue = [x for x in self.queue if x[0] is not b]
                self.active.remove(b)
                self.ubar.update(b.left)
                self._fail(b.res, exc, timed=True)
                return
            for b in books:  # which book failed: run each book's share alone
                self._run_batch([x for x in batch if x[0] is b])
            return
        for b in books:
            if b.left == 0:
                self._write(b, complete=True)

    def _write(self, b: _Book, complete: bool) -> None:
        calls = _book_calls(self.backend, b.book.book_id) - b.calls0
        self._finish(b.res, b.book, b.chunks, complete, calls)
        b.res.seconds = time.perf_counter() - b.res.t0
        self.active.remove(b)
        if complete:
            self.bar.update(1)

    def _finish(self, res: BookResult, book: Any, chunks: list[Any], complete: bool, calls: int) -> None:
        """Count the chunks and write the book (``complete: false`` when the run stopped on it)."""
        args = self.args
        tok = self.tok
        outside = outside_units(book)
        if args.keep_outside_units:
            chunks = in_text_order(book, [*chunks, *outside_chunks(book, args.method, tok,
                                                                   self.chunk_size or self.window)])
        if self.chunk_size is not None:
            chunks = fit_chunks(book, chunks, tok, self.chunk_size)
        unmapped = _add_raw_spans(book, chunks)
        for c, n in zip(chunks, count_tokens(tok, [c.text for c in chunks])):
            c.metadata["token_count"] = n
        res.over_window = over_window(chunks, tok, self.window) if self.chunk_size is None else []
        res.fallbacks = count_fallbacks(chunks)
        res.chunks = len(chunks)
        res.llm_calls = calls
        res.sentences = len({(c.unit_id, i) for c in chunks if c.is_source_span
                             for i in range(c.from_idx, c.to_idx + 1)})
        per_unit = Counter(c.unit_id for c in chunks)
        units = [{"unit_id": u.unit_id, "title": u.title, "sentences": u.n_sentences, "start": u.start, "end": u.end,
                  "chunks": per_unit[u.unit_id]} for u in book.units if u.unit_id in per_unit]
        clean = book.meta.get("clean", {})
        res.outside_words = sum(w for *_, w in outside)
        meta = {"format": FORMAT, "complete": complete, "code": cache.code_version(), "input": str(res.source),
                "input_sha256": res.input_sha, "settings": self.fingerprint, "method": args.method,
                "profile": args.profile, "options": redact_obj(self.options),  # addresses without secrets
                "max_units": args.max_units, "book_id": book.book_id, "title": book.title,
                "encoding": clean.get("encoding"), "decode": clean.get("decode"), "spans": SPANS_DOC,
                "raw_spans_unmapped": unmapped, "tokenizer": tok.name, "chunk_size": self.chunk_size,
                "window": self.window, "over_window": res.over_window, "n_units": len(units),
                "n_units_total": len(book.units),
                "n_chunks": len(chunks), "fallbacks": res.fallbacks, "llm_calls": calls,
                "model": self.cfg.llm.model if hasattr(self.cfg, "llm") else None, "units": units,
                "outside_units": {"words": res.outside_words, "spans": [[a, b] for a, b, _ in outside],
                                  "chunked": args.keep_outside_units,
                                  "why": "front matter, back matter or matter between units (not narrative "
                                         "by the structure rules): in the cleaned text and in no unit; chunked "
                                         "as unit 'outside' unless --no-keep-outside-units"},
                "stopped": None if complete else self.stopped}
        _write_book(res.output, book, chunks, meta)
        res.units = len(units)
        res.status = "done" if complete else "stopped"

    # ---- the Ray executor
    def _on_ray(self) -> None:
        """Every book's skip / refuse decision first, then a book to each free actor; the driver writes."""
        opened = [o for o in (self._open(f, base) for f, base in self.todo) if o is not None]
        self.todo = []
        if not opened:
            return
        args = self.args
        with cluster(parse_address(args.ray), num_cpus=args.ray_cpus or None) as ray:
            # deferred: ray is the optional extra (cluster() has checked it is installed)
            from ray.exceptions import RayActorError

            n = args.ray_actors or max(1, min(len(opened), int(ray.cluster_resources().get("CPU", 1))))
            counts: list[tuple[int, int, str]] = []
            lost = 0

            def last(actors: list[Any]) -> None:
                nonlocal lost
                for a in actors:
                    try:
                        counts.append(ray.get(a.cache_counts.remote()))
                    except RayActorError:  # an actor that died for good took its counts with it
                        lost += 1

            left = run_on_actors(ray, BookSegmenter, (self.cfg, args.method, args.max_units), n, opened,
                                 lambda actor, res: actor.segment.remote(str(res.source)), self._landed,
                                 lambda res, exc: self._fail(res, f"Ray worker died ({type(exc).__name__}: "
                                                                 f"{_one_line(exc)[:160]}); rerun to resume"),
                                 name="litseg-segment", num_gpus=args.ray_gpus or 0,
                                 more=lambda: self.stopped is None, last=last)
        for res in left:  # never started: the run stopped on a dead server
            self.results.remove(res)
        hits, misses = sum(c[0] for c in counts), sum(c[1] for c in counts)
        paths = sorted({c[2] for c in counts if c[2]})
        gone = f"; the counts of {lost} dead actor(s) are lost" if lost else ""
        if paths:
            total = hits + misses
            self.cache_line = (f"LLM request cache ({n} Ray actor(s)): {hits} of {total} "
                               f"repl{'y' if total == 1 else 'ies'} from the cache, {misses} computed "
                               f"({', '.join(paths)}){gone}")
        elif self.spec.needs_llm:
            self.cache_line = "LLM request cache: off (every reply computed)"

    def _landed(self, res: BookResult, out: BookOutcome) -> None:
        res.seconds = out.seconds
        if out.status == "failed":
            self._fail(res, out.reason)
            return
        if out.status == "stopped":  # the server (or embedder) died: its finished units are written, incomplete
            self._stop(out.reason)
            res.status, res.reason = "stopped", out.reason
        if out.status == "done" or out.chunks:
            self._finish(res, out.book, out.chunks, out.status == "done", out.calls)
        self.bar.update(1)


@dataclass
class BookOutcome:
    """What a Ray worker sends back for one book: ``status`` done | failed | stopped."""

    status: str
    book: Any = None
    chunks: list[Any] | None = None
    calls: int = 0
    reason: str = ""
    seconds: float = 0.0


class BookSegmenter:
    """A Ray actor holding one backend and embedder for the run (built on its first book); a book is one
    call of :meth:`segment`: clean, units and segment, as in one process."""

    def __init__(self, cfg: Any, method: str, max_units: int) -> None:
        self.cfg, self.spec, self.max_units = cfg, get_method(method), max_units
        self.backend = self.embedder = None

    def segment(self, path: str) -> BookOutcome:
        t0 = time.perf_counter()
        book, chunks, calls0 = None, [], 0
        try:
            if self.backend is None and self.embedder is None:
                self.backend, self.embedder = api.build_models(self.spec, self.cfg)
            book = api.prepare_book(Path(path), self.cfg)
            items = api.segment_items(book, self.max_units)
            calls0 = _book_calls(self.backend, book.book_id)
            for part in iter_segment(self.spec, items, self.cfg, self.backend, self.embedder):
                chunks.extend(part)
        except (LLMError, EmbeddingError) as exc:
            calls = _book_calls(self.backend, book.book_id) - calls0 if book is not None else 0
            return BookOutcome("stopped", book, chunks, calls, f"{type(exc).__name__}: {_one_line(exc)}",
                               time.perf_counter() - t0)
        except BOOK_ERRORS as exc:
            return BookOutcome("failed", reason=f"{type(exc).__name__}: {_one_line(exc)}",
                               seconds=time.perf_counter() - t0)
        return BookOutcome("done", book, chunks, _book_calls(self.backend, book.book_id) - calls0,
                           seconds=time.perf_counter() - t0)

    def cache_counts(self) -> tuple[int, int, str]:
        """(hits, misses, cache path) of this actor's request cache ((0, 0, "") without one)."""
        b = self.backend
        return (b.hits, b.misses, str(b.cache.path)) if isinstance(b, CachedBackend) else (0, 0, "")


def _book_calls(backend: Any, book_id: str) -> int:
    """LLM calls the backend's ledger recorded for ``book_id`` (all methods and stages)."""
    ledger = getattr(backend, "ledger", None)
    return sum(r.get("calls", 0) for r in ledger.rows() if r.get("book") == book_id) if ledger is not None else 0


#: CPU minutes per 1,000 words of the packaged local models with LitSeg (SmolLM2-135M: Ethan Frome, about
#: 35,000 words, took about 75 minutes on a CPU); other models: no estimate
LOCAL_MINUTES_PER_1000_WORDS = {"smollm2-135m-instruct": 2.0, "tiny-random": 0.05}


def local_model_notice(method: str, model: str, files: Sequence[Path]) -> str:
    """The line printed before an LLM method runs a local model: which one, and what to expect."""
    words = sum(len(f.read_bytes().split()) for f in files if f.is_file())
    rate = LOCAL_MINUTES_PER_1000_WORDS.get(model.lower())
    if rate is None:
        eta = "no time estimate for this model; the progress line follows"
    else:
        eta = f"about {max(1, round(rate * words / 1000))} minute(s) on a CPU for {words:,} words"
    small = (" (a small model for trying the pipeline: its chunks do not show what the method does with a "
             "capable LLM)" if model.lower() in LOCAL_MINUTES_PER_1000_WORDS else "")
    return f"[litseg_nb] {method} runs the local model {model} (--llm-backend hf){small}: {eta}"


def _outside_how(args: Any) -> str:
    return "chunked as unit 'outside'" if args.keep_outside_units else "not chunked (--no-keep-outside-units)"


def _chunk_size(text: str | None) -> int | None:
    """``--chunk-size``: None, or a whole number of tokens (a usage error otherwise)."""
    if text is None:
        return None
    try:
        size = int(text.strip())
    except ValueError:
        raise SegmentUsageError(f"--chunk-size {text!r}: give a whole number of tokens (e.g. 256)") from None
    try:
        return check_chunk_size(size, "--chunk-size")
    except ConfigError as exc:
        raise SegmentUsageError(str(exc).replace(" (or None)", "")) from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:400] or type(exc).__name__


def _fb(fallbacks: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in fallbacks.items()) or "0"


def _report(results: list[BookResult], files: Sequence[Path], stopped: str | None, args: Any, single: bool) -> int:
    done = [r for r in results if r.status in ("done", "skipped")]
    failed = [r for r in results if r.status == "failed"]
    if single and failed:  # one book: one error line
        r = failed[0]
        why = r.reason.split(": ", 1)[-1]
        print(f"[litseg_nb] segment: {why if str(r.source) in why else f'{r.source}: {why}'}", file=sys.stderr)
        return 2
    if single and done:
        r = done[0]
        fb = (f"; {sum(r.fallbacks.values())} unit(s) fell back ({_fb(r.fallbacks)}; see each chunk's metadata)"
              if r.fallbacks else "; no fallbacks")
        print(f"[litseg_nb] {args.method} ({args.profile}): {r.chunks} chunks over {r.units} unit(s)"
              + (f", {r.sentences} sentences covered" if r.status == "done" else "") + fb
              + (f", {r.llm_calls} LLM call(s)" if r.llm_calls else "")
              + (f"; {r.outside_words} word(s) of the cleaned text are outside the narrative units (front/back "
                 f"matter, {_outside_how(args)}: meta outside_units)" if r.outside_words else "")
              + f" -> {paths_of(r.output)['chunks']}"
              + (" (already complete, skipped (use --force to redo))" if r.status == "skipped" else ""))
    elif not single:
        rows = [("book", "status", "units", "chunks", "fallbacks", "LLM calls", "seconds", "output / reason")]
        rows += [(r.source.name, r.status, str(r.units), str(r.chunks), _fb(r.fallbacks), str(r.llm_calls),
                  f"{r.seconds:.1f}", r.reason if r.status in ("failed", "stopped")
                  else str(paths_of(r.output)["chunks"])) for r in results]
        widths = [max(len(row[i]) for row in rows) for i in range(7)]
        for row in rows:
            print("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[7])
        tot_fb = sum((Counter(r.fallbacks) for r in results), Counter())  # counts are positive: nothing dropped
        print(f"[litseg_nb] {len(files)} book(s): {sum(r.status == 'done' for r in results)} segmented, "
              f"{sum(r.status == 'skipped' for r in results)} already complete, {len(failed)} failed"
              + (f", {len(files) - len(results)} not started" if len(results) < len(files) else "")
              + f"; {sum(r.units for r in done)} units, {sum(r.chunks for r in done)} chunks, "
              f"fallbacks: {_fb(tot_fb)}, {sum(r.llm_calls for r in results)} LLM call(s)"
              + (f"; {sum(r.outside_words for r in done)} word(s) outside the narrative units (front/back matter, "
                 f"{_outside_how(args)}: each book's meta outside_units)"
                 if any(r.outside_words for r in done) else ""))
        if failed:
            print(f"[litseg_nb] {len(failed)} book(s) failed:", file=sys.stderr)
            for r in failed:
                print(f"  {r.source}: {r.reason}", file=sys.stderr)
    if stopped:
        partial = [r for r in results if r.status == "stopped" and r.chunks]
        wrote = "".join(f"; the {r.units} finished unit(s) of {r.source.name} written to "
                        f"{paths_of(r.output)['chunks']} (marked incomplete)" for r in partial)
        left = len(files) - len(results) + sum(1 for r in results if r.status == "stopped" and not r.chunks)
        print(f"[litseg_nb] segment stopped: the model backend failed, {stopped}{wrote}"
              + (f"; {left} book(s) not segmented" if left else "")
              + "; every next book would fail too, so the run stops; rerun to resume", file=sys.stderr)
        return 1
    if failed:
        return 2 if not done else 1
    return 0


# ------------------------------------------------------------------ command-line options
def _overrides(args: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in args.set:
        key, value = parse_key_value(item, "--set")
        *parents, leaf = key.strip().split(".")
        functools.reduce(lambda node, part: node.setdefault(part, {}), parents, out)[leaf] = value
    llm = out.setdefault("llm", {})
    if args.llm_backend:
        llm["backend"] = args.llm_backend
    if args.llm_model:
        llm["model"] = args.llm_model
    if args.base_url:
        llm["base_urls"] = tuple(args.base_url)
        llm.setdefault("backend", "openai")
    if not llm:
        out.pop("llm")
    return out
