"""Compare runner for LlamaIndex PropertyGraphIndex (`triage compare --frameworks llamaindex`).

Registered by :mod:`triage_llamaindex.plugin` through ``triage_register_runners``. Builds a
PropertyGraphIndex over the corpus chunks with the adapter's extractor + tap and the offline
LLM/embedding, then asks each question through a query engine with one PG sub-retriever (the mode),
with the compare query ids; gold feedback rounds with ``TriagePostprocessor`` reweighting
(:func:`~triage_plugins.adapter_kit.runner.run_rounds`). It emits only. LlamaIndex is imported only
inside :meth:`LlamaIndexRunner.run`.
"""

from __future__ import annotations

from typing import Any

from triage_plugins.adapter_kit.runner import Question, RunJob, Runner, Setup, run_rounds

_SUB = {"synonym": "LLMSynonymRetriever", "vector": "VectorContextRetriever"}


class LlamaIndexRunner(Runner):
    name = "llamaindex"
    # vector: the index's own vector store holds the embedded KG nodes (SimplePropertyGraphStore
    # has no vector search of its own)
    modes = ("synonym", "vector")
    requires = ("llama_index.core", "llamaindex", "llama-index-core")
    # LlamaIndex's default, index.as_retriever(), is a PGRetriever over both LLMSynonymRetriever and
    # VectorContextRetriever with include_text=True; each mode here isolates one of them, graph only.
    setups = {
        mode: Setup(
            f"PGRetriever with only {sub}, include_text=False (LlamaIndex default: "
            "LLMSynonymRetriever + VectorContextRetriever, include_text=True); the in-memory "
            "store lists triplets in insertion order (LlamaIndex's iterates a set, whose order "
            "follows PYTHONHASHSEED)",
            default=False,
        )
        for mode, sub in _SUB.items()
    }

    def retriever_of(self, mode: str) -> str:
        return f"PGRetriever({_SUB[mode]})"

    def _run(self, job: RunJob) -> None:
        from llama_index.core.instrumentation.dispatcher import instrument_tags

        from triage_llamaindex import instrument

        inst = instrument(manager=job.manager)
        try:
            engine = self._engine(job, inst)

            def ask(q: Question, qid: str) -> str:
                with instrument_tags({"query_id": qid}):
                    return str(engine.query(q.text).response)

            run_rounds(
                self.name,
                job.mode,
                job.questions,
                ask,
                lambda qid, score: inst.feedback(qid, score, source="gold"),
                job.manager.flush,
                feedback_rounds=job.feedback_rounds,
                progress=job.progress,
            )
        finally:
            inst.uninstrument()

    @staticmethod
    def _engine(job: RunJob, inst: Any) -> Any:
        """The index over the corpus (graph event emitted) and a query engine with the mode's sub-retriever."""
        from llama_index.core import PropertyGraphIndex
        from llama_index.core.indices.property_graph import LLMSynonymRetriever, VectorContextRetriever
        from llama_index.core.query_engine import RetrieverQueryEngine
        from llama_index.core.schema import TextNode

        from triage_llamaindex import TriageExtractionTap, TriageLLMPathExtractor, TriagePostprocessor
        from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

        llm, embed = OfflineLLM(answer="reader"), OfflineEmbedding()  # the same reader as every framework
        tick = job.progress(f"llamaindex/{job.mode}: index", 1)
        index = PropertyGraphIndex(
            nodes=[TextNode(id_=c.id, text=c.text) for c in job.corpus.chunks],
            property_graph_store=_insertion_ordered_store(),
            llm=llm,
            embed_model=embed,
            kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()],
        )
        inst.emit_graph(index)
        tick()
        store = index.property_graph_store
        sub = (
            LLMSynonymRetriever(store, include_text=False, llm=llm)
            if job.mode == "synonym"
            else VectorContextRetriever(
                store, include_text=False, embed_model=embed, vector_store=index.vector_store
            )
        )
        post = [TriagePostprocessor()] if job.feedback_rounds else []
        return RetrieverQueryEngine.from_args(
            index.as_retriever(sub_retrievers=[sub]), llm=llm, node_postprocessors=post
        )


def _insertion_ordered_store() -> Any:
    """LlamaIndex's ``SimplePropertyGraphStore`` listing triplets in the order they were added.

    Its ``LabelledPropertyGraph`` keeps triplets in a ``set`` of id strings, so ``get_triplets()``
    (and ``get_rel_map``'s ``limit`` cut) follow ``PYTHONHASHSEED``; compare rows must not. The
    relations dict keeps insertion order, which orders the set here; nothing else changes.
    """
    from llama_index.core.graph_stores import SimplePropertyGraphStore
    from llama_index.core.graph_stores.types import LabelledPropertyGraph

    class InsertionOrderedGraph(LabelledPropertyGraph):
        def get_triplets(self) -> list[Any]:
            order = {key: i for i, key in enumerate(self.relations)}
            key = self._get_relation_key
            ranked = sorted(
                self.triplets,
                key=lambda t: order.get(key(subj_id=t[0], rel_id=t[1], obj_id=t[2]), len(order)),
            )
            return [
                (self.nodes[s], self.relations[key(subj_id=s, rel_id=r, obj_id=o)], self.nodes[o])
                for s, r, o in ranked
            ]

    return SimplePropertyGraphStore(graph=InsertionOrderedGraph())
