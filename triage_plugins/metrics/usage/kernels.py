"""The per-query kernels over the shared views: TRIAGE eq. 25–29 and 33 (retrieval time), eq. 30–32
and KNI (answer time), eq. 34–35, CC, Hits@1 and F1 (gold)."""

from __future__ import annotations

import contextlib
import math
import weakref
from collections.abc import Iterable
from typing import Any

from triage_plugins.contract.events import GenerationEvent, Gold, RetrievalEvent, Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.citations import strip_citations
from triage_plugins.kg.relations import relation_stems, text_stems
from triage_plugins.metrics.answers import AnswerRule
from triage_plugins.metrics.result import MetricResult, na, ok
from triage_plugins.metrics.usage.views import (
    _NO_MENTIONS,
    _UNAVAILABLE,
    Grounderlike,
    _answer_mentions,
    _Connectivity,
    _Mentions,
    _Subgraph,
)

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
    """ℓ(q) and why (TRIAGE eq. 33, DESIGN §4): 0 for one retrieved entity, ∞ on disconnection or
    when grounding or retrieval failed for *any* query mention (an unresolved one included)."""
    if not q.available:
        return None, "query mentions not supplied and no grounder to derive them"
    if q.n == 0:
        return math.inf, "no entity mention in the query"
    if not q.grounded:
        return math.inf, "no query mention grounded to the KG"
    if q.unresolved:
        return math.inf, f"{q.unresolved} query mention(s) not grounded to the KG"
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


def relation_stated(predicate: str, answer: str) -> bool:
    """Whether ``predicate`` appears lexically in ``answer`` (DESIGN §4 ARF).

    Both sides are normalized (case, punctuation and underscores to spaces) and stemmed; stop words
    of the label are dropped and every remaining stem must occur in the answer.
    """
    stems = relation_stems(predicate)
    return bool(stems) and stems <= text_stems(answer)


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
    stems = text_stems(strip_citations(answer))
    stated = 0
    for t in cq:
        rel = relation_stems(t.predicate)
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


_EMPTY_PATHS = "every gold reasoning path is empty (|P*_q| = 0)"


def _gpc(gold: Gold | None, sub: _Subgraph) -> MetricResult:
    if gold is None or not gold.paths:
        return _no_gold("GPC", "gold reasoning path")
    paths = _gold_path_sets(gold)
    if not paths:
        return na("GPC", _EMPTY_PATHS, gold_paths=0)
    have = {_triple_key(t) for t in sub.triples}
    covered = any(p <= have for p in paths)
    return ok("GPC", 1.0 if covered else 0.0, n=1, gold_paths=len(paths))


def _rpp_rpr(gold: Gold | None, sub: _Subgraph) -> tuple[MetricResult, MetricResult]:
    if gold is None or not gold.paths:
        return _no_gold("RPP", "gold reasoning path"), _no_gold("RPR", "gold reasoning path")
    star: set[tuple[str, str, str]] = set().union(*_gold_path_sets(gold))
    if not star:
        return na("RPP", _EMPTY_PATHS), na("RPR", _EMPTY_PATHS)
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


_RULES: weakref.WeakKeyDictionary[Any, AnswerRule] = weakref.WeakKeyDictionary()
_PLAIN_RULE = AnswerRule()


def _rule(grounder: Grounderlike | None) -> AnswerRule:
    """The gold-hit rule over the grounder's graph labels and aliases (when it has them), one per
    grounder (its alias index is built once)."""
    if grounder is None:
        return _PLAIN_RULE
    try:
        return _RULES[grounder]
    except (KeyError, TypeError):
        pass
    graph = getattr(grounder, "graph", None)
    rule = AnswerRule(graph if isinstance(graph, GraphView) else None, getattr(grounder, "aliases", None))
    with contextlib.suppress(TypeError):  # not weak-referenceable: used once
        _RULES[grounder] = rule
    return rule


def _answer_hits(answers: Iterable[str], answer: str, a: _Mentions, rule: AnswerRule) -> set[str]:
    """Gold answers the answer names: a grounded answer entity that *is* the gold answer
    (:meth:`AnswerRule.same`), or a form of it as a whole phrase of the answer (:meth:`AnswerRule.hits`)."""
    answers = tuple(answers)
    hits = rule.hits(answer, answers)
    for g in answers:
        if g not in hits and any(rule.same(n, g) for n in a.grounded):
            hits.add(g)
    return hits


def gold_answers_hit(
    answers: Iterable[str], generation: GenerationEvent, *, grounder: Grounderlike | None = None
) -> set[str]:
    """The ``answers`` (node ids) that ``generation`` names by the gold-hit rule
    (:mod:`triage_plugins.metrics.answers`): as a grounded answer entity, or as a whole phrase of
    the normalized answer text (Hits@1's test)."""
    return _answer_hits(answers, generation.answer, _answer_mentions(generation, grounder), _rule(grounder))


def _hits1(
    gold: Gold | None,
    generation: GenerationEvent | None,
    a: _Mentions | None,
    grounder: Grounderlike | None = None,
) -> MetricResult:
    if gold is None or not gold.answers:
        return _no_gold("Hits@1", "gold answers")
    if generation is None or a is None:
        return _no_generation("Hits@1")
    hits = _answer_hits(gold.answers, generation.answer, a, _rule(grounder))
    return ok("Hits@1", 1.0 if hits else 0.0, n=1, gold_hit=len(hits))


def _f1(
    gold: Gold | None,
    generation: GenerationEvent | None,
    a: _Mentions | None,
    q: _Mentions,
    grounder: Grounderlike | None = None,
) -> MetricResult:
    """Answer-set F1: predicted entities match gold answers by the gold-hit rule's forms (case,
    punctuation, articles, aliases), so an id cased by the framework ("OSTRELIA") is the gold answer."""
    if gold is None or not gold.answers:
        return _no_gold("F1", "gold answers")
    if generation is None or a is None:
        return _no_generation("F1")
    if not a.available:
        return _mention_na("F1", a, "answer")
    rule = _rule(grounder)
    gold_set = set(gold.answers)

    def is_gold(node: str) -> bool:
        return any(rule.same(node, g) for g in gold_set)

    predicted = {n for n in a.grounded if n not in q.grounded or is_gold(n)}
    found = {g for g in gold_set if any(rule.same(n, g) for n in predicted)}
    hit = sum(1 for n in predicted if is_gold(n))
    if not predicted:  # P = 0/0: WebQSP's convention ([64], whose F1 TRIAGE uses) scores P = 1, R = 0
        return ok(
            "F1",
            0.0,
            n=0,
            reason="the answer names no entity beyond the question's (convention: P = 1, R = 0, F1 = 0)",
            predicted=0,
            correct=0,
            precision=1.0,
            recall=0.0,
        )
    precision = hit / len(predicted)
    recall = len(found) / len(gold_set)
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
