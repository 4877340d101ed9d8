"""Explicit, typed configuration.

Every stage (notebook) has one frozen dataclass config deriving from :class:`StageConfig`. A config
is built from a *profile* (``test``, ``smoke``, ``full``) plus explicit overrides::

    cfg = PreprocessConfig.for_profile("smoke", max_unit_words=1500)

Unknown keys are an error that names the key (:class:`ConfigError`); so is a value of the wrong type
(``max_units=1.5``) or outside a field's closed set of values or range (declared with
:func:`one_of` / :func:`at_least` and checked whenever a config is built). Nested configs
(:class:`LLMConfig`, :class:`EmbeddingConfig`, :class:`CorpusConfig`) accept plain dicts in
overrides, so a papermill parameter such as ``llm={"batch_size": 4}`` works.

Every profile's values — the shared sub-configs' and each stage's own — are in one table,
:data:`litseg_nb.config.profiles.PROFILES_TABLE` (``[profile]["shared"]`` and ``[profile][StageClassName]``),
read by :meth:`StageConfig.for_profile`.

Where a value comes from
------------------------
:meth:`StageConfig.for_profile` decides every field from four layers (:data:`LAYERS`), each over the
one before; ``python -m litseg_nb config --profile P --notebook NN --explain KEY`` prints the value
and the layer that set it (:func:`explain`):

1. ``default``  – the dataclass field's default (the ``full`` values, mostly).
2. ``profile``  – the profile table: the profile's ``shared`` row, then the stage's own row.
3. ``run``      – the run's settings: ``run/config --set KEY=VALUE`` (held in this process by
   :func:`config_sets`; a notebook's kernel gets them from :func:`litseg_nb.front.run_context.setup`,
   through the parameters papermill injects) and, for an ``openai`` LLM role that still has no
   address, the server variables of :data:`SERVER_ENV` (``LITSEG_LLM_URLS`` and friends).
4. ``explicit`` – the caller's keyword overrides: a notebook's parameters, an API call's options.

``--set`` reaches every config the run builds, also those a notebook builds inside (notebook 05's
``BaselinesConfig`` for the LumberChunker sweep, notebook 06's boundary corpus), because they are built
by ``for_profile`` in the same process while the sets are active.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import json
import os
import re
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Union
from ..errors import UsageError

from .profiles import PROFILES, PROFILES_TABLE, stage_values
from ..redact import redact_url


class ConfigError(UsageError, ValueError):
    """Raised for an unknown profile, an unknown key or a value of the wrong shape."""


def one_of(default: Any, *choices: Any) -> Any:
    """A field whose value (or, for a tuple field, every element) must be one of ``choices``."""
    return field(default=default, metadata={"choices": tuple(choices)})


def at_least(default: Any, minimum: float) -> Any:
    """A numeric field that must be ``>= minimum``."""
    return field(default=default, metadata={"ge": minimum})


def between(default: Any, minimum: float, maximum: float) -> Any:
    """A numeric field that must lie in ``[minimum, maximum]``."""
    return field(default=default, metadata={"ge": minimum, "le": maximum})


def field_constraint(cls: type, name: str) -> dict[str, Any]:
    """The declared ``choices`` / ``ge`` / ``le`` of field ``name`` of dataclass ``cls`` (empty when none)."""
    for f in fields(cls):
        if f.name == name:
            return dict(f.metadata)
    return {}


def _type_ok(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if origin in (Union, types.UnionType):
        return any(_type_ok(value, h) for h in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin is dict or hint is dict:
        return isinstance(value, dict)
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_type_ok(v, args[0]) for v in value)
        return len(args) == len(value) and all(_type_ok(v, a) for v, a in zip(value, args))
    if isinstance(hint, type):
        return isinstance(value, hint)
    return True


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) if isinstance(hint, type) else str(hint).replace("typing.", "")


def rejected_choices(value: Any, choices: Any) -> list[Any]:
    """The items of ``value`` (one value or a tuple of them) outside ``choices``."""
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if v not in choices]


def validate_fields(obj: Any) -> None:
    """Check every field of dataclass ``obj``: type, declared choices and minimum (:class:`ConfigError`)."""
    cls = type(obj)
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        value = getattr(obj, f.name)
        hint = hints.get(f.name)
        where = f"{cls.__name__}.{f.name}"
        if hint is not None and not _type_ok(value, hint):
            raise ConfigError(f"{where}: expected {_type_name(hint)}, got {value!r} ({type(value).__name__})")
        choices = f.metadata.get("choices")
        bad = rejected_choices(value, choices) if choices is not None else []
        if bad:
            raise ConfigError(f"{where}: {', '.join(map(repr, bad))} is not accepted; "
                              f"accepted values: {', '.join(map(str, choices))}")
        minimum = f.metadata.get("ge")
        if minimum is not None and value is not None and value < minimum:
            raise ConfigError(f"{where}: {value!r} is below the minimum {minimum}")
        maximum = f.metadata.get("le")
        if maximum is not None and value is not None and value > maximum:
            raise ConfigError(f"{where}: {value!r} is above the maximum {maximum}")


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")


#: ``Class.old_key`` -> its new name: a config given the old key is an error naming the new one
RENAMED_KEYS: dict[str, str] = {
    # the selection's length filter, not the corpus's split cap n (CorpusConfig.max_unit_words)
    "UnitSelection.max_unit_words": "skip_units_over_words",
}


def renamed_hint(parts: typing.Sequence[str]) -> str:
    """`` (renamed: selection.skip_units_over_words)`` when the field path ``parts`` ends in a key of
    :data:`RENAMED_KEYS` (else empty)."""
    new = [n for old, n in RENAMED_KEYS.items() if old.split(".", 1)[1] == parts[-1]]
    return f" (renamed: {'.'.join([*parts[:-1], new[0]])})" if new else ""


def _build(cls: type, values: Mapping[str, Any], where: str) -> Any:
    """Construct dataclass ``cls`` from ``values``, recursing into nested dataclass fields."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    known = {f.name: f for f in fields(cls) if f.init}
    unknown = sorted(set(values) - set(known))
    if unknown:
        renamed = [f"{k} is now {RENAMED_KEYS[f'{cls.__name__}.{k}']}" for k in unknown
                   if f"{cls.__name__}.{k}" in RENAMED_KEYS]
        raise ConfigError(
            f"{where}: unknown key(s) {', '.join(map(repr, unknown))}"
            + (f" ({'; '.join(renamed)})" if renamed else "")
            + f"; known keys: {', '.join(sorted(known))}"
        )
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in values.items():
        ftype = hints.get(name)
        if dataclasses.is_dataclass(ftype) and isinstance(value, Mapping):
            # a partial mapping overrides the field's own default (e.g. LiteConfig.judge_llm's openai
            # judge), not the nested class's defaults
            value = _build(ftype, _merge(_field_default(known[name]), value), f"{where}.{name}")
        elif isinstance(value, list) and typing.get_origin(ftype) is tuple:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def _field_default(f: dataclasses.Field) -> dict[str, Any]:
    """A nested dataclass field's default as a dict (empty when it has none)."""
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        default = f.default_factory()  # type: ignore[misc]
    elif f.default is not dataclasses.MISSING:
        default = f.default
    else:
        return {}
    return dataclasses.asdict(default) if dataclasses.is_dataclass(default) else {}


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Deep-merge ``over`` into ``base`` (dicts merge, everything else replaces)."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merge(out[key], value)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            out[key] = dataclasses.asdict(value)
        else:
            out[key] = value
    return out


