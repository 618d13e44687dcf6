"""The public per-query usage metrics, one function per symbol, each
``f(retrieval, generation=None, *, grounder=None, closed_book=None) -> MetricResult``."""

from __future__ import annotations

import math
from collections.abc import Callable

from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.metrics.result import MetricResult
from triage_plugins.metrics.usage.kernels import _rpc
from triage_plugins.metrics.usage.query import QueryView
from triage_plugins.metrics.usage.views import Grounderlike

# --------------------------------------------------------------------------- public per-query metrics


def query_grounding_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """QGR = |V_q^g| / |M_q| (TRIAGE eq. 25): share of query mentions that exist as KG nodes."""
    return QueryView(retrieval, grounder=grounder).qgr()


def entity_retrieval_coverage(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """ERC = |V_q^g ∩ V_S| / |M_q| (TRIAGE eq. 26); ERC ≤ QGR by construction."""
    return QueryView(retrieval, grounder=grounder).erc()


def entity_retrieval_precision(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """ERP = |V_q^g ∩ V_S| / |V_S| (TRIAGE eq. 27); read relatively, low by construction."""
    return QueryView(retrieval, grounder=grounder).erp()


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
    return QueryView(retrieval, grounder=grounder).rrs()


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
    grounding/retrieval failed for any mention (an unresolved one included); ``None`` when the
    mentions are unavailable (not evaluable)."""
    hops, _ = QueryView(retrieval, grounder=grounder).hops()
    return hops if hops is None or hops == math.inf else int(hops)


def reasoning_hop_depth(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RHD's per-query ℓ(q) (TRIAGE eq. 33) as a result: value ℓ, or N/A with ``hops="inf"`` for ∞."""
    return QueryView(retrieval, grounder=grounder).rhd()


def answer_grounding_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """AGR = |V_a^g ∩ V_S| / |M_a| (TRIAGE eq. 30): answer entities found in the retrieved context."""
    return QueryView(retrieval, generation, grounder=grounder).agr()


def answer_utilization_rate(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """AUR = |V_a^g ∩ V_S| / |V_S| (TRIAGE eq. 31): how much of the retrieved context the answer used."""
    return QueryView(retrieval, generation, grounder=grounder).aur()


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
    return QueryView(retrieval, generation, grounder=grounder).arf()


def kg_net_impact(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """KNI (TRIAGE §4.3.5, after [33]) per query: AGR of the answer given the retrieved context minus
    AGR of the closed-book answer (``context="none"``), both against the same V_S; in [-1, 1]."""
    return QueryView(retrieval, generation, grounder=grounder, closed_book=closed_book).kni()


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
    return QueryView(retrieval).gpc()


def retrieval_path_precision(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RPP = |K_S ∩ P*_q| / |K_S| (TRIAGE eq. 35), P*_q the union of the gold paths' triples."""
    return QueryView(retrieval).rpp()


def retrieval_path_recall(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """RPR = |K_S ∩ P*_q| / |P*_q| (TRIAGE eq. 35); N/A when every gold path is empty (0/0)."""
    return QueryView(retrieval).rpr()


def context_coverage(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """CC's per-query label (TRIAGE §4.3.5, §5.1): 1 when *all* gold answers are nodes of V_S."""
    return QueryView(retrieval).cc()


def hits_at_1(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """Hits@1 (TRIAGE §4.3.4, §5.1): 1 when the answer names a gold answer by the gold-hit rule
    (:mod:`triage_plugins.metrics.answers`): a grounded answer entity that is the gold answer, or a
    form of it (id, label, alias; case, punctuation, articles, possessives, citations normalized) as
    a whole phrase of the answer."""
    return QueryView(retrieval, generation, grounder=grounder).hits1()


def answer_f1(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
) -> MetricResult:
    """Answer-set F1 (TRIAGE §4.3.4, after [64]): predicted set = grounded answer entities, minus the
    question's own entities unless they are gold, matched to the gold answers by the gold-hit rule's
    forms; F1 = 0 when the answer names no other entity (WebQSP's convention: P = 1, R = 0)."""
    return QueryView(retrieval, generation, grounder=grounder).f1()


MetricFunction = Callable[..., MetricResult]
"""A per-query usage metric: ``f(retrieval, generation=None, *, grounder=None, closed_book=None)``."""
