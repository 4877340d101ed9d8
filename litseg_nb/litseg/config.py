"""Configuration of the LitSeg annotation stage (notebook 02)."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..config import (SHARED_PROFILE_DEFAULTS, ConfigError, CorpusConfig, LLMConfig, StageConfig, _Base, _merge,
                      _split_key, active_sets, at_least, coerce, one_of)
from ..core.ray_cluster import RayAddressError, parse_address
# the teacher of ``full`` (Qwen3-32B) and why: litseg_nb.config, next to the profile table
from ..config import FULL_TEACHER_MODEL, FULL_TEACHER_WEIGHTS, stage_values  # noqa: F401


@dataclass(frozen=True)
class RayOptions(_Base):
    """Where notebook 02's annotation runs: ``address`` (``""``: this process; ``local``, ``auto``, ``HOST:PORT``,
    ``ray://HOST:PORT``), ``actors`` engines (0: one per GPU or CPU), ``cpus`` of a local cluster (0: all)."""

    address: str = ""
    actors: int = 0
    gpus_per_actor: float = 0.0
    cpus: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.address:
            try:
                parse_address(self.address)
            except RayAddressError as exc:  # a config error naming the key
                raise ConfigError(f"RayOptions.address: {exc}") from None
        if self.actors < 0 or self.cpus < 0 or not self.gpus_per_actor >= 0:
            raise ConfigError(f"RayOptions: actors, cpus and gpus_per_actor must be >= 0, got "
                              f"actors={self.actors}, cpus={self.cpus}, gpus_per_actor={self.gpus_per_actor}")

    def describe(self) -> str:
        width = f"{self.actors} engine(s)" if self.actors else "one engine per " + ("GPU" if self.gpus_per_actor else "CPU")
        return f"on Ray ({parse_address(self.address)}, {width})"


@dataclass(frozen=True)
class LitSegConfig(StageConfig):
    """LitSeg pipeline settings (notebook 02). Constrained decoding is ``llm.structured_output`` (off in
    ``full``, as in the paper)."""

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
    calibration_units: int = at_least(4, 1)  # K units, stratified by dataset and seeded
    calibration_max_retries: int = -1  # -1 = max_retries
    # constrained decoding only (not the paper's; 0 = off): stage 3's floor of segments (prompting.segment_floor)
    min_segments: int = at_least(0, 0)
    unit_group_size: int = at_least(0, 0)  # units per batched group (stage 1 → 2 → 3 per group); 0 = all at once
    # notebook 02
    compare_structured: bool = True  # also run the same units with constrained decoding switched the other way
    compare_units: int = at_least(0, 0)  # units in that comparison (0 = all)
    render_unit: str = ""  # "book_id/unit_id" to render as HTML; "" = the first unit with >1 segment
    # LitSeg-Lite's training units, annotated by this (teacher) stage (other books than the evaluated ones)
    train_corpus: CorpusConfig = field(default_factory=lambda: CorpusConfig(
        datasets=("literaryqa",), literaryqa_split="train", max_unit_words=6000))
    max_train_units: int = at_least(0, 0)  # cap on annotated training units (0 = all of train_corpus)
    #: the teacher's weights: "bf16" = ``llm.model`` as configured; "fp8" / "awq" = the quantised Qwen3-32B
    teacher_weights: str = one_of("bf16", *FULL_TEACHER_WEIGHTS)
    #: where the annotation runs: this process (``ray.address == ""``) or a Ray cluster
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
        return getattr(self, f"{stage}_max_new_tokens") or self.llm.max_new_tokens

    def student_model(self) -> str:
        """The LitSeg-Lite student of this profile (``LiteConfig.llm.model`` with ``--set`` in force), for labels."""
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
