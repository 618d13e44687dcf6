"""KG Completion probe (TRIAGE §4.1.3, Table 2): the black-box completeness check.

When a graph arrives without source text, log-probabilities or provenance, link prediction asks
whether it is complete: for each held-out triple (h, r, t) the query (h, r, ?) ranks every entity
of the graph, and the rank of t gives Mean Rank, MRR and Hits@{1,3,10} in the **filtered**
setting (other known tails of (h, r) are removed from the candidates), MRR_type (eq. 17, the
rank among type-valid tails under an ontology) and ECE (eq. 18, calibration of the scorer's
top-1 confidence).

The model is a pluggable :data:`LinkScorer`; :class:`RelationTailPrior` is the built-in
baseline so the probe runs out of the box. Only tail prediction is run (the scorer's signature
fixes the head); rank ties count half (the mean of the optimistic and pessimistic ranks).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology
from triage_plugins.metrics.result import MetricResult, na, ok

__all__ = [
    "HITS_AT",
    "LinkPredictionRanks",
    "LinkScorer",
    "RelationTailPrior",
    "completion_metrics",
    "expected_calibration_error",
    "filtered_ranks",
    "hits_at_k",
    "mean_rank",
    "mean_reciprocal_rank",
    "split_holdout",
    "type_constrained_mrr",
]

LinkScorer = Callable[[str, str, Sequence[str]], np.ndarray]
"""A link-prediction model: ``(head, relation, candidate tails) -> one score per candidate``
(higher is more plausible)."""

HITS_AT: tuple[int, ...] = (1, 3, 10)


class RelationTailPrior:
    """Baseline scorer: P(t | r), how often ``t`` is the object of relation ``r`` in the graph.

    ``score(h, r, t) = (count(·, r, t) + α) / (count(·, r, ·) + α·|V|)`` with add-α smoothing; the
    head is ignored. This is a relation-conditioned popularity prior — a *baseline*, not a
    learned embedding model (TransE, RotatE ...): it answers "is the graph's answer the usual
    answer for this relation", which is what a probe needs to run out of the box. Scores are
    probabilities, so ECE (eq. 18) is defined for it.

    :param graph: the training graph (held-out triples must not be in it).
    :param smoothing: α > 0.
    """

    def __init__(self, graph: GraphView, *, smoothing: float = 1.0) -> None:
        if not smoothing > 0:
            raise ConfigError(f"smoothing must be > 0, got {smoothing!r}")
        self.smoothing = float(smoothing)
        self._n_nodes = len(graph.nodes)
        self._index = {node: i for i, node in enumerate(graph.nodes)}
        obj = graph.object_index
        by_relation: dict[str, list[int]] = defaultdict(list)
        for i, t in enumerate(graph.triples):
            by_relation[t.predicate].append(i)
        self._counts = {r: np.bincount(obj[ids], minlength=self._n_nodes) for r, ids in by_relation.items()}
        self._cached: tuple[Sequence[str], np.ndarray] | None = None

    def _positions(self, candidates: Sequence[str]) -> np.ndarray:
        if self._cached is not None and self._cached[0] is candidates:
            return self._cached[1]
        pos = np.fromiter((self._index.get(c, -1) for c in candidates), dtype=np.int64, count=len(candidates))
        self._cached = (candidates, pos)
        return pos

    def __call__(self, head: str, relation: str, candidates: Sequence[str]) -> np.ndarray:
        pos = self._positions(candidates)
        counts = self._counts.get(relation)
        raw = (
            np.zeros(len(candidates)) if counts is None else np.where(pos >= 0, counts[np.maximum(pos, 0)], 0)
        )
        total = 0 if counts is None else int(counts.sum())
        return (raw + self.smoothing) / (total + self.smoothing * self._n_nodes)


@dataclass(frozen=True)
class LinkPredictionRanks:
    """Per-query outcome of the filtered ranking protocol.

    :param ranks: filtered rank of the true tail among all candidates (ties count half).
    :param type_ranks: the same rank among type-valid candidates (eq. 17), or ``None`` without
        an ontology.
    :param top_confidence: the scorer's highest score over the filtered candidates.
    :param top_correct: probability that the top-1 prediction is the true tail (1/(ties+1)
        when the true tail shares the top score, else 0).
    :param skipped: held-out triples whose tail is not a candidate entity.
    """

    ranks: np.ndarray
    type_ranks: np.ndarray | None
    top_confidence: np.ndarray
    top_correct: np.ndarray
    skipped: int


def _entity_types(graph: GraphView) -> dict[str, set[str]]:
    types: dict[str, set[str]] = defaultdict(set)
    for t in graph.triples:
        if t.subject_type:
            types[t.subject].add(t.subject_type)
        if t.object_type:
            types[t.object].add(t.object_type)
    return types


def filtered_ranks(
    test: Sequence[Triple],
    scorer: LinkScorer,
    candidates: Sequence[str],
    *,
    known: Iterable[Triple] = (),
    ontology: Ontology | None = None,
    entity_types: Mapping[str, set[str]] | None = None,
) -> LinkPredictionRanks:
    """Rank the true tail of each held-out (h, r, t) among ``candidates`` (TRIAGE §4.1.3).

    Filtered setting: every other tail t' with (h, r, t') in ``known`` or ``test`` is removed
    before ranking. With ``ontology``, the type rank uses E_type(r): candidates whose type is
    compatible with the range of r (subclasses included); untyped entities are not ruled out,
    and a relation without a declared range constrains nothing.
    """
    candidates = tuple(candidates)
    index = {c: i for i, c in enumerate(candidates)}
    tails: dict[tuple[str, str], set[int]] = defaultdict(set)
    for t in (*known, *test):
        k = index.get(t.object)
        if k is not None:
            tails[(t.subject, t.predicate)].add(k)
    types = entity_types or {}
    valid_cache: dict[str, np.ndarray] = {}

    def type_valid(relation: str) -> np.ndarray:
        if relation not in valid_cache:
            spec = ontology.predicates.get(relation) if ontology is not None else None
            if spec is None or spec.range is None:
                mask = np.ones(len(candidates), dtype=bool)
            else:
                mask = np.fromiter(
                    (
                        not types.get(c) or any(ontology.is_a(x, spec.range) for x in types[c])
                        for c in candidates
                    ),  # type: ignore[union-attr]
                    dtype=bool,
                    count=len(candidates),
                )
            valid_cache[relation] = mask
        return valid_cache[relation]

    ranks, type_ranks, confidence, correct = [], [], [], []
    skipped = 0
    for q in test:
        target = index.get(q.object)
        if target is None:
            skipped += 1
            continue
        scores = np.asarray(scorer(q.subject, q.predicate, candidates), dtype=np.float64)
        if scores.shape != (len(candidates),) or not np.all(np.isfinite(scores)):
            raise ConfigError(
                f"the scorer must return {len(candidates)} finite scores, got shape {scores.shape}"
            )
        keep = np.ones(len(candidates), dtype=bool)
        others = tails[(q.subject, q.predicate)] - {target}
        if others:
            keep[list(others)] = False
        s_t = scores[target]
        rivals = keep.copy()
        rivals[target] = False
        greater = (scores > s_t) & rivals
        ties = (scores == s_t) & rivals
        n_greater, n_ties = int(greater.sum()), int(ties.sum())
        ranks.append(1 + n_greater + n_ties / 2)
        if ontology is not None:
            valid = type_valid(q.predicate)
            type_ranks.append(1 + int((greater & valid).sum()) + int((ties & valid).sum()) / 2)
        confidence.append(float(scores[keep].max()))
        correct.append(0.0 if n_greater else 1.0 / (1 + n_ties))
    return LinkPredictionRanks(
        ranks=np.asarray(ranks, dtype=np.float64),
        type_ranks=np.asarray(type_ranks, dtype=np.float64) if ontology is not None else None,
        top_confidence=np.asarray(confidence, dtype=np.float64),
        top_correct=np.asarray(correct, dtype=np.float64),
        skipped=skipped,
    )


# --------------------------------------------------------------------------- rank metrics


def mean_rank(ranks: Sequence[float] | np.ndarray) -> MetricResult:
    """Mean Rank, TRIAGE §4.1.3: MR = (1/|Q|) Σ_q rank_q (filtered; ≥ 1, lower is better)."""
    r = np.asarray(ranks, dtype=np.float64)
    if r.size == 0:
        return na("MR", "no ranked queries (no held-out triple with a known tail)", n=0)
    return ok("MR", float(r.mean()), n=int(r.size))


def mean_reciprocal_rank(ranks: Sequence[float] | np.ndarray) -> MetricResult:
    """Mean Reciprocal Rank, TRIAGE §4.1.3: MRR = (1/|Q|) Σ_q 1/rank_q (filtered)."""
    r = np.asarray(ranks, dtype=np.float64)
    if r.size == 0:
        return na("MRR", "no ranked queries (no held-out triple with a known tail)", n=0)
    return ok("MRR", float((1.0 / r).mean()), n=int(r.size))


def hits_at_k(ranks: Sequence[float] | np.ndarray, k: int) -> MetricResult:
    """Hits@K, TRIAGE §4.1.3: (1/|Q|) Σ_q I[rank_q ≤ K] (filtered)."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"K must be a whole number >= 1, got {k!r}")
    r = np.asarray(ranks, dtype=np.float64)
    if r.size == 0:
        return na(f"Hits@{k}", "no ranked queries (no held-out triple with a known tail)", n=0)
    return ok(f"Hits@{k}", float(np.mean(r <= k)), n=int(r.size))


