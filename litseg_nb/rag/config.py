"""Configuration of the RAG evaluation (notebook 05): retrieval, fusion, reranking, generation, judges."""
from __future__ import annotations

from dataclasses import dataclass, field
from ..config import LLMConfig, StageConfig, at_least, one_of
from .rerank import RERANKERS

#: Qwen3's native context (32,768) times the YaRN factor 4 its model card gives for long inputs
PAIRWISE_JUDGE_CONTEXT = 4 * 32768


@dataclass(frozen=True)
class RagConfig(StageConfig):
    """All stages of Appendix I.1's pipeline, shared and fixed across chunkers; the LLM-heavy parts are capped
    per profile, retrieval metrics always cover every question."""

    chunkers: tuple[str, ...] = ()  # empty = every chunk artifact found
    question_scope: str = one_of("common-units", "common-units", "all")  # common-units | all (see rag.pipeline.questions_in_scope)
    # retrieval
    dense_top_k: int = 50
    sparse_top_k: int = 50
    retrieve_top_k: int = 20  # depth of the final ranking (metrics go to k = 20)
    fusion: str = one_of("rrf", "rrf", "weighted")  # rrf | weighted
    rrf_k: int = 60
    dense_weight: float = 0.5  # weighted fusion: w * dense + (1 - w) * sparse (min-max normalised)
    # weighted RRF and linear fusion beside the paper's hybrid: w from this grid, cross-fitted over GutenQA folds
    fusion_weight_grid: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    fusion_dev_folds: int = 2
    bm25_k1: float = 1.5
    bm25_b: float = 0.75
    # reranking
    reranker: str = one_of("llm-pointwise", *RERANKERS)  # none | llm-pointwise | flagembedding
    reranker_model: str = "BAAI/bge-reranker-v2-m3"
    # flagembedding reranker: tokens of query + chunk it reads (0 = the model's own maximum; its default 512 cuts)
    reranker_max_length: int = at_least(0, 0)
    # top fused candidates that are rescored; 0 = the whole ranking the metrics read (retrieve_top_k)
    rerank_candidates: int = at_least(0, 0)
    rerank_max_questions: int = 0  # 0 = all questions
    rerank_chunkers: tuple[str, ...] = ()  # empty = all evaluated chunkers
    # HyDE (LumberChunker's row): hypothetical answer replaces the question for dense retrieval
    hyde: bool = True
    hyde_max_questions: int = 0
    hyde_max_new_tokens: int = 96
    # generation
    context_top_k: int = 3  # chunks handed to the generator
    answer_max_new_tokens: int = 64
    generation_max_questions: int = 0  # per dataset; 0 = all
    generation_chunkers: tuple[str, ...] = ()  # empty = all evaluated chunkers
    generation_max_chunkers: int = 0  # 0 = all; else the pairwise target + the first others
    max_context_chars_per_chunk: int = 0  # 0 = whole chunk
    literaryqa_max_questions: int = 0  # questions per LiteraryQA book (0 = all)
    # judges
    ragas: bool = True
    ragas_max_questions: int = 0
    ragas_max_new_tokens: int = 8
    ragas_retries: int = 5  # ragas' NV metrics retry a reply without a rating (ragas default 5)
    pairwise: bool = True
    pairwise_target: str = "litseg-lite"  # the system whose win rate is reported (paper: LitSeg-Lite)
    pairwise_max_questions: int = 0
    pairwise_max_new_tokens: int = 96
    pairwise_context_chars: int = 500  # GutenQA: +/-500 characters around the evidence (Section 4.2)
    # LiteraryQA judge context cap below the judge's own (0 = none): keeps small-profile prompts short
    pairwise_book_max_tokens: int = 0
    #: the pairwise judge (Tables 4, 8): the judge server, never the generator it judges; YaRN x4 context
    #: (131,072 tokens, see docs/guide/fidelity.md) so that a LiteraryQA book fits whole where it can
    judge_llm: LLMConfig = field(default_factory=lambda: LLMConfig(
        backend="openai", model="Qwen/Qwen3-32B", max_new_tokens=96, temperature=0.0,
        max_model_len=PAIRWISE_JUDGE_CONTEXT, request_timeout_s=600.0))
    # the whole-book benchmark (rag.benchmark): tier A = every LLM-free method on whole books, every question
    tier_a_books: tuple[str, ...] = ()  # book ids (GutenQA, LiteraryQA); empty = every local book of the two
    tier_a_embedding_presets: bool = True  # also the lib: presets that embed (each embeds every book its own way)
    budgets: tuple[int, ...] = (256, 512, 1024, 2048)  # budget-matched retrieval: tokens of chunk text taken
    paired_budget: int = 1024  # the budget of the paired comparison, fixed before any run
    paired_reference: str = "recursive"
    pooling_check_books: int = at_least(4, 1)  # the shortest tier-A books on which pooling is checked
    pooling_check_methods: tuple[str, ...] = ()  # empty = every tier-A method
    # LumberChunker's θ sweep (its figure: DCG@k per θ) on the first common units (0 = all of them)
    lumber_thetas: tuple[int, ...] = (450, 550, 650, 1000)
    lumber_theta_max_units: int = 0

    @property
    def rerank_depth(self) -> int:
        """How many fused candidates the reranker rescores (``rerank_candidates``, 0 = ``retrieve_top_k``)."""
        return self.rerank_candidates or self.retrieve_top_k
