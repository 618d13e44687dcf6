"""KG Implementation metrics (TRIAGE §4.1, Table 2): trustworthiness and triple fidelity.

Trustworthiness (§4.1.2, gold-free): TCS (eq. 7), SCR (eq. 8), EC (eq. 9, plus its Soft-F1
variant), CSC (eq. 10), SC (eq. 11–12), CVR (eq. 13), CSR_link (eq. 14), EAR (eq. 15) and the
aggregate TRIAGE-TI (eq. 16). Fidelity (§4.1.1, benchmark-only): embedding cosine (eq. 1),
component Score and Soft-P/R/F1 by maximum-weight bipartite matching (eq. 2–4), EntRatio (eq. 5)
and TFI (eq. 6).

Conventions where the paper leaves room (DESIGN §4):

- ``E`` is every extracted triple of every :class:`ExtractionEvent` (one instance per extraction),
  so k runs of a chunk weigh each run equally; CSC alone works on *distinct* canonical triples.
- A triple is compared after :func:`~triage_plugins.contract.graph_view.normalize_label` on subject,
  predicate and object (:func:`triple_key`).
- Undefined is ``None`` with the reason (no log-probabilities, no ontology, no runs to compare,
  empty denominators), never a made-up 0 or 1.

The encoder ``f`` of eq. 1–4 is a pluggable :data:`Embedder`; the NLI model of eq. 5 a pluggable
:data:`EntailmentScorer`. Nothing here downloads or calls a model by itself.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Literal

import numpy as np

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import ExtractedTriple, ExtractionEvent, Triple
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.kg.ontology import Ontology
from triage_plugins.metrics.result import MetricResult, na, ok

__all__ = [
    "CONSTRAINTS",
    "DEFAULT_TI_WEIGHTS",
    "Embedder",
    "EntailmentScorer",
    "canonicalization_success_rate",
    "component_score",
    "component_scores",
    "constraint_violation_rate",
    "cross_source_corroboration",
    "embedding_similarity",
    "entailment_ratio",
    "evidence_attribution_rate",
    "extraction_consistency",
    "implementation_metrics",
    "mean_triple_confidence",
    "schema_compliance_rate",
    "semantic_extraction_consistency",
    "soft_f1",
    "source_coverage_ratio",
    "triple_confidence_score",
    "triple_fidelity_index",
    "triple_key",
    "trustworthiness_index",
    "unit_embeddings",
    "verbalize",
]

Embedder = Callable[[list[str]], np.ndarray]
"""The encoder ``f`` of TRIAGE Table 1: a list of n strings -> an (n, d) array of vectors."""

EntailmentScorer = Callable[[str, str], float]
"""An NLI model: ``(premise, hypothesis) -> P_NLI(entailment)`` in [0, 1] (TRIAGE eq. 5)."""

CONSTRAINTS: tuple[str, ...] = ("pred", "dom", "rng")
"""The constraint set C of CVR (eq. 13): predicate membership, domain, range."""

DEFAULT_TI_WEIGHTS: Mapping[str, float] = {
    "TCS": 1 / 6,
    "SCR": 1 / 6,
    "EC": 1 / 6,
    "CSC": 1 / 6,
    "SC": 1 / 6,
    "CSR_link": 1 / 6,
}
"""Equal weights ω_1..ω_6 of TRIAGE-TI (eq. 16); the paper leaves them to application risk."""

Key = tuple[str, str, str]


# --------------------------------------------------------------------------- shared helpers


def triple_key(triple: Triple, aliases: Mapping[str, str | None] | None = None) -> Key:
    """Normalized ``(s, p, o)``: aliases resolved first (when given), then :func:`normalize_label`."""
    s, o = triple.subject, triple.object
    if aliases:
        s = aliases.get(s) or s
        o = aliases.get(o) or o
    return normalize_label(s), normalize_label(triple.predicate), normalize_label(o)


def verbalize(triple: Triple) -> str:
    """The linearized triple ``"s p o"`` embedded in eq. 1 and used as the NLI hypothesis of eq. 5."""
    return f"{triple.subject} {triple.predicate.replace('_', ' ')} {triple.object}"


def unit_embeddings(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed ``texts`` with ``embedder`` and scale each row to unit length (zero rows stay zero)."""
    if not texts:
        return np.zeros((0, 0), dtype=np.float64)
    vecs = np.asarray(embedder(list(texts)), dtype=np.float64)
    if vecs.ndim != 2 or vecs.shape[0] != len(texts):
        raise ConfigError(
            f"the embedder must return an array of shape (n, d) for n={len(texts)} texts, got {vecs.shape}"
        )
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.divide(vecs, norms, out=np.zeros_like(vecs), where=norms > 0)


