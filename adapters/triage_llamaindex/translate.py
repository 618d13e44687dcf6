"""LlamaIndex objects -> triage events: the pure translation layer of the adapter.

Nothing here is computed beyond reading LlamaIndex's own data structures:

- a property graph store's triplets become :class:`~triage_plugins.contract.events.Triple` objects with
  stable ids ``"subject|label|object"`` and each relation's **own** provenance
  (``Relation.properties["triplet_source_id"]``), not the subject entity's, which LlamaIndex
  overwrites with the last chunk mentioning the entity;
- the text of retrieved nodes (``"s -> p -> o"`` lines, alone or under the ``include_text``
  preamble) is parsed back into those triples by exact lookup of the rendered line, and an
  ``include_text`` node is split into its preamble, its triplet lines and the chunk text attached
  (:func:`split_attached`);
- chunk ids: LlamaIndex's generated node ids (UUIDs, new on every build) are replaced by a hash of
  the chunk's text (:func:`chunk_key`), so what is learned about a chunk survives a rebuild; ids
  the user set are kept;
- a completion's token log-probabilities are sliced to the tokens inside one triple's record
  (the ``(s, p, o)`` line), so TCS (TRIAGE §4.1.1) can be computed by the core.

Targets llama-index-core 0.14.25.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from triage_plugins import Chunk, GraphView, Triple
from triage_plugins.adapter_kit.logprobs import span_logprobs

__all__ = [
    "KnownGraph",
    "build_known_graph",
    "AttachedText",
    "chosen_token_offsets",
    "chunk_key",
    "chosen_tokens",
    "entity_type",
    "graph_fingerprint",
    "node_chunks",
    "parse_triples",
    "record_span",
    "retriever_name",
    "retriever_store",
    "split_attached",
    "store_of",
    "store_triplets",
    "triple_of",
    "triple_logprobs",
]

TRIPLET_SOURCE_KEY = "triplet_source_id"  # llama_index.core.graph_stores.types.TRIPLET_SOURCE_KEY
KG_SOURCE_REL = "SOURCE"  # llama_index.core.graph_stores.types.KG_SOURCE_REL
GENERIC_ENTITY_LABEL = "entity"  # EntityNode's default label: carries no type
ARROW = " -> "
_ARROW_LINE = re.compile(r"^(.+?) -> (.+?) -> (.+)$")


# --------------------------------------------------------------------------- chunk ids


CONTENT_ID_PREFIX = "chunk-"


def chunk_key(node_id: str, text: str) -> str:
    """triage's id for a LlamaIndex chunk: a hash of its text when LlamaIndex generated the id.

    LlamaIndex's node parsers name chunks with ``uuid4()``, so the same text gets a new id on every
    build. A node id that parses as a UUID is replaced by ``"chunk-" + sha256(text)[:16]``; any
    other id (one the user set, e.g. ``TextNode(id_="c0")``) is kept as it is.
    """
    try:
        uuid.UUID(node_id)
    except (ValueError, TypeError, AttributeError):
        return node_id
    return CONTENT_ID_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


# --------------------------------------------------------------------------- graph store


def entity_type(node: Any) -> str | None:
    """The entity type LlamaIndex keeps in ``EntityNode.label`` (``None`` for the generic label)."""
    label = getattr(node, "label", None)
    if not isinstance(label, str) or not label.strip() or label == GENERIC_ENTITY_LABEL:
        return None
    return label


def triple_of(subject: Any, relation: Any, obj: Any) -> Triple:
    """The triage triple of one LlamaIndex triplet ``(EntityNode, Relation, EntityNode)``.

    Triples are immutable, so a triplet retrieved again (queries over one graph retrieve the same
    ones) reuses one object: it is validated, and its JSON written, once.
    """
    return _reused(_triple, subject.id, relation.label, obj.id, entity_type(subject), entity_type(obj))


def _reused(build: Any, *args: Any) -> Any:
    """``build(*args)`` from its memo when every argument is a string or ``None`` (else built anew:
    the event's own checks then name what is wrong)."""
    if all(a is None or type(a) is str for a in args):
        return build(*args)
    return build.__wrapped__(*args)


@functools.lru_cache(maxsize=65536)
def _triple(subject: str, predicate: str, obj: str, subject_type: str | None, object_type: str | None) -> Triple:
    return Triple.of(subject, predicate, obj, subject_type=subject_type, object_type=object_type)


@functools.lru_cache(maxsize=8192)
def _chunk(chunk_id: str, doc_id: str, text: str) -> Chunk:
    return Chunk(chunk_id, doc_id, text)


def chunk_of(chunk_id: str, doc_id: str, text: str) -> Chunk:
    """A retrieved chunk, one object per distinct chunk (see :func:`triple_of`)."""
    return _reused(_chunk, chunk_id, doc_id, text)


def store_triplets(store: Any) -> list[tuple[Any, Any, Any]]:
    """Every ``(EntityNode, Relation, EntityNode)`` triplet in a property graph store.

    ``SimplePropertyGraphStore.get_triplets()`` returns nothing without a filter, so the in-memory
    store is read through its public ``graph`` model; other stores through ``get`` + ``get_rel_map``.
    """
    graph = getattr(store, "graph", None)
    if graph is not None and callable(getattr(graph, "get_triplets", None)):
        triplets = graph.get_triplets()
    else:
        triplets = store.get_rel_map(store.get(), depth=1, limit=sys.maxsize, ignore_rels=[KG_SOURCE_REL])
    return [t for t in triplets if t[1].label != KG_SOURCE_REL and _is_entity(t[0]) and _is_entity(t[2])]


def _is_entity(node: Any) -> bool:
    return hasattr(node, "name")  # EntityNode; ChunkNode has ``text`` instead


def graph_fingerprint(store: Any) -> tuple[int, int] | None:
    """A cheap change marker for the in-memory store (``None``: unknown, rebuild on request only)."""
    graph = getattr(store, "graph", None)
    triplets = getattr(graph, "triplets", None)
    nodes = getattr(graph, "nodes", None)
    if triplets is None or nodes is None:
        return None
    return (len(triplets), len(nodes))


@dataclass
class KnownGraph:
    """The adapter's read-only snapshot of one property graph store.

    :param view: the graph view sent in :class:`~triage_plugins.contract.events.GraphEvent`.
    :param by_line: rendered triplet line (both LlamaIndex renderings) -> triple.
    :param sources: triple id -> chunk ids, the relation's own source first.
    :param fingerprint: :func:`graph_fingerprint` at build time.
    """

    view: GraphView
    by_line: dict[str, Triple]
    sources: dict[str, tuple[str, ...]]
    fingerprint: tuple[int, int] | None
    grounder: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def build_known_graph(
    store: Any,
    tap_sources: Mapping[str, Sequence[str]] | None = None,
    key_of: Callable[[str], str] | None = None,
    present: Callable[[str], bool] | None = None,
    triplets: Sequence[tuple[Any, Any, Any]] | None = None,
) -> KnownGraph:
    """Snapshot ``store``: triples, entity nodes, provenance and the line index for parsing.

    Provenance of a triple is the relation's own ``triplet_source_id`` followed by every other chunk
    the extraction tap saw yield the same triple (LlamaIndex keeps only the first relation) that is
    in this store (``present``, by LlamaIndex node id: another index's chunks are never listed).
    ``key_of`` maps a LlamaIndex node id to triage's chunk id (:func:`chunk_key`); sources are
    triage chunk ids. ``triplets``: :func:`store_triplets` of ``store``, when already read.
    """
    tap_sources = tap_sources or {}
    key_of = key_of or (lambda node_id: node_id)
    triples: list[Triple] = []
    by_line: dict[str, Triple] = {}
    sources: dict[str, tuple[str, ...]] = {}
    for subject, relation, obj in store_triplets(store) if triplets is None else triplets:
        triple = triple_of(subject, relation, obj)
        triples.append(triple)
        by_line.setdefault(f"{subject.id}{ARROW}{relation.id}{ARROW}{obj.id}", triple)
        by_line.setdefault(f"{subject!s}{ARROW}{relation!s}{ARROW}{obj!s}", triple)
        node_ids: list[str] = []
        own = relation.properties.get(TRIPLET_SOURCE_KEY)
        if isinstance(own, str) and own:
            node_ids.append(own)
        node_ids.extend(
            c for c in tap_sources.get(triple.id, ()) if c not in node_ids and (present is None or present(c))
        )
        chunk_ids = list(dict.fromkeys(key_of(c) for c in node_ids))
        if chunk_ids:
            sources[triple.id] = tuple(chunk_ids)
    graph = getattr(store, "graph", None)
    if graph is not None and isinstance(getattr(graph, "nodes", None), Mapping):
        entities = [node.id for node in graph.nodes.values() if _is_entity(node)]
    else:
        entities = []
    view = GraphView(triples, nodes=entities, sources=sources)
    return KnownGraph(view, by_line, sources, graph_fingerprint(store))


def parse_triples(text: str, by_line: Mapping[str, Triple] | None) -> list[Triple]:
    """Triples rendered in a retrieved node's text, in order of appearance, without repeats.

    With a known graph, only lines that render a stored triplet count (chunk text that happens to
    contain an arrow is ignored); without one, plain ``s -> p -> o`` lines are read as they are.
    """
    found: list[Triple] = []
    seen: set[str] = set()
    for line in text.splitlines():
        triple = _line_triple(line, by_line)
        if triple is not None and triple.id not in seen:
            seen.add(triple.id)
            found.append(triple)
    return found


@dataclass(frozen=True)
class AttachedText:
    """An ``include_text`` node's text, split the way LlamaIndex joined it.

    ``BasePGRetriever._add_source_text`` writes ``preamble + "\\n".join(triplet lines) + "\\n\\n" +
    chunk text``; ``head`` is everything before the first triplet line (the preamble), ``lines``
    the triplet lines with their triples, ``chunk`` the attached chunk's own text.
    """

    head: str
    lines: tuple[tuple[str, Triple], ...]
    chunk: str

    def render(self, lines: Sequence[str]) -> str:
        """The node text with the triplet lines in the given order (LlamaIndex's layout)."""
        return self.head + "\n".join(lines) + "\n\n" + self.chunk


def split_attached(text: str, by_line: Mapping[str, Triple] | None) -> AttachedText | None:
    """Split an ``include_text`` node into preamble, triplet lines and chunk text (``None``: not one).

    The triplet block is the first run of consecutive lines that each render a triple, followed by
    an empty line; lines are matched exactly as in :func:`parse_triples`.
    """
    lines = text.split("\n")
    start = None
    for i, line in enumerate(lines):
        if _line_triple(line, by_line) is not None:
            start = i
            break
    if start is None:
        return None
    end = start
    found: list[tuple[str, Triple]] = []
    while end < len(lines):
        triple = _line_triple(lines[end], by_line)
        if triple is None:
            break
        found.append((lines[end], triple))
        end += 1
    if end >= len(lines) or lines[end] != "":
        return None
    head = "\n".join(lines[:start]) + ("\n" if start else "")
    return AttachedText(head, tuple(found), "\n".join(lines[end + 1 :]))


def _line_triple(line: str, by_line: Mapping[str, Triple] | None) -> Triple | None:
    if ARROW not in line:
        return None
    line = line.strip()
    if by_line is not None:
        return by_line.get(line)
    match = _ARROW_LINE.match(line)
    return Triple.of(*(part.strip() for part in match.groups())) if match else None


# --------------------------------------------------------------------------- retrieval


def node_chunks(nodes: Iterable[Any]) -> tuple[Chunk, ...]:
    """A text retriever's ``NodeWithScore`` list as chunks, in rank order (no graph provenance)."""
    out: dict[str, Chunk] = {}
    for scored in nodes:
        node = scored.node
        if node.node_id not in out:
            out[node.node_id] = chunk_of(node.node_id, node.ref_doc_id or node.node_id, node.get_content())
    return tuple(out.values())


def store_of(index_or_store: Any) -> Any:
    """The property graph store of a ``PropertyGraphIndex`` (or the store itself)."""
    store = getattr(index_or_store, "property_graph_store", None)
    return store if store is not None else index_or_store


def retriever_store(retriever: Any) -> Any:
    """The property graph store a (PG) retriever reads, via LlamaIndex's private ``_graph_store``."""
    store = getattr(retriever, "_graph_store", None)
    if store is not None:
        return store
    for sub in getattr(retriever, "sub_retrievers", None) or ():
        store = getattr(sub, "_graph_store", None)
        if store is not None:
            return store
    return None


def retriever_name(retriever: Any) -> str:
    """``RetrievalEvent.retriever``: the class name, with the sub-retrievers of a ``PGRetriever``."""
    name = type(retriever).__name__ if retriever is not None else "default"
    subs = getattr(retriever, "sub_retrievers", None)
    if subs:
        name += "(" + "+".join(type(s).__name__ for s in subs) + ")"
    return name


# --------------------------------------------------------------------------- log-probabilities


def chosen_tokens(text: str, logprobs: Sequence[Sequence[Any]]) -> list[tuple[str, float]] | None:
    """``(token, logprob)`` of the sampled token at each position of a completion.

    LlamaIndex's ``logprobs`` hold, per position, a list of ``LogProb(token, logprob)`` candidates
    (OpenAI's top-logprobs); the sampled token is the candidate that continues ``text`` at the
    current offset. ``None`` when the tokens cannot be aligned with the text (then no triple gets
    log-probabilities rather than wrong ones).
    """
    pairs: list[tuple[str, float]] = []
    pos = 0
    for candidates in logprobs:
        if not candidates:
            return None
        chosen = next((c for c in candidates if c.token and text.startswith(c.token, pos)), None)
        if chosen is None:
            return None
        pairs.append((chosen.token, float(chosen.logprob)))
        pos += len(chosen.token)
    return pairs


def chosen_token_offsets(text: str, logprobs: Sequence[Sequence[Any]]) -> list[tuple[int, int, float]] | None:
    """``(start, end, logprob)`` of each sampled token (:func:`chosen_tokens` as character offsets)."""
    pairs = chosen_tokens(text, logprobs)
    if pairs is None:
        return None
    out: list[tuple[int, int, float]] = []
    pos = 0
    for token, lp in pairs:
        out.append((pos, pos + len(token), lp))
        pos += len(token)
    return out


def record_span(text: str, triple: Triple, used: set[int] | None = None) -> tuple[int, int] | None:
    """Character span of the completion line that holds ``triple``'s record.

    A line is the record when LlamaIndex's own triplet parser reads exactly that triple from it
    (``default_parse_triplets_fn``, which capitalizes), else when it names subject, predicate and
    object (case-insensitively). Lines already in ``used`` (start offsets) are skipped.
    """
    from llama_index.core.indices.property_graph.utils import default_parse_triplets_fn

    want = (triple.subject, triple.predicate, triple.object)
    lowered = tuple(part.casefold() for part in want)
    fallback: tuple[int, int] | None = None
    start = 0
    for line in text.split("\n"):
        end = start + len(line)
        if line.strip() and (used is None or start not in used):
            if default_parse_triplets_fn(line) == [want]:
                return (start, end)
            folded = line.casefold()
            if fallback is None and all(part in folded for part in lowered):
                fallback = (start, end)
        start = end + 1
    return fallback


def triple_logprobs(
    text: str, logprobs: Sequence[Sequence[Any]] | None, triples: Iterable[Triple]
) -> dict[str, tuple[float, ...] | None]:
    """Per triple id, the log-probabilities of the sampled tokens overlapping its record line
    (:func:`triage_plugins.adapter_kit.logprobs.span_logprobs`)."""
    triples = list(triples)
    pairs = chosen_tokens(text, logprobs) if logprobs else None
    out: dict[str, tuple[float, ...] | None] = {}
    used: set[int] = set()
    for triple in triples:
        span = record_span(text, triple, used) if pairs is not None else None
        if span is None:
            out[triple.id] = None
            continue
        used.add(span[0])
        out[triple.id] = span_logprobs(pairs, *span)
    return out
