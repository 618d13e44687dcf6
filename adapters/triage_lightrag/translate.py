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

import dataclasses
import functools
import math
import re
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from triage_plugins import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GraphView,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.adapter_kit import coalesce_mentions, normalize_label, trusted_parts
from triage_plugins.adapter_kit.logprobs import span_logprobs

if TYPE_CHECKING:
    from triage_plugins.adapter_kit import Grounder

__all__ = [
    "DEFAULT_PREDICATE",
    "FRAMEWORK",
    "GRAPH_FIELD_SEP",
    "MODES",
    "SCORE_ATTRIBUTE",
    "TUPLE_DELIMITER",
    "extraction_event",
    "extraction_triples",
    "graph_view",
    "pin_keywords",
    "query_mentions",
    "relation_triple",
    "reroute",
    "retrieval_event",
    "retrieved_chunks",
    "retrieved_subgraph",
    "snapshot",
    "split_sources",
    "stored_scores",
    "triple_id",
]

FRAMEWORK = "lightrag"
MODES = ("local", "global", "hybrid", "mix", "naive")
# reroute "expand_hops": LightRAG has no multi-hop traversal; this is the next-wider mode.
WIDER_MODE = {"local": "hybrid", "global": "hybrid", "hybrid": "mix", "naive": "mix", "mix": "mix"}
SCORE_ATTRIBUTE = "triage_score"  # the edge attribute learned triple scores persist in

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
        out.append(ExtractedTriple(triple, span_logprobs(logprobs, start, end), fields[4] or None))
    return out


def extraction_event(
    run_id: str,
    chunk_id: str,
    record: Mapping[str, Any],
    completions: Iterable[str],
    *,
    normalize: Callable[[str], str] = str.strip,
    logprobs_of: Callable[[str], Sequence[tuple[str, float]] | None] = lambda _: None,
    model: str | None = None,
    temperature: Any = None,
) -> ExtractionEvent:
    """The extraction event of one chunk: the relation records of its cached completions.

    ``record`` is the chunk's ``text_chunks`` record; ``completions`` the ``return`` texts of its
    ``extract`` cache entries, first record of a pair kept; ``logprobs_of(completion)`` gives the
    completion's token pairs (see :mod:`triage_plugins.adapter_kit.logprobs`), or ``None``.
    """
    triples: dict[str, ExtractedTriple] = {}
    for text in completions:
        for et in extraction_triples(text, normalize=normalize, logprobs=logprobs_of(text)):
            triples.setdefault(et.triple.id, et)
    chunk = Chunk(
        chunk_id,
        str(record.get("full_doc_id") or record.get("file_path") or "unknown"),
        str(record.get("content") or ""),
        {"chunk_order_index": int(record.get("chunk_order_index") or 0)},
    )
    valid = isinstance(temperature, int | float) and temperature >= 0
    return ExtractionEvent(
        FRAMEWORK, run_id, chunk, tuple(triples.values()), model, float(temperature) if valid else None
    )


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


