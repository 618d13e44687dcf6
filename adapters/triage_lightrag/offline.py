"""LightRAG's extraction format for the core's scripted LLM (DESIGN §5): where LightRAG 1.5.7 puts the
chunk in its extraction prompt and how it parses the completion (``operate._process_extraction_result``):
one record per line, ``entity<|#|>name<|#|>type<|#|>description`` then
``relation<|#|>source<|#|>target<|#|>keywords<|#|>description``, closed by ``<|COMPLETE|>``. The predicate
travels as the relationship keywords. Imports nothing from LightRAG.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from triage_lightrag.translate import COMPLETION_DELIMITER, TUPLE_DELIMITER
from triage_plugins.adapter_kit.offline import Record, ScriptedLLM, entity_rows

__all__ = ["INPUT_MARKER", "format_lightrag", "scripted_extractor"]

INPUT_MARKER = re.compile(r"---Input Text---\s*\n```[^\n]*\n(.*?)\n```", re.DOTALL)
"""Where LightRAG's extraction prompt holds the chunk (the last match: worked examples come first)."""


def format_lightrag(records: Sequence[Record]) -> str:
    """LightRAG's delimited records: entity rows, relation rows, then ``<|COMPLETE|>``."""
    d = TUPLE_DELIMITER
    lines = [f"entity{d}{name}{d}{type_}{d}{desc}" for name, type_, desc in entity_rows(records)]
    lines += [f"relation{d}{r.subject}{d}{r.object}{d}{r.predicate}{d}{r.description}" for r in records]
    lines.append(COMPLETION_DELIMITER)
    return "\n".join(lines)


def scripted_extractor(known_chunks: Iterable[str] = ()) -> ScriptedLLM:
    """The core's scripted LLM answering LightRAG extraction prompts (:meth:`ScriptedLLM.complete`)."""
    return ScriptedLLM(tuple(known_chunks), formatter=format_lightrag, markers=(INPUT_MARKER,))
