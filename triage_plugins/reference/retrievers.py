"""Retrievers of the built-in reference KG-RAG pipeline (TRIAGE §5.1; EvoRAG §4.2).

All work over a :class:`~triage_plugins.contract.graph_view.GraphView` and a query-relevance source (a
:class:`RelevanceIndex` over a text embedder). Each returns a :class:`Retrieved`: the triples of
K_S, explicit nodes of V_S, the reasoning paths (triple-id sequences) with scores, and RPC — the
number of nodes whose adjacency the retriever expanded.

- ``gold-entity``, ``extracted-entity``, ``light-entity``, ``light-relation`` share one n-hop beam
  expansion (:func:`beam_expand`) and differ only in their seeds (TRIAGE §5.1): the gold topic
  entities (an oracle), the grounder's graph-linked query entities, the top-k entities most similar
  to the question (an entity-keyed "local" mode) and the endpoints of the top-k most similar
  triples (a relation-keyed "global" mode).
- ``path`` follows PathRAG: resource propagation from the anchors with decay α and flow-based
  pruning, then relational paths between anchors scored by the average resource of their nodes.
- ``krag`` is the KG-RAG retriever EvoRAG builds on: N seed entities (grounded first, then by
  similarity), their k-hop neighbourhood, and the top-M paths per seed by path priority — mean
  log P(t) along the path, where P(t) comes from the ``triage_rerank`` hook when a plugin answers
  (EvoRAG hybrid priority) and is the query relevance S_r otherwise.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView

__all__ = [
    "FEEDBACK_RETRIEVER",
    "RETRIEVERS",
    "RelevanceIndex",
    "Retrieved",
    "beam_expand",
    "krag_retrieve",
    "path_retrieve",
]

_EPS = 1e-6

#: The retriever EvoRAG's feedback learning builds on (KG-RAG); the one ``triage demo`` learns with.
FEEDBACK_RETRIEVER = "krag"


class Embedder(Protocol):
    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class Retrieved:
    """What a retriever returned (before it becomes a RetrievalEvent)."""

    triples: tuple[Triple, ...]
    nodes: tuple[str, ...]
    paths: tuple[tuple[str, ...], ...]
    path_scores: tuple[float, ...]
    expanded_nodes: int
    seeds: tuple[str, ...]

    def path_triples(self, graph: GraphView) -> list[list[Triple]]:
        return [[graph.triple(t) for t in p] for p in self.paths]


class RelevanceIndex:
    """Query relevance S_r ∈ (0, 1] of nodes and triples, from cosine similarity of embeddings.

    Nodes are embedded by label, predicates by name (underscores as spaces), lazily, once per
    graph. A triple is embedded compositionally, as the normalized sum of its subject, predicate
    and object vectors: v_t = (v_s + v_p + v_o) / ‖v_s + v_p + v_o‖. Then
    cos(q, v_t) = (q·v_s + q·v_p + q·v_o) / ‖v_s + v_p + v_o‖, so one query's relevance to *every*
    triple costs one mat-vec over the nodes plus O(|K|) gathers — no per-triple embedding, and hub
    entities with thousands of edges stay cheap. S_r = (1 + cos) / 2 clipped to [ε, 1] so log S_r
    stays finite.
    """

    def __init__(self, graph: GraphView, embedder: Embedder) -> None:
        self.graph = graph
        self.embedder = embedder
        self._node_vecs: np.ndarray | None = None
        self._node_mat: Any = None
        self._pred_index: dict[str, int] | None = None
        self._pred_of: np.ndarray | None = None
        self._pred_vecs: np.ndarray | None = None
        self._triple_norm: np.ndarray | None = None

    def query_vector(self, query: str) -> np.ndarray:
        return np.asarray(self.embedder.embed([query])[0], dtype=np.float32)

    @property
    def node_vectors(self) -> np.ndarray:
        """Unit vectors of the node labels (one row per node)."""
        if self._node_vecs is None:
            labels = [self.graph.label(n).replace("_", " ") for n in self.graph.nodes]
            self._node_vecs = np.asarray(self.embedder.embed(labels), dtype=np.float32)
        return self._node_vecs

    @property
    def _node_matrix(self) -> Any:
        """Node vectors for mat-vec products: sparse CSR when the embedder's vectors are sparse
        (hashed n-grams fill ~10-20 % of the dimensions), which reads 5-10x less memory per query."""
        if self._node_mat is None:
            dense = self.node_vectors
            if dense.size and np.count_nonzero(dense) < 0.35 * dense.size:
                from scipy.sparse import csr_matrix

                self._node_mat = csr_matrix(dense)
            else:
                self._node_mat = dense
        return self._node_mat

    def _prepare_triples(self) -> None:
        if self._triple_norm is not None:
            return
        triples = self.graph.triples
        preds = sorted({t.predicate for t in triples})
        self._pred_index = {p: i for i, p in enumerate(preds)}
        self._pred_vecs = np.asarray(
            self.embedder.embed([p.replace("_", " ") for p in preds]), dtype=np.float32
        )
        self._pred_of = np.fromiter(
            (self._pred_index[t.predicate] for t in triples), dtype=np.int64, count=len(triples)
        )
        nodes = self.node_vectors
        subj, obj = self.graph.subject_index, self.graph.object_index
        norms = np.empty(len(triples), dtype=np.float64)
        for lo in range(0, len(triples), 65536):  # bounded memory on large graphs
            hi = min(lo + 65536, len(triples))
            total = nodes[subj[lo:hi]] + self._pred_vecs[self._pred_of[lo:hi]] + nodes[obj[lo:hi]]
            norms[lo:hi] = np.linalg.norm(total, axis=1)
        norms[norms == 0] = 1.0
        self._triple_norm = norms

    def prepare(self) -> RelevanceIndex:
        """Embed nodes and predicates now (otherwise done on the first query)."""
        _ = self._node_matrix
        self._prepare_triples()
        return self

    def query(self, query: str) -> QueryRelevance:
        """Everything a retriever needs to rank nodes and triples for one query."""
        return QueryRelevance(self, self.query_vector(query))


class QueryRelevance:
    """Relevance of one query to the graph's nodes and triples (computed once, then gathered)."""

    def __init__(self, index: RelevanceIndex, qvec: np.ndarray) -> None:
        self.index = index
        self.qvec = qvec
        self.node_cos = np.asarray(index._node_matrix @ qvec, dtype=np.float64).ravel()
        self._triples: np.ndarray | None = None
        self._pred: np.ndarray | None = None

    @property
    def _pred_cos(self) -> np.ndarray:
        if self._pred is None:
            self.index._prepare_triples()
            self._pred = np.asarray(self.index._pred_vecs @ self.qvec, dtype=np.float64)  # type: ignore[operator]
        return self._pred

    def all_triples(self) -> np.ndarray:
        """S_r of every triple, in graph order."""
        if self._triples is None:
            self._triples = self.triple_relevance(np.arange(len(self.index.graph.triples), dtype=np.int64))
        return self._triples

    def triple_relevance(self, triple_idx: np.ndarray) -> np.ndarray:
        """S_r of the given triple indices (computed for those only)."""
        if len(triple_idx) == 0:
            return np.zeros(0, dtype=np.float64)
        pred_cos = self._pred_cos
        ix, g = self.index, self.index.graph
        dot = (
            self.node_cos[g.subject_index[triple_idx]]
            + pred_cos[ix._pred_of[triple_idx]]  # type: ignore[index]
            + self.node_cos[g.object_index[triple_idx]]
        )
        return np.clip((1.0 + dot / ix._triple_norm[triple_idx]) / 2.0, _EPS, 1.0)  # type: ignore[index]

    def top_nodes(self, k: int) -> list[str]:
        """The ``k`` nodes most similar to the query (ties by node order)."""
        nodes = self.index.graph.nodes
        if k <= 0 or not nodes:
            return []
        sims = self.node_cos
        k = min(k, len(sims))
        idx = np.argpartition(-sims, k - 1)[:k]
        idx = idx[np.lexsort((idx, -sims[idx]))]
        return [nodes[int(i)] for i in idx]

    def top_triples(self, k: int) -> list[int]:
        """Indices of the ``k`` triples most relevant to the query."""
        if k <= 0 or not self.index.graph.triples:
            return []
        rel = self.all_triples()
        k = min(k, len(rel))
        idx = np.argpartition(-rel, k - 1)[:k]
        return [int(i) for i in idx[np.lexsort((idx, -rel[idx]))]]


