"""Typed configuration: the profile table and one frozen dataclass config per stage.

Layers (:data:`LAYERS`): ``default`` (the field), ``profile`` (the table), ``run`` (``--set``, server variables),
``explicit`` (keyword overrides); ``config --explain KEY`` names the one that set a value. pydantic checks
every value; an error is a one-line :class:`ConfigError`.
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import hashlib
import json
import math
import os
import re
import types
import typing
from dataclasses import dataclass, field, fields
from typing import Annotated, Any, Literal, Mapping, Union
from urllib.parse import urlsplit

import pydantic
from typing_extensions import TypedDict

from ..errors import UsageError
from ..redact import redact_url

PROFILES = ("test", "smoke", "full")

# Teacher (LitSeg) and student (LitSeg-Lite, also the LLM baselines' model, §4.4) are separate settings; the
# paper names neither (Tables 14-15 are empty). The CPU profiles use one small model for both.
FULL_TEACHER_MODEL = "Qwen/Qwen3-32B"
FULL_STUDENT_MODEL = "Qwen/Qwen3-8B"
#: ``LitSegConfig.teacher_weights``: bf16 (full's default) needs :data:`FULL_CARD_GB`; FP8 fits an 80 GB card and,
#: like AWQ, the paper's 48 GB card (§4.4)
FULL_TEACHER_WEIGHTS = {"bf16": FULL_TEACHER_MODEL, "fp8": "Qwen/Qwen3-32B-FP8", "awq": "Qwen/Qwen3-32B-AWQ"}
#: the one card ``full`` is sized for: the bf16 teacher (~66 GB) with a 32,768-token sequence does not fit 80 GB
FULL_CARD_GB = 141

#: ``[profile]["shared"]``: every stage's sub-configs; ``[profile][StageClass]``: merged over them.
PROFILES_TABLE: dict[str, dict[str, dict[str, Any]]] = {
    "test": {
        "shared": {
            "llm": {"backend": "hf", "model": "tiny-random", "batch_size": 4, "max_new_tokens": 48,
                    "max_model_len": 2048},
            "embedding": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "batch_size": 32},
            "corpus": {"datasets": ("gutenqa", "gutenberg"), "max_books": 2, "max_units_per_book": 2,
                       "unit_selection": "questions",
                       "max_unit_words": 300},
            "selection": {"strategy": "questions", "books": ("gutenqa:Emma_-_Jane_Austen",), "max_units": 2},
        },
        "PreprocessConfig": {"benchmark_big_mb": 1.0},
        # constrained decoding (llm.structured_output) for LitSeg and Lite on the CPU profiles; off in full (the paper)
        "LitSegConfig": {
            "corpus": {"datasets": ("gutenqa",), "max_books": 1, "max_units_per_book": 2,
                       "max_unit_words": 300},
            "llm": {"max_new_tokens": 48, "max_model_len": 4096, "structured_output": True},
            "max_retries": 1,
            "stage1_max_new_tokens": 8,
            "stage2_max_new_tokens": 8,
            "stage3_max_new_tokens": 24,
            "calibration_units": 1,
            "calibration_max_retries": 0,
            "compare_units": 1,
            "train_corpus": {"datasets": ("gutenberg",), "books": ("46",), "max_books": 1,
                             "max_units_per_book": 2, "max_unit_words": 300},
        },
        "LiteConfig": {
            # the E.2 prompt alone is ~2.1k tokens: the shared test context of 2048 is too short
            "llm": {"max_model_len": 8192, "structured_output": True},
            "fallback_units": "include_if_needed", "min_train_units": 2,
            "max_train_units": 4, "max_eval_units": 2, "max_seq_tokens": 4096,
            "lora_r": 4, "lora_alpha": 8, "lora_dropout": 0.0, "gradient_checkpointing": False,
            "sft_learning_rate": 5e-3, "sft_max_steps": 2, "sft_grad_accum": 1, "sft_warmup_ratio": 0.0,
            "sft_lr_scheduler": "constant",
            "grpo_learning_rate": 5e-3, "grpo_max_steps": 1, "grpo_num_generations": 2, "grpo_beta": 0.0,
            "grpo_prompts_per_step": 1, "grpo_max_completion_length": 24, "grpo_temperature": 1.0,
            # a random model never stops within the cap: masking truncated rollouts would mask all
            "grpo_mask_truncated_completions": False,
            # ... and its rollouts all get the same reward: every group is filtered (a no-op step)
            "grpo_allow_no_signal": True,
            "judge_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                          "max_model_len": 8192},
            "judge_retries": 1, "infer_max_new_tokens": 16, "infer_retries": 1,
        },
        "BaselinesConfig": {"lumber_max_new_tokens": 16, "lumber_max_retries": 1, "proposition_max_new_tokens": 24,
                            "length_match_max_iter": 6, "perplexity_block_tokens": 256,
                            "completion_max_new_tokens": 12, "completion_max_items": 2,
                            "completion_context_chars": 200},
        # notebook 04's library presets: one cheap splitter of each library, no embedder or LLM (CI budget)
        "LibraryConfig": {"presets": ("lib:chonkie-token", "lib:llamaindex-sentence", "lib:langchain-recursive",
                                      "lib:semchunk")},
        "RagConfig": {"dense_top_k": 10, "sparse_top_k": 10, "rerank_candidates": 3, "rerank_max_questions": 3,
                      "hyde_max_questions": 3, "hyde_max_new_tokens": 16, "context_top_k": 2,
                      "answer_max_new_tokens": 12, "generation_max_questions": 3,
                      "ragas_max_new_tokens": 4, "ragas_retries": 1, "pairwise_max_questions": 2,
                      "generation_max_chunkers": 2, "ragas_max_questions": 1, "pairwise_max_new_tokens": 12,
                      "literaryqa_max_questions": 2, "max_context_chars_per_chunk": 600,
                      "lumber_thetas": (450, 550), "lumber_theta_max_units": 1,
                      "tier_a_books": ("literaryqa:31976", "literaryqa:1710"), "tier_a_embedding_presets": False,
                      "pooling_check_books": 1, "pooling_check_methods": ("recursive", "paragraph"),
                      "llm": {"max_model_len": 2048},
                      "judge_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 12,
                                    "max_model_len": 2048}},
        # the A.2 raters: the one local model for both (the table label says "same model")
        "SegmentQualityConfig": {"judge_max_units": 1, "judge_max_chunks_per_unit": 6, "judge_retries": 1,
                                 "judge_max_passage_chars": 3000, "human_sheet_chunks": 3, "llm_rating_items": 4,
                                 "llm": {"max_new_tokens": 48},
                                 "rater_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                                               "max_model_len": 8192},
                                 "rater2_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                                                "max_model_len": 8192}},
        "BoundaryConfig": {"source": "hand-checked", "max_books": 2, "max_windows_per_book": 2,
                           "window_sentences": 40, "methods": ("token", "recursive", "paragraph", "texttiling", "c99",
                                                               "boundary-model"),
                           "llm_methods": ("perplexity",), "llm_max_windows": 2, "segmenter_max_windows": 1},
        "EfficiencyConfig": {"timing_dataset": "all", "paired_max_units": 2, "paired_batch_units": 0,
                             "paired_repeats": 3},
    },
    "smoke": {
        "shared": {
            "llm": {"backend": "hf", "model": "smollm2-135m-instruct", "batch_size": 8,
                    "max_new_tokens": 384, "max_model_len": 8192},
            "embedding": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "batch_size": 64},
            "corpus": {"datasets": ("gutenqa", "gutenberg", "literaryqa"), "max_unit_words": 900},
            "selection": {"strategy": "questions", "books": ("gutenqa:Emma_-_Jane_Austen",), "min_questions": 2},
        },
        "PreprocessConfig": {},
        # SmolLM2-135M on CPU: every call is a long prefill, so retries (which double the cost) are off
        "LitSegConfig": {
            "corpus": {"datasets": ("gutenqa",), "max_books": 1},
            "llm": {"structured_output": True},
            # a small-model accommodation: stage 3's schema asks for >= 2 segments (full: 0, as the paper)
            "min_segments": 2,
            "max_retries": 0,
            # SmolLM2's one- or two-segment units cannot inform calibration: the paper's length reference of 100
            "calibrate": False,
            "stage1_max_new_tokens": 48,
            "stage2_max_new_tokens": 48,
            "stage3_max_new_tokens": 192,
            "calibration_units": 1,
            "calibration_max_retries": 0,
            "compare_units": 1,
            "train_corpus": {"datasets": ("gutenberg",), "books": ("46",), "max_books": 1,
                             "max_units_per_book": 2, "max_unit_words": 300},
        },
        "LiteConfig": {
            "llm": {"structured_output": True},  # constrained decoding, as LitSeg's (above)
            "fallback_units": "include_if_needed", "min_train_units": 2,
            "max_train_units": 2, "max_eval_units": 1, "max_seq_tokens": 6144,
            "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "gradient_checkpointing": False,
            "sft_learning_rate": 2e-4, "sft_max_steps": 1, "sft_grad_accum": 1,
            "sft_warmup_ratio": 0.0, "sft_lr_scheduler": "constant",
            "grpo_learning_rate": 2e-5, "grpo_max_steps": 1, "grpo_num_generations": 2,
            "grpo_prompts_per_step": 1, "grpo_max_completion_length": 64, "grpo_temperature": 1.0,
            # targets are longer than the CPU-sized cap: masking truncated rollouts would mask all
            "grpo_mask_truncated_completions": False,
            # 2 rollouts of a 135M model cut at 64 tokens often score alike: the step may be a no-op
            "grpo_allow_no_signal": True,
            "judge_llm": {"backend": "hf", "model": "smollm2-135m-instruct", "max_new_tokens": 64,
                          "max_model_len": 8192},
            # retries off on the CPU (each costs a ~3k-token prefill); full uses 3 like LitSeg
            "judge_retries": 1, "infer_max_new_tokens": 192, "infer_retries": 0,
            "ablation_max_units": 1,
            # a judge call is a ~5.5k-token prompt: the before/after tables report the format reward only
            "eval_with_judge": False,
        },
        "BaselinesConfig": {
            "corpus": {"datasets": ("gutenqa", "gutenberg")},
            "semantic_books": ("gutenqa:Emma_-_Jane_Austen",),
            "semantic_units": "selection",
            "margin_max_left_tokens": 128,
            # SmolLM2-135M often loops to the cap: 128 tokens hold ~10 propositions
            "proposition_max_new_tokens": 128,
            # completion: ~7 calls per chunk, hence the small sizes
            "completion_max_new_tokens": 32, "completion_max_items": 1, "completion_context_chars": 200,
            "completion_related_chunks": 1,
        },
        "LibraryConfig": {"books": ("gutenqa:Emma_-_Jane_Austen",), "embedding_units": "selection"},
        "RagConfig": {"rerank_candidates": 4, "rerank_max_questions": 3, "hyde_max_questions": 10,
                      "hyde_max_new_tokens": 48, "context_top_k": 2, "answer_max_new_tokens": 40,
                      "generation_max_questions": 3, "generation_max_chunkers": 3, "ragas_max_questions": 1,
                      "ragas_retries": 2, "pairwise_max_questions": 2,
                      "pairwise_max_new_tokens": 48, "literaryqa_max_questions": 3,
                      "max_context_chars_per_chunk": 1500, "lumber_theta_max_units": 1,
                      "pairwise_book_max_tokens": 1500,
                      # tier A: whole Emma and the five shortest LiteraryQA books (the CLI: every local book)
                      "tier_a_books": ("gutenqa:Emma_-_Jane_Austen", "literaryqa:31976", "literaryqa:1710",
                                       "literaryqa:1230", "literaryqa:2349", "literaryqa:2425"),
                      "tier_a_embedding_presets": False,
                      "pooling_check_methods": ("recursive", "paragraph", "boundary-model", "texttiling", "c99",
                                                "semantic"),
                      "judge_llm": {"backend": "hf", "model": "smollm2-135m-instruct", "max_new_tokens": 48,
                                    "max_model_len": 8192},
                      "corpus": {"datasets": ("gutenqa", "literaryqa"), "max_books": 2}},
        # SmolLM2 rarely returns a parsable rubric: judge the two LitSeg methods only, without retries
        "SegmentQualityConfig": {"judge_max_units": 1, "judge_max_chunks_per_unit": 8, "judge_retries": 0,
                                 "judge_max_passage_chars": 6000, "human_sheet_chunks": 20,
                                 "judge_pipeline_prompt": "name",
                                 "llm_rating_items": 1,
                                 "judge_methods": ("litseg", "litseg-lite"),
                                 "rater_llm": {"backend": "hf", "model": "smollm2-135m-instruct",
                                               "max_new_tokens": 48, "max_model_len": 8192},
                                 "rater2_llm": {"backend": "hf", "model": "smollm2-135m-instruct",
                                                "max_new_tokens": 48, "max_model_len": 8192},
                                 "corpus": {"datasets": ("gutenqa", "literaryqa"), "max_books": 2}},
        # every hand-checked book; margin sampling (a forward pass per sentence) is too slow here
        "BoundaryConfig": {"source": "hand-checked", "window_sentences": 60, "max_windows_per_book": 8,
                           "llm_methods": ("perplexity",), "llm_max_windows": 4, "segmenter_max_windows": 2,
                           "embedder_max_windows": 16},
        "EfficiencyConfig": {"timing_dataset": "all", "paired_max_units": 1, "paired_batch_units": 0,
                             "paired_repeats": 2},
    },
    "full": {
        "shared": {
            "llm": {"backend": "vllm", "model": FULL_STUDENT_MODEL, "batch_size": 256, "max_new_tokens": 4096,
                    "max_model_len": 32768, "dtype": "bfloat16", "device": "cuda",
                    # LoRA on: Lite's adapters are requests on the base model's engine
                    "engine": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "enable_lora": True,
                               "max_lora_rank": 32}},
            "embedding": {"backend": "flagembedding", "model": "BAAI/bge-m3", "batch_size": 256,
                          "device": "cuda", "use_instructions": True, "max_passage_tokens": 8192},
            "corpus": {"datasets": ("gutenqa", "literaryqa"), "literaryqa_split": "test",
                       "max_unit_words": 6000},
            "selection": {"strategy": "first"},  # every unit of the evaluation corpus
        },
        "PreprocessConfig": {},
        "LitSegConfig": {"llm": {"model": FULL_TEACHER_MODEL}, "teacher_weights": "bf16",
                         "max_retries": 3, "calibration_units": 50, "compare_units": 50, "unit_group_size": 512,
                         "train_corpus": {"datasets": ("literaryqa",), "literaryqa_split": "train",
                                          "max_unit_words": 6000}},
        "LiteConfig": {"llm": {"model": FULL_STUDENT_MODEL}},
        "BaselinesConfig": {},
        "LibraryConfig": {},
        "RagConfig": {"reranker": "flagembedding", "reranker_max_length": 8192,  # bge-reranker-v2-m3's maximum
                      "context_top_k": 5, "answer_max_new_tokens": 256},
        # the raters read Appendix B's whole-book contexts too (budgeted to their 32,768 tokens): the judge's timeout
        "SegmentQualityConfig": {"rater_llm": {"request_timeout_s": 600.0}, "rater2_llm": {"request_timeout_s": 600.0}},
        "BoundaryConfig": {"source": "corpus", "segmenter_max_windows": 0},
        # the paired §4.4 measurement times LitSeg on the student's model beside the teacher: no second ledger run
        "EfficiencyConfig": {"litseg_on_student": False},
    },
}


class ConfigError(UsageError, ValueError):
    """An unknown profile, an unknown key or a value of the wrong shape."""


class NoSuchField(ConfigError):
    """``config --explain KEY``: a config class without the field ``KEY``."""


def one_of(default: Any, *choices: Any) -> Any:
    return field(default=default, metadata={"choices": tuple(choices)})


def at_least(default: Any, minimum: float) -> Any:
    return field(default=default, metadata={"ge": minimum})


def between(default: Any, minimum: float, maximum: float) -> Any:
    return field(default=default, metadata={"ge": minimum, "le": maximum})


def field_constraint(cls: type, name: str) -> dict[str, Any]:
    return next((dict(f.metadata) for f in fields(cls) if f.name == name), {})


def rejected_choices(value: Any, choices: Any) -> list[Any]:
    items = value if isinstance(value, tuple) else (value,)
    return [v for v in items if v not in choices]


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) if isinstance(hint, type) else str(hint).replace("typing.", "")


#: ``LLMConfig.engine``: the ``vllm.LLM`` engine arguments a config may set, with their types
ENGINE_SETTINGS: dict[str, Any] = {
    "tensor_parallel_size": int, "pipeline_parallel_size": int, "gpu_memory_utilization": float,
    "enforce_eager": bool, "max_num_seqs": int, "max_num_batched_tokens": int, "quantization": str,
    "kv_cache_dtype": str, "swap_space": float, "cpu_offload_gb": float, "enable_lora": bool,
    "max_lora_rank": int, "max_loras": int, "trust_remote_code": bool, "max_logprobs": int,
    "enable_chunked_prefill": bool,
}
_ENGINE = pydantic.with_config(pydantic.ConfigDict(extra="forbid"))(
    TypedDict("EngineSettings", {k: t | None for k, t in ENGINE_SETTINGS.items()}, total=False))


def _schema(hint: Any, meta: Mapping[str, Any], name: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return pydantic.InstanceOf[hint]  # a nested config was checked when it was built
    if name == "engine":
        return _ENGINE
    if "choices" in meta:
        choice = Literal[meta["choices"]]
        return tuple[choice, ...] if typing.get_origin(hint) is tuple else choice
    if "ge" in meta or "le" in meta:
        args = typing.get_args(hint) if typing.get_origin(hint) in (Union, types.UnionType) else (hint,)
        bounded = [Annotated[a, pydantic.Field(ge=meta.get("ge"), le=meta.get("le"))] if a is not type(None) else a
                   for a in args]
        return Union[tuple(bounded)]
    return hint


@functools.cache
def _validator(cls: type) -> pydantic.TypeAdapter:
    hints = typing.get_type_hints(cls)
    spec = TypedDict(cls.__name__, {f.name: _schema(hints[f.name], f.metadata, f.name) for f in fields(cls)})
    strict = pydantic.ConfigDict(strict=True, arbitrary_types_allowed=True)
    return pydantic.TypeAdapter(pydantic.with_config(strict)(spec))


def _config_error(obj: Any, err: Mapping[str, Any]) -> ConfigError:
    cls, name = type(obj), err["loc"][0]
    where, value, meta = f"{cls.__name__}.{name}", getattr(obj, name), field_constraint(type(obj), name)
    if name == "engine" and err["type"] == "extra_forbidden":
        unknown = sorted(set(value) - set(ENGINE_SETTINGS))
        return ConfigError(f"{where}: unknown engine setting(s) {', '.join(map(repr, unknown))}; "
                           f"known: {', '.join(sorted(ENGINE_SETTINGS))}")
    if name == "engine" and len(err["loc"]) > 1:
        key = err["loc"][1]
        return ConfigError(f"{where}.{key}: expected {_type_name(ENGINE_SETTINGS[key])}, got {value[key]!r}")
    bad = rejected_choices(value, meta["choices"]) if "choices" in meta else []
    if bad:
        return ConfigError(f"{where}: {', '.join(map(repr, bad))} is not accepted; "
                           f"accepted values: {', '.join(map(str, meta['choices']))}")
    if err["type"] == "greater_than_equal":
        return ConfigError(f"{where}: {value!r} is below the minimum {meta['ge']}")
    if err["type"] == "less_than_equal":
        return ConfigError(f"{where}: {value!r} is above the maximum {meta['le']}")
    hint = typing.get_type_hints(cls)[name]
    return ConfigError(f"{where}: expected {_type_name(hint)}, got {value!r} ({type(value).__name__})")


def _check_profile(profile: str) -> None:
    if profile not in PROFILES:
        raise ConfigError(f"unknown profile {profile!r}; expected one of {', '.join(PROFILES)}")


#: ``Class.old_key`` -> its new name: a config given the old key is an error naming the new one
RENAMED_KEYS: dict[str, str] = {
    "UnitSelection.max_unit_words": "skip_units_over_words",
}


def renamed_hint(parts: typing.Sequence[str]) -> str:
    new = [n for old, n in RENAMED_KEYS.items() if old.split(".", 1)[1] == parts[-1]]
    return f" (renamed: {'.'.join([*parts[:-1], new[0]])})" if new else ""


def _build(cls: type, values: Mapping[str, Any], where: str) -> Any:
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
            # a partial mapping overrides the field's own default, not the nested class's defaults
            value = _build(ftype, _merge(_field_default(known[name]), value), f"{where}.{name}")
        elif isinstance(value, list) and typing.get_origin(ftype) is tuple:
            value = tuple(value)
        kwargs[name] = value
    return cls(**kwargs)


def _field_default(f: dataclasses.Field) -> dict[str, Any]:
    default = f.default if f.default_factory is dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    return dataclasses.asdict(default) if dataclasses.is_dataclass(default) else {}


def _merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
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
    """Base of every config dataclass: checked by pydantic when built, hashed by its values."""

    def __post_init__(self) -> None:
        try:
            _validator(type(self)).validate_python({f.name: getattr(self, f.name) for f in fields(self)})
        except pydantic.ValidationError as exc:
            # a NaN passes the bounds here: the fields that must be finite say so themselves (LLMConfig)
            errors = [e for e in exc.errors() if not (isinstance(e["input"], float) and math.isnan(e["input"]))]
            if errors:
                raise _config_error(self, errors[0]) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)  # type: ignore[arg-type]

    def fingerprint(self) -> str:
        """Stable hash of the config's values (part of every cache key)."""
        blob = json.dumps(self.to_dict(), sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    def replace(self, **changes: Any):
        return _build(type(self), _merge(self.to_dict(), changes), type(self).__name__)


class Options(_Base):
    """A segmentation method's options (its cache key); a stage config running the method inherits them."""

    @classmethod
    def of(cls, cfg: Any):
        return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls) if f.init})


