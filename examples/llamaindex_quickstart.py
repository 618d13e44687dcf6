"""LlamaIndex PropertyGraphIndex, observed and improved by triage — offline, a few seconds.

    python examples/llamaindex_quickstart.py [--store triage.sqlite]

1. ``LlamaIndexInstrumentor().instrument()`` puts triage's handlers on LlamaIndex's
   instrumentation dispatcher (``triage_llamaindex.instrument()`` is the same shortcut).
2. The index is built with ``TriageLLMPathExtractor`` + ``TriageExtractionTap`` (extraction events
   with token log-probabilities); the offline scripted LLM (the core's rule-based extractor) and
   hashing embedding stand in for real models.
3. A query runs through a query engine with ``TriagePostprocessor`` (EvoRAG reweighting on); a
   bad rating blames the triple the answer came from, and the next run ranks it last.
4. The TRIAGE metrics the core computed from the events are read back from the store.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from llama_index.core import PropertyGraphIndex
from llama_index.core.indices.property_graph import LLMSynonymRetriever
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import TextNode

from triage_llamaindex import (
    LlamaIndexInstrumentor,
    TriageExtractionTap,
    TriageLLMPathExtractor,
    TriagePostprocessor,
)
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

CORPUS = [
    "Nolan directed Inception.",
    "Nolan was born in London.",
    "Nolan directed Interstellar.",
    "Caine starred in Interstellar. Caine was born in London.",
]


def main(store_path: Path, *, temporary: bool = False) -> None:
    inst = LlamaIndexInstrumentor().instrument(store=store_path, reweight=True)

    llm, embed = OfflineLLM(), OfflineEmbedding()  # the core's rule-based extractor and hashing embedder
    index = PropertyGraphIndex(
        nodes=[TextNode(id_=f"chunk-{i}", text=text) for i, text in enumerate(CORPUS)],
        llm=llm,
        embed_model=embed,
        kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()],
    )
    inst.emit_graph(index)

    retriever = index.as_retriever(
        sub_retrievers=[LLMSynonymRetriever(index.property_graph_store, include_text=False, llm=llm)]
    )
    engine = RetrieverQueryEngine.from_args(retriever, llm=llm, node_postprocessors=[TriagePostprocessor()])

    question = "Tell me about Nolan"
    with inst.query("q1"):  # the id the retrieval, generation and feedback events share
        first = engine.query(question)
    print(f"Q: {question}\nA (before feedback): {first.response}")
    for node in first.source_nodes:
        print(f"   {node.score:.4f}  {node.node.get_content()}")

    inst.feedback("q1", 0.0, source="human", raw="wrong answer")
    inst.flush()  # events are delivered by a background worker; wait until the learner has it
    second = engine.query(question)
    print(f"A (after a bad rating): {second.response}")
    for node in second.source_nodes:
        print(f"   {node.score:.4f}  {node.node.get_content()}")

    inst.flush()
    print("\nmetrics recorded in", store_path)
    for row in inst.manager.store.metrics():
        if row.scope_id in ("q1", "llamaindex") and row.value is not None:
            print(f"   {row.scope:<6} {row.scope_id:<11} {row.name:<10} {row.value:.3f}")
    inst.uninstrument()  # removes the two handlers and closes the manager it created
    if temporary:
        print("(a temporary store, deleted at exit: pass --store FILE to keep it for `triage report FILE`)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, default=None, help="SQLite file (default: a temporary one)")
    args = parser.parse_args()
    if args.store is not None:
        main(args.store)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp) / "triage.sqlite", temporary=True)
