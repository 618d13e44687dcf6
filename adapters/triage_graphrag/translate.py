"""GraphRAG 3.3 output tables and query contexts -> triage events, with ids that survive updates (DESIGN §3).

GraphRAG 3.3 gives entities and relationships a fresh uuid4 on every index run, and the short ids
in a query context (``human_readable_id``, the text-unit row label, the community number) are
positions in one run's tables. Ids here are stable instead:

- a **node** is the entity title (GraphRAG upper-cases titles; titles are unique in ``entities``);
- a **triple** is ``"SOURCE|TARGET"`` (:func:`triple_id`): the ordered pair of entity titles;
- a **chunk** is the text unit id (a SHA-512 of the chunk text).

**Merge rule.** The triple key is GraphRAG's own merge key. GraphRAG keeps one relationship per
ordered (source, target) pair and merges every new mention into it: extraction groups a run's
records by ``["source", "target"]`` (``extract_graph._merge_relationships``) and an incremental
update merges old and delta tables the same way (``update.relationships._update_and_merge_relationships``:
descriptions and ``text_unit_ids`` concatenated, the old ``id`` kept). GraphRAG relationships have
no predicate label, so the pair *is* the relation's signature: the key does not change when the
relationship is re-extracted, read from another chunk, summarized anew or merged by ``graphrag
update``, and learned scores stay on it. The text units a relationship was read from are kept as
data (``GraphView.sources``), not as identity; every per-chunk triple of an extraction event has the
id of the graph triple it is merged into.

**Old keys.** Before issue #16 the key was ``"SOURCE|TARGET|<12 hex>"`` (a digest of the text units,
:func:`legacy_triple_id`). :func:`stable_key` maps such a key to its pair; scores stored under old
keys are carried over by :func:`migrate_legacy_scores` (never deleted): a pair with no score of its
own gets the mean raw score of its old keys.

The triple's ``predicate`` is the relationship description (the summarized one in the graph, the
per-chunk one in extraction events).

A query context (what ``on_context`` receives) names rows by short ids: :func:`retrieval_event` maps
them back — local search gives entities (V_S), relationships (K_S) and sources (chunks, in context
order); global search gives reports, whose communities' relationships and text units become K_S and
the chunks; basic search gives sources only; DRIFT gives one local context per action, merged into
one event. Mentions and their grounding come from the default grounder over entity titles
(TRIAGE §4.3.1).
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from triage_plugins import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    GraphEvent,
    GraphView,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.adapter_kit.logprobs import span_logprobs, spells

if TYPE_CHECKING:
    import pandas as pd

    from triage_plugins.adapter_kit import Grounder

__all__ = [
    "FRAMEWORK",
    "GraphTables",
    "RecordLogprobs",
    "extraction_events",
    "generation_event",
    "legacy_triple_id",
    "migrate_legacy_scores",
    "record_logprobs",
    "retrieval_event",
    "stable_key",
    "triple_id",
]

log = logging.getLogger("triage.graphrag.tables")

FRAMEWORK = "graphrag"
NO_DESCRIPTION = "related to"


def triple_id(source: str, target: str) -> str:
    """``"SOURCE|TARGET"``: the stable key of GraphRAG's one relationship per ordered pair (merge rule above)."""
    return f"{str(source).strip()}|{str(target).strip()}"


def legacy_triple_id(source: str, target: str, text_unit_ids: Iterable[str]) -> str:
    """The key used before issue #16: ``"SOURCE|TARGET|<12 hex>"``, a digest of the sorted, distinct text units."""
    units = "\n".join(sorted({str(u) for u in text_unit_ids}))
    digest = hashlib.sha1(units.encode("utf-8")).hexdigest()[:12]
    return f"{source}|{target}|{digest}"


_LEGACY = re.compile(r"^(?P<pair>[^|]+\|[^|]+)\|[0-9a-f]{12}$")


def stable_key(key: str) -> str:
    """The stable key of ``key``: an old ``SOURCE|TARGET|<12 hex>`` key gives ``SOURCE|TARGET``; others are kept."""
    match = _LEGACY.match(key)
    return match.group("pair") if match else key


def migrate_legacy_scores(manager: Any, triple_ids: Iterable[str]) -> dict[str, float]:
    """Seed each of ``triple_ids`` that has no learned score with the mean raw score of its old-style keys.

    Old rows stay in the store (nothing is deleted); a pair that already has a score of its own keeps
    it. Returns the scores seeded (logged when any).
    """
    wanted = set(triple_ids)
    learned = manager.learned_scores("triple")
    old: dict[str, list[float]] = {}
    for key, raw in learned.items():
        pair = stable_key(key)
        if pair != key and pair in wanted and pair not in learned:
            old.setdefault(pair, []).append(raw)
    seeds = {pair: sum(values) / len(values) for pair, values in old.items()}
    if seeds and manager.seed_scores("triple", seeds):
        log.warning(
            "triage_graphrag: carried the scores of %d old-style triple keys (SOURCE|TARGET|digest) over to "
            "%d stable keys (SOURCE|TARGET); the old rows are kept",
            sum(len(v) for v in old.values()), len(seeds),
        )  # fmt: skip
    return seeds