def stored_scores(edges: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Triple id -> the learned score an edge carries as :data:`SCORE_ATTRIBUTE` (persisted earlier)."""
    out: dict[str, float] = {}
    for e in edges:
        raw, src, tgt = e.get(SCORE_ATTRIBUTE), e.get("source"), e.get("target")
        if raw in (None, "") or not src or not tgt:
            continue
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
        if math.isfinite(value):
            out[triple_id(str(src), str(tgt))] = value
    return out


# --------------------------------------------------------------------------- retrieval


#: (src, tgt, keywords) of a retrieved relation -> its triple (``None``: not a relation), for
#: string fields: every query over one graph reads the same relations again.
_RETRIEVED: dict[tuple[str, str, str | None], Triple | None] = {}
_RETRIEVED_MAX = 65536
#: chunk id -> the chunk last retrieved under it (used while its file path and text are the same)
_CHUNKS: dict[str, Chunk] = {}


def _retrieved_triple(src: Any, tgt: Any, keywords: Any) -> Triple | None:
    """The triple of one payload relation, ``None`` for a self-loop or a missing end; remembered
    when its fields are strings (a lookup with other types then never matches: ``1 != "1"``)."""
    t = None if not src or not tgt or src == tgt else relation_triple(str(src), str(tgt), keywords)
    if type(src) is str and type(tgt) is str and (keywords is None or type(keywords) is str):
        if len(_RETRIEVED) >= _RETRIEVED_MAX:
            _RETRIEVED.clear()
        _RETRIEVED[(src, tgt, keywords)] = t
    return t


def retrieved_subgraph(data: Mapping[str, Any]) -> Subgraph:
    """K_S: the ``relationships`` of an ``aquery_data`` payload as triples, ``entities`` as V_S."""
    triples: list[Triple] = []
    seen: set[str] = set()
    memo = _RETRIEVED
    for r in data.get("relationships") or ():
        key = (r.get("src_id"), r.get("tgt_id"), r.get("keywords"))
        try:
            t = memo[key]  # type: ignore[index]
        except (KeyError, TypeError):  # not seen, or an unhashable field
            t = _retrieved_triple(*key)
        if t is not None and t.id not in seen:
            seen.add(t.id)
            triples.append(t)
    nodes = tuple(
        dict.fromkeys(str(e["entity_name"]) for e in data.get("entities") or () if e.get("entity_name"))
    )
    if all(n.strip() for n in nodes):  # triples are Triples with distinct ids by construction
        return Subgraph.trusted(tuple(triples), nodes)
    return Subgraph(tuple(triples), nodes)  # names the blank one


def retrieved_chunks(data: Mapping[str, Any]) -> tuple[Chunk, ...]:
    """The ``chunks`` of an ``aquery_data`` payload in rank order.

    LightRAG's payload names no document id for a chunk, so ``doc_id`` is its ``file_path`` (the
    citation LightRAG itself shows); the rank is the position in the tuple.
    """
    out: list[Chunk] = []
    seen: set[str] = set()
    memo = _CHUNKS
    for c in data.get("chunks") or ():
        cid = c.get("chunk_id")
        if not cid or cid in seen:
            continue
        seen.add(cid)
        doc, text = c.get("file_path") or "unknown_source", c.get("content") or ""
        chunk = memo.get(cid)
        # compared, not hashed: a chunk's text is long, and usually the very object read last time
        if chunk is None or chunk.text != text or chunk.doc_id != doc:
            chunk = _chunk(str(cid), str(doc), str(text))
            if type(cid) is str:
                if len(memo) >= _RETRIEVED_MAX:
                    memo.clear()
                memo[cid] = chunk
        out.append(chunk)
    return tuple(out)


def snapshot(result: Any) -> dict[str, Any]:
    """The parts of an ``aquery_data`` / ``aquery_llm`` payload an event needs, copied (the caller
    may mutate its own)."""
    if not isinstance(result, dict):
        return {}
    data = result.get("data") or {}
    keywords = (result.get("metadata") or {}).get("keywords") or {}
    return {
        "data": {k: list(data.get(k) or ()) for k in ("entities", "relationships", "chunks")},
        "metadata": {"keywords": {k: list(keywords.get(k) or ()) for k in ("high_level", "low_level")}},
    }


def query_mentions(
    grounder: Grounder | None, query: str, low: Sequence[Any], high: Sequence[Any]
) -> tuple[list[str], dict[str, str | None]]:
    """M_q and γ_q: the default grounder's mentions, LightRAG's low-level keywords, and its high-level
    keywords that name a node (themes that name none are not entity mentions), coalesced by the
    grounder's rule (TRIAGE §4.3.1). A keyword without letters or digits names nothing."""
    found: list[tuple[str, str | None]] = []
    if grounder is None:
        found.extend((kw.strip(), None) for kw in low if isinstance(kw, str) and normalize_label(kw))
    else:
        memo = _memo(grounder)
        grounded = _memoized(memo, "ground", query, grounder.ground)
        found.extend((m, grounded.grounding[m]) for m in grounded.mentions)
        for kw in low:
            if isinstance(kw, str) and normalize_label(kw):
                found.append((kw.strip(), _memoized(memo, "link", kw, grounder.link)))
        for kw in high:
            if isinstance(kw, str) and (node := _memoized(memo, "link", kw, grounder.link)) is not None:
                found.append((kw.strip(), node))
    coalesced = coalesce_mentions(found)
    return list(coalesced.mentions), dict(coalesced.grounding)


#: grounder -> {(what, text): its grounding or linked node}: a grounder is one graph version's,
#: immutable, so queries over it that repeat a question or a keyword reuse the answer.
_MEMOS: weakref.WeakKeyDictionary[Any, dict[tuple[str, str], Any]] = weakref.WeakKeyDictionary()
_MEMO_MAX = 4096