DEVICES = ("auto", "cpu", "cuda")
UNIT_SELECTIONS = ("first", "questions")
LLM_BACKENDS = ("hf", "vllm", "openai")


@dataclass(frozen=True)
class LLMConfig(_Base):
    """Which LLM to use and how to call it (see :mod:`litseg_nb.llm`)."""

    backend: str = one_of("hf", *LLM_BACKENDS)
    model: str = "tiny-random"  # "tiny-random", "smollm2-135m-instruct", a local path or a hub id
    dtype: str = one_of("auto", "auto", "float32", "bfloat16", "float16")
    device: str = one_of("auto", *DEVICES)
    batch_size: int = at_least(4, 1)
    max_new_tokens: int = at_least(512, 1)
    temperature: float = at_least(0.0, 0.0)
    top_p: float = 1.0
    max_model_len: int = at_least(8192, 1)
    base_urls: tuple[str, ...] = ()
    # the NAME of the variable holding the API key (the key never enters a config or a record)
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_s: float = 120.0
    # openai backend: the most one request may wait over its attempts; a console line every wait_report_s
    max_wait_s: float = at_least(300.0, 1.0)
    wait_report_s: float = at_least(30.0, 1.0)
    max_concurrency: int = at_least(8, 1)
    max_retries: int = at_least(3, 0)
    structured_output: bool = False
    use_cache: bool = True
    # hf backend: compute a prompt prefix shared by many requests once and reuse its KV cache
    prefix_reuse: bool = True
    enable_thinking: bool = False
    # hf backend, forward-only calls: a batch is cut before more than this fraction of its tokens is padding
    max_padding: float = between(0.25, 0.0, 1.0)
    engine: dict[str, Any] = field(default_factory=dict)
    # vllm backend: a LoRA adapter folder served on ``model``'s engine (needs engine enable_lora); "" = none
    lora_adapter: str = ""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (math.isfinite(self.request_timeout_s) and self.request_timeout_s > 0):
            raise ConfigError(f"llm.request_timeout_s={self.request_timeout_s!r}: seconds, a positive number")
        if not (math.isfinite(self.temperature) and self.temperature >= 0):
            raise ConfigError(f"llm.temperature={self.temperature!r}: a finite number >= 0 (0 = greedy)")
        if not (math.isfinite(self.top_p) and 0 < self.top_p <= 1):
            raise ConfigError(f"llm.top_p={self.top_p!r}: a probability in (0, 1]")
        for url in self.base_urls:
            try:
                parts = urlsplit(str(url))
                ok = parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in url)
                parts.port  # noqa: B018  (a port that is not a number raises here)
            except ValueError:
                ok = False
            if not ok:
                raise ConfigError(f"llm.base_urls: {redact_url(str(url))!r} is not a server address; expected "
                                  f"http(s)://HOST[:PORT]/v1 (an OpenAI-compatible endpoint)")
            if "#" in str(url):  # a fragment never reaches the server: the request path would be cut there
                raise ConfigError(f"llm.base_urls: {redact_url(str(url))!r} has a fragment ('#...'), which no request "
                                  "sends; give the address without it (a secret belongs in the query or the API key)")