def _value(metric: MetricResult | float | None) -> float | None:
    if isinstance(metric, MetricResult):
        return metric.value
    return None if metric is None else float(metric)


def _check_tau(tau: float) -> float:
    if isinstance(tau, bool) or not isinstance(tau, int | float) or not 0.0 <= float(tau) <= 1.0:
        raise ConfigError(f"tau must be a number in [0, 1], got {tau!r}")
    return float(tau)


def _instances(events: Iterable[ExtractionEvent]) -> list[ExtractedTriple]:
    return [x for e in events for x in e.triples]


def _runs_by_chunk(events: Iterable[ExtractionEvent]) -> dict[str, dict[str, list[ExtractedTriple]]]:
    """chunk id -> run id -> extracted triples (events repeating a (chunk, run) are merged)."""
    out: dict[str, dict[str, list[ExtractedTriple]]] = defaultdict(lambda: defaultdict(list))
    for e in events:
        out[e.chunk.id][e.run_id].extend(e.triples)
    return out


# --------------------------------------------------------------------------- TCS, SCR (eq. 7, 8)


def triple_confidence_score(extracted: ExtractedTriple) -> MetricResult:
    """Triple Confidence Score, TRIAGE eq. 7: ``exp(mean token log-probability)`` ∈ (0, 1].

    The geometric mean of the probabilities of the tokens inside the triple's record. ``None``
    when the extractor exposed no token log-probabilities (a black-box extractor), never 1.0.
    """
    lps = extracted.token_logprobs
    if lps is None:
        return na("TCS", "no token log-probabilities: the extractor does not expose them", n=0)
    if not lps:
        return na("TCS", "the triple's record has no tokens", n=0)
    return ok("TCS", math.exp(math.fsum(lps) / len(lps)), n=len(lps))


def mean_triple_confidence(extracted: Sequence[ExtractedTriple], *, tau: float = 0.5) -> MetricResult:
    """Corpus TCS: the mean of eq. 7 over the triples that carry log-probabilities.

    ``details``: ``flagged`` (TCS < τ), ``without_logprobs``. ``None`` when no triple has any.
    """
    tau = _check_tau(tau)
    scores = [r.value for r in map(triple_confidence_score, extracted) if r.value is not None]
    missing = len(extracted) - len(scores)
    if not scores:
        why = "no extracted triples" if not extracted else "no triple carries token log-probabilities"
        return na("TCS", why, n=0, without_logprobs=missing)
    caveat = f"{missing} of {len(extracted)} triples lack log-probabilities" if missing else None
    return ok(
        "TCS",
        math.fsum(scores) / len(scores),
        n=len(scores),
        reason=caveat,
        flagged=sum(s < tau for s in scores),
        without_logprobs=missing,
        tau=tau,
    )


def source_coverage_ratio(
    events: Sequence[ExtractionEvent], *, tau: float = 0.5, passages: Iterable[str] | None = None
) -> MetricResult:
    """Source Coverage Ratio, TRIAGE eq. 8: passages with at least one triple of TCS ≥ τ, over |P|.

    Passages are chunks. P is ``passages`` (chunk ids: every chunk the framework indexed) when
    given, so a chunk that emitted no extraction event counts as uncovered
    (``details["silent_passages"]``); without it, P is the chunks that emitted an event (an event
    with no triple is an uncovered passage). With several runs of a chunk, the chunk's coverage is the fraction of
    its runs that yield a confident triple, so SCR is the expected single-run value (eq. 8
    exactly when there is one run). A run with no confident triple but some triple without
    log-probabilities is undetermined and left out (``details["undetermined_runs"]``). ``None`` when no triple
    carries log-probabilities: TCS is then the missing confidence source, and counting raw
    triples instead would measure something else.
    """
    tau = _check_tau(tau)
    known = list(dict.fromkeys(passages)) if passages is not None else []
    if not events and not known:
        return na("SCR", "no extraction events (no passages)", n=0)
    if not any(x.token_logprobs for x in _instances(events)):
        return na("SCR", "no confidence source: no extracted triple carries token log-probabilities", n=0)
    by_chunk = _runs_by_chunk(events)
    silent = [c for c in known if c not in by_chunk]
    coverage: list[float] = [0.0] * len(silent)
    undetermined = 0
    for runs in by_chunk.values():
        covered: list[bool] = []
        for triples in runs.values():
            scores = [triple_confidence_score(x).value for x in triples]
            if any(s is not None and s >= tau for s in scores):
                covered.append(True)
            elif any(s is None for s in scores):
                undetermined += 1
            else:
                covered.append(False)
        if covered:
            coverage.append(sum(covered) / len(covered))
    if not coverage:
        return na("SCR", "every run is undetermined (triples without log-probabilities)", n=0)
    return ok(
        "SCR",
        math.fsum(coverage) / len(coverage),
        n=len(coverage),
        undetermined_runs=undetermined,
        silent_passages=len(silent),
        tau=tau,
    )


