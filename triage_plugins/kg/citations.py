"""Citation markers in generated answers, which name documents, not entities (issue #15 point 5).

Graph-RAG readers cite their sources inline and list them at the end; a common answer prompt asks
for ``[n]`` markers and a trailing section under ``### References`` with entries
``- [n] Document Title``. None of it is part of the answer's content: grounding "[1]" finds the
mention "1", and a title such as ``Ostrelia_history.txt`` would name an entity the answer never
stated. Recognized here:

* inline markers: ``[1]``, ``[1, 2]``, ``[1-3]``, ``[^1]``, ``[^1, ^2]``, and the source tags
  ``[KG]``, ``[DC]``, ``[KG/DC]`` (source tags of older answer prompts), each optionally followed by ``: n``;
* a trailing reference section: a line that is only a heading ``References``, ``Sources`` or
  ``Citations`` (Markdown ``#``, bold ``**…**`` or a trailing colon allowed) and everything after it;
* trailing footnote definitions (``[^1]: …`` lines) at the end of the text.

:func:`strip_citations` blanks them with spaces, so the offsets of every other character stay
valid (grounding spans point into the original answer).
"""

from __future__ import annotations

import re

__all__ = ["citation_spans", "strip_citations"]

_INLINE = re.compile(
    r"\[\s*\^?\d+(?:\s*[,;\-–]\s*\^?\d+)*\s*\]"  # [1] [1, 2] [1-3] [^1]
    r"|\[\s*(?:KG|DC)(?:\s*/\s*(?:KG|DC))?(?:\s*:\s*\d+)?\s*\]"  # [KG] [DC] [KG/DC] [KG: 3]
)
_HEADING = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*|__)?[ \t]*(?:references?|sources?|citations?)[ \t]*:?[ \t]*"
    r"(?:\*\*|__)?[ \t]*:?[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_FOOTNOTES = re.compile(r"(?:^[ \t]*\[\^\d+\]:[^\n]*(?:\n|\Z))+\s*\Z", re.MULTILINE)


def citation_spans(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` character spans of ``text`` that are citations, in order, disjoint."""
    spans: list[tuple[int, int]] = []
    end = len(text)
    heading = _HEADING.search(text)
    if heading is not None and heading.start() > 0:  # a section, not an answer that is only a title
        end = heading.start()
    foot = _FOOTNOTES.search(text, 0, end)
    if foot is not None and foot.start() > 0:
        end = foot.start()
    spans.extend(m.span() for m in _INLINE.finditer(text, 0, end))
    if end < len(text):
        spans.append((end, len(text)))
    return spans


def strip_citations(text: str) -> str:
    """``text`` with every citation span (:func:`citation_spans`) replaced by as many spaces."""
    spans = citation_spans(text)
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, stop in spans:
        parts.append(text[last:start])
        parts.append(" " * (stop - start))
        last = stop
    parts.append(text[last:])
    return "".join(parts)
