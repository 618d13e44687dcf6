"""KG Usage metrics (TRIAGE §4.3, eq. 25–35) over one query's retrieval and generation events.

Every per-query function has the same signature, ``f(retrieval, generation=None, *, grounder=None,
closed_book=None) -> MetricResult`` (retrieval-time metrics ignore ``generation``), and has its
:class:`~triage_plugins.metrics.registry.MetricSpec` in the registry under the paper's symbol.
:func:`~triage_plugins.metrics.per_query.usage_metrics` computes every per-query metric of a registry at once; the built-in ones share
one :class:`QueryView` (the grounding and the subgraph index: this is the hot path, plain sets and
dicts, no networkx).

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

The package: ``views`` (mention sets, the subgraph index, connectivity), ``kernels`` (one per metric),
``query`` (:class:`QueryView`, :func:`query_view`), ``functions`` (the public per-query functions),
``population`` (the RHD distribution, RFR, HHR, the means over queries).
"""

from __future__ import annotations

from triage_plugins.metrics.usage.functions import (
    MetricFunction,
    answer_f1,
    answer_grounding_rate,
    answer_reasoning_faithfulness,
    answer_utilization_rate,
    context_coverage,
    entity_retrieval_coverage,
    entity_retrieval_precision,
    gold_path_coverage,
    hits_at_1,
    hop_depth,
    kg_net_impact,
    query_grounding_rate,
    reasoning_hop_depth,
    reasoning_readiness_score,
    retrieval_path_cost,
    retrieval_path_precision,
    retrieval_path_recall,
)
from triage_plugins.metrics.usage.kernels import gold_answers_hit, relation_stated
from triage_plugins.metrics.usage.population import (
    aggregate_usage,
    hard_gold_answers,
    hard_hits_rate,
    reasoning_failure_rate,
    rhd_distribution,
)
from triage_plugins.metrics.usage.query import QueryView, query_view
from triage_plugins.metrics.usage.views import Grounderlike

__all__ = [
    "Grounderlike",
    "MetricFunction",
    "QueryView",
    "aggregate_usage",
    "answer_f1",
    "answer_grounding_rate",
    "answer_reasoning_faithfulness",
    "answer_utilization_rate",
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
    "query_view",
    "reasoning_failure_rate",
    "reasoning_hop_depth",
    "reasoning_readiness_score",
    "relation_stated",
    "retrieval_path_cost",
    "retrieval_path_precision",
    "retrieval_path_recall",
    "rhd_distribution",
]
