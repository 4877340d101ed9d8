"""LitSeg as a LlamaIndex ``NodeParser``::

    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    parser = LitSegNodeParser(method="litseg", profile="smoke")
    nodes = IngestionPipeline(transformations=[parser]).run(documents=[Document(text=text)])

Each node's text is the chunk text (LitSeg's subtitle + context + main text); ``start_char_idx`` /
``end_char_idx`` are the main text's offsets in the document text; nodes of one document are linked
``PREVIOUS`` / ``NEXT`` and to their ``SOURCE`` document; metadata holds unit, sentence range,
spans, subtitle and context indices (see :func:`litseg_nb.integrations.core.chunk_metadata`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode
from pydantic import Field, PrivateAttr

from .core import Segmenter, check_text, chunk_metadata

_SPAN_KEY = "_litseg_span"


def profile_embedding(profile: str = "smoke") -> Any:
    """The profile's embedding model (offline MiniLM in test/smoke) as a LlamaIndex ``BaseEmbedding``."""
    from ..chunkers.library_adapters import llamaindex_embedding
    from ..config import StageConfig
    from ..embeddings import load_embedder

    return llamaindex_embedding(load_embedder(StageConfig.for_profile(profile).embedding))


class LitSegNodeParser(NodeParser):
    """Any registered method as a LlamaIndex node parser (``options``: overrides of its config)."""

    method: str = Field(default="litseg", description="litseg, litseg-lite, a baseline or lib:<preset>")
    profile: str = Field(default="smoke", description="test | smoke | full")
    options: Dict[str, Any] = Field(default_factory=dict, description="overrides of the method's config")
    _segmenter: Any = PrivateAttr(default=None)

    @classmethod
    def class_name(cls) -> str:
        return "LitSegNodeParser"

    def model_post_init(self, __context: Any) -> None:  # noqa: D102
        self._segmenter = Segmenter(self.method, self.profile, **self.options)

    @classmethod
    def from_models(cls, method: str = "litseg", profile: str = "smoke", backend: Any = None, embedder: Any = None,
                    **kwargs: Any) -> "LitSegNodeParser":
        """A parser that reuses an already-built LLM backend / embedder."""
        parser = cls(method=method, profile=profile, **kwargs)
        parser._segmenter = Segmenter(method, profile, backend=backend, embedder=embedder, **parser.options)
        return parser

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> List[BaseNode]:
        out: List[BaseNode] = []
        for node in nodes:
            text = check_text(node.get_content(), f"(node {node.node_id})")
            _, chunks = self._segmenter.segment(text, doc_id=node.node_id)  # chunk ids: <node id>/<unit>.<chunk>
            for i, c in enumerate(chunks):
                md = chunk_metadata(c)
                tn = TextNode(id_=self.id_func(i, node), text=c.text, metadata=md,
                              excluded_embed_metadata_keys=list(md), excluded_llm_metadata_keys=list(md),
                              relationships={NodeRelationship.SOURCE: node.as_related_node_info()})
                if md["start_index"] is not None:
                    tn.start_char_idx, tn.end_char_idx = md["start_index"], md["end_index"]
                out.append(tn)
        return out

    def _postprocess_parsed_nodes(self, nodes: List[BaseNode], parent_doc_map: Dict[str, Document]) -> List[BaseNode]:
        # the base class re-locates each node by searching its text in the document; LitSeg's text
        # (subtitle + context) is not a substring, so the exact offsets are put back afterwards
        spans = [(n.start_char_idx, n.end_char_idx) for n in nodes]
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for n, (a, b) in zip(nodes, spans):
            n.start_char_idx, n.end_char_idx = a, b
        return nodes
