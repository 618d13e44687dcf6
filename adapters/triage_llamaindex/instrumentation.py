"""Old home of the LlamaIndex instrumentation, kept so that old imports still work.

The adapter is :mod:`triage_llamaindex.instrument`
(:class:`~triage_llamaindex.instrument.LlamaIndexInstrumentor`); ``Instrumentation`` is its former name.
"""

from __future__ import annotations

from triage_llamaindex.instrument import FRAMEWORK, LlamaIndexInstrumentor, active_instrumentation, instrument

Instrumentation = LlamaIndexInstrumentor

__all__ = ["FRAMEWORK", "Instrumentation", "active_instrumentation", "instrument"]