def type_constrained_mrr(type_ranks: Sequence[float] | np.ndarray | None) -> MetricResult:
    """Ontology-constrained ranking MRR_type, TRIAGE eq. 17: (1/|Q|) Σ_q 1/rank_q^type.

    ``None`` without an ontology (``type_ranks is None``) or without ranked queries.
    """
    if type_ranks is None:
        return na("MRR_type", "needs an ontology (schema-dependent §)", n=0)
    r = np.asarray(type_ranks, dtype=np.float64)
    if r.size == 0:
        return na("MRR_type", "no ranked queries (no held-out triple with a known tail)", n=0)
    return ok("MRR_type", float((1.0 / r).mean()), n=int(r.size))


def expected_calibration_error(
    confidences: Sequence[float] | np.ndarray, outcomes: Sequence[float] | np.ndarray, *, bins: int = 10
) -> MetricResult:
    """Expected Calibration Error, TRIAGE eq. 18: Σ_m (|B_m|/n)·|acc(B_m) − conf(B_m)|.

    ``bins`` equal-width confidence bins over [0, 1] (the last one closed). ``outcomes`` are
    correctness values in [0, 1] (1 correct, 0 wrong; a fraction is an expected correctness).
    ``None`` with no predictions.
    """
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise ConfigError(f"bins must be a whole number >= 1, got {bins!r}")
    conf = np.asarray(confidences, dtype=np.float64)
    acc = np.asarray(outcomes, dtype=np.float64)
    if conf.shape != acc.shape:
        raise ConfigError(f"confidences and outcomes differ in length: {conf.shape} vs {acc.shape}")
    if conf.size == 0:
        return na("ECE", "no predictions to calibrate", n=0)
    if np.any((conf < 0) | (conf > 1)) or np.any((acc < 0) | (acc > 1)):
        raise ConfigError("confidences and outcomes must lie in [0, 1]")
    which = np.minimum((conf * bins).astype(np.int64), bins - 1)
    counts = np.bincount(which, minlength=bins)
    gap = np.abs(
        np.bincount(which, weights=acc, minlength=bins) - np.bincount(which, weights=conf, minlength=bins)
    )
    return ok(
        "ECE",
        float(gap.sum() / conf.size),
        n=int(conf.size),
        bins=bins,
        used_bins=int(np.count_nonzero(counts)),
    )


