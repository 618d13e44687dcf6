"""triage-plugins adapter for LlamaIndex ``PropertyGraphIndex`` (llama-index-core 0.14.x).

Observe::

    from triage_llamaindex import instrument, TriageExtractionTap, TriageLLMPathExtractor

    inst = instrument(store="triage.sqlite")           # handlers on LlamaIndex's root dispatcher
    index = PropertyGraphIndex.from_documents(
        docs, kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()])
    response = index.as_query_engine().query("Who directed Inception?")
    inst.feedback(inst.last_query_id, 1.0)             # or use instrument_tags({"query_id": ...})

Improve: add ``TriagePostprocessor()`` to ``node_postprocessors``, or use
``TriageLLMSynonymRetriever`` / ``TriageVectorContextRetriever`` as sub-retrievers, with
``TriageConfig(reweight=True)`` so the feedback learner answers ``triage_rerank``.

LlamaIndex is imported lazily: importing this package (or its entry-point module ``plugin``)
imports nothing from ``llama_index``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "Instrumentation",
    "TriageExtractionTap",
    "TriageLLMPathExtractor",
    "TriageLLMSynonymRetriever",
    "TriagePostprocessor",
    "TriageVectorContextRetriever",
    "instrument",
    "persist_contributions",
]

_LOCATIONS = {
    "Instrumentation": "triage_llamaindex.instrumentation",
    "instrument": "triage_llamaindex.instrumentation",
    "TriageExtractionTap": "triage_llamaindex.extraction",
    "TriageLLMPathExtractor": "triage_llamaindex.extraction",
    "TriagePostprocessor": "triage_llamaindex.reweight",
    "TriageLLMSynonymRetriever": "triage_llamaindex.reweight",
    "TriageVectorContextRetriever": "triage_llamaindex.reweight",
    "persist_contributions": "triage_llamaindex.reweight",
}


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'triage_llamaindex' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