@dataclass(frozen=True)
class EmbeddingConfig(_Base):
    """Dense embedding model (see :mod:`litseg_nb.rag`)."""

    # numpy: BERT encoders such as MiniLM on the core install, no torch (litseg_nb.llm.bert_numpy)
    backend: str = one_of("sentence-transformers", "sentence-transformers", "flagembedding", "numpy")
    model: str = "all-MiniLM-L6-v2"  # packaged name, local path or hub id
    batch_size: int = at_least(64, 1)
    device: str = one_of("auto", *DEVICES)
    normalize: bool = True
    use_instructions: bool = False
    # flagembedding backend: tokens read per passage / query; 0 = the model's own maximum
    max_passage_tokens: int = at_least(0, 0)
    max_query_tokens: int = at_least(512, 0)
    passage_instruction: str = "Represent the literature text chunk for literary question answering:"
    query_instruction: str = (
        "Given a literary question, retrieve relevant literature text chunks that answer the question."
    )


@dataclass(frozen=True)
class CorpusConfig(_Base):
    """Which data a stage runs on: the ``datasets``, the ``books`` (empty = all) and caps (0 = no cap)."""

    datasets: tuple[str, ...] = one_of(("gutenqa",), "gutenqa", "gutenberg", "literaryqa")
    books: tuple[str, ...] = ()
    max_books: int = at_least(0, 0)
    max_units_per_book: int = at_least(0, 0)
    # which units the max_units_per_book cap keeps: "first" (book order) or "questions" (evidence units first)
    unit_selection: str = one_of("first", *UNIT_SELECTIONS)
    literaryqa_split: str = one_of("validation", "train", "validation", "test")
    # the paper's n: units longer than this many words are split recursively; None = never split
    max_unit_words: int | None = at_least(2000, 1)
    sentence_splitter: str = one_of("nupunkt", "nupunkt", "regex")
    # a raw book that cannot be read is skipped and listed in the load report; strict=True makes it an error
    strict: bool = False

    def summary(self, training: bool = False) -> str:
        """The data in one phrase, for labels (``training``: with the LiteraryQA split, without the caps' rules)."""
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
    """Which units every LLM-based method segments (the same for all); ``units``: ``"book_id/unit_id"``."""

    strategy: str = one_of("first", *UNIT_SELECTIONS)
    books: tuple[str, ...] = ()
    units: tuple[str, ...] = ()
    min_questions: int = at_least(0, 0)
    max_units: int = at_least(0, 0)
    # a length filter (not the corpus's split cap n): longer units are left out; None = any length
    skip_units_over_words: int | None = at_least(None, 1)