# --------------------------------------------------------------------------- EC (eq. 9)


def extraction_consistency(events: Sequence[ExtractionEvent]) -> MetricResult:
    """Extraction Consistency, TRIAGE eq. 9: mean pairwise Jaccard of the k runs of a chunk.

    Runs are compared as sets of normalized (s, p, o) (:func:`triple_key`); the per-chunk value
    ``2/(k(k-1)) Σ_{i<j} |E_i ∩ E_j| / |E_i ∪ E_j|`` is averaged over chunks with k ≥ 2 runs. A
    pair of runs that both extracted nothing has no Jaccard (0/0) and is skipped
    (``details["empty_pairs"]``). ``None`` when no chunk was extracted twice.
    """
    per_chunk: list[float] = []
    empty_pairs = 0
    for runs in _runs_by_chunk(events).values():
        if len(runs) < 2:
            continue
        sets = [{triple_key(x.triple) for x in triples} for triples in runs.values()]
        values = []
        for a, b in combinations(sets, 2):
            union = len(a | b)
            if union == 0:
                empty_pairs += 1
                continue
            values.append(len(a & b) / union)
        if values:
            per_chunk.append(math.fsum(values) / len(values))
    if not per_chunk:
        why = "only empty runs to compare" if empty_pairs else "no chunk has two or more extraction runs"
        return na("EC", why, n=0, empty_pairs=empty_pairs)
    return ok("EC", math.fsum(per_chunk) / len(per_chunk), n=len(per_chunk), empty_pairs=empty_pairs)


def semantic_extraction_consistency(
    events: Sequence[ExtractionEvent], *, embedder: Embedder | None
) -> MetricResult:
    """Semantic EC, the variant of TRIAGE eq. 9 that replaces Jaccard with Soft-F1 (eq. 4).

    Same averaging as :func:`extraction_consistency`; each pair of runs scores the Soft-F1 of
    their maximum-weight matching under the component Score (eq. 2). ``None`` without an embedder.
    """
    if embedder is None:
        return na("EC_soft", "needs an embedder for the component similarity (eq. 2)", n=0)
    per_chunk: list[float] = []
    empty_pairs = 0
    for runs in _runs_by_chunk(events).values():
        if len(runs) < 2:
            continue
        run_triples = [[x.triple for x in triples] for triples in runs.values()]
        values = []
        for a, b in combinations(run_triples, 2):
            f1 = soft_f1(a, b, embedder=embedder)
            if f1.value is None:
                empty_pairs += 1
                continue
            values.append(f1.value)
        if values:
            per_chunk.append(math.fsum(values) / len(values))
    if not per_chunk:
        why = "only empty runs to compare" if empty_pairs else "no chunk has two or more extraction runs"
        return na("EC_soft", why, n=0, empty_pairs=empty_pairs)
    return ok("EC_soft", math.fsum(per_chunk) / len(per_chunk), n=len(per_chunk), empty_pairs=empty_pairs)


# --------------------------------------------------------------------------- CSC (eq. 10)


