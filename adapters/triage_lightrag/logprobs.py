"""Token log-probabilities of LightRAG's extraction completions: the adapter kit's string convention.

LightRAG passes completions around as plain strings, so your ``llm_model_func`` returns a
:class:`LogprobText` and is decorated with :func:`capture_logprobs`; see
:mod:`triage_plugins.adapter_kit.logprobs` (where these live, shared by every adapter).
"""

from __future__ import annotations

from triage_plugins.adapter_kit.logprobs import (
    LogprobText,
    capture_logprobs,
    lookup_logprobs,
    record_logprobs,
)

__all__ = ["LogprobText", "capture_logprobs", "lookup_logprobs", "record_logprobs"]