def _memo(grounder: Any) -> dict[tuple[str, str], Any]:
    """The memo of one grounder (made on first use; a fresh one, kept nowhere, for a grounder that
    takes no weak reference)."""
    try:
        memo = _MEMOS.get(grounder)
        if memo is None:
            memo = _MEMOS.setdefault(grounder, {})
    except TypeError:
        return {}
    return memo


def _memoized(memo: dict[tuple[str, str], Any], what: str, text: str, fn: Callable[[str], Any]) -> Any:
    """``fn(text)``, remembered in ``memo`` (emptied when full)."""
    key = (what, text)
    hit = memo.get(key, memo)
    if hit is not memo:
        return hit
    value = fn(text)
    if len(memo) >= _MEMO_MAX:
        memo.clear()
    memo[key] = value
    return value


def retrieval_event(
    query_id: str,
    query: str,
    mode: str,
    payload: Any,
    grounder: Grounder | None,
    scored: int,
    seconds: float,
) -> RetrievalEvent:
    """The retrieval event of one ``aquery_data`` payload (:func:`snapshot`).

    ``scored`` is what LightRAG's entity and relation vector queries returned (the RPC proxy).
    """
    payload = payload if isinstance(payload, dict) else {}
    data = payload.get("data") or {}
    keywords = (payload.get("metadata") or {}).get("keywords") or {}
    mentions, grounding = query_mentions(
        grounder, query, keywords.get("low_level") or (), keywords.get("high_level") or ()
    )
    if mode == "naive":
        expanded, note = 0, "naive mode: vector search over chunks only; no graph node is expanded"
    else:
        expanded = scored
        note = (
            "entities + relations returned by LightRAG's vector queries (top_k each); "
            "graph neighbours read afterwards are not counted"
        )
    values = (
        FRAMEWORK,
        query_id,
        query,
        tuple(mentions),
        grounding,
        retrieved_subgraph(data),
        (),
        retrieved_chunks(data),  # Chunks with distinct ids by construction
        expanded,
        note,
        seconds,
        mode if mode in MODES else "default",
        None,
    )
    if _checked(query_id, query, mentions, grounding, expanded, seconds):
        return RetrievalEvent.trusted(*values[:4], MappingProxyType(grounding), *values[5:])
    return RetrievalEvent(*values)  # names what is wrong


def _checked(
    query_id: Any, query: Any, mentions: list[str], grounding: dict[str, Any], expanded: Any, seconds: Any
) -> bool:
    """Whether the parts :func:`retrieval_event` does not build itself are in the form
    :meth:`RetrievalEvent.trusted` takes (else the checked constructor says what is wrong)."""
    return type(expanded) is int and expanded >= 0 and trusted_parts(query_id, query, mentions, grounding, seconds)


# --------------------------------------------------------------------------- gate


def pin_keywords(param: Any, result: Any) -> Any:
    """The same ``QueryParam`` with the keywords the retrieval used (no second keyword LLM call)."""
    if param.hl_keywords or param.ll_keywords or not isinstance(result, dict):
        return param
    keywords = (result.get("metadata") or {}).get("keywords") or {}
    high, low = list(keywords.get("high_level") or ()), list(keywords.get("low_level") or ())
    if not high and not low:
        return param
    return dataclasses.replace(param, hl_keywords=high, ll_keywords=low)


def reroute(param: Any, suggestion: Any) -> Any:
    """Apply a gate suggestion to a copy of ``param`` (documented in docs/lightrag.md).

    ``top_k`` / ``chunk_top_k``: set; ``widen_top_k``: multiply ``top_k`` and ``chunk_top_k``;
    ``mode``: switch to that mode; ``expand_hops`` > 0: switch to the next wider mode
    (local/global -> hybrid -> mix, naive -> mix).
    """
    s = dict(suggestion or {})
    changes: dict[str, Any] = {}
    factor = s.get("widen_top_k")
    if isinstance(factor, int | float) and factor > 0:
        changes["top_k"] = max(1, math.ceil(param.top_k * float(factor)))
        if param.chunk_top_k:
            changes["chunk_top_k"] = max(1, math.ceil(param.chunk_top_k * float(factor)))
    for name in ("top_k", "chunk_top_k"):
        if isinstance(s.get(name), int | float) and s[name] >= 1:
            changes[name] = int(s[name])
    if s.get("mode") in MODES:
        changes["mode"] = s["mode"]
    hops = s.get("expand_hops")
    if isinstance(hops, int | float) and hops > 0 and "mode" not in changes:
        changes["mode"] = WIDER_MODE.get(param.mode, param.mode)
    return dataclasses.replace(param, **changes) if changes else param
