"""LitSeg as a LlamaIndex ``NodeParser``::

    from llama_index.core import Document, VectorStoreIndex
    from llama_index.core.ingestion import IngestionPipeline
    from litseg_nb.integrations.llamaindex import LitSegNodeParser

    parser = LitSegNodeParser(method="litseg", profile="smoke", chunk_size=256,
                              llm={"backend": "openai", "base_urls": ("http://localhost:8000/v1",)})
    nodes = IngestionPipeline(transformations=[parser]).run(documents=[Document(text=text)])

A node's text is the text to embed (LitSeg: subtitle + context + main text); ``start_char_idx`` /
``end_char_idx`` locate the main text; nodes link to their ``SOURCE`` document (and ``PREVIOUS`` / ``NEXT``)
and carry :func:`~litseg_nb.integrations.chunk_metadata`. Keywords: the parser's own fields and what
:class:`~litseg_nb.integrations.Segmenter` takes (or ``options={...}``).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from llama_index.core.node_parser import NodeParser
from llama_index.core.schema import BaseNode, Document, NodeRelationship, TextNode
from pydantic import Field, PrivateAttr

from . import ADAPTER_OPTIONS, Segmenter, check_text, chunk_key
from ..chunkers.library import llamaindex_embedding
from ..config import StageConfig, ConfigError
from ..llm.embeddings import load_embedder

def profile_embedding(profile: str = "smoke", **embedding: Any) -> Any:
    """The profile's embedding model (offline MiniLM in test/smoke) as a LlamaIndex ``BaseEmbedding``; ``embedding``
    overrides its config (``backend="numpy"``: the core install's torch-free encoder)."""
    return llamaindex_embedding(load_embedder(StageConfig.for_profile(profile).embedding.replace(**embedding)))


class LitSegNodeParser(NodeParser):
    """Any registered method as a LlamaIndex node parser (``options``: overrides of its config)."""

    method: str = Field(default="litseg", description="litseg, litseg-lite, a baseline or lib:<preset>")
    profile: str = Field(default="smoke", description="test | smoke | full")
    options: Dict[str, Any] = Field(default_factory=dict, description="overrides of the method's config")
    chunk_size: Optional[int] = Field(default=None, description=ADAPTER_OPTIONS["chunk_size"])
    keep_outside_units: bool = Field(default=True, description=ADAPTER_OPTIONS["keep_outside_units"])
    nested_metadata: bool = Field(default=False, description=ADAPTER_OPTIONS["nested_metadata"])
    token_counter: Optional[str] = Field(default=None, description=ADAPTER_OPTIONS["token_counter"])
    _segmenter: Any = PrivateAttr(default=None)

    def __init__(self, method: str = "litseg", profile: str = "smoke", options: Dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        own = {k: kwargs.pop(k) for k in list(kwargs) if k in type(self).model_fields}
        both = sorted(set(options or {}) & set(kwargs))
        if both:
            raise ConfigError(f"LitSegNodeParser: {', '.join(both)} given both in options= and as a keyword")
        options = {**(options or {}), **kwargs}
        adapter = {k: own[k] for k in ADAPTER_OPTIONS if k in own}
        segmenter = Segmenter(method, profile, **adapter, **options)  # a ConfigError naming the known keys first
        super().__init__(method=method, profile=profile, options=options, **own)
        self._segmenter = segmenter

    @classmethod
    def class_name(cls) -> str:
        return "LitSegNodeParser"

    def _parse_nodes(self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any) -> List[BaseNode]:
        from llama_index.core.utils import get_tqdm_iterable

        out: List[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Segmenting documents"):
            text = check_text(node.get_content(), f"(node {node.node_id})")
            _, chunks = self._segmenter.segment(text, doc_id=node.node_id)  # chunk ids: <node id>/<unit>.<chunk>
            source = node.as_related_node_info()  # once per document: it hashes the whole text
            own = dict(node.metadata) if self.include_metadata else {}
            for i, c in enumerate(chunks):
                md = self._segmenter.metadata(c, own)  # the document's keys kept (ours beside a clash)
                ours = [k for k in md if k not in own]
                tn = TextNode(id_=self.id_func(i, node), text=c.text, metadata=md,
                              excluded_embed_metadata_keys=ours, excluded_llm_metadata_keys=ours,
                              relationships={NodeRelationship.SOURCE: source})
                start = md[chunk_key("start_index", own)]
                if start is not None:
                    tn.start_char_idx, tn.end_char_idx = start, md[chunk_key("end_index", own)]
                out.append(tn)
        return out

    def _postprocess_parsed_nodes(self, nodes: List[BaseNode], parent_doc_map: Dict[str, Document]) -> List[BaseNode]:
        # the base class re-locates each node by searching its text in the whole document (LitSeg's text,
        # subtitle + context, is no substring: a scan of the document per node) and merges the document's
        # metadata over nothing new (done in _parse_nodes); here only its links: SOURCE, PREVIOUS, NEXT
        for i, node in enumerate(nodes):
            parent = parent_doc_map.get(node.ref_doc_id or "")
            if parent is not None and parent.source_node is not None:
                node.relationships[NodeRelationship.SOURCE] = parent.source_node
            if not self.include_prev_next_rel or node.source_node is None:
                continue
            for j, rel in ((i - 1, NodeRelationship.PREVIOUS), (i + 1, NodeRelationship.NEXT)):
                if 0 <= j < len(nodes) and nodes[j].source_node is not None \
                        and nodes[j].source_node.node_id == node.source_node.node_id:
                    node.relationships[rel] = nodes[j].as_related_node_info()
        return nodes