# --------------------------------------------------------------------------- beam expansion


def beam_expand(
    graph: GraphView,
    relevance: RelevanceIndex,
    query: str,
    seeds: Sequence[str],
    *,
    hops: int = 2,
    beam: int = 16,
) -> Retrieved:
    """n-hop beam expansion from ``seeds`` (TRIAGE §5.1, shared by the four entity retrievers).

    Paths start at each seed; at each hop every kept path is extended by the incident triples of
    its end node (direction ignored, no node revisited) and only the ``beam`` best paths by mean
    S_r survive. K_S is every triple on a kept path; RPC counts the distinct nodes expanded.
    """
    seeds = [s for s in dict.fromkeys(seeds) if graph.has_node(s)]
    if not seeds:
        return Retrieved((), (), (), (), 0, ())
    qr = relevance.query(query)
    # frontier entries: (sum of log S_r along the path, triple indices, node indices)
    frontier: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = [
        (0.0, (), (graph.node_index(s),)) for s in seeds
    ]
    kept: dict[tuple[int, ...], float] = {}
    expanded: set[int] = set()
    for _ in range(hops):
        candidates: list[tuple[float, tuple[int, ...], tuple[int, ...]]] = []
        for sumlog, tpath, nodes in frontier:
            u = nodes[-1]
            expanded.add(u)
            lo, hi = graph.indptr[u], graph.indptr[u + 1]
            if lo == hi:
                continue
            inc = graph.incident[lo:hi]
            logs = np.log(qr.triple_relevance(inc))
            visited = set(nodes)
            for t, v, r in zip(inc.tolist(), graph.indices[lo:hi].tolist(), logs.tolist(), strict=True):
                if v not in visited and t not in tpath:
                    candidates.append((sumlog + r, tpath + (t,), nodes + (v,)))
        if not candidates:
            break
        frontier = heapq.nlargest(beam, candidates, key=lambda c: (c[0] / len(c[1]), [-x for x in c[1]]))
        for sumlog, tpath, _ in frontier:
            kept[tpath] = sumlog / len(tpath)
    return _assemble(graph, kept, seeds, len(expanded))