@dataclass(frozen=True)
class StageConfig(_Base):
    """Base of every stage config; a subclass's per-profile values are its rows of :data:`PROFILES_TABLE`."""

    profile: str = one_of("test", *PROFILES)
    seed: int = 0
    llm: LLMConfig = field(default_factory=LLMConfig)
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    selection: UnitSelection = field(default_factory=UnitSelection)

    @classmethod
    def profile_defaults(cls, profile: str) -> dict[str, Any]:
        _check_profile(profile)
        row = _row_name(cls, profile)
        return copy.deepcopy(PROFILES_TABLE[profile][row]) if row else {}

    @classmethod
    def for_profile(cls, profile: str, **overrides: Any):
        """Build the config for ``profile`` with explicit ``overrides`` (unknown keys raise)."""
        values = cls.layered_values(profile, overrides)["explicit"]
        return _build(cls, values, f"{cls.__name__}[{profile}]")

    @classmethod
    def layered_values(cls, profile: str, overrides: Mapping[str, Any] | None = None) -> dict[str, dict[str, Any]]:
        """The values after each layer of :data:`LAYERS` above ``default`` (each including those below)."""
        _check_profile(profile)
        values: dict[str, Any] = _merge(copy.deepcopy(PROFILES_TABLE[profile]["shared"]), cls.profile_defaults(profile))
        # `run --set` / `config --set`, then $LITSEG_JUDGE_URLS, ... (see SERVER_ENV)
        run = apply_server_env(cls, apply_sets(cls, values, active_sets()))
        return {"profile": values, "run": run, "explicit": {**_merge(run, dict(overrides or {})), "profile": profile}}

    def describe(self) -> str:
        """One line naming profile, models and data, for table and figure captions."""
        return f"{self.describe_models()} | data={self.corpus.summary()}"

    def describe_models(self) -> str:
        return f"profile={self.profile} | LLM={self.llm.model} ({self.llm.backend}) | embeddings={self.embedding.model}"


