"""Old home of the GraphRAG translation layer, kept so that old imports still work: see
:mod:`triage_graphrag.translate`."""

from __future__ import annotations

from triage_graphrag.translate import (
    FRAMEWORK,
    GraphTables,
    RecordLogprobs,
    extraction_events,
    record_logprobs,
    triple_id,
)

__all__ = ["FRAMEWORK", "GraphTables", "RecordLogprobs", "extraction_events", "record_logprobs", "triple_id"]
