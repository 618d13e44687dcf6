"""The scripted LLM: answers an extraction prompt with the rule-based extractor (DESIGN §5).

An adapter plugs :class:`ScriptedLLM` in where its framework expects a completion function and gives it
the two things that are the framework's own: where the framework puts the input text in its extraction
prompt (``markers``, regular expressions whose first group is the text) and how the framework parses
the completion (``formatter``, records -> text). The scripted LLM finds the chunk inside the prompt
(:func:`find_chunk_text`), runs :func:`~triage_plugins.offline.extractor.extract_records` on it and
formats the records with the formatter. Each adapter's ``offline`` module holds its format, checked
against the framework's installed parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from triage_plugins.contract.events import Chunk
from triage_plugins.offline.extractor import Record, extract_records

__all__ = ["Formatter", "ScriptedLLM", "entity_rows", "find_chunk_text"]

Formatter = Callable[[Sequence[Record]], str]
"""Records -> the completion text a framework's extraction parser reads."""


def entity_rows(records: Sequence[Record]) -> list[tuple[str, str, str]]:
    """Distinct entities in first-mention order as ``(name, type, description)``; the description is
    ``"<name> (<type>). "`` followed by the sentences that mention it (for formats with entity rows)."""
    types: dict[str, str] = {}
    sentences: dict[str, list[str]] = {}
    for r in records:
        for name, type_ in ((r.subject, r.subject_type), (r.object, r.object_type)):
            types.setdefault(name, type_)
            said = sentences.setdefault(name, [])
            if r.evidence not in said:
                said.append(r.evidence)
    return [(name, types[name], f"{name} ({types[name]}). {' '.join(sentences[name])}") for name in types]


def find_chunk_text(
    prompt: str, known_chunks: Iterable[Chunk | str] = (), markers: Sequence[re.Pattern[str]] = ()
) -> str | None:
    """The input text inside an extraction prompt, or ``None`` when there is none.

    :param markers: where the framework puts the input text (first group); tried in order, the last
        match of a marker wins (worked examples come before the real input). When the text found equals
        a known chunk, that chunk's exact text is returned.

    Without a marker match, the longest known chunk contained in the prompt is returned.
    """
    texts = [c.text if isinstance(c, Chunk) else c for c in known_chunks]
    for marker in markers:
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
    :param formatter: records -> completion in the framework's format (:meth:`complete`).
    :param markers: the framework's input-text markers (:func:`find_chunk_text`).
    """

    def __init__(
        self,
        known_chunks: Iterable[Chunk | str] = (),
        extractor: Callable[[str], list[Record]] = extract_records,
        *,
        formatter: Formatter | None = None,
        markers: Sequence[re.Pattern[str]] = (),
    ) -> None:
        self.known_chunks = tuple(known_chunks)
        self.extractor = extractor
        self.formatter = formatter
        self.markers = tuple(markers)
        self.calls = 0

    def records(self, prompt: str) -> list[Record]:
        """The records of the chunk found in ``prompt`` (none when no chunk is found)."""
        self.calls += 1
        text = find_chunk_text(prompt, self.known_chunks, self.markers)
        return [] if text is None else self.extractor(text)

    def complete(self, prompt: str) -> str:
        """The extraction completion for ``prompt``: its records in the framework's format."""
        if self.formatter is None:
            raise TypeError("ScriptedLLM.complete needs a formatter (records -> the framework's format)")
        return self.formatter(self.records(prompt))