def _assemble(
    graph: GraphView, kept: dict[tuple[int, ...], float], seeds: Sequence[str], expanded: int
) -> Retrieved:
    order = sorted(kept.items(), key=lambda kv: (-kv[1], kv[0]))
    triples: dict[int, Triple] = {}
    for tpath, _ in order:
        for t in tpath:
            triples.setdefault(t, graph.triples[t])
    return Retrieved(
        triples=tuple(triples.values()),
        nodes=tuple(seeds),
        paths=tuple(tuple(graph.triples[t].id for t in tp) for tp, _ in order),
        path_scores=tuple(s for _, s in order),
        expanded_nodes=expanded,
        seeds=tuple(seeds),
    )


# --------------------------------------------------------------------------- PathRAG


def path_retrieve(
    graph: GraphView,
    relevance: RelevanceIndex,
    query: str,
    anchors: Sequence[str],
    *,
    alpha: float = 0.8,
    threshold: float = 0.05,
    max_hops: int = 4,
    top_k: int = 10,
) -> Retrieved:
    """PathRAG's principle: flow-pruned relational paths between anchors.

    Resource starts at 1 on every anchor and flows outwards: a node passes α·S(v)/deg(v) to each
    neighbour; flow below ``threshold`` is pruned (early stopping), at most ``max_hops`` steps.
    Candidate paths join pairs of anchors through resource-carrying nodes (for a single anchor:
    from the anchor to the highest-resource nodes); a path's score is the average resource of its
    nodes and the ``top_k`` best are kept. RPC counts the nodes that pushed resource.
    """
    anchors = [a for a in dict.fromkeys(anchors) if graph.has_node(a)]
    if not anchors:
        return Retrieved((), (), (), (), 0, ())
    resource: dict[int, float] = {}
    parents: dict[int, dict[int, tuple[int, int]]] = {}
    pushed: set[int] = set()
    deg = graph.degrees()
    for a in anchors:
        ai = graph.node_index(a)
        parents[ai] = _flow(
            graph, deg, ai, resource, pushed, alpha=alpha, threshold=threshold, max_hops=max_hops
        )
    idx = [graph.node_index(a) for a in anchors]
    kept = (
        _anchor_pair_paths(idx, parents, resource)
        if len(idx) >= 2
        else _anchor_paths(idx[0], parents, resource)
    )
    best = dict(heapq.nlargest(top_k, kept.items(), key=lambda kv: (kv[1], [-x for x in kv[0]])))
    return _assemble(graph, best, anchors, len(pushed))