class _Base:
    def __post_init__(self) -> None:
        validate_fields(self)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[arg-type]

    def fingerprint(self) -> str:
        """Stable hash of the config's values (part of every cache key)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def replace(self, **changes: Any):
        merged = _merge(self.to_dict(), changes)
        return _build(type(self), merged, type(self).__name__)


class Options(_Base):
    """Base of a segmentation method's options: a frozen dataclass beside the method (``LumberOptions``
    in chunkers/lumber.py, ...) whose fields are every knob that changes the method's chunks, so the
    method's cache key is derived from them (:mod:`litseg_nb.segmenters.contract`).

    A stage config that runs the method carries the same fields by inheriting the options class
    (``BaselinesConfig(TokenOptions, ..., StageConfig)``): the knob is declared once, its key and its
    error messages keep their names; :meth:`of` takes a method's own options out of such a config.
    """

    @classmethod
    def of(cls, cfg: Any):
        """The options of this class held by ``cfg`` (a config inheriting it, or an instance of it)."""
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls) if f.init})

    @classmethod
    def build(cls, values: Mapping[str, Any]):
        """Construct from a mapping (unknown keys and bad values raise :class:`ConfigError`)."""
        return _build(cls, values, cls.__name__)


LLM_BACKENDS = ("hf", "vllm", "openai")
DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICES = ("auto", "cpu", "cuda")
EMBEDDING_BACKENDS = ("sentence-transformers", "flagembedding")
DATASETS = ("gutenqa", "gutenberg", "literaryqa")
UNIT_SELECTIONS = ("first", "questions")
SENTENCE_SPLITTERS = ("nupunkt", "regex")
LITERARYQA_SPLITS = ("train", "validation", "test")


#: ``LLMConfig.engine``: the ``vllm.LLM`` engine arguments a config may set, with their types (any other
#: key is an error naming it; vLLM's own defaults apply to keys left out). The backend passes them
#: through unchanged; ``enable_lora``/``max_lora_rank`` serve LoRA adapters from one engine (notebooks
#: 03, 07).
ENGINE_SETTINGS: dict[str, Any] = {
    "tensor_parallel_size": int, "pipeline_parallel_size": int, "gpu_memory_utilization": float,
    "enforce_eager": bool, "max_num_seqs": int, "max_num_batched_tokens": int, "quantization": str,
    "kv_cache_dtype": str, "swap_space": float, "cpu_offload_gb": float, "enable_lora": bool,
    "max_lora_rank": int, "max_loras": int, "trust_remote_code": bool, "max_logprobs": int,
    "enable_chunked_prefill": bool,
}


def check_engine(engine: Mapping[str, Any], where: str = "LLMConfig.engine") -> None:
    """Unknown keys and values of the wrong type in an ``engine`` mapping (:class:`ConfigError`)."""
    unknown = sorted(set(engine) - set(ENGINE_SETTINGS))
    if unknown:
        raise ConfigError(f"{where}: unknown engine setting(s) {', '.join(map(repr, unknown))}; "
                          f"known: {', '.join(sorted(ENGINE_SETTINGS))}")
    for key, value in engine.items():
        if value is not None and not _type_ok(value, ENGINE_SETTINGS[key]):
            raise ConfigError(f"{where}.{key}: expected {_type_name(ENGINE_SETTINGS[key])}, got {value!r}")


@dataclass(frozen=True)
class LLMConfig(_Base):
    """Which LLM to use and how to call it (see :mod:`litseg_nb.llm`)."""

    backend: str = one_of("hf", *LLM_BACKENDS)
    model: str = "tiny-random"  # "tiny-random", "smollm2-135m-instruct", a local path or a hub id
    dtype: str = one_of("auto", *DTYPES)
    device: str = one_of("auto", *DEVICES)
    batch_size: int = at_least(4, 1)
    max_new_tokens: int = at_least(512, 1)
    temperature: float = at_least(0.0, 0.0)
    top_p: float = 1.0
    max_model_len: int = at_least(8192, 1)
    base_urls: tuple[str, ...] = ()
    # openai backend: the NAME of the environment variable holding the API key. The key itself is
    # never a config value, so it cannot reach manifests, labels, cache keys or notebooks
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_s: float = 120.0
    # openai backend: the most one request may wait in all, over its attempts and backoffs; after it
    # the run stops with BackendUnavailableError naming the server. While requests wait, a console
    # line every wait_report_s says how many and how long the oldest has waited (a hung server)
    max_wait_s: float = at_least(300.0, 1.0)
    wait_report_s: float = at_least(30.0, 1.0)
    max_concurrency: int = at_least(8, 1)
    max_retries: int = at_least(3, 0)
    structured_output: bool = False
    use_cache: bool = True
    # a reply the caller finds invalid (LitSeg's schema, LumberChunker's "Answer: ID"): "drop" takes it out
    # of the request cache, so a rerun asks again (a server answering nonsense may be fixed since);
    # "keep" keeps it (a rerun replays the same fallback); "auto": drop for the openai backend, keep for
    # hf/vllm (a local model's revision is in the key: asked again, it gives the same reply)
    cache_invalid_replies: str = one_of("auto", "auto", "drop", "keep")
    # hf backend: compute a prompt prefix shared by many requests once and reuse its KV cache
    # (vLLM: its own prefix caching, always on; openai: the server's)
    prefix_reuse: bool = True
    # chat template's thinking switch (Qwen3-style `enable_thinking`); off for segmentation,
    # judging and rewriting, a notebook turns it on where it wants a reasoning model to reason
    enable_thinking: bool = False
    # hf backend, forward-only calls (log-probs: margin sampling, perplexity, scoring): a batch is cut
    # before more than this fraction of its tokens would be padding (1 = batches of batch_size only)
    max_padding: float = between(0.25, 0.0, 1.0)
    # vllm backend: engine arguments passed to ``vllm.LLM`` (keys of :data:`ENGINE_SETTINGS`, e.g.
    # tensor_parallel_size, gpu_memory_utilization, enforce_eager, max_num_seqs, quantization);
    # recorded with the config in every manifest
    engine: dict[str, Any] = field(default_factory=dict)
    # vllm backend: a LoRA adapter folder served on ``model``'s engine (needs engine enable_lora);
    # "" = the plain model. See litseg_nb.lite.train.student_backend.
    lora_adapter: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_engine(self.engine)
        check_sampling_and_servers(self)


def check_sampling_and_servers(llm: "LLMConfig") -> None:
    """Values a model call cannot use, refused when the config is built (a :class:`ConfigError` naming the
    field) rather than failing later and being blamed on a book: a timeout that is not a positive number,
    a temperature that is not a finite number >= 0, a ``top_p`` outside (0, 1], and a server address that
    is not an ``http(s)://host`` URL."""
    import math
    from urllib.parse import urlsplit

    if not (math.isfinite(llm.request_timeout_s) and llm.request_timeout_s > 0):
        raise ConfigError(f"llm.request_timeout_s={llm.request_timeout_s!r}: seconds, a positive number")
    if not (math.isfinite(llm.temperature) and llm.temperature >= 0):
        raise ConfigError(f"llm.temperature={llm.temperature!r}: a finite number >= 0 (0 = greedy)")
    if not (math.isfinite(llm.top_p) and 0 < llm.top_p <= 1):
        raise ConfigError(f"llm.top_p={llm.top_p!r}: a probability in (0, 1]")
    for url in llm.base_urls:
        shown = redact_url(str(url))
        try:
            parts = urlsplit(str(url))
            ok = parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in str(url))
            parts.port  # noqa: B018  (a port that is not a number raises here)
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"llm.base_urls: {shown!r} is not a server address; expected http(s)://HOST[:PORT]/v1 "
                              f"(an OpenAI-compatible endpoint)")


