"""triage-plugins adapter for LightRAG (``lightrag-hku`` 1.5.7): drop-in instrumentation and write-back.

::

    from triage_lightrag import instrument      # or LightRAGInstrumentor().instrument(rag, ...)

    inst = instrument(rag)                     # an initialized LightRAG instance
    with inst.query() as qid:
        await rag.aquery("Who directed Inception?")
    inst.feedback(qid, 1.0)                    # score in [0, 1]

See ``docs/lightrag.md``. The modules follow the adapter skeleton: :mod:`~triage_lightrag.instrument`
(the instrumentor), :mod:`~triage_lightrag.translate` (LightRAG objects -> events),
:mod:`~triage_lightrag.reweight` (priorities -> LightRAG's ranking knobs). LightRAG is imported
lazily, only inside functions: this package and :mod:`triage_lightrag.plugin` (the entry point)
import nothing from it.
"""

from __future__ import annotations

from triage_lightrag.instrument import GatedAnswer, LightRAGInstrumentor, instrument
from triage_plugins.adapter_kit.logprobs import LogprobText, capture_logprobs, record_logprobs

Instrumentation = LightRAGInstrumentor  # the handle's former name

__all__ = [
    "GatedAnswer",
    "Instrumentation",
    "LightRAGInstrumentor",
    "LogprobText",
    "capture_logprobs",
    "instrument",
    "record_logprobs",
]
