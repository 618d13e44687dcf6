"""KG Usage metrics (TRIAGE §4.3, eq. 25–35) over one query's retrieval and generation events.

Every per-query function has the same signature, ``f(retrieval, generation=None, *, grounder=None,
closed_book=None) -> MetricResult`` (retrieval-time metrics ignore ``generation``), and is registered
in :data:`METRICS` under the paper's symbol. :func:`usage_metrics` computes them all at once, sharing
the grounding and the subgraph index (this is the hot path: plain sets and dicts, no networkx).

Entity resolution (§4.3.1, DESIGN §4). The mention universe M_q is the event's ``mentions`` with their
``grounding`` (γ_q); when the event carries no mentions and a ``grounder`` is given, both are derived
from the query text (``grounder.ground(text)``), and a mention missing from ``grounding`` is linked with
``grounder.link(surface)`` (else it counts as unresolved, ⊥). Mentions are *coalesced* before counting:
mentions grounded to the same node count once, unresolved mentions count once per normalized surface
form. |M_q| is the size of that coalesced set, so an unresolved mention is still penalized. The same
holds for answer mentions M_a (``answer_mentions`` / ``answer_grounding``).

N/A conventions (§4.3.1): QGR, ERC, RRS are N/A when |M_q| = 0; ERP and AUR when |V_S| = 0; AGR when
|M_a| = 0; ARF when C_q is empty. When mentions were neither supplied nor derivable the result is N/A
with ``details["cause"] = "unavailable"`` (as opposed to ``"no_mentions"``: the extractor found none).
Degenerate-input counts (raw and coalesced mentions, grounded, unresolved, |V_S|) are in ``details``.

RHD (eq. 33): :func:`hop_depth` gives ℓ(q) as an ``int`` or ``math.inf``; the metric result carries ℓ
as its value when finite and is N/A with ``details["hops"] = "inf"`` for the ∞ bucket (a
:class:`MetricResult` value is always finite). :func:`rhd_distribution` aggregates ℓ over queries.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from triage_plugins.contract.events import GenerationEvent, Gold, RetrievalEvent, Triple
from triage_plugins.contract.graph_view import normalize_label
from triage_plugins.metrics.result import MetricResult, na, ok

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView

__all__ = [
    "GOLD_FREE",
    "METRICS",
    "POPULATION_METRICS",
    "Grounderlike",
    "aggregate_usage",
    "answer_f1",
    "answer_grounding_rate",
    "answer_reasoning_faithfulness",
    "answer_utilization_rate",
    "chain_head_metrics",
    "context_coverage",
    "entity_retrieval_coverage",
    "entity_retrieval_precision",
    "gold_answers_hit",
    "gold_path_coverage",
    "hard_gold_answers",
    "hard_hits_rate",
    "hits_at_1",
    "hop_depth",
    "kg_net_impact",
    "query_grounding_rate",
    "reasoning_failure_rate",
    "reasoning_hop_depth",
    "reasoning_readiness_score",
    "relation_stated",
    "retrieval_path_cost",
    "retrieval_path_precision",
    "retrieval_path_recall",
    "rhd_distribution",
    "usage_metrics",
]


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
    return _coalesce(generation.answer_mentions, generation.answer_grounding, generation.answer, grounder)


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


# --------------------------------------------------------------------------- eq. 25–29 kernels


def _mention_na(name: str, q: _Mentions, side: str = "query") -> MetricResult:
    if not q.available:
        return na(name, f"{side} mentions not supplied and no grounder to derive them", cause=_UNAVAILABLE)
    return na(
        name,
        f"no entity mention could be extracted from the {side} (|M|=0)",
        cause=_NO_MENTIONS,
        **q.counts(),
    )


def _qgr(q: _Mentions) -> MetricResult:
    if q.n == 0:
        return _mention_na("QGR", q)
    return ok("QGR", len(q.grounded) / q.n, n=q.n, **q.counts())


def _erc(q: _Mentions, sub: _Subgraph) -> MetricResult:
    if q.n == 0:
        return _mention_na("ERC", q)
    hit = sum(1 for n in q.grounded if n in sub.nodes)
    return ok("ERC", hit / q.n, n=q.n, retrieved=hit, retrieved_nodes=len(sub.nodes), **q.counts())


def _erp(q: _Mentions, sub: _Subgraph) -> MetricResult:
    if not sub.nodes:
        return na("ERP", "empty retrieval (|V_S|=0)", retrieved_nodes=0)
    if not q.available:
        return _mention_na("ERP", q)
    hit = sum(1 for n in q.grounded if n in sub.nodes)
    return ok("ERP", hit / len(sub.nodes), n=len(sub.nodes), retrieved=hit, retrieved_nodes=len(sub.nodes))


def _rrs(q: _Mentions, sub: _Subgraph, conn: _Connectivity) -> MetricResult:
    if q.n == 0:
        return _mention_na("RRS", q)
    if q.n == 1:
        hit = any(n in sub.nodes for n in q.grounded)
        return ok("RRS", 1.0 if hit else 0.0, n=1, pairs=0, single_entity=1, **q.counts())
    pairs = q.n * (q.n - 1) // 2
    return ok(
        "RRS",
        conn.connected_pairs / pairs,
        n=pairs,
        pairs=pairs,
        connected_pairs=conn.connected_pairs,
        **q.counts(),
    )


def _rpc(retrieval: RetrievalEvent) -> MetricResult:
    extra: dict[str, Any] = {}
    if retrieval.seconds is not None:
        extra["seconds"] = retrieval.seconds
    if retrieval.expanded_nodes is None:
        why = retrieval.expanded_nodes_note or "the retriever did not report how many nodes it expanded"
        return na("RPC", why, **extra)
    if retrieval.expanded_nodes_note:
        return ok("RPC", retrieval.expanded_nodes, reason=retrieval.expanded_nodes_note, **extra)
    return ok("RPC", retrieval.expanded_nodes, **extra)


def _hops(q: _Mentions, sub: _Subgraph, conn: _Connectivity) -> tuple[float | None, str]:
    """ℓ(q) and why (DESIGN §4): 0 for one retrieved entity, ∞ on disconnection or failure."""
    if not q.available:
        return None, "query mentions not supplied and no grounder to derive them"
    if q.n == 0:
        return math.inf, "no entity mention in the query"
    if not q.grounded:
        return math.inf, "no query mention grounded to the KG"
    if any(n not in sub.nodes for n in q.grounded):
        return math.inf, "a grounded query entity is not in the retrieved subgraph"
    if conn.max_distance == math.inf:
        return math.inf, "grounded query entities are disconnected in K_S"
    return conn.max_distance, ""


def _rhd(q: _Mentions, sub: _Subgraph, conn: _Connectivity) -> MetricResult:
    hops, why = _hops(q, sub, conn)
    if hops is None:
        return na("RHD", why, cause=_UNAVAILABLE)
    if hops == math.inf:
        return na("RHD", f"ℓ(q) = ∞: {why}", hops="inf", **q.counts())
    return ok("RHD", hops, n=len(q.grounded), hops=int(hops))


# --------------------------------------------------------------------------- eq. 30–32 kernels


def _no_generation(name: str) -> MetricResult:
    return na(name, "no generation event for this query")


def _agr(a: _Mentions, sub: _Subgraph) -> MetricResult:
    if a.n == 0:
        return _mention_na("AGR", a, "answer")
    hit = sum(1 for n in a.grounded if n in sub.nodes)
    return ok("AGR", hit / a.n, n=a.n, in_context=hit, **a.counts())


def _aur(a: _Mentions, sub: _Subgraph) -> MetricResult:
    if not sub.nodes:
        return na("AUR", "empty retrieval (|V_S|=0)", retrieved_nodes=0)
    if not a.available:
        return _mention_na("AUR", a, "answer")
    hit = sum(1 for n in a.grounded if n in sub.nodes)
    return ok("AUR", hit / len(sub.nodes), n=len(sub.nodes), in_context=hit, retrieved_nodes=len(sub.nodes))


_STOP_WORDS = "a an the of by in on at to for with from as is are was were be been has have had its"
_STOP = frozenset(_STOP_WORDS.split())
_SEGMENT = re.compile(r"[/.#:]")
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ers", "er", "ors", "or", "es", "s", "ly")


def _stem(token: str) -> str:
    """A tiny suffix-stripping stemmer: 'directed', 'directs', 'director' -> 'direct';
    'release', 'released' -> 'releas'; 'movie', 'movies' -> 'movi'."""
    if token.endswith("ies") and len(token) >= 5:
        token = token[:-3] + "i"
    else:
        for suffix in _SUFFIXES:
            if token.endswith(suffix) and len(token) - len(suffix) >= 3:
                token = token[: -len(suffix)]
                break
    if len(token) > 3 and token[-1] in "ey":
        token = token[:-1] + ("i" if token[-1] == "y" else "")
    return token


@lru_cache(maxsize=4096)
def _relation_stems(label: str) -> frozenset[str]:
    """Content stems of a relation label; for 'film.film.directed_by' only the last segment counts."""
    segment = _SEGMENT.split(label.strip("/.#: "))[-1] or label
    tokens = normalize_label(segment).split()
    content = [t for t in tokens if t not in _STOP] or tokens
    return frozenset(_stem(t) for t in content)


def _text_stems(text: str) -> frozenset[str]:
    return frozenset(_stem(t) for t in normalize_label(text).split())


def relation_stated(predicate: str, answer: str) -> bool:
    """Whether ``predicate`` appears lexically in ``answer`` (DESIGN §4 ARF).

    Both sides are normalized (case, punctuation and underscores to spaces) and stemmed; stop words
    of the label are dropped and every remaining stem must occur in the answer.
    """
    stems = _relation_stems(predicate)
    return bool(stems) and stems <= _text_stems(answer)


def _arf(a: _Mentions, sub: _Subgraph, answer: str) -> MetricResult:
    if not a.available:
        return _mention_na("ARF", a, "answer")
    anchors = a.grounded & sub.nodes
    if len(anchors) < 2:
        return na("ARF", "no retrieved triple joins two answer entities (|C_q|=0)", co_mentioned=0)
    cq = [
        t
        for t, s, o in zip(sub.triples, sub.subs, sub.objs, strict=True)
        if s in anchors and o in anchors and s != o
    ]
    if not cq:
        return na("ARF", "no retrieved triple joins two answer entities (|C_q|=0)", co_mentioned=0)
    stems = _text_stems(answer)
    stated = 0
    for t in cq:
        rel = _relation_stems(t.predicate)
        if rel and rel <= stems:
            stated += 1
    return ok("ARF", stated / len(cq), n=len(cq), co_mentioned=len(cq), stated=stated)


# --------------------------------------------------------------------------- gold kernels (§4.3.4–4.3.5)


def _no_gold(name: str, what: str = "gold annotations") -> MetricResult:
    return na(name, f"no {what} for this query")


def _triple_key(t: Triple) -> tuple[str, str, str]:
    return (t.subject, t.predicate, t.object)


def _gold_path_sets(gold: Gold) -> list[set[tuple[str, str, str]]]:
    return [{_triple_key(t) for t in path} for path in gold.paths if path]


def _gpc(gold: Gold | None, sub: _Subgraph) -> MetricResult:
    if gold is None or not gold.paths:
        return _no_gold("GPC", "gold reasoning path")
    have = {_triple_key(t) for t in sub.triples}
    paths = _gold_path_sets(gold)
    covered = any(p <= have for p in paths)
    return ok("GPC", 1.0 if covered else 0.0, n=1, gold_paths=len(paths))


def _rpp_rpr(gold: Gold | None, sub: _Subgraph) -> tuple[MetricResult, MetricResult]:
    if gold is None or not gold.paths:
        return _no_gold("RPP", "gold reasoning path"), _no_gold("RPR", "gold reasoning path")
    star: set[tuple[str, str, str]] = set().union(*_gold_path_sets(gold))
    have = {_triple_key(t) for t in sub.triples}
    both = len(have & star)
    rpp = (
        ok("RPP", both / len(have), n=len(have), on_gold_path=both)
        if have
        else na("RPP", "empty retrieval (|K_S|=0)", on_gold_path=0)
    )
    rpr = ok("RPR", both / len(star), n=len(star), retrieved=both)
    return rpp, rpr


def _normalized_nodes(nodes: Iterable[str]) -> set[str]:
    return {normalize_label(n) for n in nodes}


def _cc(gold: Gold | None, sub: _Subgraph) -> MetricResult:
    if gold is None or not gold.answers:
        return _no_gold("CC", "gold answers")
    missing = [g for g in gold.answers if g not in sub.nodes]
    if missing:  # fall back to normalized labels only when an id is not found as is
        normal = _normalized_nodes(sub.nodes)
        missing = [g for g in missing if normalize_label(g) not in normal]
    present = len(gold.answers) - len(missing)
    value = 1.0 if present == len(gold.answers) else 0.0
    return ok("CC", value, n=1, gold_answers=len(gold.answers), in_context=present)


def _answer_hits(answers: Iterable[str], answer: str, a: _Mentions) -> set[str]:
    """Gold answers found in the answer: by grounded node id, or as a whole phrase in its text."""
    text = f" {normalize_label(answer)} "
    grounded_norm = _normalized_nodes(a.grounded)
    hits = set()
    for g in answers:
        norm = normalize_label(g)
        if g in a.grounded or norm in grounded_norm or (norm and f" {norm} " in text):
            hits.add(g)
    return hits


def gold_answers_hit(
    answers: Iterable[str], generation: GenerationEvent, *, grounder: Grounderlike | None = None
) -> set[str]:
    """The ``answers`` (node ids) that ``generation`` names: as a grounded answer entity, or as the
    normalized label appearing as a whole phrase in the normalized answer text (Hits@1's test)."""
    return _answer_hits(answers, generation.answer, _answer_mentions(generation, grounder))


def _hits1(gold: Gold | None, generation: GenerationEvent | None, a: _Mentions | None) -> MetricResult:
    if gold is None or not gold.answers:
        return _no_gold("Hits@1", "gold answers")
    if generation is None or a is None:
        return _no_generation("Hits@1")
    hits = _answer_hits(gold.answers, generation.answer, a)
    return ok("Hits@1", 1.0 if hits else 0.0, n=1, gold_hit=len(hits))


def _f1(
    gold: Gold | None, generation: GenerationEvent | None, a: _Mentions | None, q: _Mentions
) -> MetricResult:
    if gold is None or not gold.answers:
        return _no_gold("F1", "gold answers")
    if generation is None or a is None:
        return _no_generation("F1")
    if not a.available:
        return _mention_na("F1", a, "answer")
    gold_set = set(gold.answers)
    predicted = set(a.grounded) - (q.grounded - gold_set)
    hit = len(predicted & gold_set)
    if not predicted:
        return ok(
            "F1", 0.0, n=0, reason="the answer names no entity beyond the question's", predicted=0, correct=0
        )
    precision = hit / len(predicted)
    recall = hit / len(gold_set)
    f1 = 0.0 if hit == 0 else 2 * precision * recall / (precision + recall)
    return ok(
        "F1", f1, n=len(predicted), predicted=len(predicted), correct=hit, precision=precision, recall=recall
    )


def _kni(
    agr_with: MetricResult,
    closed_book: GenerationEvent | None,
    sub: _Subgraph,
    grounder: Grounderlike | None,
) -> MetricResult:
    if closed_book is None:
        return na("KNI", "no closed-book (context='none') generation for this query")
    if agr_with.value is None:
        return na("KNI", f"AGR with retrieval is N/A ({agr_with.reason})")
    without = _agr(_answer_mentions(closed_book, grounder), sub)
    if without.value is None:
        return na("KNI", f"AGR without retrieval is N/A ({without.reason})")
    return ok(
        "KNI",
        agr_with.value - without.value,
        n=1,
        agr_retrieved=agr_with.value,
        agr_closed_book=without.value,
    )


# --------------------------------------------------------------------------- public per-query metrics


def query_grounding_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """QGR = |V_q^g| / |M_q| (TRIAGE eq. 25): share of query mentions that exist as KG nodes."""
    return _qgr(_query_mentions(retrieval, grounder))


def entity_retrieval_coverage(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """ERC = |V_q^g ∩ V_S| / |M_q| (TRIAGE eq. 26); ERC ≤ QGR by construction."""
    return _erc(_query_mentions(retrieval, grounder), _Subgraph(retrieval))


def entity_retrieval_precision(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """ERP = |V_q^g ∩ V_S| / |V_S| (TRIAGE eq. 27); read relatively, low by construction."""
    return _erp(_query_mentions(retrieval, grounder), _Subgraph(retrieval))


def reasoning_readiness_score(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RRS (TRIAGE eq. 28): connected grounded pairs in K_S over C(|M_q|, 2); 1[V_q^g ∩ V_S ≠ ∅] if |M_q| = 1.

    Pairs are taken over the coalesced mention set and connectivity is undirected (DESIGN §4).
    """
    q = _query_mentions(retrieval, grounder)
    sub = _Subgraph(retrieval)
    return _rrs(q, sub, _connectivity(q, sub))


def retrieval_path_cost(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RPC (TRIAGE eq. 29): nodes expanded during retrieval, as the retriever reports it."""
    return _rpc(retrieval)


def hop_depth(retrieval: RetrievalEvent, *, grounder: Grounderlike | None = None) -> int | float | None:
    """ℓ(q) of TRIAGE eq. 33: the largest pairwise undirected shortest-path length among the grounded
    query entities in K_S; 0 for one retrieved entity; ``math.inf`` when a pair is disconnected or
    grounding/retrieval failed; ``None`` when the mentions are unavailable (not evaluable)."""
    q = _query_mentions(retrieval, grounder)
    sub = _Subgraph(retrieval)
    hops, _ = _hops(q, sub, _connectivity(q, sub))
    return hops if hops is None or hops == math.inf else int(hops)


def reasoning_hop_depth(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RHD's per-query ℓ(q) (TRIAGE eq. 33) as a result: value ℓ, or N/A with ``hops="inf"`` for ∞."""
    q = _query_mentions(retrieval, grounder)
    sub = _Subgraph(retrieval)
    return _rhd(q, sub, _connectivity(q, sub))


def answer_grounding_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """AGR = |V_a^g ∩ V_S| / |M_a| (TRIAGE eq. 30): answer entities found in the retrieved context."""
    if generation is None:
        return _no_generation("AGR")
    return _agr(_answer_mentions(generation, grounder), _Subgraph(retrieval))


def answer_utilization_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """AUR = |V_a^g ∩ V_S| / |V_S| (TRIAGE eq. 31): how much of the retrieved context the answer used."""
    if generation is None:
        return _no_generation("AUR")
    return _aur(_answer_mentions(generation, grounder), _Subgraph(retrieval))


def answer_reasoning_faithfulness(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """ARF (TRIAGE eq. 32): of the retrieved triples whose two (distinct) endpoints are both grounded
    in the answer (C_q), the share whose relation label appears lexically in the answer
    (:func:`relation_stated`); N/A when C_q is empty."""
    if generation is None:
        return _no_generation("ARF")
    return _arf(_answer_mentions(generation, grounder), _Subgraph(retrieval), generation.answer)


def kg_net_impact(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """KNI (TRIAGE §4.3.5, after [33]) per query: AGR of the answer given the retrieved context minus
    AGR of the closed-book answer (``context="none"``), both against the same V_S; in [-1, 1]."""
    if generation is None:
        return _no_generation("KNI")
    sub = _Subgraph(retrieval)
    return _kni(_agr(_answer_mentions(generation, grounder), sub), closed_book, sub, grounder)


def gold_path_coverage(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """GPC's per-query label (TRIAGE eq. 34): 1 when some gold path P*_q lies entirely in K_S.

    Triples are compared by (subject, predicate, object); GPC over a query set is the mean label.
    """
    return _gpc(retrieval.gold, _Subgraph(retrieval))


def retrieval_path_precision(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RPP = |K_S ∩ P*_q| / |K_S| (TRIAGE eq. 35), P*_q the union of the gold paths' triples."""
    return _rpp_rpr(retrieval.gold, _Subgraph(retrieval))[0]


def retrieval_path_recall(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RPR = |K_S ∩ P*_q| / |P*_q| (TRIAGE eq. 35)."""
    return _rpp_rpr(retrieval.gold, _Subgraph(retrieval))[1]


def context_coverage(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """CC's per-query label (TRIAGE §4.3.5, §5.1): 1 when *all* gold answers are nodes of V_S."""
    return _cc(retrieval.gold, _Subgraph(retrieval))


def hits_at_1(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """Hits@1 (TRIAGE §4.3.4, §5.1): 1 when a gold answer appears in the generated answer — as a
    grounded answer entity, or as its normalized label, a whole phrase of the normalized answer."""
    if generation is None:
        return _hits1(retrieval.gold, None, None)
    return _hits1(retrieval.gold, generation, _answer_mentions(generation, grounder))


def answer_f1(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """Answer-set F1 (TRIAGE §4.3.4): predicted set = grounded answer entities, minus the question's own
    entities unless they are gold; F1 = 0 when the answer names no other entity."""
    if generation is None:
        return _f1(retrieval.gold, None, None, _Mentions(0, frozenset(), 0, False))
    return _f1(
        retrieval.gold,
        generation,
        _answer_mentions(generation, grounder),
        _query_mentions(retrieval, grounder),
    )


MetricFunction = Callable[..., MetricResult]

METRICS: dict[str, MetricFunction] = {
    "QGR": query_grounding_rate,
    "ERC": entity_retrieval_coverage,
    "ERP": entity_retrieval_precision,
    "RRS": reasoning_readiness_score,
    "RPC": retrieval_path_cost,
    "RHD": reasoning_hop_depth,
    "AGR": answer_grounding_rate,
    "AUR": answer_utilization_rate,
    "ARF": answer_reasoning_faithfulness,
    "KNI": kg_net_impact,
    "GPC": gold_path_coverage,
    "RPP": retrieval_path_precision,
    "RPR": retrieval_path_recall,
    "CC": context_coverage,
    "Hits@1": hits_at_1,
    "F1": answer_f1,
}
"""Per-query usage metrics by symbol; each ``f(retrieval, generation=None, *, grounder, closed_book)``."""

GOLD_FREE: tuple[str, ...] = ("QGR", "ERC", "ERP", "RRS", "RPC", "RHD", "AGR", "AUR", "ARF", "KNI")
"""The deployable, gold-free subset (Table 2 above the dashed line)."""


# --------------------------------------------------------------------------- all at once


def chain_head_metrics(
    retrieval: RetrievalEvent, *, grounder: Grounderlike | None = None
) -> dict[str, MetricResult]:
    """QGR, ERC and RRS only: the pre-generation links of the chain, for the synchronous gate."""
    q = _query_mentions(retrieval, grounder)
    sub = _Subgraph(retrieval)
    return {"QGR": _qgr(q), "ERC": _erc(q, sub), "RRS": _rrs(q, sub, _connectivity(q, sub))}


def usage_metrics(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> dict[str, MetricResult]:
    """Every per-query usage metric of :data:`METRICS` for one query, sharing one grounding and one
    subgraph index. Answer-side metrics are N/A without ``generation``, gold metrics without
    ``retrieval.gold``, KNI without ``closed_book`` (a ``context="none"`` generation)."""
    q = _query_mentions(retrieval, grounder)
    sub = _Subgraph(retrieval)
    conn = _connectivity(q, sub)
    out = {
        "QGR": _qgr(q),
        "ERC": _erc(q, sub),
        "ERP": _erp(q, sub),
        "RRS": _rrs(q, sub, conn),
        "RPC": _rpc(retrieval),
        "RHD": _rhd(q, sub, conn),
    }
    a: _Mentions | None = None
    if generation is None:
        for name in ("AGR", "AUR", "ARF", "KNI"):
            out[name] = _no_generation(name)
    else:
        a = _answer_mentions(generation, grounder)
        out["AGR"] = _agr(a, sub)
        out["AUR"] = _aur(a, sub)
        out["ARF"] = _arf(a, sub, generation.answer)
        out["KNI"] = _kni(out["AGR"], closed_book, sub, grounder)
    gold = retrieval.gold
    out["GPC"] = _gpc(gold, sub)
    out["RPP"], out["RPR"] = _rpp_rpr(gold, sub)
    out["CC"] = _cc(gold, sub)
    out["Hits@1"] = _hits1(gold, generation, a)
    out["F1"] = _f1(gold, generation, a, q)
    return out


# --------------------------------------------------------------------------- population level


def rhd_distribution(values: Iterable[int | float | MetricResult | None]) -> dict[int | float, float]:
    """RHD(k) = |{q : ℓ(q) = k}| / |Q| over k ∈ {0, 1, 2, …, ∞} (TRIAGE eq. 33).

    Accepts ℓ values (``int`` or ``math.inf``) or RHD :class:`MetricResult` objects. Unevaluable
    queries (``None``, or results with ``cause="unavailable"``) are left out of Q. Keys are ascending
    with ``math.inf`` last; the fractions sum to 1. Empty input gives ``{}``.
    """
    counts: dict[int | float, int] = {}
    for v in values:
        if isinstance(v, MetricResult):
            hops = v.details.get("hops")
            if hops is None:
                continue
            v = math.inf if hops == "inf" else int(hops)
        if v is None:
            continue
        key: int | float = math.inf if v == math.inf else int(v)
        counts[key] = counts.get(key, 0) + 1
    total = sum(counts.values())
    return {k: counts[k] / total for k in sorted(counts)}


def reasoning_failure_rate(
    context_covered: Sequence[float | None], hits: Sequence[float | None]
) -> MetricResult:
    """RFR (TRIAGE §4.3.5, after [65]): among queries whose gold answer is in context (CC = 1), the
    share answered wrongly (Hits@1 = 0). Pairs with either label N/A are left out."""
    if len(context_covered) != len(hits):
        raise ValueError(f"RFR needs one Hits@1 per CC label, got {len(context_covered)} and {len(hits)}")
    pairs = [(c, h) for c, h in zip(context_covered, hits, strict=True) if c is not None and h is not None]
    in_context = [h for c, h in pairs if c >= 0.5]
    if not in_context:
        return na("RFR", "no query has its gold answer in the retrieved context", queries=len(pairs))
    wrong = sum(1 for h in in_context if h < 0.5)
    return ok("RFR", wrong / len(in_context), n=len(in_context), wrong=wrong, queries=len(pairs))


def hard_gold_answers(gold: Gold, graph: GraphView) -> tuple[str, ...]:
    """Gold answers no single KG triple links to a gold topic entity: answering them needs reasoning
    beyond a direct lookup (the "hard" answers of [70] under an incomplete KG)."""
    topics = set(gold.entities)
    hard = []
    for answer in gold.answers:
        if not graph.has_node(answer):
            hard.append(answer)
            continue
        if not topics.intersection(graph.neighbours(answer)):
            hard.append(answer)
    return tuple(hard)


def hard_hits_rate(hits_any: Sequence[float | None], hits_hard: Sequence[float | None]) -> MetricResult:
    """HHR = Hits@Hard / Hits@Any (TRIAGE §4.3.5, after [70]), over the queries that have hard answers.

    ``hits_hard[i]`` is 1 when the answer hits one of query i's hard gold answers, ``None`` when the
    query has none (then it is left out, with its ``hits_any``).
    """
    if len(hits_any) != len(hits_hard):
        raise ValueError(f"HHR needs paired labels, got {len(hits_any)} and {len(hits_hard)}")
    pairs = [(a, h) for a, h in zip(hits_any, hits_hard, strict=True) if a is not None and h is not None]
    if not pairs:
        return na("HHR", "no query with hard gold answers and an answer")
    any_rate = sum(1 for a, _ in pairs if a >= 0.5) / len(pairs)
    hard_rate = sum(1 for _, h in pairs if h >= 0.5) / len(pairs)
    if any_rate == 0:
        return na("HHR", "Hits@Any is 0: no query was answered correctly", n=len(pairs))
    return ok("HHR", hard_rate / any_rate, n=len(pairs), hits_any=any_rate, hits_hard=hard_rate)


POPULATION_METRICS: dict[str, Callable[..., MetricResult]] = {
    "RFR": reasoning_failure_rate,
    "HHR": hard_hits_rate,
}
"""Population-level ratios with no single-query value (TRIAGE §4.3.5)."""


def aggregate_usage(per_query: Iterable[Mapping[str, MetricResult]]) -> dict[str, MetricResult]:
    """Means of the per-query usage metrics over the queries where each is defined.

    A metric undefined everywhere stays N/A with the most common reason; ``details`` counts the N/A
    queries per cause. RHD is not averaged (see :func:`rhd_distribution`); GPC and CC means are the
    population rates of eq. 34 and §4.3.5; RFR is added from the CC and Hits@1 labels.
    """
    values: dict[str, list[float]] = {}
    missing: dict[str, dict[str, int]] = {}
    cc: list[float | None] = []
    hits: list[float | None] = []
    for row in per_query:
        for name, result in row.items():
            if name == "RHD":
                continue
            if result.value is None:
                bucket = missing.setdefault(name, {})
                reason = result.reason or "undefined"
                bucket[reason] = bucket.get(reason, 0) + 1
                values.setdefault(name, [])
            else:
                values.setdefault(name, []).append(result.value)
        if "CC" in row and "Hits@1" in row:
            cc.append(row["CC"].value)
            hits.append(row["Hits@1"].value)
    out: dict[str, MetricResult] = {}
    for name, vals in values.items():
        na_counts = missing.get(name, {})
        n_na = sum(na_counts.values())
        if vals:
            out[name] = ok(name, math.fsum(vals) / len(vals), n=len(vals), na_queries=n_na)
        else:
            reason = max(na_counts, key=na_counts.__getitem__)
            out[name] = na(name, reason, n=0, na_queries=n_na)
    if cc:
        out["RFR"] = reasoning_failure_rate(cc, hits)
    return out