LAYERS: tuple[str, ...] = ("default", "profile", "run", "explicit")

#: ``(variable, config class or None = any, LLM field)``: addresses for an ``openai`` role without ``base_urls``
SERVER_ENV: tuple[tuple[str, str | None, str], ...] = (
    ("LITSEG_TEACHER_URLS", "LitSegConfig", "llm"),  # notebook 02's teacher
    ("LITSEG_JUDGE_URLS", None, "judge_llm"),  # notebook 03's judge; 05's pairwise judge
    ("LITSEG_RATER_URLS", None, "rater_llm"),  # notebooks 06/07: the A.2 LLM raters
    ("LITSEG_RATER2_URLS", None, "rater2_llm"),
    ("LITSEG_LLM_URLS", None, "llm"),  # every stage's main LLM
)

_ACTIVE_SETS: list[tuple[str, Any]] = []


def active_sets() -> list[tuple[str, Any]]:
    return list(_ACTIVE_SETS)


@contextlib.contextmanager
def config_sets(sets: typing.Sequence[tuple[str, Any]]):
    """Make ``sets`` active ``--set`` overrides (after those already active) inside the block."""
    old = list(_ACTIVE_SETS)
    _ACTIVE_SETS.extend((str(k), v) for k, v in sets)
    try:
        yield
    finally:
        _ACTIVE_SETS[:] = old


