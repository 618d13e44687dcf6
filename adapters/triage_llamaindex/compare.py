"""Compare runner for LlamaIndex PropertyGraphIndex (`triage compare --frameworks llamaindex`).

Declared with ``[project.entry-points."triage.compare"] llamaindex = "triage_llamaindex.compare:LlamaIndexRunner"``.
Builds a PropertyGraphIndex over the corpus chunks with the adapter's extractor + tap and the offline
LLM/embedding, then asks each question through a query engine with one PG sub-retriever (the mode),
with the compare query ids; gold feedback rounds with ``TriagePostprocessor`` reweighting. It emits only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from triage_plugins.apps.compare import Corpus, Progress, Question, missing_package, query_id

_SUB = {"synonym": "LLMSynonymRetriever", "vector": "VectorContextRetriever"}


class LlamaIndexRunner:
    name = "llamaindex"
    framework = "llamaindex"
    # vector: the index's own vector store holds the embedded KG nodes (SimplePropertyGraphStore
    # has no vector search of its own)
    modes = ("synonym", "vector")

    def available(self) -> tuple[bool, str]:
        missing = missing_package("llama_index.core", "llamaindex", "llama-index-core")
        return missing is None, missing or ""

    def retriever_of(self, mode: str) -> str:
        return f"PGRetriever({_SUB[mode]})"

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: Any,
        *,
        feedback_rounds: int,
        seed: int,
        progress: Progress,
    ) -> None:
        from llama_index.core import PropertyGraphIndex
        from llama_index.core.indices.property_graph import LLMSynonymRetriever, VectorContextRetriever
        from llama_index.core.instrumentation.dispatcher import instrument_tags
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.core.schema import TextNode

        from triage_llamaindex import (
            TriageExtractionTap,
            TriageLLMPathExtractor,
            TriagePostprocessor,
            instrument,
        )
        from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

        inst = instrument(manager=manager)
        try:
            llm, embed = OfflineLLM(answer="reader"), OfflineEmbedding()  # the same reader as every framework
            tick = progress(f"llamaindex/{mode}: index", 1)
            index = PropertyGraphIndex(
                nodes=[TextNode(id_=c.id, text=c.text) for c in corpus.chunks],
                llm=llm,
                embed_model=embed,
                kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()],
            )
            inst.emit_graph(index)
            tick()
            store = index.property_graph_store
            sub = (
                LLMSynonymRetriever(store, include_text=False, llm=llm)
                if mode == "synonym"
                else VectorContextRetriever(
                    store, include_text=False, embed_model=embed, vector_store=index.vector_store
                )
            )
            post = [TriagePostprocessor()] if feedback_rounds else []
            engine = RetrieverQueryEngine.from_args(
                index.as_retriever(sub_retrievers=[sub]), llm=llm, node_postprocessors=post
            )
            for round_ in range(feedback_rounds + 1):
                tick = progress(
                    f"llamaindex/{mode}: questions" + (f" (round {round_})" if round_ else ""), len(questions)
                )
                answers = []
                for q in questions:
                    qid = query_id(q.id, mode, round_)
                    with instrument_tags({"query_id": qid}):
                        answers.append((q, qid, str(engine.query(q.text).response)))
                    tick()
                if round_ < feedback_rounds:
                    for q, qid, answer in answers:
                        if q.gold is not None:
                            hit = any(a.casefold() in answer.casefold() for a in q.gold.answers)
                            inst.feedback(qid, 1.0 if hit else 0.0, source="gold")
                    manager.flush()
        finally:
            inst.uninstrument()
