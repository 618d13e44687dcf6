"""``triage probe``: TRIAGE §5.1's distance-controlled probe and its Table 5 (predictive validity).

Every probe question (:mod:`~triage_plugins.reference.probe_builder`) is verbalized, grounded by
the pipeline's default grounder and run through the five retrievers of §5.1 (``gold-entity``,
``extracted-entity``, ``light-entity``, ``light-relation``, ``path``). Per observation
(question × retriever) it records the gold-free predictors ERC, RRS, QGR and RPC, and two outcomes:
CC (every gold-answer entity in the retrieved subgraph — reader-free) and Hits@1 (a gold answer in
the reader's answer). Off-topic questions have no gold answer and are excluded from the predictive
table, as in the paper. Every value is read from the scorer's record of the query
(``triage_query_scored``, DESIGN §4 "Scoring once"); the probe computes no metric itself.

Table 5's strata: ERC < 0.5, 0.5 ≤ ERC < 1, ERC = 1; RRS = 0, RRS > 0 — with n, CC % and Hits@1 %
and cluster-bootstrap BCa intervals (the question is the cluster: five retrievers see the same
question). θ_ERC is the Youden-optimal threshold for predicting CC = 0 from ERC, reported as the
paper does (the largest ERC value still classified failing), with a clustered BCa interval.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError, TriageError
from triage_plugins.contract.events import Gold
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.records import RecordCollector
from triage_plugins.diagnosis.calibration import clustered_bca_interval, youden_threshold
from triage_plugins.reference.probe_builder import build_probe
from triage_plugins.report.results import Observation, ProbeResult, Stratum

if TYPE_CHECKING:
    from triage_plugins.metrics.result import MetricResult

__all__ = ["PROBE_RETRIEVERS", "run_probe", "strata"]

PROBE_RETRIEVERS: tuple[str, ...] = (
    "gold-entity",
    "extracted-entity",
    "light-entity",
    "light-relation",
    "path",
)


def _metrics(collector: RecordCollector, framework: str, query_id: str) -> Mapping[str, MetricResult]:
    """The metrics of the query just answered, from its last record (the manager is synchronous: the
    records of one query are collected by the time its answer returns)."""
    record = next(
        (r for r in reversed(collector.take()) if r.framework == framework and r.query_id == query_id), None
    )
    if record is None:
        raise TriageError(
            f"no scorer record for {framework} query {query_id!r}: is a probe plugin "
            "(triage.probe.scorer, triage.probe.records) blocked by TRIAGE_DISABLE_PLUGINS?"
        )
    return record.metrics


def _value(metrics: Mapping[str, MetricResult], name: str) -> float | None:
    r = metrics.get(name)
    return None if r is None else r.value


def _rate(
    values: list[float], clusters: list[str], resamples: int, seed: int
) -> tuple[float | None, tuple | None]:
    if not values:
        return None, None
    est = 100.0 * float(np.mean(values))
    if len(set(clusters)) < 2 or len(values) < 2:
        return est, None
    ci = clustered_bca_interval(np.asarray(values, dtype=float), clusters, n_resamples=resamples, seed=seed)
    return est, (100.0 * ci.low, 100.0 * ci.high)


def strata(observations: Sequence[Observation], *, resamples: int = 1000, seed: int = 0) -> list[Stratum]:
    """Table 5's five strata over ``observations`` (off-topic questions must already be excluded)."""
    defs: list[tuple[str, Callable[[Observation], bool]]] = [
        ("ERC < 0.5", lambda o: o.ERC is not None and o.ERC < 0.5),
        ("0.5 <= ERC < 1", lambda o: o.ERC is not None and 0.5 <= o.ERC < 1.0),
        ("ERC = 1", lambda o: o.ERC is not None and o.ERC >= 1.0),
        ("RRS = 0", lambda o: o.RRS is not None and o.RRS == 0.0),
        ("RRS > 0", lambda o: o.RRS is not None and o.RRS > 0.0),
    ]
    out = []
    for name, keep in defs:
        rows = [o for o in observations if keep(o)]
        cc_rows = [o for o in rows if o.CC is not None]
        h_rows = [o for o in rows if o.hits1 is not None]
        cc, cc_ci = _rate([o.CC for o in cc_rows], [o.question_id for o in cc_rows], resamples, seed)  # type: ignore[misc]
        h, h_ci = _rate([o.hits1 for o in h_rows], [o.question_id for o in h_rows], resamples, seed)  # type: ignore[misc]
        out.append(Stratum(name, len(rows), cc, cc_ci, h, h_ci))
    return out


