"""The scripted LLM: answers a framework's extraction prompt with the rule-based extractor.

The framework adapters plug :class:`ScriptedLLM` in where the framework expects a completion
function. It finds the chunk inside the framework's prompt (:func:`find_chunk_text`), runs
:func:`~triage_plugins.offline.extractor.extract_records` on it and formats the records the way that
framework parses them (see ``shared/FRAMEWORKS.md``, checked against the installed parsers):

- LightRAG 1.5.7 (``operate._process_extraction_result``): one record per line,
  ``entity<|#|>name<|#|>type<|#|>description`` then
  ``relation<|#|>source<|#|>target<|#|>keywords<|#|>description``, closed by ``<|COMPLETE|>``;
- GraphRAG 3.3.0 (``GraphExtractor._process_result``): records joined by ``##``,
  ``("entity"<|>name<|>type<|>description)`` and
  ``("relationship"<|>source<|>target<|>description<|>strength)``, closed by ``<|COMPLETE|>``;
- LlamaIndex 0.14 (``default_parse_triplets_fn``): one ``(subject, predicate, object)`` per line.

The predicate travels as LightRAG's relationship keywords, as the first words of GraphRAG's
relationship description (``"directed_by: <sentence>"``) and as LlamaIndex's predicate.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from triage_plugins.contract.events import Chunk
from triage_plugins.offline.extractor import Record, extract_records

__all__ = [
    "ScriptedLLM",
    "find_chunk_text",
    "format_graphrag",
    "format_lightrag",
    "format_llamaindex",
]

LIGHTRAG_TUPLE = "<|#|>"
GRAPHRAG_TUPLE = "<|>"
GRAPHRAG_RECORD = "##"
COMPLETE = "<|COMPLETE|>"

# Where each framework puts the input text in its extraction prompt (the last match wins, since
# worked examples come before the real input).
_MARKERS: tuple[re.Pattern[str], ...] = (
    re.compile(r"---Input Text---\s*\n```[^\n]*\n(.*?)\n```", re.DOTALL),  # LightRAG
    re.compile(r"-Real Data-.*?\nText:\s?(.*?)\n#{6,}\s*\nOutput:", re.DOTALL),  # GraphRAG
    re.compile(r"\nText: ((?:(?!\nText: ).)*?)\n(?:Triplets|Output):\s*\Z", re.DOTALL),  # LlamaIndex
)


def _entities(records: Sequence[Record]) -> list[tuple[str, str, str]]:
    """Distinct entities in first-mention order, each with a description from its sentences."""
    types: dict[str, str] = {}
    sentences: dict[str, list[str]] = {}
    for r in records:
        for name, type_ in ((r.subject, r.subject_type), (r.object, r.object_type)):
            types.setdefault(name, type_)
            said = sentences.setdefault(name, [])
            if r.evidence not in said:
                said.append(r.evidence)
    return [(name, types[name], f"{name} ({types[name]}). {' '.join(sentences[name])}") for name in types]


def format_lightrag(records: Sequence[Record]) -> str:
    """LightRAG's delimited records: entity rows, relation rows, then ``<|COMPLETE|>``."""
    d = LIGHTRAG_TUPLE
    lines = [f"entity{d}{name}{d}{type_}{d}{desc}" for name, type_, desc in _entities(records)]
    lines += [f"relation{d}{r.subject}{d}{r.object}{d}{r.predicate}{d}{r.description}" for r in records]
    lines.append(COMPLETE)
    return "\n".join(lines)


def format_graphrag(records: Sequence[Record], *, strength: int = 1) -> str:
    """GraphRAG's ``("entity"<|>…)`` / ``("relationship"<|>…)`` tuples joined by ``##``."""
    d = GRAPHRAG_TUPLE
    rows = [f'("entity"{d}{name}{d}{type_}{d}{desc})' for name, type_, desc in _entities(records)]
    rows += [
        f'("relationship"{d}{r.subject}{d}{r.object}{d}{r.predicate}: {r.description}{d}{strength})'
        for r in records
    ]
    return f"\n{GRAPHRAG_RECORD}\n".join(rows) + ("\n" if rows else "") + COMPLETE


def _plain(text: str) -> str:
    # LlamaIndex splits a triplet on commas and stops at the first ")": keep them out of the fields.
    return re.sub(r"\s+", " ", re.sub(r"[,()]", " ", text)).strip()


def format_llamaindex(records: Sequence[Record]) -> str:
    """LlamaIndex's ``(subject, predicate, object)`` lines."""
    return "\n".join(f"({_plain(r.subject)}, {_plain(r.predicate)}, {_plain(r.object)})" for r in records)


def find_chunk_text(prompt: str, known_chunks: Iterable[Chunk | str] = ()) -> str | None:
    """The input text inside a framework's extraction prompt, or ``None`` when there is none.

    The framework's own input marker is tried first (the last match, after any worked examples);
    when it equals a known chunk, that chunk's exact text is returned. Without a marker, the longest
    known chunk contained in the prompt is returned.
    """
    texts = [c.text if isinstance(c, Chunk) else c for c in known_chunks]
    for marker in _MARKERS:
        matches = marker.findall(prompt)
        if matches:
            region = matches[-1].strip()
            for text in texts:
                if text.strip() == region:
                    return text
            return region
    contained = [t for t in texts if t.strip() and t in prompt]
    return max(contained, key=len) if contained else None


class ScriptedLLM:
    """A deterministic stand-in for an extraction LLM (DESIGN §5).

    :param known_chunks: the corpus chunks, used to recognise the input text in a prompt.
    :param extractor: text -> records (the rule-based extractor by default).
    """

    def __init__(
        self,
        known_chunks: Iterable[Chunk | str] = (),
        extractor: Callable[[str], list[Record]] = extract_records,
    ) -> None:
        self.known_chunks = tuple(known_chunks)
        self.extractor = extractor
        self.calls = 0

    def records(self, prompt: str) -> list[Record]:
        """The records of the chunk found in ``prompt`` (none when no chunk is found)."""
        self.calls += 1
        text = find_chunk_text(prompt, self.known_chunks)
        return [] if text is None else self.extractor(text)

    def lightrag(self, prompt: str) -> str:
        """A LightRAG extraction completion for ``prompt``."""
        return format_lightrag(self.records(prompt))

    def graphrag(self, prompt: str) -> str:
        """A GraphRAG extraction completion for ``prompt``."""
        return format_graphrag(self.records(prompt))

    def llamaindex(self, prompt: str) -> str:
        """A LlamaIndex triplet-extraction completion for ``prompt``."""
        return format_llamaindex(self.records(prompt))