def cross_source_corroboration(
    events: Sequence[ExtractionEvent], *, aliases: Mapping[str, str | None] | None = None
) -> MetricResult:
    """Cross-Source Corroboration, TRIAGE eq. 10: distinct canonical triples from ≥ 2 documents.

    A triple is canonicalized by :func:`triple_key` (aliases first); src(t) is the set of
    ``chunk.doc_id`` it was extracted from. ``None`` when no triple was extracted, or when every
    extraction comes from one document (multi-document provenance is what CSC needs).
    """
    sources: dict[Key, set[str]] = defaultdict(set)
    documents: set[str] = set()
    for e in events:
        documents.add(e.chunk.doc_id)
        for x in e.triples:
            sources[triple_key(x.triple, aliases)].add(e.chunk.doc_id)
    if not sources:
        return na("CSC", "no extracted triples", n=0)
    if len(documents) < 2:
        return na(
            "CSC",
            "all extractions come from one document; CSC needs multi-document provenance",
            n=len(sources),
        )
    corroborated = sum(len(docs) >= 2 for docs in sources.values())
    return ok("CSC", corroborated / len(sources), n=len(sources), documents=len(documents))


# --------------------------------------------------------------------------- SC, CVR (eq. 11–13)


def _checks(triple: Triple, ontology: Ontology) -> tuple[int, int | None, int | None]:
    """Indicators I_pred, I_dom, I_rng of eq. 11 (1 = satisfied, 0 = violated, None = unknown type).

    A predicate outside the vocabulary fails only the pred check (no domain/range applies to it);
    an undeclared domain or range is satisfied; a declared one needs the entity's type, and an
    untyped entity leaves that check undetermined (its type cannot be inferred here).
    """
    spec = ontology.predicates.get(triple.predicate)
    if spec is None:
        return 0, 1, 1
    dom: int | None = 1
    rng: int | None = 1
    if spec.domain is not None:
        dom = None if triple.subject_type is None else int(ontology.is_a(triple.subject_type, spec.domain))
    if spec.range is not None:
        rng = None if triple.object_type is None else int(ontology.is_a(triple.object_type, spec.range))
    return 1, dom, rng


def schema_compliance_rate(triples: Sequence[Triple], ontology: Ontology | None) -> MetricResult:
    """Schema Compliance Rate, TRIAGE eq. 11–12: mean of valid_O(t) = I[p∈R]·I[dom]·I[rng].

    Types come from ``Triple.subject_type``/``object_type`` and match through the subclass
    hierarchy. A triple whose validity hinges on an unknown entity type is left out
    (``details["undetermined"]``). ``None`` without an ontology.
    """
    if ontology is None:
        return na("SC", "needs an ontology (schema-dependent §)", n=0)
    valid: list[int] = []
    for t in triples:
        checks = _checks(t, ontology)
        if 0 in checks:
            valid.append(0)
        elif None not in checks:
            valid.append(1)
    undetermined = len(triples) - len(valid)
    if not valid:
        why = "no extracted triples" if not triples else "every triple lacks the entity types its checks need"
        return na("SC", why, n=0, undetermined=undetermined)
    return ok("SC", sum(valid) / len(valid), n=len(valid), undetermined=undetermined)


def constraint_violation_rate(
    triples: Sequence[Triple],
    ontology: Ontology | None,
    *,
    constraint: Literal["pred", "dom", "rng"] | None = None,
) -> MetricResult:
    """Constraint Violation Rate, TRIAGE eq. 13: mean over triples of (1/|C|) Σ_c viol_c(t).

    With ``constraint`` (``"pred"``, ``"dom"`` or ``"rng"``) it is the per-type rate CVR_c, the
    mean of viol_c over triples where that check is determined. The overall CVR uses triples
    whose three checks are determined; ``details`` carries the three per-type rates as well.
    ``None`` without an ontology.
    """
    name = "CVR" if constraint is None else f"CVR_{constraint}"
    if constraint is not None and constraint not in CONSTRAINTS:
        raise ConfigError(f"constraint must be one of {CONSTRAINTS}, got {constraint!r}")
    if ontology is None:
        return na(name, "needs an ontology (schema-dependent §)", n=0)
    if not triples:
        return na(name, "no extracted triples", n=0)
    checks = [_checks(t, ontology) for t in triples]
    per_type: dict[str, float | None] = {}
    for i, c in enumerate(CONSTRAINTS):
        known = [1 - row[i] for row in checks if row[i] is not None]
        per_type[c] = sum(known) / len(known) if known else None
    if constraint is not None:
        i = CONSTRAINTS.index(constraint)
        known = [1 - row[i] for row in checks if row[i] is not None]
        if not known:
            return na(name, f"no triple has the entity types the {constraint} check needs", n=0)
        return ok(name, sum(known) / len(known), n=len(known))
    full = [sum(1 - x for x in row) / len(CONSTRAINTS) for row in checks if None not in row]
    details = {f"CVR_{c}": v for c, v in per_type.items()}
    if not full:
        return na(name, "every triple lacks an entity type its checks need", n=0, **details)
    return ok(name, math.fsum(full) / len(full), n=len(full), undetermined=len(checks) - len(full), **details)


