"""triage-plugins adapter for LlamaIndex ``PropertyGraphIndex`` (llama-index-core 0.14.x).

Observe::

    from triage_llamaindex import instrument, TriageExtractionTap, TriageLLMPathExtractor

    inst = instrument(store="triage.sqlite")           # or LlamaIndexInstrumentor().instrument(...)
    index = PropertyGraphIndex.from_documents(
        docs, kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()])
    with inst.query() as qid:                          # or instrument_tags({"query_id": ...})
        response = index.as_query_engine().query("Who directed Inception?")
    inst.feedback(qid, 1.0)                            # with reweight=True: learned before it returns

Improve: ``instrument(store=..., reweight=True)`` (or ``TriageConfig(reweight=True)``) so the
feedback learner answers ``triage_rerank``, then add ``TriagePostprocessor()`` to
``node_postprocessors`` (LlamaIndex's defaults, ``include_text=True`` and streaming included), or use
``TriageLLMSynonymRetriever`` / ``TriageVectorContextRetriever`` as sub-retrievers.

The modules follow the adapter skeleton: :mod:`~triage_llamaindex.instrument` (the instrumentor),
:mod:`~triage_llamaindex.translate` (LlamaIndex objects -> events), :mod:`~triage_llamaindex.reweight`
(priorities -> LlamaIndex's ranking), :mod:`~triage_llamaindex.answers` (generation events, streamed
ones included, and feedback), plus :mod:`~triage_llamaindex.extraction` (the components a user adds
to ``kg_extractors``). LlamaIndex is imported lazily: importing this package (or its
entry-point module ``plugin``) imports nothing from ``llama_index``.
"""

from __future__ import annotations

from typing import Any

from triage_llamaindex.instrument import LlamaIndexInstrumentor, instrument

Instrumentation = LlamaIndexInstrumentor  # the handle's former name

__all__ = [
    "Instrumentation",
    "LlamaIndexInstrumentor",
    "TriageExtractionTap",
    "TriageLLMPathExtractor",
    "TriageLLMSynonymRetriever",
    "TriagePostprocessor",
    "TriageVectorContextRetriever",
    "instrument",
    "persist_contributions",
]

_LOCATIONS = {
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
