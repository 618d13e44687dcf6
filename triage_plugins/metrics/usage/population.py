"""Usage metrics over a query set: the RHD distribution (eq. 33), RFR and HHR (§4.3.5), and the means
of the per-query metrics."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from triage_plugins.contract.events import Gold
from triage_plugins.metrics.result import MetricResult, na, ok

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView


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