@dataclass(frozen=True)
class EmbeddingConfig(_Base):
    """Dense embedding model (see :mod:`litseg_nb.rag`)."""

    backend: str = one_of("sentence-transformers", *EMBEDDING_BACKENDS)
    model: str = "all-MiniLM-L6-v2"  # packaged name, local path or hub id
    batch_size: int = at_least(64, 1)
    device: str = one_of("auto", *DEVICES)
    normalize: bool = True
    use_instructions: bool = False
    # flagembedding backend: tokens read per passage / query (FlagEmbedding's own default is 512, which
    # silently truncates a long chunk); 0 = the model's own maximum. full: BGE-M3 reads 8192.
    max_passage_tokens: int = at_least(0, 0)
    max_query_tokens: int = at_least(512, 0)
    passage_instruction: str = "Represent the literature text chunk for literary question answering:"
    query_instruction: str = (
        "Given a literary question, retrieve relevant literature text chunks that answer the question."
    )


@dataclass(frozen=True)
class CorpusConfig(_Base):
    """Which data a stage runs on.

    ``datasets`` names the sources: ``gutenqa`` (GutenQA, paragraphs per chapter), ``gutenberg``
    (the raw Project Gutenberg books under ``<data>/gutenberg``) and ``literaryqa``.
    ``books`` restricts to given book ids (empty = all available); ``max_books`` / ``max_units``
    cap the amount (0 = no cap).
    """

    datasets: tuple[str, ...] = one_of(("gutenqa",), *DATASETS)
    books: tuple[str, ...] = ()
    max_books: int = at_least(0, 0)
    max_units_per_book: int = at_least(0, 0)
    # which units the max_units_per_book cap keeps: "first" (book order) or "questions" (units that
    # hold a question's evidence first, in book order, then the first others) — so small profiles
    # still have answerable GutenQA questions and every LLM method sees the same units
    unit_selection: str = one_of("first", *UNIT_SELECTIONS)
    literaryqa_split: str = one_of("validation", *LITERARYQA_SPLITS)
    # the paper's n: units longer than this many words are split recursively; None = never split
    max_unit_words: int | None = at_least(2000, 1)
    sentence_splitter: str = one_of("nupunkt", *SENTENCE_SPLITTERS)
    # a raw book that cannot be read (empty, undecodable, several books in one file) is skipped and
    # listed in the load report; strict=True makes it an error instead
    strict: bool = False

    def summary(self, training: bool = False) -> str:
        """The data in one phrase, for labels: datasets, books and caps. ``training`` (a training
        corpus: :meth:`litseg_nb.litseg.config.LitSegConfig.train_data`) names the LiteraryQA split
        and leaves out ``max_books`` and the unit-selection rule."""
        out = "+".join(self.datasets)
        if training and "literaryqa" in self.datasets:
            out += f" ({self.literaryqa_split} split)"
        if self.books:
            out += f" books={','.join(self.books)}"
        if self.max_books and not training:
            out += f" max_books={self.max_books}"
        if self.max_units_per_book:
            out += f" max_units/book={self.max_units_per_book}"
            if self.unit_selection != "first" and not training:
                out += f" ({self.unit_selection})"
        return out


