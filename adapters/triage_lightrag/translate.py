"""LightRAG 1.5.7 objects -> triage events: pure functions, no I/O (DESIGN §2 "an adapter only translates").

Decisions (documented in ``docs/lightrag.md``):

- **Triple ids.** LightRAG's graph is undirected and keyed by the entity pair, so a relation's id is
  the *sorted* pair ``"A|B"`` (:func:`triple_id`): the same edge has the same id whether LightRAG
  reports it as ``(A, B)`` or ``(B, A)``, at extraction, in the graph and at retrieval. Subject and
  object keep the orientation LightRAG reported.
- **Predicate.** The relation's keywords (LightRAG's closest thing to a relation label, merged with
  ``,`` across chunks), or ``"related_to"`` when there are none.
- **Provenance.** ``source_id`` fields are chunk ids joined by ``GRAPH_FIELD_SEP`` (``"<SEP>"``).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from triage_plugins.contract.events import Chunk, ExtractedTriple, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView

__all__ = [
    "DEFAULT_PREDICATE",
    "GRAPH_FIELD_SEP",
    "TUPLE_DELIMITER",
    "extraction_triples",
    "graph_view",
    "record_token_logprobs",
    "relation_triple",
    "retrieved_chunks",
    "retrieved_subgraph",
    "split_sources",
    "triple_id",
]

GRAPH_FIELD_SEP = "<SEP>"  # lightrag.constants.GRAPH_FIELD_SEP in 1.5.7 (a test checks it)
TUPLE_DELIMITER = "<|#|>"  # PROMPTS["DEFAULT_TUPLE_DELIMITER"]
COMPLETION_DELIMITER = "<|COMPLETE|>"
DEFAULT_PREDICATE = "related_to"

_LINE = re.compile(r"[^\n]+")


def triple_id(src: str, tgt: str) -> str:
    """Stable id of LightRAG's undirected edge between ``src`` and ``tgt``: the sorted pair ``"A|B"``."""
    a, b = (src, tgt) if src <= tgt else (tgt, src)
    return f"{a}|{b}"


def _predicate(keywords: Any) -> str:
    text = str(keywords or "").strip()
    return text or DEFAULT_PREDICATE


def relation_triple(
    src: str,
    tgt: str,
    keywords: Any = None,
    *,
    subject_type: str | None = None,
    object_type: str | None = None,
) -> Triple:
    """A LightRAG relation as a :class:`Triple` (id :func:`triple_id`, predicate = keywords).

    Triples are immutable, so a relation read again (every query reads the same edges) reuses one
    object instead of validating a new one.
    """
    return _triple(src, tgt, _predicate(keywords), subject_type or None, object_type or None)


@functools.lru_cache(maxsize=65536)
def _triple(src: str, tgt: str, predicate: str, subject_type: str | None, object_type: str | None) -> Triple:
    return Triple(triple_id(src, tgt), src, predicate, tgt, subject_type, object_type)


@functools.lru_cache(maxsize=8192)
def _chunk(chunk_id: str, doc_id: str, text: str) -> Chunk:
    return Chunk(chunk_id, doc_id, text)


def split_sources(source_id: Any) -> tuple[str, ...]:
    """Chunk ids of a ``source_id`` field (joined by ``GRAPH_FIELD_SEP``), duplicates dropped."""
    if not source_id:
        return ()
    return tuple(dict.fromkeys(s.strip() for s in str(source_id).split(GRAPH_FIELD_SEP) if s.strip()))


# --------------------------------------------------------------------------- extraction


def record_token_logprobs(
    pairs: Sequence[tuple[str, float]] | None, start: int, end: int
) -> tuple[float, ...] | None:
    """Log-probabilities of the tokens overlapping characters ``[start, end)`` of the completion.

    ``pairs`` are ``(token_text, logprob)`` whose texts concatenate to the completion; ``None`` when
    there are none or they do not cover the span (then TCS is N/A for the triple).
    """
    if not pairs:
        return None
    out: list[float] = []
    pos = 0
    for token, lp in pairs:
        nxt = pos + len(token)
        if nxt > start and pos < end:
            out.append(min(0.0, float(lp)))
        if pos >= end:
            break
        pos = nxt
    return tuple(out) if out and pos >= end else None