# --------------------------------------------------------------------------- CSR_link (eq. 14)


class _Linker:
    """C(·) of eq. 14: surface form -> canonical id, or None (⊥)."""

    def __init__(self, aliases: Mapping[str, str | None] | None, graph: GraphView | None) -> None:
        self.aliases = dict(aliases or {})
        self.graph = graph
        self._norm_aliases: dict[str, str | None] | None = None
        self._norm_nodes: dict[str, str] | None = None

    def __call__(self, surface: str) -> str | None:
        if surface in self.aliases:
            return self.aliases[surface]
        if self.graph is not None and self.graph.has_node(surface):
            return surface
        key = normalize_label(surface)
        if self._norm_aliases is None:
            self._norm_aliases = {}
            for k, v in self.aliases.items():
                self._norm_aliases.setdefault(normalize_label(k), v)
        if key in self._norm_aliases:
            return self._norm_aliases[key]
        if self.graph is None:
            return None
        if self._norm_nodes is None:
            self._norm_nodes = {}
            for node in self.graph.nodes:
                self._norm_nodes.setdefault(normalize_label(self.graph.label(node)), node)
                self._norm_nodes.setdefault(normalize_label(node), node)
        return self._norm_nodes.get(key)


def canonicalization_success_rate(
    triples: Sequence[Triple],
    *,
    aliases: Mapping[str, str | None] | None = None,
    graph: GraphView | None = None,
    ontology: Ontology | None = None,
    regime: Literal["resolution", "ontology"] | None = None,
) -> MetricResult:
    """Canonicalization Success Rate, TRIAGE eq. 14: triples whose subject and object both link.

    C(x) looks ``x`` up in ``aliases`` (surface -> canonical id; ``None`` marks a known failure),
    then among the nodes of ``graph`` (exactly, then after :func:`normalize_label`); ⊥ otherwise.
    The two regimes of §3.1 differ in what counts as canonical:

    - ``"resolution"`` (no ontology): the canonical set is the one induced by entity resolution,
      i.e. ``aliases`` and the nodes of the assembled ``graph``; CSR_link measures internal
      consistency.
    - ``"ontology"`` (ontology-grounded): ``graph``/``aliases`` are the KB identifiers, and an entity
      links only if, besides resolving, its type is a class declared in the ontology (schema
      grounding); CSR_link measures external grounding.

    ``regime`` defaults to ``"ontology"`` when an ontology is given, else ``"resolution"``.
    ``None`` when there is nothing to link against, or (``"ontology"``) no ontology.
    """
    regime = regime or ("ontology" if ontology is not None else "resolution")
    if regime not in ("resolution", "ontology"):
        raise ConfigError(f"regime must be 'resolution' or 'ontology', got {regime!r}")
    name = "CSR_link"
    if regime == "ontology" and ontology is None:
        return na(name, "the ontology-grounded regime needs an ontology", n=0, regime=regime)
    if not aliases and graph is None:
        return na(
            name, "no canonical map: give the alias map or the graph to link against", n=0, regime=regime
        )
    if not triples:
        return na(name, "no extracted triples", n=0, regime=regime)
    link = _Linker(aliases, graph)
    classes = set(ontology.classes) if ontology is not None else set()

    def linked(surface: str, etype: str | None) -> bool:
        if link(surface) is None:
            return False
        return regime == "resolution" or etype in classes

    hits = sum(linked(t.subject, t.subject_type) and linked(t.object, t.object_type) for t in triples)
    return ok(name, hits / len(triples), n=len(triples), regime=regime)


# --------------------------------------------------------------------------- EAR (eq. 15)


def evidence_attribution_rate(extracted: Sequence[ExtractedTriple]) -> MetricResult:
    """Evidence Attribution Rate, TRIAGE eq. 15: triples carrying a non-blank evidence span."""
    if not extracted:
        return na("EAR", "no extracted triples", n=0)
    spans = sum(bool(x.evidence and x.evidence.strip()) for x in extracted)
    return ok("EAR", spans / len(extracted), n=len(extracted))