def _flow(
    graph: GraphView,
    deg: np.ndarray,
    anchor: int,
    resource: dict[int, float],
    pushed: set[int],
    *,
    alpha: float,
    threshold: float,
    max_hops: int,
) -> dict[int, tuple[int, int]]:
    """Spread resource from one anchor (adds to ``resource`` and ``pushed``); returns its parent tree."""
    level = {anchor: 1.0}
    best_parent: dict[int, tuple[int, int]] = {}
    seen = {anchor}
    resource[anchor] = resource.get(anchor, 0.0) + 1.0
    for _ in range(max_hops):
        nxt: dict[int, float] = {}
        for u, s in level.items():
            d = int(deg[u])
            if d == 0:
                continue
            flow = alpha * s / d
            if flow < threshold:
                continue
            pushed.add(u)
            lo, hi = graph.indptr[u], graph.indptr[u + 1]
            for t, v in zip(graph.incident[lo:hi].tolist(), graph.indices[lo:hi].tolist(), strict=True):
                if v in seen:
                    continue
                nxt[v] = nxt.get(v, 0.0) + flow
                best_parent.setdefault(v, (u, t))
        if not nxt:
            break
        for v, s in nxt.items():
            resource[v] = resource.get(v, 0.0) + s
            seen.add(v)
        level = nxt
    return best_parent


def _walk(tree: dict[int, tuple[int, int]], anchor: int, node: int) -> list[tuple[int, int]] | None:
    """(triple, node) steps from ``anchor`` down its parent tree to ``node``; ``None`` if unreached."""
    steps: list[tuple[int, int]] = []
    while node != anchor:
        if node not in tree:
            return None
        u, t = tree[node]
        steps.append((t, node))
        node = u
    return list(reversed(steps))


def _anchor_pair_paths(
    idx: list[int], parents: dict[int, dict[int, tuple[int, int]]], resource: dict[int, float]
) -> dict[tuple[int, ...], float]:
    """Paths joining pairs of anchors where their flows meet, scored by mean node resource."""
    kept: dict[tuple[int, ...], float] = {}
    for i, a in enumerate(idx):
        for b in idx[i + 1 :]:
            # meet in the middle: nodes reached from both anchors
            for m in set(parents[a]) & set(parents[b]) | ({b} & set(parents[a])) | ({a} & set(parents[b])):
                left = _walk(parents[a], a, m) if m != a else []
                right = _walk(parents[b], b, m) if m != b else []
                if left is None or right is None:
                    continue
                tpath = tuple(t for t, _ in left) + tuple(t for t, _ in reversed(right))
                if not tpath or len(set(tpath)) != len(tpath):
                    continue
                nodes = {a, b} | {n for _, n in left} | {n for _, n in right}
                kept[tpath] = sum(resource.get(n, 0.0) for n in nodes) / len(nodes)
    return kept


