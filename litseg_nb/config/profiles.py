"""Every profile's values, in one table: ``PROFILES_TABLE[profile][section] = {field: value}``.

``section`` is ``"shared"`` (the sub-configs every stage has: ``llm``, ``embedding``, ``corpus``,
``selection``) or the name of a stage config class (``"LitSegConfig"``, ``"RagConfig"``, ...): its own
fields, and nested sections it sets differently from the shared ones. A stage's values are the shared
ones with its own merged over them (:meth:`litseg_nb.config.StageConfig.for_profile`); fields a profile
leaves out keep the dataclass defaults, which are the ``full`` values unless ``full`` says otherwise.
Every profile has an entry for every stage (``full`` included, even when it is empty), so a missing
one is an error here rather than a silent default.

This module imports nothing of the package: every config module reads it, so it sits below all of them.
"""
from __future__ import annotations

from typing import Any

PROFILES = ("test", "smoke", "full")

# The teacher (LitSeg, ``LitSegConfig.llm``) and the student (LitSeg-Lite, ``LiteConfig.llm``) are
# separate settings. The paper distils a large teacher into a compact student and names neither in
# the text we have (its Tables 14-15 are empty); in ``full`` we use Qwen3-32B as the teacher (the
# largest dense Qwen3; fits one 80 GB GPU in bf16) and Qwen3-8B as the student, which is also the
# model of the LLM baselines (§4.4: "LitSeg-Lite and LumberChunker using the same inference
# configuration"). The CPU profiles use one small model for both (labelled: teacher = student).
FULL_TEACHER_MODEL = "Qwen/Qwen3-32B"
FULL_STUDENT_MODEL = "Qwen/Qwen3-8B"
#: the teacher's weights, ``LitSegConfig.teacher_weights``: bf16 (~65 GB: one 80 GB card) or quantised, for
#: the paper's one 48 GB RTX 6000 Ada (§4.4): FP8 (~33 GB; Ada runs FP8 natively; the closest to bf16 that
#: fits, the one that card implies) or AWQ 4-bit (~19 GB; room for a larger KV cache)
FULL_TEACHER_WEIGHTS = {"bf16": FULL_TEACHER_MODEL, "fp8": "Qwen/Qwen3-32B-FP8", "awq": "Qwen/Qwen3-32B-AWQ"}

