"""Old home of the LightRAG instrumentation, kept so that old imports still work.

The adapter is :mod:`triage_lightrag.instrument` (:class:`~triage_lightrag.instrument.LightRAGInstrumentor`);
``Instrumentation`` is its former name.
"""

from __future__ import annotations

from triage_lightrag.instrument import FRAMEWORK, GatedAnswer, LightRAGInstrumentor, instrument
from triage_lightrag.translate import MODES, SCORE_ATTRIBUTE, reroute

Instrumentation = LightRAGInstrumentor
_reroute = reroute

__all__ = ["FRAMEWORK", "MODES", "SCORE_ATTRIBUTE", "GatedAnswer", "Instrumentation", "instrument"]
