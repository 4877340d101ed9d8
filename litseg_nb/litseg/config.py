"""Configuration of the LitSeg annotation stage (notebook 02)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from ..config import (SHARED_PROFILE_DEFAULTS, ConfigError, CorpusConfig, LLMConfig, StageConfig, _Base, _build,
                      _merge, _split_key, active_sets, at_least, coerce, one_of)
from ..core.ray_cluster import RayAddressError, parse_address
# the teacher of ``full`` (Qwen3-32B) and why: litseg_nb.config.profiles, next to the profile table
from ..config.profiles import FULL_TEACHER_MODEL, FULL_TEACHER_WEIGHTS, stage_values  # noqa: F401


@dataclass(frozen=True)
class RayOptions(_Base):
    """Where notebook 02's annotation runs (:mod:`litseg_nb.litseg.ray_annotate`): ``address`` as
    :func:`~litseg_nb.core.ray_cluster.parse_address` reads it (``""``: this process, not on Ray; ``local``,
    ``auto``, ``HOST:PORT``, ``ray://HOST:PORT``), ``actors`` engines (0: one per cluster GPU when
    ``gpus_per_actor`` > 0, else one per CPU), ``gpus_per_actor`` GPUs each engine reserves, ``cpus`` of a
    local cluster (0: this machine's). Where the work runs changes no annotation: the records and their
    keys are those of one process."""

    address: str = ""
    actors: int = 0
    gpus_per_actor: float = 0.0
    cpus: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.address:
            try:
                parse_address(self.address)
            except RayAddressError as exc:  # a config error naming the key (secrets already out of the message)
                raise ConfigError(f"RayOptions.address: {exc}") from None
        if self.actors < 0 or self.cpus < 0 or not self.gpus_per_actor >= 0:
            raise ConfigError(f"RayOptions: actors, cpus and gpus_per_actor must be >= 0, got "
                              f"actors={self.actors}, cpus={self.cpus}, gpus_per_actor={self.gpus_per_actor}")

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> "RayOptions":
        """From a mapping (a config file's ``ray`` block): unknown keys and bad values are a ConfigError."""
        return _build(cls, values, cls.__name__)

    def describe(self) -> str:
        """``""`` off Ray, else one phrase for labels."""
        if not self.address:
            return ""
        width = f"{self.actors} engine(s)" if self.actors else "one engine per " + ("GPU" if self.gpus_per_actor else "CPU")
        return f"on Ray ({parse_address(self.address)}, {width})"


@dataclass(frozen=True)
class LitSegConfig(StageConfig):
    """LitSeg pipeline settings.

    Constrained decoding is switched with ``llm.structured_output`` (off by default and in ``full``,
    as in the paper; on in ``test`` and ``smoke``, see :mod:`litseg_nb.config.profiles`): each stage's reply
    is decoded under its JSON schema (:func:`~litseg_nb.litseg.prompting.stage_json_schema`, stage 3's
    sentence indices bounded by the unit's sentence count). Notebook 02 additionally runs the same
    units with the other setting when ``compare_structured`` is set.
    """

    # retry / fallback (section 3.1.2): invalid outputs are retried up to N times
    max_retries: int = at_least(3, 0)
    retry_temperature: float = 0.7  # retries sample (seed + attempt) so they can differ from a greedy miss
    # per-stage generation caps; 0 = llm.max_new_tokens
    stage1_max_new_tokens: int = 0
    stage2_max_new_tokens: int = 0
    stage3_max_new_tokens: int = 0
    # soft length reference: the paper's prompt says 100; calibration replaces it
    length_reference: int = 100
    calibrate: bool = True
    calibration_quantile: float = 0.9
    calibration_units: int = at_least(4, 1)  # K selected units, stratified by dataset and seeded (calibrate.calibration_subset)
    calibration_max_retries: int = -1  # -1 = max_retries
    # constrained decoding only, a small-model accommodation (not the paper's; 0 = off, as in full): stage 3's
    # schema requires at least max(min_segments, ceil(n / length reference)) segments for a unit of n sentences
    # (capped at n and at the stage's token budget; prompting.segment_floor). SmolLM2-135M otherwise copies the
    # prompt's "from 1 to N" and every unit is one segment; where the boundaries go stays the model's choice
    min_segments: int = at_least(0, 0)
    # which units: the shared ``selection`` (litseg_nb.corpus.select_units), as every LLM method
    unit_group_size: int = at_least(0, 0)  # units per batched group (stage 1 → 2 → 3 per group); 0 = all at once
    # notebook 02
    compare_structured: bool = True  # also run the same units with constrained decoding switched the other way
    compare_units: int = at_least(0, 0)  # units in that comparison (0 = all)
    render_unit: str = ""  # "book_id/unit_id" to render as HTML; "" = the first unit with >1 segment
    # LitSeg-Lite's training units, annotated by this (teacher) stage into
    # artifacts/litseg/train_annotations.jsonl. The paper trains on "LitSeg annotations of the
    # LiteraryQA training set" (full: literaryqa_split="train"); only validation texts exist locally,
    # so test/smoke train on another BOOK (Gutenberg 46), a book-level split from the evaluated units.
    train_corpus: CorpusConfig = field(default_factory=lambda: CorpusConfig(
        datasets=("literaryqa",), literaryqa_split="train", max_unit_words=6000))
    max_train_units: int = at_least(0, 0)  # cap on annotated training units (0 = all of train_corpus)
    #: the teacher's weights (:data:`litseg_nb.config.profiles.FULL_TEACHER_WEIGHTS`): "bf16" = ``llm.model`` as
    #: configured (full: Qwen/Qwen3-32B, ~65 GB, an 80 GB card); "fp8" = Qwen/Qwen3-32B-FP8 (~33 GB) or
    #: "awq" = Qwen/Qwen3-32B-AWQ (~19 GB), which fit the paper's one 48 GB RTX 6000 Ada (fp8: the one it
    #: implies, see the README). Only for the Qwen3-32B teacher (another ``llm.model`` is an error)
    teacher_weights: str = one_of("bf16", *FULL_TEACHER_WEIGHTS)
    #: where the annotation runs: this process (``ray.address == ""``, every profile's default) or a Ray
    #: cluster, an engine per actor (notebook 02's ``ray_address``; :mod:`litseg_nb.litseg.ray_annotate`)
    ray: RayOptions = field(default_factory=RayOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.teacher_weights == "bf16":
            return
        want = FULL_TEACHER_WEIGHTS[self.teacher_weights]
        if self.llm.model not in (FULL_TEACHER_MODEL, want):
            raise ConfigError(f"LitSegConfig.teacher_weights={self.teacher_weights!r} selects {want}, the quantised "
                              f"{FULL_TEACHER_MODEL}; llm.model is {self.llm.model!r} (set teacher_weights=bf16 to use it)")
        object.__setattr__(self, "llm", self.llm.replace(model=want))

    def stage_max_new_tokens(self, stage: str) -> int:
        value = {"stage1": self.stage1_max_new_tokens, "stage2": self.stage2_max_new_tokens,
                 "stage3": self.stage3_max_new_tokens}[stage]
        return value or self.llm.max_new_tokens

    def student_model(self) -> str:
        """The LitSeg-Lite student of this profile (notebook 03's ``LiteConfig.llm.model``), for labels:
        the profile table's ``LiteConfig`` row over the shared one, with the ``--set`` overrides of
        ``llm.model`` (unqualified or ``LiteConfig.``) in force, as ``LiteConfig.for_profile`` applies them
        (the student's config sits above this one: Lite is evaluated on LitSeg's units)."""
        model = _merge(SHARED_PROFILE_DEFAULTS[self.profile]["llm"],
                       stage_values(self.profile, "LiteConfig").get("llm", {})).get("model", LLMConfig().model)
        for key, value in active_sets():
            qual, parts = _split_key(key)
            if qual not in (None, "LiteConfig") or parts[0] != "llm":
                continue
            if parts == ["llm", "model"]:
                model = coerce(value, str, f"--set {key}")
            elif parts == ["llm"] and isinstance(value, dict) and "model" in value:
                model = value["model"]
        return model

    def train_data(self) -> str:
        """One line naming Lite's training units (dataset, split, books)."""
        out = self.train_corpus.summary(training=True)
        if self.max_train_units:
            out += f" max_units={self.max_train_units}"
        return out

    def describe(self) -> str:
        base = super().describe().replace(" | LLM=", " | teacher LLM=")
        so = "on" if self.llm.structured_output else "off"
        floor = f" segment_floor>={self.min_segments}" if self.min_segments and self.llm.structured_output else ""
        return (f"{base} | student (Lite)={self.student_model()} | Lite training units={self.train_data()}"
                f" | LitSeg retries={self.max_retries} structured={so}{floor}"
                + (f" | {self.ray.describe()}" if self.ray.address else ""))