PROFILES_TABLE: dict[str, dict[str, dict[str, Any]]] = {
    "test": {
        "shared": {
            "llm": {"backend": "hf", "model": "tiny-random", "batch_size": 4, "max_new_tokens": 48,
                    "max_model_len": 2048},
            "embedding": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "batch_size": 32},
            "corpus": {"datasets": ("gutenqa", "gutenberg"), "max_books": 2, "max_units_per_book": 2,
                       "unit_selection": "questions",
                       "max_unit_words": 300},
            # the LLM methods: Emma's first two units holding a question's evidence (tiny random model)
            "selection": {"strategy": "questions", "books": ("gutenqa:Emma_-_Jane_Austen",), "max_units": 2},
        },
        # notebook 01: the shared corpus defaults; the test profile times a small big book
        "PreprocessConfig": {"benchmark_big_mb": 1.0},
        # constrained decoding (llm.structured_output) on for LitSeg and Lite in test and smoke: the replies
        # follow the stage / E.2 JSON schemas, sentence indices bounded by each unit's sentence count
        # (litseg.prompting; xgrammar in the hf backend); the validator and the paper's fallbacks
        # still run on every reply and are counted. Off in full, as in the paper.
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
                      "llm": {"max_model_len": 2048},
                      # the pairwise judge: the local model (the generator's; full: the judge server)
                      "judge_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 12,
                                    "max_model_len": 2048}},
        # the A.2 raters: the one local model for both (the table label says "same model"); SmolLM2 as the second
        # rater took > 5 min of notebook 06 on the loaded CI cores (its B.2 annotator prompts are long)
        "SegmentQualityConfig": {"judge_max_units": 1, "judge_max_chunks_per_unit": 6, "judge_retries": 1,
                                 "judge_max_passage_chars": 3000, "human_sheet_chunks": 3, "llm_rating_items": 4,
                                 "llm": {"max_new_tokens": 48},
                                 "rater_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                                               "max_model_len": 8192},
                                 "rater2_llm": {"backend": "hf", "model": "tiny-random", "max_new_tokens": 24,
                                                "max_model_len": 8192}},
        # two hand-checked books (Persuasion, Alice: both kinds), two windows of each kind per book,
        # the rule-based methods and the tiny model's perplexity chunker on two windows
        "BoundaryConfig": {"source": "hand-checked", "max_books": 2, "max_windows_per_book": 2,
                           "window_sentences": 40, "methods": ("token", "recursive", "paragraph", "texttiling", "c99",
                                                               "boundary-model"),
                           "llm_methods": ("perplexity",), "llm_max_windows": 2, "segmenter_max_windows": 1},
        # test/smoke evaluate GutenQA Emma units only: their evaluation set is every shared unit; the paired
        # §4.4 measurement: both units in one batch, three interleaved repeats
        "EfficiencyConfig": {"timing_dataset": "all", "paired_max_units": 2, "paired_batch_units": 0,
                             "paired_repeats": 3},
    },
    "smoke": {
        "shared": {
            "llm": {"backend": "hf", "model": "smollm2-135m-instruct", "batch_size": 8,
                    "max_new_tokens": 384, "max_model_len": 8192},
            "embedding": {"backend": "sentence-transformers", "model": "all-MiniLM-L6-v2", "batch_size": 64},
            "corpus": {"datasets": ("gutenqa", "gutenberg", "literaryqa"), "max_unit_words": 900},
            # the LLM methods: the fewest Emma units holding the evidence of >= 2 GutenQA questions
            # (2 units, 22 sentences, 525 words at 900 words/unit), so notebook 05 compares every method on >= 2
            # questions. Issue #35 (smoke in 15 minutes): 8 questions (8 units, 147 sentences) until 2026-12-02,
            # then 4 (4 units, 56 sentences, 1,868 words; 32 min idle); nearly all of smoke's LLM work
            # (notebooks 02, 04, 06-08) scales with these units
            "selection": {"strategy": "questions", "books": ("gutenqa:Emma_-_Jane_Austen",), "min_questions": 2},
        },
        "PreprocessConfig": {},
        # Every call is a ~2,650-3,000-token prefill with SmolLM2-135M on 2 CPU cores (the system
        # prompt alone is ~1,800 tokens; ~10 s each) and long-context decoding runs at ~4 tok/s,
        # so retries (which double the cost) are off here; they are exercised by the tests and
        # the test profile. The units are the shared selection (2 Emma units, 22 sentences; the measurements
        # below were made on the 8 units, 147 sentences, of the selection before issue #35).
        # SmolLM2-135M without constrained decoding: 8 of 8 units fell back to the whole unit (the smoke run
        # at f1ca1bc); with it (stage JSON schemas, indices bounded by the unit's sentence count) 0 of 8 did
        # (1 valid, 6 index_repair, 1 coverage_repair; benchmarks/smoke_litseg_fallbacks.py, 1481 s for the
        # 8 units on 2 cores at load ~18). But the model copies the prompt's placeholder strings and writes
        # "from 1 to N" (often twice): every unit ends as ONE segment over the whole unit, a small-model result
        "LitSegConfig": {
            "corpus": {"datasets": ("gutenqa",), "max_books": 1},
            "llm": {"structured_output": True},
            # ... so stage 3's schema asks for at least 2 segments (or ceil(n / length reference)): a small-model
            # accommodation that lets the walk-through show where SmolLM2 puts a boundary (issue #32; counted:
            # each record's segment_floor; full: 0, the paper's schema-free decoding). Measured at 364071c: 0 of 8
            # whole-unit fallbacks, 8 of 8 units with 2 segments (3 valid, 5 coverage_repair; 3023 s at load 11-23),
            # but every cut next to an edge of the unit (after sentence 1-2 or before the last): no narrative reading
            "min_segments": 2,
            "max_retries": 0,
            # no calibration in smoke (issue #35: it ran the three stages a second time on a GutenQA and a
            # Gutenberg unit, ~1 min, for a value SmolLM2's one- or two-segment units cannot inform): the
            # paper's length reference of 100; `-p calibrate=true` runs it, the test profile always does
            "calibrate": False,
            "stage1_max_new_tokens": 48,
            "stage2_max_new_tokens": 48,
            "stage3_max_new_tokens": 192,
            "calibration_units": 1,
            "calibration_max_retries": 0,
            "compare_units": 1,
            # Lite's training data: 2 units of another book (34 s of annotation in the idle smoke run at b0a5dae)
            # (600 words per unit until issue #35; 300 as the test profile: shorter SFT examples too)
            "train_corpus": {"datasets": ("gutenberg",), "books": ("46",), "max_books": 1,
                             "max_units_per_book": 2, "max_unit_words": 300},
        },
        # Sized from measurements on the 2-core CPU: with the verbatim E.2 prompt (~2.1k tokens) a
        # SmolLM2-135M example is ~3.3k tokens; one SFT step on it took ~98 s and generating 96
        # tokens ~31 s. So: 1 SFT step (2 until issue #35), 1 GRPO step, 1 held-out unit, short generations.
        "LiteConfig": {
            # constrained decoding, as LitSeg's (above): the untrained SmolLM2 with the E.2 prompt on smoke's 8
            # LitSeg units, whole-unit fallback 0/8 (6 valid, 2 coverage_repair; one segment each; 757 s)
            "llm": {"structured_output": True},
            "fallback_units": "include_if_needed", "min_train_units": 2,
            "max_train_units": 2, "max_eval_units": 1, "max_seq_tokens": 6144,
            "lora_r": 8, "lora_alpha": 16, "lora_dropout": 0.0, "gradient_checkpointing": False,
            "sft_learning_rate": 2e-4, "sft_max_steps": 1, "sft_grad_accum": 1,  # 2 steps until issue #35
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
            "ablation_max_units": 1,  # 7 variants x ~1 min per unit on the CPU
            # a judge call is a ~5.5k-token prompt (~1 min on the CPU): GRPO keeps the judge, the
            # before/after tables report the format reward only (labelled)
            "eval_with_judge": False,
        },
        # non-LLM methods: the eleven raw Gutenberg books + GutenQA's Emma; LLM methods: the
        # shared selection of Emma units (SmolLM2-135M on CPU; see notebook 04's budget notes)
        "BaselinesConfig": {
            "corpus": {"datasets": ("gutenqa", "gutenberg")},
            "semantic_books": ("gutenqa:Emma_-_Jane_Austen",),
            # ... on the unit selection (the units notebooks 05-07 compare every method on): all of Emma took
            # 110 s of the idle smoke run (issue #35)
            "semantic_units": "selection",
            # margin sampling's left text (the current chunk, three times in the prompt) capped
            # at 128 tokens; it rarely binds (SmolLM2 splits often: 64 saved 4% of the prompt
            # tokens and no measurable time, so it stays at 128)
            "margin_max_left_tokens": 128,
            # proposition chunking is decode-bound and SmolLM2-135M loops on a repeated line in
            # about half its replies, which then run to the cap: 192 tokens took ~4.3 min of
            # the smoke run, 128 (room for ~10 propositions of ~12 tokens) ~2.9 min
            "proposition_max_new_tokens": 128,
            # completion: 28 chunks x ~7 calls; measured 212 calls / 23 min at 64 tokens, 3 items,
            # 400 context chars on a loaded 2-core machine, hence the smaller sizes
            "completion_max_new_tokens": 32, "completion_max_items": 1, "completion_context_chars": 200,
            "completion_related_chunks": 1,
        },
        # the presets on the evaluation book only (as BaselinesConfig.semantic_books), the embedding
        # presets on the shared unit selection (see LibraryConfig.books / embedding_units)
        "LibraryConfig": {"books": ("gutenqa:Emma_-_Jane_Austen",), "embedding_units": "selection"},
        # SmolLM2-135M on 2 CPU cores: generation/judges on a subset (notebook 05 ~ 6 min)
        "RagConfig": {"rerank_candidates": 4, "rerank_max_questions": 3, "hyde_max_questions": 10,
                      "hyde_max_new_tokens": 48, "context_top_k": 2, "answer_max_new_tokens": 40,
                      "generation_max_questions": 3, "generation_max_chunkers": 3, "ragas_max_questions": 1,
                      "ragas_retries": 2, "pairwise_max_questions": 2,
                      "pairwise_max_new_tokens": 48, "literaryqa_max_questions": 3,
                      "max_context_chars_per_chunk": 1500, "lumber_theta_max_units": 1,
                      "pairwise_book_max_tokens": 1500,
                      "judge_llm": {"backend": "hf", "model": "smollm2-135m-instruct", "max_new_tokens": 48,
                                    "max_model_len": 8192},
                      "corpus": {"datasets": ("gutenqa", "literaryqa"), "max_books": 2}},
        # a judge call is a ~5.5k-token prompt (~1 min on 2 CPU cores), and SmolLM2 rarely
        # returns a parsable rubric: judge the two LitSeg methods only, without retries
        # SmolLM2's 8k context holds the rubric and the passage, not also Lite's ~2.4k-token prompt
        "SegmentQualityConfig": {"judge_max_units": 1, "judge_max_chunks_per_unit": 8, "judge_retries": 0,
                                 "judge_max_passage_chars": 6000, "human_sheet_chunks": 20,
                                 "judge_pipeline_prompt": "name",
                                 "llm_rating_items": 1,  # 2 until issue #35 (~70 s less)
                                 "judge_methods": ("litseg", "litseg-lite"),
                                 # the A.2 raters: SmolLM2 is the one local instruct model (tiny-random is
                                 # random weights, no rater): both raters are it, labelled "same model"
                                 "rater_llm": {"backend": "hf", "model": "smollm2-135m-instruct",
                                               "max_new_tokens": 48, "max_model_len": 8192},
                                 "rater2_llm": {"backend": "hf", "model": "smollm2-135m-instruct",
                                                "max_new_tokens": 48, "max_model_len": 8192},
                                 "corpus": {"datasets": ("gutenqa", "literaryqa"), "max_books": 2}},
        # every hand-checked book (token, recursive, paragraph, TextTiling, C99, the boundary model: every
        # window, ~290); the semantic chunker on 16 windows, SmolLM2-135M's perplexity chunker on 4 (2 chapter,
        # 2 scene) and LitSeg (its smoke config: constrained decoding, three prompts per window, the costliest
        # method here) on 2 (1 + 1). Measured idle at b4f0d7c with the sizes before issue #35: semantic on 96
        # windows 146 s, perplexity on 16 windows 64 s, LitSeg on 8 windows 312 s (60 s of it calibration, now
        # off in smoke), TextTiling 42 s, scoring 7 s. Margin sampling (one forward pass per sentence) took
        # > 13 min on 16 windows of a loaded machine: run it with `boundaries --method margin --llm-windows N`
        # Issue #35 (smoke in 15 minutes): 16 perplexity, 8 LitSeg and 96 semantic windows until 2026-12-02,
        # then 8 / 4 / 32 (the boundary benchmark took 274 s of the 32-min idle run)
        "BoundaryConfig": {"source": "hand-checked", "window_sentences": 60, "max_windows_per_book": 8,
                           "llm_methods": ("perplexity",), "llm_max_windows": 4, "segmenter_max_windows": 2,
                           "embedder_max_windows": 16},
        # test/smoke evaluate GutenQA Emma units only: their evaluation set is every shared unit; the paired
        # §4.4 measurement on 1 unit, 2 interleaved repeats (2 units x 3 repeats took 309 s of the idle smoke run)
        "EfficiencyConfig": {"timing_dataset": "all", "paired_max_units": 1, "paired_batch_units": 0,
                             "paired_repeats": 2},
    },
    "full": {
        "shared": {
            "llm": {"backend": "vllm", "model": FULL_STUDENT_MODEL, "batch_size": 256, "max_new_tokens": 4096,
                    "max_model_len": 32768, "dtype": "bfloat16", "device": "cuda",
                    # vLLM's defaults for one GPU, stated (tensor_parallel_size > 1 for a teacher that does
                    # not fit); LoRA on, so Lite's adapters are requests on the base model's engine (03, 07)
                    # and every role of one model shares one engine (same settings everywhere)
                    "engine": {"tensor_parallel_size": 1, "gpu_memory_utilization": 0.9, "enable_lora": True,
                               "max_lora_rank": 32}},
            "embedding": {"backend": "flagembedding", "model": "BAAI/bge-m3", "batch_size": 256,
                          "device": "cuda", "use_instructions": True, "max_passage_tokens": 8192},
            "corpus": {"datasets": ("gutenqa", "literaryqa"), "literaryqa_split": "test",
                       "max_unit_words": 6000},
            "selection": {"strategy": "first"},  # every unit of the evaluation corpus
        },
        "PreprocessConfig": {},
        # teacher_weights: "bf16" on an 80 GB card; "fp8" (or "awq") on the paper's 48 GB card
        "LitSegConfig": {"llm": {"model": FULL_TEACHER_MODEL}, "teacher_weights": "bf16",
                         "max_retries": 3, "calibration_units": 50, "compare_units": 50, "unit_group_size": 512,
                         "train_corpus": {"datasets": ("literaryqa",), "literaryqa_split": "train",
                                          "max_unit_words": 6000}},
        "LiteConfig": {"llm": {"model": FULL_STUDENT_MODEL}},
        "BaselinesConfig": {},
        "LibraryConfig": {},
        "RagConfig": {"reranker": "flagembedding", "reranker_max_length": 8192,  # bge-reranker-v2-m3's maximum
                      "context_top_k": 5, "answer_max_new_tokens": 256},
        "SegmentQualityConfig": {},
        # llm_methods: every LLM baseline (the dataclass default)
        "BoundaryConfig": {"source": "corpus", "segmenter_max_windows": 0},
        "EfficiencyConfig": {},
    },
}


def stage_values(profile: str, stage: str) -> dict[str, Any]:
    """The table's own entry for ``stage`` (a stage config class name) in ``profile`` ({} for a stage the
    table does not know, such as a test's own config class). The caller checks ``profile``."""
    return PROFILES_TABLE[profile].get(stage, {})
