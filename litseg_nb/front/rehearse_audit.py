"""Does the rehearsal reach every configuration ``full`` builds? A record of them, and a verdict.

The rehearsal (:mod:`litseg_nb.front.rehearse`) runs notebooks 01-08 with ``--profile full`` and ``--set``
overrides that swap ``full``'s models, data sizes, splits and servers for tiny local ones. An override
reaches only the config classes it names; a config a notebook (or a package function it calls) builds
for a class the overrides do not name keeps ``full``'s real values (Qwen3-32B, BGE-M3, LiteraryQA
test, every book, a CUDA device) and fails in the rehearsal only where it is first used, or not at all.

This module records every configuration object (every :class:`litseg_nb.config._Base` dataclass:
stage configs and their LLM/embedding/corpus sections, also those built directly or with
``.replace``) while notebooks run, with the notebook and code cell that built it, and checks each
against :func:`real_targets`: the values that would still point at ``full``'s real models, data or
servers. Two ways to run it:

* in the rehearsal itself: ``$LITSEG_CONFIG_AUDIT`` names a JSONL file every kernel appends its
  records to (:func:`install_from_env`, called by :mod:`litseg_nb.config` on import); a notebook
  with an uncovered config fails its row of the rehearsal's table;
* without vLLM (CI): :func:`audit_notebooks` executes the notebooks' code cells in this process, with
  ``full`` and the rehearsal's overrides (passed in: this module sits below :mod:`litseg_nb.front.rehearse`), every engine a stand-in (the tiny random model on
  transformers; vLLM engines and LoRA requests are served by it, FlagEmbedding loads the rehearsal's
  tiny BGE-M3), and returns the records (tests/test_rehearse_audit.py).
"""
from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence
from ..config import SERVER_ENV, CorpusConfig, LLMConfig, _Base, active_sets, config_sets, use_sets
from ..config import FULL_STUDENT_MODEL, FULL_TEACHER_MODEL
from .. import config
from ..llm.hf import HFBackend
from ..llm.models import TINY_RANDOM
from ..lite.train import save_merged_model
from ..llm import models, vllm_backend

AUDIT_ENV = "LITSEG_CONFIG_AUDIT"  # JSONL file every process of the rehearsal appends its records to
NOTEBOOK_ENV = "LITSEG_AUDIT_NOTEBOOK"  # the notebook a kernel runs (set by the rehearsal per notebook)

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
_LOOPBACK = re.compile(r"^https?://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)")
#: LiteraryQA's split held locally (the others are ``full``'s data)
LOCAL_LITERARYQA_SPLITS = ("validation",)


@contextlib.contextmanager
def _no_sets() -> Iterator[None]:
    """No ``--set`` overrides (held in-process) and no server variables inside the block: ``full`` as is."""
    saved = {k: os.environ.pop(k) for k, *_ in SERVER_ENV if k in os.environ}
    sets = active_sets()
    use_sets([])
    try:
        yield
    finally:
        use_sets(sets)
        os.environ.update(saved)


