"""triage-plugins adapter for LightRAG (``lightrag-hku`` 1.5.7): drop-in instrumentation and write-back.

::

    from triage_lightrag import instrument

    inst = instrument(rag)                     # an initialized LightRAG instance
    await rag.aquery("Who directed Inception?")
    inst.feedback(inst.query_id, 1.0)          # score in [0, 1]

See ``docs/lightrag.md``. LightRAG is imported lazily, only inside this package's functions; this
module and :mod:`triage_lightrag.plugin` (the entry point) import nothing heavy.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GatedAnswer",
    "Instrumentation",
    "LogprobText",
    "capture_logprobs",
    "instrument",
    "record_logprobs",
]

_LAZY = {
    "GatedAnswer": "triage_lightrag.instrumentation",
    "Instrumentation": "triage_lightrag.instrumentation",
    "instrument": "triage_lightrag.instrumentation",
    "LogprobText": "triage_lightrag.logprobs",
    "capture_logprobs": "triage_lightrag.logprobs",
    "record_logprobs": "triage_lightrag.logprobs",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)