# --------------------------------------------------------------------------- TRIAGE-TI (eq. 16)


def trustworthiness_index(
    components: Mapping[str, MetricResult | float | None],
    *,
    weights: Mapping[str, float] | None = None,
) -> MetricResult:
    """Aggregated Trustworthiness Index TRIAGE-TI, eq. 16: Σ ω_i·m_i over TCS, SCR, EC, CSC, SC, CSR_link.

    ``weights`` (default equal) are normalized to sum to one. As the paper prescribes for SC
    without an ontology, every undefined component is dropped and the remaining weights are
    renormalized; the dropped symbols are named in ``reason`` and ``details["dropped"]``.
    ``None`` when no component with positive weight is defined.
    """
    weights = dict(DEFAULT_TI_WEIGHTS if weights is None else weights)
    unknown = set(weights) - set(DEFAULT_TI_WEIGHTS)
    if unknown:
        raise ConfigError(
            f"unknown TRIAGE-TI components {sorted(unknown)}; allowed: {list(DEFAULT_TI_WEIGHTS)}"
        )
    for key, w in weights.items():
        if isinstance(w, bool) or not isinstance(w, int | float) or w < 0 or not math.isfinite(w):
            raise ConfigError(f"TRIAGE-TI weight {key} must be a non-negative number, got {w!r}")
    if not math.fsum(weights.values()) > 0:
        raise ConfigError("TRIAGE-TI weights must not all be zero")
    used: dict[str, tuple[float, float]] = {}
    dropped: list[str] = []
    for key, w in weights.items():
        if w == 0:
            continue
        v = _value(components.get(key))
        if v is None:
            dropped.append(key)
        else:
            used[key] = (w, v)
    if not used:
        return na("TRIAGE-TI", "no component is defined", n=0, dropped=",".join(dropped))
    total = math.fsum(w for w, _ in used.values())
    value = math.fsum(w * v for w, v in used.values()) / total
    reason = f"renormalized without {', '.join(dropped)} (undefined)" if dropped else None
    return ok(
        "TRIAGE-TI",
        value,
        n=len(used),
        reason=reason,
        dropped=",".join(dropped),
        **{f"w_{k}": w / total for k, (w, _) in used.items()},
    )


# --------------------------------------------------------------------------- fidelity (eq. 1–6)


def embedding_similarity(
    extracted: Sequence[Triple], gold: Sequence[Triple], *, embedder: Embedder | None
) -> MetricResult:
    """Embedding similarity, TRIAGE eq. 1, as cos̄: mean over E of the best-match cosine in G.

    Each triple is linearized by :func:`verbalize`. ``details["pairs"]`` = |E|·|G|. ``None``
    without an embedder or with an empty E or G.
    """
    if embedder is None:
        return na("cos", "needs an embedder (the encoder f of eq. 1)", n=0)
    if not extracted or not gold:
        return na("cos", "needs non-empty extracted and gold triple sets", n=0)
    vecs = unit_embeddings(embedder, [verbalize(t) for t in extracted] + [verbalize(t) for t in gold])
    sims = vecs[: len(extracted)] @ vecs[len(extracted) :].T
    return ok("cos", float(sims.max(axis=1).mean()), n=len(extracted), pairs=sims.size)


def component_scores(extracted: Sequence[Triple], gold: Sequence[Triple], embedder: Embedder) -> np.ndarray:
    """The |E|×|G| matrix of Score(t̂, t), TRIAGE eq. 2: mean of the s, p, o cosine similarities."""
    if not extracted or not gold:
        return np.zeros((len(extracted), len(gold)))
    texts: dict[str, int] = {}
    for t in (*extracted, *gold):
        for part in (t.subject, t.predicate, t.object):
            texts.setdefault(part, len(texts))
    vecs = unit_embeddings(embedder, list(texts))
    total = np.zeros((len(extracted), len(gold)))
    for part in ("subject", "predicate", "object"):
        a = vecs[[texts[getattr(t, part)] for t in extracted]]
        b = vecs[[texts[getattr(t, part)] for t in gold]]
        total += a @ b.T
    return total / 3.0


