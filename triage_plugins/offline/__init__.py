"""Deterministic offline stand-ins (DESIGN §5): world generator, rule-based extractor, scripted LLM,
hashing embedder and extractive reader. Seeded, no network, no model weights."""

from triage_plugins.offline.embedder import HashingEmbedder
from triage_plugins.offline.extractor import Record, extract_chunk, extract_records, extraction_event
from triage_plugins.offline.llm import Formatter, ScriptedLLM, entity_rows, find_chunk_text
from triage_plugins.offline.reader import NO_ANSWER, ExtractiveReader, ReaderAnswer
from triage_plugins.offline.world import (
    Document,
    Entity,
    NoiseConfig,
    NoiseRecord,
    Question,
    Statement,
    World,
    generate_world,
)

__all__ = [
    "NO_ANSWER",
    "Document",
    "Entity",
    "ExtractiveReader",
    "Formatter",
    "HashingEmbedder",
    "NoiseConfig",
    "NoiseRecord",
    "Question",
    "ReaderAnswer",
    "Record",
    "ScriptedLLM",
    "Statement",
    "World",
    "extract_chunk",
    "extract_records",
    "extraction_event",
    "entity_rows",
    "find_chunk_text",
    "generate_world",
]