@dataclass(frozen=True)
class UnitSelection(_Base):
    """Which units the LLM-based methods segment — LitSeg, LitSeg-Lite, the LLM baselines and the
    ablations all take :func:`litseg_nb.corpus.selection.select_units` of this, so they see the same units.

    From the loaded corpus: units of ``books`` (ids or title substrings; empty = every book), except
    those longer than ``skip_units_over_words`` words (None = any length), ordered by ``strategy`` — ``"first"`` (book
    order) or ``"questions"`` (units holding a GutenQA question's evidence first). ``units`` names
    units explicitly (``"book_id/unit_id"``). ``min_questions`` keeps the fewest evidence units that
    together hold the evidence of at least that many questions (greedy cover, shortest first), so a
    small run still has answerable questions. ``max_units`` caps the result (0 = no cap). The
    selected units are returned in corpus order.
    """

    strategy: str = one_of("first", *UNIT_SELECTIONS)
    books: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    min_questions: int = at_least(0, 0)
    max_units: int = at_least(0, 0)
    # a length filter (not the corpus's split cap n, CorpusConfig.max_unit_words): longer units are
    # left out of the selection; None = any length
    skip_units_over_words: int | None = at_least(None, 1)


#: the shared sub-configs' values per profile: the ``"shared"`` rows of :data:`litseg_nb.config.profiles.PROFILES_TABLE`
SHARED_PROFILE_DEFAULTS: dict[str, dict[str, dict[str, Any]]] = {p: PROFILES_TABLE[p]["shared"] for p in PROFILES}