def component_score(extracted: Triple, gold: Triple, *, embedder: Embedder) -> MetricResult:
    """Score(t̂, t), TRIAGE eq. 2, for one pair of triples."""
    return ok("Score", float(component_scores([extracted], [gold], embedder)[0, 0]), n=1)


def soft_f1(
    extracted: Sequence[Triple], gold: Sequence[Triple], *, embedder: Embedder | None
) -> MetricResult:
    """Soft-F1, TRIAGE eq. 3–4, over a maximum-weight bipartite matching M between E and G.

    M maximizes Σ Score over one-to-one pairs (``scipy.optimize.linear_sum_assignment``); a
    negative Score counts as 0, i.e. as leaving the pair unmatched. Soft-P = ΣM/|E|,
    Soft-R = ΣM/|G| (in ``details``), and Soft-F1 = 2·ΣM/(|E|+|G|), which equals eq. 4 whenever
    Soft-P and Soft-R are defined. Empty sides: G = ∅ leaves Soft-R undefined (0/0), so Soft-F1 is
    ``None``; E = ∅ against a non-empty G has Soft-R = 0 and Soft-P = 0/0, scored by the WebQSP
    convention TRIAGE's answer F1 follows ([64]: no prediction is precision 1, recall 0), so
    Soft-F1 = 0 with the convention in ``reason``. ``None`` without an embedder.
    """
    if embedder is None:
        return na("Soft-F1", "needs an embedder (the encoder f of eq. 2)", n=0)
    if not gold:
        why = "both triple sets are empty" if not extracted else "the gold triple set is empty"
        return na("Soft-F1", f"{why}: Soft-R = ΣM/|G| is 0/0", n=0, extracted=len(extracted))
    if not extracted:
        return ok(
            "Soft-F1",
            0.0,
            n=len(gold),
            reason="no extracted triple: Soft-P is 0/0, scored 1 by the WebQSP convention; Soft-R = 0",
            soft_p=None,
            soft_r=0.0,
            matched_score=0.0,
            matched_pairs=0,
        )
    weights = np.clip(component_scores(extracted, gold, embedder), 0.0, None)
    matched = 0.0
    pairs = 0
    if weights.size:
        # Imported here: scipy.optimize costs ~47 MiB and ~0.4 s on import, paid by every manager start.
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(weights, maximize=True)
        matched = float(weights[rows, cols].sum())
        pairs = int(np.count_nonzero(weights[rows, cols] > 0))
    precision = matched / len(extracted) if extracted else None
    recall = matched / len(gold) if gold else None
    return ok(
        "Soft-F1",
        2 * matched / (len(extracted) + len(gold)),
        n=len(extracted) + len(gold),
        soft_p=precision,
        soft_r=recall,
        matched_score=matched,
        matched_pairs=pairs,
    )


def entailment_ratio(events: Sequence[ExtractionEvent], *, nli: EntailmentScorer | None) -> MetricResult:
    """Entailment Ratio, TRIAGE eq. 5: mean P_NLI(ent | p(t̂), H(t̂)) over extracted triples.

    The premise p(t̂) is the text of the chunk the triple was extracted from (its provenance),
    the hypothesis H(t̂) its verbalization (:func:`verbalize`). ``None`` without an NLI scorer.
    """
    if nli is None:
        return na("EntRatio", "needs an NLI scorer (premise, hypothesis) -> P(entailment)", n=0)
    cache: dict[tuple[str, str], float] = {}
    probs: list[float] = []
    for e in events:
        for x in e.triples:
            pair = (e.chunk.text, verbalize(x.triple))
            if pair not in cache:
                p = float(nli(*pair))
                if not 0.0 <= p <= 1.0:
                    raise ConfigError(f"the NLI scorer must return a probability in [0, 1], got {p!r}")
                cache[pair] = p
            probs.append(cache[pair])
    if not probs:
        return na("EntRatio", "no extracted triples", n=0)
    return ok("EntRatio", math.fsum(probs) / len(probs), n=len(probs))