def _model_fields(obj: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            yield from _model_fields(v, f"{path}{f.name}.")
        elif f.name == "model" or f.name.endswith("_model"):
            yield f"{path}{f.name}", v


_REAL_MODELS: set[str] | None = None


def full_models() -> set[str]:
    """Every model name ``full`` configures (``model`` and ``*_model`` fields of every stage config
    in ``full`` without overrides): the teacher, student, judges, BGE-M3, the reranker."""
    global _REAL_MODELS
    if _REAL_MODELS is None:
        # deferred: tests patch litseg_nb.front.params.stage_config_classes (read at call time)
        from .params import stage_config_classes

        names = {FULL_TEACHER_MODEL, FULL_STUDENT_MODEL}
        with _no_sets(), suspended():
            for cls in stage_config_classes():
                cfg = cls.for_profile("full")
                names |= {v for _, v in _model_fields(cfg) if isinstance(v, str) and v}
        _REAL_MODELS = names
    return _REAL_MODELS


def real_targets(obj: Any, path: str = "") -> list[str]:
    """The fields of config ``obj`` (recursively) that still point at ``full``'s real models, data or
    servers, each as ``"path: why"``: a model ``full`` configures or any hub id (the rehearsal builds its
    models locally); a CUDA device; a vLLM engine without the rehearsal's CPU settings; an
    OpenAI-compatible server that is not on this machine; LiteraryQA's test or train split (the
    rehearsal holds validation); a corpus without caps (``full``'s whole data)."""
    out: list[str] = []
    for f in dataclasses.fields(obj):
        v, p = getattr(obj, f.name), f"{path}{f.name}"
        if dataclasses.is_dataclass(v):
            out += real_targets(v, p + ".")
        elif (f.name == "model" or f.name.endswith("_model")) and isinstance(v, str) and v:
            if v in full_models() or (_HUB_ID.match(v) and not Path(v).exists()):
                out.append(f"{p}: {v!r} is full's model (the rehearsal uses local tiny models)")
        elif f.name == "device" and v == "cuda":
            out.append(f"{p}: 'cuda' (the rehearsal runs on the CPU)")
    if isinstance(obj, LLMConfig):
        if obj.backend == "vllm" and not obj.engine.get("enforce_eager"):
            out.append(f"{path}engine: {obj.engine!r} is full's vLLM engine (the rehearsal's CPU settings have "
                       f"enforce_eager)")
        far = [u for u in obj.base_urls if not _LOOPBACK.match(u)]
        if far:
            out.append(f"{path}base_urls: {far!r} are not on this machine (the rehearsal serves its own judge)")
    if isinstance(obj, CorpusConfig):
        if "literaryqa" in obj.datasets and obj.literaryqa_split not in LOCAL_LITERARYQA_SPLITS:
            out.append(f"{path}literaryqa_split: {obj.literaryqa_split!r} is full's LiteraryQA split (held "
                       f"locally: {', '.join(LOCAL_LITERARYQA_SPLITS)})")
        if obj.max_books == 0 and not obj.books and obj.max_units_per_book == 0:
            out.append(f"{path}max_books: 0 with no book list and no unit cap is full's whole corpus")
    return out


# ---------------------------------------------------------------- recording
_records: list[dict[str, Any]] | None = None
_where: dict[str, Any] = {"notebook": None, "cell": None}
_sink: Path | None = None
_suspended = 0
_orig_post_init = None
_kept: list[Any] = []  # the recorded objects (their ids stay unique while the audit runs)


@contextlib.contextmanager
def suspended() -> Iterator[None]:
    """Configs built inside are not recorded (the audit's own look-ups)."""
    global _suspended
    _suspended += 1
    try:
        yield
    finally:
        _suspended -= 1


def _cell() -> Any:
    if _where["cell"] is not None:
        return _where["cell"]
    try:  # inside a Jupyter kernel: the execution count is the code cell's position (papermill runs in order)
        from IPython import get_ipython

        ip = get_ipython()
        # the executed notebook's cell of that execution count (outputs/<profile>/executed/)
        return None if ip is None else f"In [{ip.execution_count}]"
    except ImportError:
        return None


def _observe(cfg: Any) -> None:
    if _suspended or (_records is None and _sink is None):
        return
    with suspended():
        issues = real_targets(cfg)
    rec = {"notebook": _where["notebook"] or os.environ.get(NOTEBOOK_ENV, ""), "cell": _cell(),
           "config": type(cfg).__name__, "issues": issues, "id": id(cfg), "children": _children(cfg)}
    _kept.append(cfg)
    if _records is not None:
        _records.append(rec)
    if _sink is not None and issues:  # the rehearsal keeps what fails (every object would be a big file)
        with open(_sink, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")


def _children(obj: Any) -> list[int]:
    out = []
    for f in dataclasses.fields(obj):
        v = getattr(obj, f.name)
        if dataclasses.is_dataclass(v):
            out += [id(v), *_children(v)]
    return out


def _install() -> None:
    global _orig_post_init

    if _orig_post_init is not None:
        return
    _orig_post_init = _Base.__post_init__
    field_default = config._field_default

    def quiet_default(f: Any) -> Any:  # a nested field's default, built only to be merged into
        with suspended():
            return field_default(f)

    config._field_default = quiet_default

    def __post_init__(self) -> None:  # noqa: N807 - the dataclass hook
        _orig_post_init(self)
        _observe(self)

    _Base.__post_init__ = __post_init__


def install_from_env() -> None:
    """Record into ``$LITSEG_CONFIG_AUDIT`` (the rehearsal's kernels) when it is set."""
    global _sink
    target = os.environ.get(AUDIT_ENV, "").strip()
    if target:
        _sink = Path(target)
        _install()
        with open(_sink, "a", encoding="utf-8") as fh:  # the rehearsal checks every kernel was audited
            fh.write(json.dumps({"notebook": os.environ.get(NOTEBOOK_ENV, ""), "installed": os.getpid()}) + "\n")


@contextlib.contextmanager
def recording() -> Iterator[list[dict[str, Any]]]:
    """Every config built inside, as records ``{notebook, cell, config, issues}``."""
    global _records
    _install()
    old, _records = _records, []
    try:
        yield _records
    finally:
        _records = old


def uncovered(records: Sequence[dict[str, Any]]) -> list[str]:
    """One line per (notebook, cell, config, issue) found, deduplicated, in order; a section of a
    recorded config is reported as a field of that config."""
    nested = {c for r in records for c in r.get("children", ())}
    seen, out = set(), []
    for r in records:
        if r.get("id") in nested:
            continue
        for issue in r["issues"]:
            line = f"notebook {r['notebook']} cell {r['cell']}: {r['config']}.{issue}"
            if line not in seen:
                seen.add(line)
                out.append(line)
    return out


def read_sink(path: Path, notebook: str) -> list[str] | None:
    """The uncovered configs notebook ``notebook``'s kernel wrote to the audit file; None when no kernel
    of that notebook installed the audit (then nothing was checked)."""
    if not Path(path).is_file():
        return None
    recs = [json.loads(ln) for ln in Path(path).read_text(encoding="utf-8").splitlines() if ln.strip()]
    mine = [r for r in recs if r["notebook"] == notebook]
    if not any("installed" in r for r in mine):
        return None
    return uncovered([r for r in mine if "issues" in r])


# ---------------------------------------------------------------- executing notebooks with stand-in engines
class _StandInVLLM:
    """Stands in for :class:`litseg_nb.llm.vllm_backend.VLLMBackend`: records the model it was asked
    for and serves it with the tiny random model on transformers (a LoRA request: the tiny model with
    the adapter merged)."""

    requested: list[dict[str, Any]] = []

    def __new__(cls, model: str, *, dtype: str = "auto", max_model_len: int = 8192, structured_output: bool = False,
                ledger: Any = None, enable_thinking: bool = False, lora_adapter: str = "", **engine: Any):

        cls.requested.append({"notebook": _where["notebook"], "cell": _where["cell"], "model": model,
                              "lora_adapter": lora_adapter, "engine": engine})
        name = TINY_RANDOM
        if lora_adapter:
            name = str(save_merged_model(TINY_RANDOM, [Path(lora_adapter)], Path(lora_adapter).parent / "standin"))
        return HFBackend(name, dtype="float32", device="cpu", batch_size=4, max_model_len=max_model_len,
                         structured_output=structured_output, ledger=ledger, enable_thinking=enable_thinking)


@contextlib.contextmanager
def stand_in_engines() -> Iterator[list[dict[str, Any]]]:
    """vLLM engines served by the tiny random model (requests recorded); every other model name the
    rehearsal gives an LLM (SmolLM2) loads the tiny random model too, so training and the hf backend
    run in seconds. FlagEmbedding and FAISS run as they are (on the rehearsal's tiny BGE-M3)."""
    real_resolve = models.resolve_model_path
    real_vllm = vllm_backend.VLLMBackend

    def resolve(name: str) -> str:
        return real_resolve(models.TINY_RANDOM if name == models.SMOLLM2 else name)

    _StandInVLLM.requested = []
    models.resolve_model_path, vllm_backend.VLLMBackend = resolve, _StandInVLLM
    try:
        yield _StandInVLLM.requested
    finally:
        models.resolve_model_path, vllm_backend.VLLMBackend = real_resolve, real_vllm


def code_cells(notebook: Path) -> list[str]:
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    return ["".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code"]


def execute_notebook(notebook: Path, number: str, parameters: dict[str, Any]) -> None:
    """``notebook``'s code cells in order in a fresh namespace, ``parameters`` assigned after its
    parameters cell (as papermill injects them); the current cell is recorded with every config."""
    import matplotlib

    matplotlib.use("Agg")
    ns: dict[str, Any] = {"__name__": "__main__"}
    inject = "\n".join(f"{k} = {v!r}" for k, v in parameters.items())
    for i, src in enumerate(code_cells(notebook)):
        _where.update(notebook=number, cell=i)
        exec(compile(src, f"<{notebook.name} code cell {i}>", "exec"), ns)  # noqa: S102 - our own notebooks
        if i == 0:
            exec(inject, ns)  # noqa: S102
        import matplotlib.pyplot as plt

        plt.close("all")


def audit_notebooks(numbers: Sequence[str], sets_for: Callable[[str], Sequence[tuple[str, Any]]],
                    judge_url: str = "http://127.0.0.1:9/v1", notebooks: Sequence[Path] | None = None) -> dict[str, Any]:
    """Notebooks ``numbers`` executed here in order with ``profile="full"`` and the overrides
    ``sets_for(number)`` (the rehearsal's: ``lambda n: litseg_nb.front.rehearse.notebook_sets(n, m3, reranker)``,
    as ``run --set`` passes them), engines stood in (:func:`stand_in_engines`), the judge at ``judge_url``. ``notebooks`` runs other notebook
    files under those numbers' overrides (a test's planted notebook). Returns ``{"records",
    "uncovered", "engines", "seconds"}``; a notebook that raises stops the audit with its notebook and
    cell in the error."""
    # deferred: loads nbformat (not loaded by importing this module)
    from .runner import discover_notebooks

    files = list(notebooks) if notebooks is not None else [discover_notebooks([n])[0] for n in numbers]
    out: dict[str, Any] = {"records": [], "seconds": {}}
    # the judge server serves every judging role: the GRPO/pairwise judge and notebooks 06/07's two A.2 raters
    judge_vars = ("LITSEG_JUDGE_URLS", "LITSEG_RATER_URLS", "LITSEG_RATER2_URLS")
    old_env = {k: os.environ.get(k) for k in judge_vars}
    os.environ.update({k: judge_url for k in judge_vars})
    try:
        with recording() as recs, stand_in_engines() as engines:
            for n, nb in zip(numbers, files):
                t0 = time.perf_counter()
                with suspended():  # the overrides' own look-ups are not the notebook's configs
                    sets = list(sets_for(n))
                    full_models()
                with config_sets(sets):
                    try:
                        execute_notebook(nb, n, {"profile": "full"})
                    except Exception as exc:
                        err = RuntimeError(f"audit: notebook {n} code cell {_where['cell']} raised "
                                           f"{type(exc).__name__}: {exc}")
                        # what was recorded up to the failure (an uncovered config often causes it)
                        err.audit = {"records": list(recs), "uncovered": uncovered(recs), "engines": list(engines)}
                        raise err from exc
                out["seconds"][n] = round(time.perf_counter() - t0, 1)
            out["records"], out["engines"] = list(recs), list(engines)
    finally:
        _where.update(notebook=None, cell=None)
        for k, v in old_env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    out["uncovered"] = uncovered(out["records"])
    return out