def extraction_triples(
    completion: str,
    *,
    normalize: Callable[[str], str] = str.strip,
    logprobs: Sequence[tuple[str, float]] | None = None,
    entity_types: Mapping[str, str] | None = None,
) -> list[ExtractedTriple]:
    """The relation records of one LightRAG text-mode extraction completion.

    Rows are ``relation<|#|>src<|#|>tgt<|#|>keywords<|#|>description``; entity names go through
    ``normalize`` (pass ``lightrag.utils.normalize_entity_name`` so ids match the graph). Self-loops
    and malformed rows are skipped, as LightRAG's parser skips them; a pair seen twice keeps its
    first record. Entity types come from the completion's own ``entity`` rows, else ``entity_types``.
    """
    types: dict[str, str] = dict(entity_types or {})
    rows: list[tuple[list[str], int, int]] = []
    for m in _LINE.finditer(completion):
        line = m.group().replace(COMPLETION_DELIMITER, "").strip()
        if TUPLE_DELIMITER not in line:
            continue
        fields = [f.strip() for f in line.split(TUPLE_DELIMITER)]
        kind = fields[0].strip("()\"' ").lower()
        if kind == "entity" and len(fields) == 4:
            name = normalize(fields[1])
            if name and fields[2]:
                types.setdefault(name, fields[2].lower())
        elif kind.startswith("relation") and len(fields) == 5:
            rows.append((fields, m.start(), m.end()))
    out: list[ExtractedTriple] = []
    seen: set[str] = set()
    for fields, start, end in rows:
        src, tgt = normalize(fields[1]), normalize(fields[2])
        if not src or not tgt or src == tgt:
            continue
        triple = relation_triple(src, tgt, fields[3], subject_type=types.get(src), object_type=types.get(tgt))
        if triple.id in seen:
            continue
        seen.add(triple.id)
        out.append(ExtractedTriple(triple, record_token_logprobs(logprobs, start, end), fields[4] or None))
    return out


# --------------------------------------------------------------------------- graph


def graph_view(nodes: Iterable[Mapping[str, Any]], edges: Iterable[Mapping[str, Any]]) -> GraphView:
    """The whole ``chunk_entity_relation_graph`` as a :class:`GraphView`.

    ``nodes`` / ``edges`` are what ``get_all_nodes()`` / ``get_all_edges()`` return (``id``,
    ``entity_type``; ``source``, ``target``, ``keywords``, ``source_id``). Edge provenance becomes
    ``sources``; isolated entities stay nodes.
    """
    node_ids: list[str] = []
    types: dict[str, str] = {}
    for n in nodes:
        nid = n.get("id") or n.get("entity_id")
        if not nid:
            continue
        node_ids.append(str(nid))
        if n.get("entity_type"):
            types[str(nid)] = str(n["entity_type"])
    triples: list[Triple] = []
    sources: dict[str, tuple[str, ...]] = {}
    for e in edges:
        src, tgt = e.get("source"), e.get("target")
        if not src or not tgt or src == tgt:
            continue
        t = relation_triple(
            str(src), str(tgt), e.get("keywords"), subject_type=types.get(src), object_type=types.get(tgt)
        )
        triples.append(t)
        sources.setdefault(t.id, split_sources(e.get("source_id")))
    return GraphView(triples, nodes=node_ids, sources=sources)


# --------------------------------------------------------------------------- retrieval


def retrieved_subgraph(data: Mapping[str, Any]) -> Subgraph:
    """K_S: the ``relationships`` of an ``aquery_data`` payload as triples, ``entities`` as V_S."""
    triples: list[Triple] = []
    seen: set[str] = set()
    for r in data.get("relationships") or ():
        src, tgt = r.get("src_id"), r.get("tgt_id")
        if not src or not tgt or src == tgt:
            continue
        t = relation_triple(str(src), str(tgt), r.get("keywords"))
        if t.id not in seen:
            seen.add(t.id)
            triples.append(t)
    nodes = tuple(
        dict.fromkeys(str(e["entity_name"]) for e in data.get("entities") or () if e.get("entity_name"))
    )
    return Subgraph(tuple(triples), nodes)


def retrieved_chunks(data: Mapping[str, Any]) -> tuple[Chunk, ...]:
    """The ``chunks`` of an ``aquery_data`` payload in rank order.

    LightRAG's payload names no document id for a chunk, so ``doc_id`` is its ``file_path`` (the
    citation LightRAG itself shows); the rank is the position in the tuple.
    """
    out: list[Chunk] = []
    seen: set[str] = set()
    for c in data.get("chunks") or ():
        cid = c.get("chunk_id")
        if not cid or cid in seen:
            continue
        seen.add(cid)
        out.append(_chunk(str(cid), str(c.get("file_path") or "unknown_source"), str(c.get("content") or "")))
    return tuple(out)