def use_sets(sets: typing.Sequence[tuple[str, Any]]) -> None:
    _ACTIVE_SETS[:] = [(str(k), v) for k, v in sets]


def _split_key(key: str) -> tuple[str | None, list[str]]:
    parts = [p.strip() for p in key.strip().split(".")]
    if not all(parts):
        raise ConfigError(f"--set {key!r}: expected section.field=value (e.g. judge_llm.base_urls=http://host:8000/v1)")
    if parts[0][:1].isupper():
        return parts[0], parts[1:]
    return None, parts


def field_hint(cls: type, parts: typing.Sequence[str]) -> Any:
    owner: Any = cls
    hint: Any = cls
    for i, part in enumerate(parts):
        if owner is LLMConfig and part == "engine" and i == len(parts) - 2:
            return ENGINE_SETTINGS.get(parts[-1], Any)  # an unknown key fails when the config is built
        if not dataclasses.is_dataclass(owner) or part not in {f.name for f in fields(owner) if f.init}:
            return _MISSING
        hint = typing.get_type_hints(owner)[part]
        owner = hint
    return hint


_MISSING = object()


_TRUE, _FALSE = ("true", "1", "yes"), ("false", "0", "no")


def _scalar(value: Any, base: type) -> Any:
    """A notebook parameter's ``value`` as ``base`` (bool, int, float or str), or raise ValueError."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    text = value.strip() if isinstance(value, str) else None
    if base is bool and (isinstance(value, bool) or number and isinstance(value, int) and value in (0, 1)):
        return bool(value)
    if base is bool and text is not None and text.lower() in _TRUE + _FALSE:
        return text.lower() in _TRUE
    if base is int and (number and isinstance(value, int) or text is not None and re.fullmatch(r"[+-]?\d+", text)):
        return value if text is None else int(text)
    if base is float and (number or text is not None):
        return float(value if text is None else text)  # ValueError for "abc"
    if base is str and (number or text is not None):
        return value if text is not None else str(value)  # e.g. -p books=46 (read as a number)
    raise ValueError(value)


@functools.cache
def _lax(hint: Any) -> pydantic.TypeAdapter:
    return pydantic.TypeAdapter(hint, config=pydantic.ConfigDict(coerce_numbers_to_str=True))


def coerce(value: Any, hint: Any, where: str) -> Any:
    """A command-line value as the field type ``hint`` (a list comma-separated), by pydantic's lax mode."""
    args = typing.get_args(hint)
    if dataclasses.is_dataclass(hint):
        return value  # a section given whole: built (and checked) with the config
    if type(None) in args and (value is None or (isinstance(value, str) and value.lower() in ("none", "null"))):
        return None
    if isinstance(value, str) and tuple in (typing.get_origin(hint), *map(typing.get_origin, args)):
        value = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, str) and str not in (hint, *args):
        value = value.strip()
    try:
        return _lax(hint).validate_python(value)
    except pydantic.ValidationError:
        raise ConfigError(f"{where}: {value!r} is not accepted; expected {_type_name(hint)}") from None


