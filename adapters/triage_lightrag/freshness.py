"""Graph freshness across processes: a change log in the shared store, applied incrementally.

Under ``lightrag-gunicorn`` every worker holds its own :class:`~triage_plugins.contract.graph_view.GraphView`
of LightRAG's graph (for grounding and graph events), but only the worker that processed an upload
knows that the graph changed. The processing worker therefore *logs* what changed — the entity names
and relation pairs LightRAG's own recovery anchors (``full_entities`` / ``full_relations``) name for
each processed document — in the shared triage store, before LightRAG writes the document's
``processed`` status:

- ``lightrag.graph.version``: a counter stepped atomically (``add_param``) once per change;
- ``lightrag.graph.change.<slot>``: the change of version ``v`` in slot ``v % RING``, written in the
  same transaction as the step, with the version it holds and the process that logged it.

Both live in the learner's scope (the LightRAG workspace), so workspaces keep separate logs. Before
grounding a query, a worker compares the counter with the version its view is at and reads only the
named nodes and edges back from LightRAG's storage (``get_nodes_batch`` / ``get_edges_batch``), never
the whole graph, and applies them to its view (:meth:`GraphView.with_changes`: the unchanged arrays
are kept, the new incidences merged in) and grounder (:meth:`Grounder.updated`: only the changed
nodes are filed again), never rebuilding either. A change that names too many ids, an edit or deletion (``full``), or a worker so far
behind that its slots were reused, falls back to one full re-read.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from triage_lightrag.translate import relation_triple, split_sources, triple_id
from triage_plugins import GraphView, Triple

__all__ = [
    "CHANGE_PARAM",
    "MAX_CHANGE_IDS",
    "RING",
    "VERSION_PARAM",
    "ChangeLog",
    "GraphChange",
    "change_of_documents",
    "updated_view",
]

log = logging.getLogger("triage.lightrag.freshness")

VERSION_PARAM = "lightrag.graph.version"
CHANGE_PARAM = "lightrag.graph.change.{slot}"
RING = 256  # change slots kept; a reader further behind re-reads the graph in full
MAX_CHANGE_IDS = 50_000  # a change naming more ids is logged as a full re-read

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class GraphChange:
    """Nodes and edges (sorted entity pairs) whose state may differ from a view's; ``full``: re-read all."""

    nodes: frozenset[str] = frozenset()
    edges: frozenset[Pair] = frozenset()
    full: bool = False

    def __post_init__(self) -> None:
        if not self.full and len(self.nodes) + len(self.edges) > MAX_CHANGE_IDS:
            object.__setattr__(self, "nodes", frozenset())
            object.__setattr__(self, "edges", frozenset())
            object.__setattr__(self, "full", True)

    @property
    def empty(self) -> bool:
        return not (self.full or self.nodes or self.edges)

    def merged(self, other: GraphChange) -> GraphChange:
        if self.full or other.full:
            return GraphChange(full=True)
        return GraphChange(self.nodes | other.nodes, self.edges | other.edges)

    def to_param(self, version: int, origin: str) -> dict[str, Any]:
        return {
            "version": version,
            "origin": origin,
            "full": self.full,
            "nodes": sorted(self.nodes),
            "edges": [list(p) for p in sorted(self.edges)],
        }

    @classmethod
    def from_param(cls, value: Mapping[str, Any]) -> GraphChange:
        if value.get("full"):
            return cls(full=True)
        edges = (_pair(p) for p in value.get("edges") or ())
        return cls(frozenset(str(n) for n in value.get("nodes") or ()), frozenset(p for p in edges if p))


def _pair(value: Any) -> Pair | None:
    if not isinstance(value, list | tuple) or len(value) != 2 or not all(value):
        return None
    a, b = str(value[0]), str(value[1])
    return (a, b) if a <= b else (b, a)


def change_of_documents(
    entity_rows: Iterable[Mapping[str, Any] | None], relation_rows: Iterable[Mapping[str, Any] | None]
) -> GraphChange:
    """The change named by documents' ``full_entities`` / ``full_relations`` rows (LightRAG's
    recovery anchors: every entity name and relation pair the document's merge touched)."""
    nodes = {str(n) for row in entity_rows if row for n in row.get("entity_names") or () if n}
    edges = {p for row in relation_rows if row for p in map(_pair, row.get("relation_pairs") or ()) if p}
    return GraphChange(frozenset(nodes), frozenset(edges))