def triple_fidelity_index(
    cos: MetricResult | float | None,
    soft_f1: MetricResult | float | None,
    ent_ratio: MetricResult | float | None,
    *,
    weights: tuple[float, float, float] = (1 / 3, 1 / 3, 1 / 3),
) -> MetricResult:
    """Triple Fidelity Index, TRIAGE eq. 6: λ1·cos̄ + λ2·Soft-F1 + λ3·EntRatio, Σλ = 1 (benchmark-only).

    cos̄ is clipped at 0 so the index stays in [0, 1]. An undefined component (EntRatio without
    an NLI model) is dropped and the weights renormalized, as TRIAGE-TI does for SC; the
    dropped names are in ``reason``. ``None`` when cos̄ and Soft-F1 (the gold parts) are undefined.
    """
    if len(weights) != 3 or any(isinstance(w, bool) or w < 0 for w in weights) or not sum(weights) > 0:
        raise ConfigError(f"TFI weights must be three non-negative numbers, not all zero; got {weights!r}")
    parts = {"cos": _value(cos), "Soft-F1": _value(soft_f1), "EntRatio": _value(ent_ratio)}
    if parts["cos"] is None and parts["Soft-F1"] is None:
        return na("TFI", "needs a gold triple set and an embedder (cos̄ and Soft-F1 are undefined)", n=0)
    if parts["cos"] is not None:
        parts["cos"] = max(0.0, parts["cos"])
    used = [(w, v) for w, v in zip(weights, parts.values(), strict=True) if v is not None and w > 0]
    dropped = [k for (k, v), w in zip(parts.items(), weights, strict=True) if v is None and w > 0]
    if not used:
        return na("TFI", "every component with positive weight is undefined", n=0)
    total = math.fsum(w for w, _ in used)
    reason = f"renormalized without {', '.join(dropped)} (undefined)" if dropped else None
    return ok(
        "TFI",
        math.fsum(w * v for w, v in used) / total,
        n=len(used),
        reason=reason,
        dropped=",".join(dropped),
    )


# --------------------------------------------------------------------------- everything at once


def implementation_metrics(
    events: Sequence[ExtractionEvent],
    *,
    ontology: Ontology | None = None,
    tau: float = 0.5,
    graph: GraphView | None = None,
    aliases: Mapping[str, str | None] | None = None,
    embedder: Embedder | None = None,
    nli: EntailmentScorer | None = None,
    gold: Sequence[Triple] | None = None,
    weights: Mapping[str, float] | None = None,
    passages: Iterable[str] | None = None,
) -> dict[str, MetricResult]:
    """Every KG Implementation metric computable from ``events`` (TRIAGE §4.1), keyed by symbol.

    ``passages`` (every indexed chunk id) is SCR's P, so chunks that emitted nothing count.

    Always: TCS (corpus mean), SCR, EC, CSC, EAR, CSR_link, SC, CVR and CVR_pred/dom/rng,
    TRIAGE-TI; each ``None`` with its reason when its input is missing. With ``embedder``:
    EC_soft. With ``nli``: EntRatio. With ``gold`` (benchmark setting): cos, Soft-F1 and TFI,
    over the distinct extracted triples (runs repeating a triple would otherwise lower Soft-P).
    """
    extracted = _instances(events)
    triples = [x.triple for x in extracted]
    out: dict[str, MetricResult] = {
        "TCS": mean_triple_confidence(extracted, tau=tau),
        "SCR": source_coverage_ratio(events, tau=tau, passages=passages),
        "EC": extraction_consistency(events),
        "CSC": cross_source_corroboration(events, aliases=aliases),
        "SC": schema_compliance_rate(triples, ontology),
        "CVR": constraint_violation_rate(triples, ontology),
    }
    for c in CONSTRAINTS:
        out[f"CVR_{c}"] = constraint_violation_rate(triples, ontology, constraint=c)  # type: ignore[arg-type]
    out["CSR_link"] = canonicalization_success_rate(triples, aliases=aliases, graph=graph, ontology=ontology)
    out["EAR"] = evidence_attribution_rate(extracted)
    out["TRIAGE-TI"] = trustworthiness_index(out, weights=weights)
    if embedder is not None:
        out["EC_soft"] = semantic_extraction_consistency(events, embedder=embedder)
    if nli is not None:
        out["EntRatio"] = entailment_ratio(events, nli=nli)
    if gold is not None:
        distinct = list({triple_key(t): t for t in triples}.values())
        out["cos"] = embedding_similarity(distinct, gold, embedder=embedder)
        out["Soft-F1"] = soft_f1(distinct, gold, embedder=embedder)
        out["TFI"] = triple_fidelity_index(out["cos"], out["Soft-F1"], out.get("EntRatio"))
    return out
