"""A scripted LLM *reader* for frameworks that hand the model a text context (DESIGN §5).

Many frameworks answer from a prompt that holds the retrieved context as text (relationship
descriptions, triplet lines, chunk texts). :func:`answer_from_context` is what the
offline stand-in LLM of each adapter says to such a prompt: it reads the facts back out of the
context (sentences through the rule-based extractor; ``A -> rel -> B`` and ``(A, rel, B)`` lines
as written), builds the paths from the question's entities through them, and answers with the
relation-aware :class:`~triage_plugins.offline.reader.ExtractiveReader` — so every framework is
answered by the same reader, from its own retrieved context only.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.offline.extractor import extract_records
from triage_plugins.offline.reader import NO_ANSWER, ExtractiveReader

__all__ = ["NOTHING_FOUND", "answer_from_context", "context_triples"]

NOTHING_FOUND = "I found nothing relevant in the knowledge base."

_ARROW = re.compile(r"^\s*(?:[-*]\s*)?([^\n>]+?)\s*->\s*([^\n>]+?)\s*->\s*([^\n]+?)\s*$", re.MULTILINE)
_TUPLE = re.compile(r"\(\s*([^,()\n]+?)\s*,\s*([^,()\n]+?)\s*,\s*([^,()\n]+?)\s*\)")
_MAX_PATHS = 400


def context_triples(context: str) -> list[Triple]:
    """The facts a context states: rule-extractor sentences, arrow lines and (s, p, o) tuples."""
    out: dict[str, Triple] = {}
    for r in extract_records(context.replace("<SEP>", ". ")):
        t = Triple.of(r.subject, r.predicate, r.object, subject_type=r.subject_type, object_type=r.object_type)
        out.setdefault(t.id, t)
    for pattern in (_ARROW, _TUPLE):
        for s, p, o in pattern.findall(context):
            s, p, o = s.strip(" \"'"), p.strip(" \"'").lower().replace(" ", "_"), o.strip(" \"'.")
            if s and p and o:
                t = Triple.of(s, p, o)
                out.setdefault(t.id, t)
    return list(out.values())


def _paths(graph: GraphView, starts: Iterable[str], max_hops: int) -> list[list[Triple]]:
    """Simple paths (as triples, direction-free) from ``starts``, shortest first, bounded in count."""
    found: list[list[Triple]] = []
    queue: deque[tuple[str, list[Triple], set[str]]] = deque((s, [], {s}) for s in starts if graph.has_node(s))
    while queue and len(found) < _MAX_PATHS:
        node, path, seen = queue.popleft()
        for t in graph.incident_triples(node):
            nxt = t.object if t.subject == node else t.subject
            if nxt in seen:
                continue
            new = [*path, t]
            found.append(new)
            if len(new) < max_hops:
                queue.append((nxt, new, seen | {nxt}))
    return found


def answer_from_context(question: str, context: str, *, relations: Iterable[str] | None = None, max_hops: int = 3) -> str:
    """The offline reader's answer to ``question`` from ``context`` alone (module docstring)."""
    from triage_plugins.kg.grounding import Grounder

    triples = context_triples(context)
    if not triples:
        return NOTHING_FOUND
    graph = GraphView(triples)
    topic = list(Grounder(graph).ground(question).nodes)
    if not topic:
        return NOTHING_FOUND
    reader = ExtractiveReader(relations if relations is not None else sorted({t.predicate for t in triples}))
    answer = reader.answer(question, _paths(graph, topic, max_hops), topic)
    return answer.text if answer.text and answer.text != NO_ANSWER else NOTHING_FOUND