def apply_sets(cls: type, values: dict[str, Any], sets: typing.Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """``values`` with every ``--set`` whose field path exists in ``cls`` applied (``Class.path``: that class only)."""
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
    hints = typing.get_type_hints(cls)
    return [f.name for f in fields(cls) if hints.get(f.name) is LLMConfig]


def apply_server_env(cls: type, values: dict[str, Any]) -> dict[str, Any]:
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
    """What ``cfg`` cannot run without, one line each: an ``openai`` LLM role (of ``roles``) with no server."""
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


@dataclass(frozen=True)
class Explanation:
    """A config value and the layer of :data:`LAYERS` that set it (``source``: where, in words)."""

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
    return any(k == key or key.startswith(k + ".") for k in flat)


def _row_name(cls: type, profile: str) -> str | None:
    stages = cls.__mro__[:cls.__mro__.index(StageConfig)]
    return next((k.__name__ for k in stages if k.__name__ in PROFILES_TABLE[profile]), None)


def explain(cls: type, profile: str, key: str, overrides: Mapping[str, Any] | None = None) -> list[Explanation]:
    """The value of ``key`` (a section: each field) in ``cls.for_profile``, and the layer that set it."""
    qual, parts = _split_key(key)
    unknown_engine = len(parts) >= 2 and parts[-2] == "engine" and parts[-1] not in ENGINE_SETTINGS
    if (qual is not None and qual != cls.__name__) or unknown_engine or field_hint(cls, parts) is _MISSING:
        raise NoSuchField(f"--explain {key}: {cls.__name__} has no field {'.'.join(parts)!r}{renamed_hint(parts)}")
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
    set_paths = [(".".join(_split_key(sk)[1]), sk, sv) for sk, sv in active_sets()
                 if _split_key(sk)[0] in (None, cls.__name__)]
    after_sets = _flat(apply_sets(cls, layers["profile"], active_sets()))  # another class's sets are skipped there
    after_run = _flat(layers["run"])
    row = _row_name(cls, profile)
    stage_row = _flat(PROFILES_TABLE[profile][row]) if row else {}
    shared_row = _flat(PROFILES_TABLE[profile]["shared"])
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
        elif hits := [(sk, sv) for p, sk, sv in set_paths if _given({p: None}, k)]:
            sk, sv = hits[-1]
            layer, source = "run", f"--set {sk}={sv!r}"
        elif _given(stage_row, k):
            layer, source = "profile", f"profile table: PROFILES_TABLE[{profile!r}][{row!r}]"
        elif _given(shared_row, k):
            layer, source = "profile", f"profile table: PROFILES_TABLE[{profile!r}]['shared']"
        else:
            layer, source = "default", f"the default of {cls.__name__}"
        out.append(Explanation(k, final[k], layer, source))
    return out
