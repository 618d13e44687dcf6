"""The offline stand-ins an adapter's offline mode builds on (:mod:`triage_plugins.offline`), re-exported
for adapters, which import only the package face and :mod:`triage_plugins.adapter_kit`."""

from __future__ import annotations

from triage_plugins.offline.context_reader import NOTHING_FOUND, answer_from_context
from triage_plugins.offline.embedder import HashingEmbedder
from triage_plugins.offline.extractor import Record, extract_records
from triage_plugins.offline.keywords import query_names
from triage_plugins.offline.llm import ScriptedLLM, entity_rows, find_chunk_text

__all__ = [
    "NOTHING_FOUND",
    "HashingEmbedder",
    "Record",
    "ScriptedLLM",
    "answer_from_context",
    "entity_rows",
    "extract_records",
    "find_chunk_text",
    "query_names",
]
