"""What the usage metrics share: coalesced mention sets (M_q, M_a), the index of K_S (V_S and an
undirected adjacency) and the connectivity of the grounded query nodes (TRIAGE §4.3.1, DESIGN §4)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.contract.graph_view import normalize_label
from triage_plugins.kg.citations import strip_citations


class Grounderlike(Protocol):
    """What the usage metrics need from :class:`triage_plugins.kg.grounding.Grounder`."""

    def ground(self, text: str) -> Any: ...  # -> Grounding(mentions, grounding, spans)

    def link(self, surface: str) -> str | None: ...


_UNAVAILABLE = "unavailable"
_NO_MENTIONS = "no_mentions"
_MISSING = object()


# --------------------------------------------------------------------------- shared views


@dataclass(slots=True)
class _Mentions:
    """A coalesced mention set: grounded node ids plus distinct unresolved surfaces."""

    raw: int
    grounded: frozenset[str]
    unresolved: int
    available: bool

    @property
    def n(self) -> int:
        return len(self.grounded) + self.unresolved

    def counts(self) -> dict[str, int]:
        return {
            "mentions": self.n,
            "mentions_raw": self.raw,
            "grounded": len(self.grounded),
            "unresolved": self.unresolved,
        }


def _coalesce(
    mentions: Sequence[str],
    grounding: Mapping[str, str | None],
    text: str,
    grounder: Grounderlike | None,
) -> _Mentions:
    if not mentions:
        if grounder is None:
            return _Mentions(0, frozenset(), 0, False)
        derived = grounder.ground(text)
        mentions, grounding = tuple(derived.mentions), derived.grounding
    nodes: set[str] = set()
    unresolved: set[str] = set()
    get = grounding.get
    for m in mentions:
        node = get(m, _MISSING)
        if node is _MISSING:
            node = grounder.link(m) if grounder is not None else None
        if node is None:
            unresolved.add(normalize_label(m) or m)
        else:
            nodes.add(node)  # type: ignore[arg-type]
    return _Mentions(len(mentions), frozenset(nodes), len(unresolved), True)


def _query_mentions(retrieval: RetrievalEvent, grounder: Grounderlike | None) -> _Mentions:
    return _coalesce(retrieval.mentions, retrieval.grounding, retrieval.query, grounder)


def _answer_mentions(generation: GenerationEvent, grounder: Grounderlike | None) -> _Mentions:
    """M_a of the answer without its citations (:mod:`triage_plugins.kg.citations`): mentions are
    derived from the cleaned text, and supplied mentions found only inside citations are dropped."""
    answer = generation.answer
    clean = strip_citations(answer)
    mentions, grounding = generation.answer_mentions, generation.answer_grounding
    if clean != answer and mentions:
        words = f" {normalize_label(clean)} "
        mentions = tuple(m for m in mentions if f" {normalize_label(m) or m} " in words)
        if not mentions and grounder is None:  # every supplied mention was a citation: |M_a| = 0
            return _Mentions(len(generation.answer_mentions), frozenset(), 0, True)
    return _coalesce(mentions, grounding, clean, grounder)


class _Subgraph:
    """V_S and an undirected adjacency of K_S, built once per query (adjacency lazily)."""

    __slots__ = ("triples", "subs", "objs", "nodes", "_adj")

    def __init__(self, retrieval: RetrievalEvent) -> None:
        triples = retrieval.subgraph.triples
        self.triples = triples
        self.subs = [t.subject for t in triples]
        self.objs = [t.object for t in triples]
        nodes = set(retrieval.subgraph.nodes)
        nodes.update(self.subs)
        nodes.update(self.objs)
        self.nodes = nodes
        self._adj: dict[str, list[str]] | None = None

    def adjacency(self) -> dict[str, list[str]]:
        adj = self._adj
        if adj is None:
            adj = {}
            for s, o in zip(self.subs, self.objs, strict=True):
                a = adj.get(s)
                if a is None:
                    adj[s] = [o]
                else:
                    a.append(o)
                b = adj.get(o)
                if b is None:
                    adj[o] = [s]
                else:
                    b.append(s)
            self._adj = adj
        return adj

    def distances(self, source: str, targets: set[str]) -> dict[str, int]:
        """Undirected BFS hop counts from ``source`` to each reachable node of ``targets``."""
        adj = self.adjacency()
        found: dict[str, int] = {}
        if source in targets:
            found[source] = 0
        remaining = len(targets) - len(found)
        seen = {source}
        frontier = [source]
        depth = 0
        while frontier and remaining:
            depth += 1
            nxt: list[str] = []
            for u in frontier:
                for v in adj.get(u, ()):
                    if v not in seen:
                        seen.add(v)
                        nxt.append(v)
                        if v in targets:
                            found[v] = depth
                            remaining -= 1
            frontier = nxt
        return found


@dataclass(slots=True)
class _Connectivity:
    """Connectivity of the grounded query nodes inside K_S."""

    connected_pairs: int
    max_distance: float  # math.inf when some pair is disconnected


def _connectivity(q: _Mentions, sub: _Subgraph) -> _Connectivity:
    present = [n for n in q.grounded if n in sub.nodes]
    k = len(present)
    if k < 2:
        return _Connectivity(0, 0.0 if k == 1 else math.inf)
    targets = set(present)
    component: dict[str, int] = {}
    sizes: list[int] = []
    longest = 0
    # One BFS per node: gives components (pairs) and the largest pairwise distance (RHD).
    for i, src in enumerate(present[:-1]):
        dist = sub.distances(src, targets)
        if src not in component:
            cid = len(sizes)
            sizes.append(len(dist))
            for node in dist:
                component[node] = cid
        for node in present[i + 1 :]:
            d = dist.get(node)
            if d is not None and d > longest:
                longest = d
    if present[-1] not in component:
        sizes.append(1)
    pairs = sum(s * (s - 1) // 2 for s in sizes)
    full = len(sizes) == 1 and len(present) == len(q.grounded)
    return _Connectivity(pairs, float(longest) if full else math.inf)