# --------------------------------------------------------------------------- probe


def split_holdout(
    triples: Sequence[Triple], *, fraction: float = 0.1, seed: int = 0
) -> tuple[list[Triple], list[Triple]]:
    """Split triples into (train, held-out) for the probe; seeded, deterministic.

    A held-out triple whose head or tail would not occur in train goes back to train, so every
    held-out query can be ranked.
    """
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"fraction must be in (0, 1), got {fraction!r}")
    order = np.random.default_rng(seed).permutation(len(triples))
    n_test = int(round(fraction * len(triples)))
    test_ids = set(order[:n_test].tolist())
    train = [t for i, t in enumerate(triples) if i not in test_ids]
    seen = {x for t in train for x in (t.subject, t.object)}
    test: list[Triple] = []
    for i in sorted(test_ids):
        t = triples[i]
        (test if t.subject in seen and t.object in seen else train).append(t)
    return train, test


def completion_metrics(
    graph: GraphView,
    test: Sequence[Triple],
    *,
    scorer: LinkScorer | None = None,
    ontology: Ontology | None = None,
    known: Iterable[Triple] = (),
    bins: int = 10,
) -> dict[str, MetricResult]:
    """The KG Completion probe of TRIAGE §4.1.3 on held-out ``test`` triples, keyed by symbol.

    Candidates are the nodes of ``graph`` (the training graph); filtering removes other known
    tails found in ``graph``, ``known`` and ``test``. ``scorer`` defaults to
    :class:`RelationTailPrior` (a baseline). Returns MR, MRR, Hits@1/3/10, MRR_type (``None``
    without an ontology) and ECE over the top-1 predictions (``None`` when the scorer's scores
    are not probabilities in [0, 1]).
    """
    model = scorer if scorer is not None else RelationTailPrior(graph)
    result = filtered_ranks(
        test,
        model,
        graph.nodes,
        known=(*graph.triples, *known),
        ontology=ontology,
        entity_types=_entity_types(graph) if ontology is not None else None,
    )
    out = {"MR": mean_rank(result.ranks), "MRR": mean_reciprocal_rank(result.ranks)}
    for k in HITS_AT:
        out[f"Hits@{k}"] = hits_at_k(result.ranks, k)
    out["MRR_type"] = type_constrained_mrr(result.type_ranks)
    conf = result.top_confidence
    if conf.size and (conf.min() < 0 or conf.max() > 1):
        out["ECE"] = na("ECE", "the scorer's scores are not probabilities in [0, 1]", n=int(conf.size))
    else:
        out["ECE"] = expected_calibration_error(conf, result.top_correct, bins=bins)
    if result.skipped:
        for key, value in out.items():
            out[key] = _with_detail(value, skipped=result.skipped)
    return out


def _with_detail(result: MetricResult, **extra: int) -> MetricResult:
    return MetricResult(result.name, result.value, result.reason, result.n, {**result.details, **extra})
