"""Extraction-stage pieces users put in ``PropertyGraphIndex(kg_extractors=[...])``.

LlamaIndex has no "chunk extracted" event, so:

- :class:`TriageExtractionTap` is a pass-through ``TransformComponent`` appended after the
  extractors. For each chunk it dispatches a :class:`ChunkExtracted` instrumentation event with the
  chunk's node id, text and ``metadata["relations"]``; the handler registered by
  :func:`triage_llamaindex.instrument` turns it into an ``ExtractionEvent``. Without
  instrumentation nobody listens and the tap costs one loop over the nodes.
- :class:`TriageLLMPathExtractor` is ``SimpleLLMPathExtractor`` that marks which chunk each LLM call
  belongs to (a context variable read by the handler), so the completion's token log-probabilities
  (``CompletionResponse.logprobs`` / ``ChatResponse.logprobs`` on ``LLMCompletionEndEvent`` /
  ``LLMChatEndEvent``) are matched to the right chunk. The stock extractor calls ``apredict``, which
  returns only text; with it the handler falls back to finding the chunk text inside the prompt.
  The LLM must be asked for log-probabilities itself (e.g. ``OpenAI(logprobs=True, top_logprobs=1)``).

Private surface: ``SimpleLLMPathExtractor._aextract`` (overridden to set the context variable, then
delegating to the stock implementation). llama-index-core 0.14.25.
"""

from __future__ import annotations

import uuid
from contextvars import ContextVar
from typing import Any

from llama_index.core.graph_stores.types import KG_NODES_KEY, KG_RELATIONS_KEY
from llama_index.core.indices.property_graph import SimpleLLMPathExtractor
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.events.base import BaseEvent
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent

from triage_llamaindex.translate import entity_type

__all__ = ["ChunkExtracted", "TriageExtractionTap", "TriageLLMPathExtractor", "extracting_node_id"]

dispatcher = get_dispatcher(__name__)

extracting_node_id: ContextVar[str | None] = ContextVar("triage_extracting_node_id", default=None)
"""Id of the chunk whose triples are being extracted in the current task (set by the extractor)."""


class ChunkExtracted(BaseEvent):
    """One chunk after the kg extractors ran (dispatched by :class:`TriageExtractionTap`).

    :param node_id: the chunk's node id (what LlamaIndex stores as ``triplet_source_id``).
    :param doc_id: the source document id (``ref_doc_id``), or the node id when there is none.
    :param text: the chunk text without metadata.
    :param triples: ``(subject id, relation label, object id, subject type, object type)``.
    :param run_id: the extraction run (one tap call, unless the tap was given a fixed id).
    """

    node_id: str
    doc_id: str
    text: str
    triples: list[tuple[str, str, str, str | None, str | None]]
    run_id: str

    @classmethod
    def class_name(cls) -> str:
        return "TriageChunkExtracted"


def _chunk_triples(node: BaseNode) -> list[tuple[str, str, str, str | None, str | None]]:
    types = {
        entity.id: entity_type(entity)
        for entity in node.metadata.get(KG_NODES_KEY, ()) or ()
        if hasattr(entity, "name")
    }
    out = []
    for relation in node.metadata.get(KG_RELATIONS_KEY, ()) or ():
        s, o = relation.source_id, relation.target_id
        out.append((s, relation.label, o, types.get(s), types.get(o)))
    return out


class TriageExtractionTap(TransformComponent):
    """Pass-through transform that reports each chunk's extracted relations.

    Append it after your ``kg_extractors``::

        PropertyGraphIndex.from_documents(docs, kg_extractors=[TriageLLMPathExtractor(llm=llm),
                                                                TriageExtractionTap()])

    :param run_id: a fixed extraction-run id (default: a new id per call, i.e. per insert batch).
    """

    run_id: str | None = None

    @classmethod
    def class_name(cls) -> str:
        return "TriageExtractionTap"

    def __call__(self, nodes: Any, **kwargs: Any) -> Any:
        run_id = self.run_id or f"llamaindex-{uuid.uuid4().hex[:12]}"
        for node in nodes:
            if KG_RELATIONS_KEY not in node.metadata and KG_NODES_KEY not in node.metadata:
                continue
            dispatcher.event(
                ChunkExtracted(
                    node_id=node.node_id,
                    doc_id=node.ref_doc_id or node.node_id,
                    text=node.get_content(metadata_mode=MetadataMode.NONE),
                    triples=_chunk_triples(node),
                    run_id=run_id,
                )
            )
        return nodes


class TriageLLMPathExtractor(SimpleLLMPathExtractor):
    """``SimpleLLMPathExtractor`` whose LLM calls are attributed to their chunk.

    Same arguments and output as the stock extractor; the completion (with its log-probabilities,
    when the LLM returns them) is matched to the chunk exactly instead of by prompt search.
    """

    @classmethod
    def class_name(cls) -> str:
        return "TriageLLMPathExtractor"

    async def _aextract(self, node: BaseNode) -> BaseNode:
        token = extracting_node_id.set(node.node_id)
        try:
            return await super()._aextract(node)
        finally:
            extracting_node_id.reset(token)