def _list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, float) and math.isnan(value):
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _text(value: Any, default: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return default
    text = str(value).strip()
    return text or default


@dataclass
class GraphTables:
    """Lookups from one index run's tables to stable ids, plus the :class:`GraphView` of the graph.

    :param entities: the ``entities`` table (title, type, human_readable_id, text_unit_ids ...).
    :param relationships: the ``relationships`` table (id, human_readable_id, source, target,
        description, combined_degree, text_unit_ids).
    :param text_units: the ``text_units`` table (id, text, document_id); its index labels are the
        short ids local search shows.
    :param communities: the ``communities`` table (community, relationship_ids, text_unit_ids), optional.
    """

    triples: dict[str, Triple] = field(default_factory=dict)  # stable id -> triple
    by_uuid: dict[str, str] = field(default_factory=dict)  # relationship id (uuid) -> stable id
    by_short: dict[str, str] = field(default_factory=dict)  # human_readable_id -> stable id
    by_pair: dict[tuple[str, str], str] = field(default_factory=dict)  # (source, target) -> stable id
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # stable id -> text unit ids
    degree: dict[str, float] = field(default_factory=dict)  # stable id -> combined_degree
    entity_by_short: dict[str, str] = field(default_factory=dict)  # human_readable_id -> title
    entity_types: dict[str, str] = field(default_factory=dict)
    unit_by_short: dict[str, str] = field(default_factory=dict)  # index label -> text unit id
    chunks: dict[str, Chunk] = field(default_factory=dict)  # text unit id -> chunk
    unit_by_text: dict[str, str] = field(default_factory=dict)  # chunk text -> text unit id
    community_triples: dict[str, tuple[str, ...]] = field(default_factory=dict)
    community_units: dict[str, tuple[str, ...]] = field(default_factory=dict)
    row_ids: list[str] = field(default_factory=list)  # stable ids in the relationships frame's row order
    row_degrees: list[float] = field(default_factory=list)  # combined_degree in the same order
    frame_id: int | None = None  # id() of the relationships frame the tables were built from
    graph: GraphView = field(default_factory=lambda: GraphView(()))
    _grounder: Grounder | None = None

    @classmethod
    def from_frames(
        cls,
        entities: pd.DataFrame,
        relationships: pd.DataFrame,
        text_units: pd.DataFrame | None = None,
        communities: pd.DataFrame | None = None,
    ) -> GraphTables:
        out = cls()
        for row in entities.itertuples(index=False):
            title = str(row.title)
            out.entity_types[title] = _text(getattr(row, "type", None)) or None  # type: ignore[assignment]
            short = getattr(row, "human_readable_id", None)
            if short is not None:
                out.entity_by_short[str(short)] = title
        for row in relationships.itertuples(index=False):
            source, target = str(row.source), str(row.target)
            units = tuple(dict.fromkeys(str(u) for u in _list(getattr(row, "text_unit_ids", None))))
            tid = triple_id(source, target)
            out.triples[tid] = Triple(
                tid,
                source,
                _text(getattr(row, "description", None), NO_DESCRIPTION),
                target,
                out.entity_types.get(source),
                out.entity_types.get(target),
            )
            out.sources[tid] = units
            out.row_ids.append(tid)
            out.by_pair[(source, target)] = tid
            out.degree[tid] = float(getattr(row, "combined_degree", 0) or 0)
            out.row_degrees.append(out.degree[tid])
            uuid = getattr(row, "id", None)
            if uuid is not None:
                out.by_uuid[str(uuid)] = tid
            short = getattr(row, "human_readable_id", None)
            if short is not None:
                out.by_short[str(short)] = tid
        out.frame_id = id(relationships)
        if text_units is not None:
            for label, row in zip(text_units.index, text_units.itertuples(index=False), strict=True):
                uid = str(row.id)
                out.unit_by_short[str(label)] = uid
                doc = _text(getattr(row, "document_id", None), uid)
                out.chunks[uid] = Chunk(
                    uid, doc, str(row.text), {"row": int(getattr(row, "human_readable_id", 0) or 0)}
                )
                out.unit_by_text.setdefault(str(row.text), uid)
        if communities is not None:
            for row in communities.itertuples(index=False):
                key = str(row.community)
                out.community_triples[key] = tuple(
                    out.by_uuid[r]
                    for r in map(str, _list(getattr(row, "relationship_ids", None)))
                    if r in out.by_uuid
                )
                out.community_units[key] = tuple(str(u) for u in _list(getattr(row, "text_unit_ids", None)))
        out.graph = GraphView(
            out.triples.values(),
            nodes=list(out.entity_types),
            sources=out.sources,
        )
        return out

    @property
    def grounder(self) -> Grounder:
        """The default grounder over entity titles (built once; TRIAGE §4.3.1)."""
        if self._grounder is None:
            from triage_plugins.adapter_kit import shared_grounder

            self._grounder = shared_grounder(self.graph)
        return self._grounder

    def graph_event(self) -> GraphEvent:
        return GraphEvent(FRAMEWORK, self.graph)


# --------------------------------------------------------------------------- extraction


@dataclass(frozen=True, slots=True)
class RecordLogprobs:
    """Token log-probabilities of one relationship record of an extraction completion."""

    source: str
    target: str
    description: str
    logprobs: tuple[float, ...]


def _clean(text: str) -> str:
    """GraphRAG's ``clean_str``: strip, unescape HTML, drop control characters."""
    import html
    import re

    return re.sub(r"[\x00-\x1f\x7f-\x9f]", "", html.unescape(text.strip()))


def record_logprobs(content: str, tokens: Sequence[tuple[str, float]]) -> list[RecordLogprobs]:
    """Split a completion into GraphRAG relationship records and give each the log-probs of its tokens.

    Tokens are aligned to characters by concatenation; when they do not reproduce ``content``
    (a provider that normalizes tokens), nothing is returned rather than a misaligned guess.
    """
    if not spells(tokens, content):
        return []
    out: list[RecordLogprobs] = []
    start = 0
    for piece in content.split("##"):
        end = start + len(piece)
        # the record itself: from its "(" to its ")", without a trailing <|COMPLETE|> or blank lines
        lo = piece.find("(")
        hi = piece.rfind(")")
        span = (start + lo, start + hi + 1) if 0 <= lo < hi else (start, end)
        record = piece.strip()
        if record.startswith("("):
            record = record[1:]
        record = record.removesuffix("<|COMPLETE|>").strip().removesuffix(")")
        parts = record.split("<|>")
        if parts[0] == '"relationship"' and len(parts) >= 5:
            lps = span_logprobs(tokens, *span, skip_blank=True) or ()
            out.append(
                RecordLogprobs(_clean(parts[1].upper()), _clean(parts[2].upper()), _clean(parts[3]), lps)
            )
        start = end + 2
    return out


def extraction_events(
    raw_relationships: pd.DataFrame,
    text_units: pd.DataFrame,
    *,
    run_id: str,
    entity_types: Mapping[str, str | None] | None = None,
    logprobs: Mapping[str, Sequence[RecordLogprobs]] | None = None,
    model: str | None = None,
) -> list[ExtractionEvent]:
    """One :class:`ExtractionEvent` per text unit, from the ``raw_relationships`` snapshot.

    ``raw_relationships`` rows group one (source, target) pair across chunks with ``description``
    and ``text_unit_ids`` aligned list-for-list; each pair (description, text unit) is one
    per-chunk triple, with id :func:`triple_id` (source, target) — the id of the graph triple it is
    merged into.

    :param logprobs: text unit id -> the relationship records of its extraction completions with
        token log-probabilities (from the logprob-recording model); triples without a matching
        record get ``None`` (TCS is then N/A).
    """
    types = entity_types or {}
    per_unit: dict[str, list[ExtractedTriple]] = {str(u): [] for u in text_units["id"]}
    for row in raw_relationships.itertuples(index=False):
        source, target = str(row.source), str(row.target)
        descriptions = _list(row.description)
        units = [str(u) for u in _list(row.text_unit_ids)]
        if len(descriptions) != len(units):
            log.warning(
                "raw relationship %s -> %s: descriptions and text units are not aligned", source, target
            )
            descriptions = [descriptions[0] if descriptions else NO_DESCRIPTION] * len(units)
        for desc, unit in zip(descriptions, units, strict=True):
            desc = _text(desc, NO_DESCRIPTION)
            lps = None
            for rec in (logprobs or {}).get(unit, ()):
                if rec.source == source and rec.target == target and rec.description == desc and rec.logprobs:
                    lps = rec.logprobs
                    break
            triple = Triple(
                triple_id(source, target), source, desc, target, types.get(source), types.get(target)
            )
            per_unit.setdefault(unit, []).append(ExtractedTriple(triple, lps, desc))
    chunks = {
        str(row.id): Chunk(
            str(row.id),
            _text(getattr(row, "document_id", None), str(row.id)),
            str(row.text),
            {"row": int(getattr(row, "human_readable_id", 0) or 0)},
        )
        for row in text_units.itertuples(index=False)
    }
    return [
        ExtractionEvent(FRAMEWORK, run_id, chunks[unit], tuple(triples), model)
        for unit, triples in per_unit.items()
        if unit in chunks
    ]


# --------------------------------------------------------------------------- queries


def _column(frame: Any, name: str, n: int) -> list[Any]:
    """A frame's column as a list (``n`` ``None`` when it has no such column).

    Reads the column's array (``DataFrame._get_column_array``), the values ``frame[name].tolist()``
    gives: on pandas 3 building the Series first costs 3-4x more, on the host's query path
    (``benchmarks/RESULTS.md``). A duplicate column name, or a pandas without that method, takes the
    public path.
    """
    columns = frame.columns
    if name not in columns:
        return [None] * n
    loc = columns.get_loc(name)
    read = getattr(frame, "_get_column_array", None)
    if read is not None and isinstance(loc, int):
        return read(loc).tolist()
    return frame[name].tolist()


def _rows(context: Any, name: str, *columns: str) -> list[tuple[Any, ...]]:
    """The given columns of a context table, rows left out of the context (``in_context`` False) dropped."""
    if not isinstance(context, dict):
        return []
    frame = context.get(name)
    if frame is None or not hasattr(frame, "columns") or len(frame) == 0:
        return []
    n = len(frame)
    cols = [_column(frame, c, n) for c in columns]
    keep = _column(frame, "in_context", n)  # no such column: all None, all kept
    return [row for row, k in zip(zip(*cols, strict=True), keep, strict=True) if k is not False]


def _short(value: Any) -> str:
    text = str(value).strip()
    try:
        return str(int(float(text)))
    except ValueError:
        return text


def _by_short(table: Mapping[str, str], value: Any) -> str | None:
    """``table``'s entry for a short id as the context shows it (``"12"``), else as it normalizes
    (``"12.0"``, ``" 12"`` -> ``"12"``)."""
    hit = table.get(value) if isinstance(value, str) else None
    return hit if hit is not None else table.get(_short(value))


def _local_rows(
    t: GraphTables, context: Any, triples: dict[str, Triple], nodes: list[str], chunk_ids: list[str]
) -> None:
    """Add one local-search context's entities, relationships and sources (basic search: sources only)."""
    for short, title in _rows(context, "entities", "id", "entity"):
        title = str(title or _by_short(t.entity_by_short, short) or "").strip()
        if title:
            nodes.append(title)
    for short, source, target in _rows(context, "relationships", "id", "source", "target"):
        tid = _by_short(t.by_short, short) or t.by_pair.get((str(source), str(target)))
        if tid is not None:
            triples[tid] = t.triples[tid]
    for short, text in _rows(context, "sources", "id", "text"):
        uid = _by_short(t.unit_by_short, short)
        if uid is None or (text is not None and uid in t.chunks and t.chunks[uid].text != str(text)):
            uid = t.unit_by_text.get(str(text)) if text is not None else uid
        if uid is not None:
            chunk_ids.append(uid)


def retrieval_event(
    tables: GraphTables, context: Any, query: str, query_id: str, retriever: str, seconds: float
) -> RetrievalEvent:
    """The retrieval event of one query context.

    ``retriever`` is ``"local"``, ``"global"`` (``context`` with a ``reports`` table), ``"basic"``
    (``sources`` only) or ``"drift"`` (``context`` is the list of its actions' local contexts,
    merged: triples and nodes deduplicated, chunks in first-seen order).
    """
    t = tables
    triples: dict[str, Triple] = {}
    nodes: list[str] = []
    chunk_ids: list[str] = []
    if retriever == "global":
        for (short,) in _rows(context, "reports", "id"):
            key = _short(short)
            triples.update((i, t.triples[i]) for i in t.community_triples.get(key, ()) if i in t.triples)
            chunk_ids.extend(t.community_units.get(key, ()))
    else:
        for part in context if isinstance(context, list) else [context]:
            _local_rows(t, part, triples, nodes, chunk_ids)
    chunks = tuple(t.chunks[c] for c in dict.fromkeys(chunk_ids) if c in t.chunks)
    grounding = t.grounder.ground(query)
    return RetrievalEvent(
        FRAMEWORK,
        query_id,
        query,
        grounding.mentions,
        dict(grounding.grounding),
        Subgraph(tuple(triples.values()), tuple(dict.fromkeys(nodes))),
        (),
        chunks,
        None,
        "GraphRAG does not report how many entities its search scored",
        seconds,
        retriever,
    )


def generation_event(tables: GraphTables, query_id: str, answer: str, seconds: float) -> GenerationEvent:
    """The generation event of one answer, its mentions grounded over entity titles."""
    grounding = tables.grounder.ground_answer(answer)
    return GenerationEvent(
        FRAMEWORK, query_id, answer, grounding.mentions, dict(grounding.grounding), None, seconds
    )