def _anchor_paths(
    a: int, parents: dict[int, dict[int, tuple[int, int]]], resource: dict[int, float]
) -> dict[tuple[int, ...], float]:
    """For a single anchor: paths from it to every node its flow reached."""
    kept: dict[tuple[int, ...], float] = {}
    for m in parents[a]:
        steps = _walk(parents[a], a, m)
        if steps:
            nodes = {a} | {n for _, n in steps}
            kept[tuple(t for t, _ in steps)] = sum(resource.get(n, 0.0) for n in nodes) / len(nodes)
    return kept


# --------------------------------------------------------------------------- KG-RAG (EvoRAG)


def _expand(graph: GraphView, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All incidences of the nodes ``ends``: (index into ``ends``, triple index, neighbour index)."""
    starts = graph.indptr[ends]
    counts = graph.indptr[ends + 1] - starts
    total = int(counts.sum())
    if total == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    owner = np.repeat(np.arange(len(ends), dtype=np.int64), counts)
    offsets = (
        np.arange(total, dtype=np.int64)
        - np.repeat(np.cumsum(counts) - counts, counts)
        + np.repeat(starts, counts)
    )
    return owner, graph.incident[offsets], graph.indices[offsets]


def _top(scores: np.ndarray, tiebreak: np.ndarray, k: int) -> np.ndarray:
    """Indices of the ``k`` best scores, best first (ties: smaller ``tiebreak`` first)."""
    part = np.argpartition(-scores, k - 1)[:k] if len(scores) > k else np.arange(len(scores))
    return part[np.lexsort((tiebreak[part], -scores[part]))]


def krag_retrieve(
    graph: GraphView,
    relevance: RelevanceIndex,
    query: str,
    grounded: Sequence[str],
    *,
    n_seeds: int = 10,
    hops: int = 2,
    paths_per_seed: int = 10,
    beam: int = 64,
    priority: Callable[[list[str], list[float]], list[float] | None] | None = None,
    per_length: bool = False,
    walks: bool = False,
) -> Retrieved:
    """EvoRAG's KG-RAG retriever: N seeds, k-hop paths, top-M paths per seed by path priority.

    With ``per_length`` the top-M is kept per path length (M one-hop, M two-hop ... paths per
    seed), so long paths do not compete with short ones for the same M places. With ``walks`` a
    path may come back to a node it passed (never through the same triple twice): many multi-hop
    questions walk such loops ("X's child's mother" is X or X's spouse; on PathQuestion 3-hop 48 %
    of the gold paths revisit a node), which simple paths can never retrieve.

    Seeds are the grounded query entities, then the most similar entities up to ``n_seeds``.
    Candidate paths (up to ``hops`` triples, no node revisited unless ``walks``, at most ``beam``
    per hop and seed by mean log S_r) are collected first; then ``priority(ids, S_r)`` (the ``triage_rerank`` hook)
    may replace S_r by P(t) for every candidate triple at once. A path's priority is the mean
    log P(t) along it (EvoRAG eq. 3 before the softmax, which does not change the order).
    Expansion is vectorized per hop (numpy), so hub entities with thousands of edges stay cheap.
    """
    qr = relevance.query(query)
    seeds = _krag_seeds(graph, qr, grounded, n_seeds)
    if not seeds:
        return Retrieved((), (), (), (), 0, ())
    expanded: set[int] = set()
    per_seed = [
        _seed_levels(graph, qr, graph.node_index(s), expanded, hops=hops, beam=beam, walks=walks)
        for s in seeds
    ]
    all_tp = [lv.ravel() for levels in per_seed for lv in levels]
    if not all_tp:
        return Retrieved((), tuple(seeds), (), (), len(expanded), tuple(seeds))
    cand = np.unique(np.concatenate(all_tp))
    s_r = qr.triple_relevance(cand)
    p = s_r
    if priority is not None:
        answer = priority([graph.triples[int(i)].id for i in cand], s_r.tolist())
        if answer is not None:
            p = np.clip(np.asarray(answer, dtype=np.float64), _EPS, None)
    logp = np.log(p)
    kept: dict[tuple[int, ...], float] = {}
    for levels in per_seed:
        if levels:
            _keep_best(kept, levels, logp, cand, paths_per_seed, per_length)
    return _assemble(graph, kept, seeds, len(expanded))


def _krag_seeds(graph: GraphView, qr: Any, grounded: Sequence[str], n_seeds: int) -> list[str]:
    """The grounded query entities, then the most similar entities, up to ``n_seeds``."""
    seeds = [s for s in dict.fromkeys(grounded) if graph.has_node(s)]
    if len(seeds) < n_seeds:
        for s in qr.top_nodes(n_seeds):
            if s not in seeds:
                seeds.append(s)
            if len(seeds) >= n_seeds:
                break
    return seeds[:n_seeds]


def _seed_levels(
    graph: GraphView, qr: Any, start: int, expanded: set[int], *, hops: int, beam: int, walks: bool
) -> list[np.ndarray]:
    """Beam-searched candidate paths from one seed: one (paths × h) triple-index array per hop h."""
    tp = np.zeros((1, 0), dtype=np.int64)
    nodes = np.asarray([[start]], dtype=np.int64)
    sumlog = np.zeros(1)
    levels: list[np.ndarray] = []
    for h in range(1, hops + 1):
        expanded.update(nodes[:, -1].tolist())
        owner, inc, nbr = _expand(graph, nodes[:, -1])
        if len(inc):
            if walks:  # a node may repeat, a triple may not
                fresh = ~(tp[owner] == inc[:, None]).any(axis=1)
            else:  # simple paths: no node revisited
                fresh = ~(nodes[owner] == nbr[:, None]).any(axis=1)
            owner, inc, nbr = owner[fresh], inc[fresh], nbr[fresh]
        if not len(inc):
            break
        logs = sumlog[owner] + np.log(qr.triple_relevance(inc))
        keep = _top(logs / h, inc, beam)
        owner, inc, nbr = owner[keep], inc[keep], nbr[keep]
        tp = np.hstack([tp[owner], inc[:, None]])
        nodes = np.hstack([nodes[owner], nbr[:, None]])
        sumlog = logs[keep]
        levels.append(tp)
    return levels


def _keep_best(
    kept: dict[tuple[int, ...], float],
    levels: list[np.ndarray],
    logp: np.ndarray,
    cand: np.ndarray,
    paths_per_seed: int,
    per_length: bool,
) -> None:
    """Add one seed's top-M paths by mean log P(t) to ``kept`` (per path length with ``per_length``)."""
    score = np.concatenate([logp[np.searchsorted(cand, lv)].mean(axis=1) for lv in levels])
    level_of = np.concatenate([np.full(len(lv), k, dtype=np.int64) for k, lv in enumerate(levels)])
    row_of = np.concatenate([np.arange(len(lv), dtype=np.int64) for lv in levels])
    first = np.concatenate([lv[:, 0] for lv in levels])
    if per_length:
        chosen = [
            int(np.flatnonzero(level_of == k)[j])
            for k in range(len(levels))
            for j in _top(score[level_of == k], first[level_of == k], paths_per_seed).tolist()
        ]
    else:
        chosen = _top(score, first, paths_per_seed).tolist()
    for i in chosen:
        path = tuple(levels[level_of[i]][row_of[i]].tolist())
        kept[path] = max(float(score[i]), kept.get(path, -math.inf))


#: Names of the reference retrievers, in the order reports show them.
RETRIEVERS: tuple[str, ...] = (
    "gold-entity",
    "extracted-entity",
    "light-entity",
    "light-relation",
    "path",
    "krag",
)