@dataclass(frozen=True)
class StageConfig(_Base):
    """Base of every notebook/stage config: profile, seed and the shared sub-configs.

    Subclasses add their own fields (all with defaults); their per-profile values are the rows of
    :data:`litseg_nb.config.profiles.PROFILES_TABLE` under the class's name, with an explicit entry for every
    profile (``full`` included, even when it is empty: the dataclass defaults are the ``full`` values).
    """

    profile: str = one_of("test", *PROFILES)
    seed: int = 0
    llm: LLMConfig = field(default_factory=LLMConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    selection: UnitSelection = field(default_factory=UnitSelection)

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        """Stage-specific per-profile values (merged over the shared defaults): the profile table's row
        of the nearest class (this one, else a base) that has one."""
        _check_profile(profile)
        for klass in cls.__mro__:
            if klass is StageConfig:
                break
            if klass.__name__ in PROFILES_TABLE[profile]:
                return copy.deepcopy(stage_values(profile, klass.__name__))
        return {}

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any):
        """Build the config for ``profile`` with explicit ``overrides`` (unknown keys raise)."""
        values = cls.layered_values(profile, overrides)["explicit"]
        return _build(cls, values, f"{cls.__name__}[{profile}]")

    @classmethod
    def layered_values(cls, profile: str, overrides: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """The values after each layer of :data:`LAYERS` above ``default`` (the dataclass defaults
        are applied when the config is built), as nested dicts: ``{"profile": ..., "run": ...,
        "explicit": ...}``, each including the layers below it."""
        _check_profile(profile)
        out: dict[str, dict[str, Any]] = {}
        values: dict[str, Any] = _merge(copy.deepcopy(SHARED_PROFILE_DEFAULTS[profile]), cls.profile_defaults(profile))
        out["profile"] = values
        values = apply_sets(cls, values, active_sets())  # `run --set` / `config --set`
        values = apply_server_env(cls, values)  # $LITSEG_JUDGE_URLS, ... (see SERVER_ENV)
        out["run"] = values
        values = _merge(values, dict(overrides or {}))
        values["profile"] = profile
        out["explicit"] = values
        return out

    def describe(self) -> str:
        """One line naming profile, models and data, for table and figure captions."""
        return f"{self.describe_models()} | data={self.corpus.summary()}"

    def describe_models(self) -> str:
        """The head of :meth:`describe`: profile, LLM (backend) and embedding model."""
        return f"profile={self.profile} | LLM={self.llm.model} ({self.llm.backend}) | embeddings={self.embedding.model}"


# ---------------------------------------------------------------- the layers, --set and server addresses
#: The layers that decide a config value, lowest first (see the module's docstring).
LAYERS: tuple[str, ...] = ("default", "profile", "run", "explicit")

#: Environment variables holding OpenAI-compatible server addresses (comma- or space-separated
#: ``http://host:port/v1``), ``(variable, config class or None = any, LLM field)``. They fill
#: ``base_urls`` of that LLM role when its backend is ``openai`` and no ``--set`` gave addresses;
#: the first matching variable wins (so the teacher's own variable beats ``LITSEG_LLM_URLS``).
SERVER_ENV: tuple[tuple[str, str | None, str], ...] = (
    ("LITSEG_TEACHER_URLS", "LitSegConfig", "llm"),  # notebook 02's teacher
    ("LITSEG_JUDGE_URLS", None, "judge_llm"),  # notebook 03's GRPO / evaluation judge; 05's pairwise judge
    ("LITSEG_RATER_URLS", None, "rater_llm"),  # notebooks 06/07: the first A.2 LLM rater
    ("LITSEG_RATER2_URLS", None, "rater2_llm"),  # notebooks 06/07: the second A.2 LLM rater (another model)
    ("LITSEG_LLM_URLS", None, "llm"),  # every stage's main LLM (student, baselines, generator)
)

#: The ``--set`` overrides in force in this process, in order (:func:`config_sets`, :func:`use_sets`).
_ACTIVE_SETS: list[tuple[str, Any]] = []


def active_sets() -> list[tuple[str, Any]]:
    """The ``--set`` overrides in force in this process, in order."""
    return list(_ACTIVE_SETS)


@contextlib.contextmanager
def config_sets(sets: typing.Sequence[tuple[str, Any]]):
    """Make ``sets`` active ``--set`` overrides (after those already active) inside the block, in
    this process: every config built there applies them. A notebook's kernel gets them as a
    parameter (:func:`litseg_nb.front.run_context.setup`), never through the environment."""
    old = list(_ACTIVE_SETS)
    _ACTIVE_SETS.extend((str(k), v) for k, v in sets)
    try:
        yield
    finally:
        _ACTIVE_SETS[:] = old


def use_sets(sets: typing.Sequence[tuple[str, Any]]) -> None:
    """Make ``sets`` THE active ``--set`` overrides of this process from now on (a notebook's kernel:
    :func:`litseg_nb.front.run_context.setup` with the sets the runner passed)."""
    _ACTIVE_SETS[:] = [(str(k), v) for k, v in sets]


def _split_key(key: str) -> tuple[str | None, list[str]]:
    """``"LiteConfig.judge_llm.model"`` -> ``("LiteConfig", [...])``; unqualified keys -> ``(None, [...])``."""
    parts = [p.strip() for p in key.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {key!r}: expected section.field=value (e.g. judge_llm.base_urls=http://host:8000/v1)")
    if parts[0][:1].isupper():
        return parts[0], parts[1:]
    return None, parts


def field_hint(cls: type, parts: typing.Sequence[str]) -> Any:
    """The type of field path ``parts`` of dataclass ``cls`` (``_MISSING`` when it has no such field).
    Inside ``LLMConfig.engine`` the key's type comes from :data:`ENGINE_SETTINGS`."""
    owner: Any = cls
    hint: Any = cls
    for i, part in enumerate(parts):
        if owner is LLMConfig and part == "engine" and i == len(parts) - 2:
            return ENGINE_SETTINGS.get(parts[-1], Any)  # an unknown key fails in check_engine
        if not dataclasses.is_dataclass(owner) or part not in {f.name for f in fields(owner) if f.init}:
            return _MISSING
        hint = typing.get_type_hints(owner)[part]
        owner = hint
    return hint


_MISSING = object()


_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")
_INT_RE = re.compile(r"^[+-]?\d+$")


def _scalar(value: Any, base: type) -> Any:
    """``value`` as ``base``, or raise ValueError."""
    if base is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
    elif base is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, str) and _INT_RE.match(value.strip()):
            return int(value.strip())
    elif base is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            return float(value.strip())  # ValueError for "abc"
    elif base is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)  # e.g. -p books=46 (the runner reads 46 as a number)
    raise ValueError(value)


def coerce(value: Any, hint: Any, where: str) -> Any:
    """A command-line value (a literal or a string) as the field type ``hint`` (:class:`ConfigError` if not)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in ("none", "null"))):
            return None
        for a in args:
            if a is not type(None):
                try:
                    return coerce(value, a, where)
                except ConfigError:
                    continue
        raise ConfigError(f"{where}: {value!r} is not accepted; expected {_type_name(hint)}")
    if origin is tuple:
        items = [v.strip() for v in value.split(",") if v.strip()] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise ConfigError(f"{where}: {value!r} is not accepted; expected a comma-separated list")
        elem = args[0] if args else Any
        return tuple(coerce(v, elem, where) for v in items)
    if hint in (bool, int, float, str):
        try:
            return _scalar(value, hint)
        except ValueError:
            raise ConfigError(f"{where}: {value!r} is not accepted; expected {hint.__name__}") from None
    if (origin is dict or hint is dict) and not isinstance(value, dict):
        raise ConfigError(f"{where}: {value!r} is not accepted; expected a mapping such as {{'key': 1}}")
    return value


def apply_sets(cls: type, values: dict[str, Any], sets: typing.Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``values`` with every ``--set`` whose field path exists in ``cls`` applied (a qualified key,
    ``ClassName.path``, only to that class; a qualified path the class lacks is an error)."""
    if not sets:
        return values
    values = copy.deepcopy(values)  # never write into the profile table's nested dicts
    for key, value in sets:
        qual, parts = _split_key(key)
        if qual is not None and qual != cls.__name__:
            continue
        if parts[0] == "profile":
            raise ConfigError(f"--set {key}: the profile is chosen with --profile")
        hint = field_hint(cls, parts)
        if hint is _MISSING:
            if qual is not None:
                raise ConfigError(f"--set {key}: {cls.__name__} has no field {'.'.join(parts)}")
            continue
        node = values
        for p in parts[:-1]:
            node = node.setdefault(p, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {key}: {p} is not a section")
        node[parts[-1]] = coerce(value, hint, f"--set {key}")
    return values


def llm_roles(cls: type) -> list[str]:
    """The fields of stage config ``cls`` that are :class:`LLMConfig` (``llm``, ``judge_llm``, ...)."""
    hints = typing.get_type_hints(cls)
    return [f.name for f in fields(cls) if hints.get(f.name) is LLMConfig]


def apply_server_env(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """``base_urls`` from :data:`SERVER_ENV` for the ``openai`` roles of ``cls`` that have none."""
    roles = {f.name: f for f in fields(cls)}
    for env, qual, role in SERVER_ENV:
        raw = os.environ.get(env, "").strip()
        if not raw or (qual is not None and qual != cls.__name__) or role not in llm_roles(cls):
            continue
        node = values.get(role) or {}
        backend = node.get("backend", _field_default(roles[role]).get("backend"))
        if backend != "openai" or node.get("base_urls"):
            continue
        urls = tuple(u for u in raw.replace(",", " ").split() if u)
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ConfigError(f"${env}: {', '.join(bad)} is not an http(s):// address")
        values = _merge(values, {role: {"base_urls": urls}})
    return values


def missing_settings(cfg: Any, roles: typing.Sequence[str] | None = None) -> list[str]:
    """What ``cfg`` cannot run without, one line each (empty = runnable): an ``openai`` LLM role with
    no server address. ``roles`` restricts the check to the LLM roles a notebook uses."""
    out = []
    name = type(cfg).__name__
    for role in llm_roles(type(cfg)):
        if roles is not None and role not in roles:
            continue
        llm = getattr(cfg, role)
        if llm.backend == "openai" and not llm.base_urls:
            env = next(e for e, q, r in SERVER_ENV if r == role and q in (None, name))
            out.append(f"{name}.{role}.base_urls is unset: the {role} ({llm.model}) uses the openai backend and "
                       f"needs a server; set {env}=http://HOST:PORT/v1 (comma-separated for replicas) or "
                       f"--set {role}.base_urls=http://HOST:PORT/v1")
    return out


# ---------------------------------------------------------------- which layer set a value
@dataclass(frozen=True)
class Explanation:
    """A config value and the layer of :data:`LAYERS` that set it (``source`` says where, in words)."""

    key: str
    value: Any
    layer: str
    source: str


def _flat(d: Any, prefix: str = "") -> dict[str, Any]:
    if dataclasses.is_dataclass(d) and not isinstance(d, type):
        d = dataclasses.asdict(d)
    if isinstance(d, Mapping):
        out: dict[str, Any] = {}
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out if out or not prefix else {prefix[:-1]: d}
    return {prefix[:-1]: d}


def _given(flat: Mapping[str, Any], key: str) -> bool:
    """Whether the flattened layer ``flat`` gives ``key`` (itself, or a section holding it)."""
    return any(k == key or key.startswith(k + ".") for k in flat)


def _row_name(cls: type, profile: str) -> str | None:
    for klass in cls.__mro__:
        if klass is StageConfig:
            return None
        if klass.__name__ in PROFILES_TABLE[profile]:
            return klass.__name__
    return None


def explain(cls: type, profile: str, key: str, overrides: Mapping[str, Any] | None = None) -> list[Explanation]:
    """The value of ``key`` (``"llm.model"``; a section such as ``"llm"`` gives each of its fields) in
    ``cls.for_profile(profile, **overrides)`` with the ``--set`` overrides in force, and which layer of
    :data:`LAYERS` set it. :class:`ConfigError` when ``cls`` has no such field."""
    qual, parts = _split_key(key)
    unknown_engine = len(parts) >= 2 and parts[-2] == "engine" and parts[-1] not in ENGINE_SETTINGS
    if (qual is not None and qual != cls.__name__) or unknown_engine or field_hint(cls, parts) is _MISSING:
        raise ConfigError(f"--explain {key}: {cls.__name__} has no field {'.'.join(parts)!r}{renamed_hint(parts)}")
    path = ".".join(parts)
    overrides = dict(overrides or {})
    if path == "profile":
        return [Explanation(path, profile, "explicit", "--profile (the notebook's profile parameter)")]
    final = _flat(cls.for_profile(profile, **overrides).to_dict())
    keys = [k for k in final if k == path or k.startswith(path + ".")]
    if not keys:  # an LLMConfig.engine key that is not set: vLLM's own default
        return [Explanation(path, None, "default", "not set (the engine's own default)")]
    layers = cls.layered_values(profile, overrides)
    explicit = _flat(overrides)
    sets = [(k, v) for k, v in active_sets() if _split_key(k)[0] in (None, cls.__name__)]
    after_sets = _flat(apply_sets(cls, layers["profile"], sets))
    after_run = _flat(layers["run"])
    row = _row_name(cls, profile)
    stage_row = _flat(stage_values(profile, row)) if row else {}
    shared_row = _flat(SHARED_PROFILE_DEFAULTS[profile])
    default = _flat(cls().to_dict())
    out = []
    for k in keys:
        below = after_run[k] if k in after_run else default.get(k)
        if _given(explicit, k):
            layer, source = "explicit", "the notebook's parameter (or a keyword override)"
        elif final[k] != below:  # LiteConfig's corpus is LitSeg's, LibraryConfig's options, ...
            layer, source = "explicit", f"derived by {cls.__name__}.for_profile from another config"
        elif after_run.get(k) != after_sets.get(k) and _given(after_run, k):
            env = next((e for e, q, r in SERVER_ENV if k == f"{r}.base_urls" and q in (None, cls.__name__)
                        and os.environ.get(e, "").strip()), "a server variable")
            layer, source = "run", f"${env}"
        elif any(_given(_flat(_set_dict(sk)), k) for sk, _ in sets):
            sk, sv = [(sk, sv) for sk, sv in sets if _given(_flat(_set_dict(sk)), k)][-1]
            layer, source = "run", f"--set {sk}={sv!r}"
        elif _given(stage_row, k):
            layer, source = "profile", f"profile table: PROFILES_TABLE[{profile!r}][{row!r}]"
        elif _given(shared_row, k):
            layer, source = "profile", f"profile table: PROFILES_TABLE[{profile!r}]['shared']"
        else:
            layer, source = "default", f"the default of {cls.__name__}"
        out.append(Explanation(k, final[k], layer, source))
    return out


def _set_dict(key: str) -> dict[str, Any]:
    """``"LiteConfig.judge_llm.model"`` -> ``{"judge_llm": {"model": None}}`` (the path a --set gives)."""
    node: Any = None
    for part in reversed(_split_key(key)[1]):
        node = {part: node}
    return node