def run_probe(
    graph: GraphView,
    *,
    kb_name: str = "kb",
    per_category: int = 12,
    seed: int = 0,
    retrievers: Sequence[str] = PROBE_RETRIEVERS,
    candidates: set[str] | None = None,
    store: Any = None,
    resamples: int = 1000,
    progress: Callable[[str, int], Callable[[], None]] | None = None,
    **pipeline_options: Any,
) -> ProbeResult:
    """Build the probe over ``graph`` and run it through ``retrievers`` (module docstring)."""
    from triage_plugins.plugins.usage import collect_records
    from triage_plugins.reference.pipeline import ReferencePipeline
    from triage_plugins.runtime.manager import TriageManager

    unknown = set(retrievers) - set(PROBE_RETRIEVERS) - {"krag"}
    if unknown:
        raise ConfigError(f"unknown probe retriever(s): {', '.join(sorted(unknown))}")
    bar = progress or (lambda label, total: lambda: None)
    questions = build_probe(graph, per_category=per_category, seed=seed, candidates=candidates)
    counts: dict[str, int] = {}
    for q in questions:
        counts[q.category] = counts.get(q.category, 0) + 1
    notes = [
        f"{cat}: {n} of {per_category} questions (the KB cannot supply more)"
        for cat, n in counts.items()
        if n < per_category
    ]
    notes += [f"{cat}: 0 questions (the KB cannot supply any)" for cat in _missing(counts)]
    # The gate is off: the probe measures the retrievers as configured, not rerouted. Synchronous:
    # each query's record is there as soon as it is answered.
    manager = TriageManager(
        store,
        config=TriageConfig(gate=False),
        entry_points=False,
        defaults=store is not None,
        synchronous=True,
    )
    observations: list[Observation] = []
    try:
        scored = collect_records(manager, "triage.probe")
        pipeline = ReferencePipeline(manager, graph, **pipeline_options)
        tick = bar("probe questions × retrievers", len(questions) * len(retrievers))
        for q in questions:
            gold = Gold(q.gold_answers, (), q.entities) if q.gold_answers else Gold((), (), q.entities)
            for name in retrievers:
                answer = pipeline.ask(q.text, query_id=f"{q.id}:{name}", retriever=name, gold=gold)
                metrics = _metrics(scored, answer.retrieval.framework, answer.query_id)
                observations.append(
                    Observation(
                        question_id=q.id,
                        category=q.category,
                        retriever=name,
                        ERC=_value(metrics, "ERC"),
                        RRS=_value(metrics, "RRS"),
                        QGR=_value(metrics, "QGR"),
                        RPC=_value(metrics, "RPC"),
                        CC=_value(metrics, "CC") if q.gold_answers else None,
                        hits1=_value(metrics, "Hits@1") if q.gold_answers else None,
                        answer=answer.text,
                    )
                )
                tick()
        manager.flush()
    finally:
        manager.close()
    predictive = [o for o in observations if o.category != "off-topic"]
    pooled = strata(predictive, resamples=resamples, seed=seed)
    per_retriever = {
        name: strata([o for o in predictive if o.retriever == name], resamples=resamples, seed=seed)
        for name in retrievers
    }
    theta, theta_ci, j = _theta(predictive, resamples, seed)
    if theta is None:
        notes.append("θ_ERC undefined: ERC does not separate CC = 0 from CC = 1 on these observations")
    return ProbeResult(
        kb_name, questions, observations, pooled, per_retriever, theta, theta_ci, j, counts, notes
    )


def _missing(counts: dict[str, int]) -> list[str]:
    from triage_plugins.reference.probe_builder import CATEGORIES

    return [c for c in CATEGORIES if c not in counts]


def _theta(
    obs: Sequence[Observation], resamples: int, seed: int
) -> tuple[float | None, tuple | None, float | None]:
    rows = [o for o in obs if o.ERC is not None and o.CC is not None]
    if not rows:
        return None, None, None
    erc = [o.ERC for o in rows]
    failed = [o.CC == 0.0 for o in rows]
    fit = youden_threshold(erc, failed)
    if fit.threshold is None:
        return None, None, fit.j
    clusters = [o.question_id for o in rows]

    def stat(x: np.ndarray, y: np.ndarray) -> float:
        t = youden_threshold(x, y.astype(bool)).threshold
        return math.nan if t is None else t

    ci = clustered_bca_interval(
        (np.asarray(erc, dtype=float), np.asarray(failed, dtype=float)),
        clusters,
        stat,
        n_resamples=resamples,
        seed=seed,
    )
    return fit.threshold, (ci.low, ci.high), fit.j