class ChangeLog:
    """The change log of one learner scope in a shared store (see the module docstring).

    :param store: the (scoped) triage store; :param origin: this process's tag, so a reader can skip
    the changes it logged itself (it applied them already).
    """

    def __init__(self, store: Any, origin: str) -> None:
        self.store = store
        self.origin = origin

    def version(self) -> int:
        """The latest logged version (0: nothing logged yet)."""
        return int(self.store.get_param(VERSION_PARAM, 0) or 0)

    def publish(self, change: GraphChange) -> int:
        """Log ``change``: step the counter and write its slot in one transaction; the new version."""
        with self.store.transaction() as tx:
            version = int(tx.add_param(VERSION_PARAM, 1.0))
            tx.set_param(CHANGE_PARAM.format(slot=version % RING), change.to_param(version, self.origin))
        return version

    def since(self, version: int, latest: int) -> GraphChange:
        """The union of the changes other processes logged after ``version`` up to ``latest``
        (``full`` when one of them is no longer in its slot)."""
        if latest - version > RING:
            return GraphChange(full=True)
        out = GraphChange()
        for v in range(version + 1, latest + 1):
            value = self.store.get_param(CHANGE_PARAM.format(slot=v % RING))
            if not isinstance(value, Mapping) or value.get("version") != v:
                log.info("graph change %d is no longer logged: the graph is re-read in full", v)
                return GraphChange(full=True)
            if value.get("origin") != self.origin:
                out = out.merged(GraphChange.from_param(value))
        return out


def updated_view(
    view: GraphView,
    nodes: Mapping[str, Mapping[str, Any] | None],
    edges: Mapping[Pair, Mapping[str, Any] | None],
) -> GraphView:
    """``view`` with the given nodes and edges replaced by their current state in LightRAG.

    ``nodes``: node id -> its properties, ``None`` when it is gone (its edges go too); ``edges``:
    sorted entity pair -> properties, ``None`` when gone. Unnamed nodes and edges are kept as they
    are (an edge whose endpoint's type changed is re-typed). An edge already in the view keeps its
    orientation and place; a new one takes the pair's and goes last. Applied with
    :meth:`~triage_plugins.contract.graph_view.GraphView.with_changes`: the work is the named rows
    and the re-typed nodes' edges, plus vectorized passes over the view's arrays.
    """
    gone = {n for n, row in nodes.items() if row is None}
    types = {n: _entity_type(row) for n, row in nodes.items() if row is not None}
    known = _known_types(view, types)
    triples: dict[str, Triple] = {}
    removed: list[str] = []
    sources: dict[str, tuple[str, ...]] = {}
    for (a, b), row in edges.items():
        tid = triple_id(a, b)
        if row is None or a == b or a in gone or b in gone:  # a self-loop is no triple (graph_view)
            removed.append(tid)
            continue
        if view.has_triple(tid):
            old = view.triple(tid)
            a, b = old.subject, old.object  # keep the orientation the view has
        triples[tid] = relation_triple(a, b, row.get("keywords"), subject_type=known(a), object_type=known(b))
        sources[tid] = split_sources(row.get("source_id"))
    named = set(triples) | set(removed)
    for node in types:
        if view.has_node(node):
            for t in view.incident_triples(node):
                if t.id not in named and t.subject not in gone and t.object not in gone:
                    retyped = _retyped(t, types)
                    if retyped is not t:
                        triples[t.id] = retyped
    added = [n for n in nodes if n not in gone and not view.has_node(n)]
    return view.with_changes(
        triples.values(), removed=removed, nodes=added, removed_nodes=sorted(gone), sources=sources
    )


def _entity_type(row: Mapping[str, Any]) -> str | None:
    value = row.get("entity_type")
    return str(value) if value else None


def _retyped(t: Triple, types: Mapping[str, str | None]) -> Triple:
    subject_type = types.get(t.subject, t.subject_type)
    object_type = types.get(t.object, t.object_type)
    if (subject_type, object_type) == (t.subject_type, t.object_type):
        return t
    return dataclasses.replace(t, subject_type=subject_type or None, object_type=object_type or None)


def _known_types(view: GraphView, types: Mapping[str, str | None]) -> Any:
    """node -> its entity type: the fresh rows first, else what the view's triples say."""

    def known(node: str) -> str | None:
        if node in types:
            return types[node]
        if view.has_node(node):
            for t in view.incident_triples(node):
                found = t.subject_type if t.subject == node else t.object_type
                if found:
                    return found
        return None

    return known
