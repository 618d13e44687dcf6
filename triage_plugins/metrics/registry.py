"""THE list of metrics: one :class:`MetricSpec` per TRIAGE metric, in the order of TRIAGE Table 2.

Everything that shows or computes metrics derives its columns from a :class:`MetricRegistry`:
:func:`~triage_plugins.metrics.per_query.usage_metrics` and the usage plugin (which per-query metrics,
written when), ``triage score`` (its tables and the per-query chain columns), ``triage compare``
(the Implementation / Validation / Usage / gold columns, :meth:`MetricRegistry.columns`), both
reports, the diagnostic chain (:attr:`MetricRegistry.chain`, its order and signatures) and the default
chain thresholds (:meth:`MetricRegistry.thresholds`; the built-in links take their θ from
:data:`~triage_plugins.contract.config.CHAIN_THRESHOLDS`).

:data:`BUILTIN_METRICS` holds the metrics this package defines; the default plugin ``triage.metrics``
registers them through the hook ``triage_register_metrics(register)`` (after simonw/llm's
``register_models``), as any plugin registers its own, and :func:`registry_from` builds a registry from
what the plugins registered (:func:`~triage_plugins.runtime.registrations.metric_registry` reads a
manager's, given ones, or the ``triage`` entry-point plugins'). A third-party usage metric is one
function with the per-query signature
``f(retrieval, generation=None, *, grounder=None, closed_book=None) -> MetricResult`` plus its spec::

    @hookimpl
    def triage_register_metrics(register):
        register(MetricSpec("ANS", "Answered", "usage", "generation", answered, "plugin"))

It is then computed by the usage plugin and ``triage score`` and shown by ``triage compare`` and both
reports. A plugin's metric cannot join the diagnostic chain (its signatures and remediation map are
fixed by TRIAGE §4.5), and a symbol registered twice is a :class:`~triage_plugins.ConfigError`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from triage_plugins.contract.config import CHAIN_THRESHOLDS as _THETA
from triage_plugins.contract.errors import ConfigError
from triage_plugins.metrics import completion as C
from triage_plugins.metrics import extraction as X
from triage_plugins.metrics import usage as U
from triage_plugins.metrics import validation as V
from triage_plugins.metrics.result import MetricResult

__all__ = [
    "BUILTIN_METRICS",
    "LinkSpec",
    "MetricRegistry",
    "MetricSpec",
    "Phase",
    "Stage",
    "registry_from",
]

log = logging.getLogger("triage.metrics.registry")

Phase = Literal["implementation", "validation", "usage"]
Stage = Literal["extraction", "completion", "graph", "retrieval", "generation", "closed_book", "population"]

STAGES: dict[str, tuple[str, ...]] = {
    "implementation": ("extraction", "completion"),
    "validation": ("graph",),
    "usage": ("retrieval", "generation", "closed_book", "population"),
}
"""The stages of each phase: what a metric is computed over, or for usage metrics when it is known."""

PER_QUERY: tuple[str, ...] = ("retrieval", "generation", "closed_book")
"""Usage stages with one value per query (``population`` ratios have none)."""

Group = Literal["implementation", "validation", "usage", "gold"]


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """A metric's place in the diagnostic chain QGR → ERC → RRS → ARF → AGR (TRIAGE §4.5, Fig. 5).

    :param position: 1 for the first link.
    :param threshold: the default θ; the link fails when ``value < θ`` (DESIGN §4).
    :param signature: the failure signature when this is the first link to fail.
    :param meaning: what failing this link means, in a few words.
    """

    position: int
    threshold: float
    signature: str
    meaning: str


@dataclass(frozen=True, slots=True)
class MetricSpec:
    """One metric: what it is, where the paper defines it, how it is computed and how to read it.

    :param symbol: the paper's symbol, the registry key and the :class:`MetricResult` name (``"ERC"``).
    :param name: the display name (``"Entity Retrieval Coverage"``).
    :param phase: the TKG phase of TRIAGE Table 2: ``"implementation"``, ``"validation"`` or ``"usage"``.
    :param stage: what it is computed over: ``"extraction"`` events or a ``"completion"`` probe
        (implementation), the ``"graph"`` (validation); for usage, when a query's value is known:
        at ``"retrieval"``, with the answer (``"generation"``), with the closed-book answer too
        (``"closed_book"``), or only over a query set (``"population"``).
    :param function: the pure metric function. A per-query usage metric's signature is
        ``f(retrieval, generation=None, *, grounder=None, closed_book=None) -> MetricResult``;
        implementation and validation functions are those of their modules.
    :param section: where the paper defines it (``"§4.3.2, eq. 26"``, or a plugin's own reference).
    :param needs_gold: needs gold annotations (Table 2's †: offline calibration, not deployment).
    :param link: its place in the diagnostic chain, or ``None``.
    :param higher_is_better: ``True`` for coverage-like ratios, ``False`` for costs and error rates,
        ``None`` when neither (a distribution, a signed difference).
    :param value_range: the closed range of values, or ``None`` when unbounded (a count, a rank).
    :param headline: shown as a column of ``triage compare`` and of the store report's summaries
        (``False`` for variants, gold-reference checks and metrics shown another way, such as RHD's
        distribution).
    :param kernel: a built-in per-query usage metric's computation over the shared
        :class:`~triage_plugins.metrics.usage.QueryView` (a plugin's metric leaves it ``None`` and
        ``function`` is called).
    :param definition: what it measures, in one sentence (empty: the first paragraph of
        ``function``'s docstring is the definition).
    :param healthy: what a healthy value looks like (empty for a chain link: at or above its θ).
    :param lever: what to change when the value is poor (empty for a chain link: the levers of its
        signature in :data:`~triage_plugins.diagnosis.chain.REMEDIATION`).
    """

    symbol: str
    name: str
    phase: Phase
    stage: Stage
    function: Callable[..., Any]
    section: str
    needs_gold: bool = False
    link: LinkSpec | None = None
    higher_is_better: bool | None = True
    value_range: tuple[float, float] | None = (0.0, 1.0)
    headline: bool = True
    kernel: Callable[[U.QueryView], MetricResult] | None = field(default=None, repr=False, compare=False)
    definition: str = field(default="", compare=False)
    healthy: str = field(default="", compare=False)
    lever: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.symbol, str) or not self.symbol.strip():
            raise ConfigError(f"MetricSpec.symbol must be a non-empty string, got {self.symbol!r}")
        if self.phase not in STAGES:
            raise ConfigError(
                f"metric {self.symbol}: phase must be one of {', '.join(STAGES)}, got {self.phase!r}"
            )
        if self.stage not in STAGES[self.phase]:
            raise ConfigError(
                f"metric {self.symbol}: a {self.phase} metric's stage is one of "
                f"{', '.join(STAGES[self.phase])}, got {self.stage!r}"
            )
        if not callable(self.function):
            raise ConfigError(f"metric {self.symbol}: function must be callable, got {self.function!r}")
        if self.link is not None and (self.phase != "usage" or self.stage not in PER_QUERY):
            raise ConfigError(f"metric {self.symbol}: only a per-query usage metric can be a chain link")
        if self.value_range is not None and not self.value_range[0] <= self.value_range[1]:
            raise ConfigError(
                f"metric {self.symbol}: value_range must be (low, high), got {self.value_range!r}"
            )

    @property
    def per_query(self) -> bool:
        """A usage metric with one value per query."""
        return self.phase == "usage" and self.stage in PER_QUERY


class MetricRegistry:
    """An ordered list of :class:`MetricSpec`, one per symbol; built-ins first, then plugins' in the
    order they registered.

    :param specs: the initial specs (chain links allowed: this is how the built-ins are declared).
    """

    def __init__(self, specs: Iterable[MetricSpec] = (), *, origin: str = "built-in") -> None:
        self._specs: dict[str, MetricSpec] = {}
        self._origin: dict[str, str] = {}
        self._cache: dict[str, Any] = {}
        #: Plugins whose ``triage_register_metrics`` failed, with why; their metrics are left out.
        self.failed: dict[str, str] = {}
        for spec in specs:
            self._add(spec, origin)

    def _add(self, spec: MetricSpec, origin: str) -> None:
        if not isinstance(spec, MetricSpec):
            raise ConfigError(f"register() takes a MetricSpec, got {type(spec).__name__}")
        if spec.symbol in self._specs:
            raise ConfigError(
                f"metric {spec.symbol!r} is already registered ({self._origin[spec.symbol]}); "
                "choose another symbol"
            )
        self._specs[spec.symbol] = spec
        self._origin[spec.symbol] = origin
        self._cache.clear()

    def register(self, spec: MetricSpec, *, origin: str = "registered") -> None:
        """Add ``spec`` (what ``triage_register_metrics``' ``register`` does).

        :raises ConfigError: its symbol is already registered, or it claims a chain link (the chain
            and its remediation map are fixed, TRIAGE §4.5).
        """
        if isinstance(spec, MetricSpec) and spec.link is not None:
            raise ConfigError(
                f"metric {spec.symbol!r}: a registered metric cannot join the diagnostic chain "
                f"({' → '.join(s.symbol for s in self.chain)} is fixed by TRIAGE §4.5); drop its link"
            )
        self._add(spec, origin)

    def copy(self) -> MetricRegistry:
        """A registry with the same specs, to register more into."""
        out = MetricRegistry()
        out._specs, out._origin, out.failed = dict(self._specs), dict(self._origin), dict(self.failed)
        return out

    # ------------------------------------------------------------------ reading

    def __iter__(self) -> Iterator[MetricSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, symbol: object) -> bool:
        return symbol in self._specs

    def __getitem__(self, symbol: str) -> MetricSpec:
        return self._specs[symbol]

    def get(self, symbol: str) -> MetricSpec | None:
        return self._specs.get(symbol)

    def origin(self, symbol: str) -> str:
        """``"built-in"`` or the name of the plugin that registered ``symbol``."""
        return self._origin[symbol]

    def select(
        self,
        *,
        phase: Phase | None = None,
        stage: Stage | None = None,
        needs_gold: bool | None = None,
        headline: bool | None = None,
    ) -> tuple[MetricSpec, ...]:
        """The specs matching every given filter, in registry order."""
        return tuple(
            s
            for s in self._specs.values()
            if (phase is None or s.phase == phase)
            and (stage is None or s.stage == stage)
            and (needs_gold is None or s.needs_gold == needs_gold)
            and (headline is None or s.headline == headline)
        )

    def symbols(self, **filters: Any) -> tuple[str, ...]:
        """The symbols of :meth:`select` (same filters)."""
        return tuple(s.symbol for s in self.select(**filters))

    def _cached(self, key: str, build: Callable[[], Any]) -> Any:
        value = self._cache.get(key)
        if value is None:
            value = self._cache[key] = build()
        return value

    @property
    def per_query(self) -> tuple[MetricSpec, ...]:
        """The per-query usage metrics, what :func:`~triage_plugins.metrics.per_query.usage_metrics` computes."""
        return self._cached("per_query", lambda: tuple(s for s in self if s.per_query))

    @property
    def chain(self) -> tuple[MetricSpec, ...]:
        """The chain links, in chain order (QGR → ERC → RRS → ARF → AGR)."""

        def build() -> tuple[MetricSpec, ...]:
            return tuple(sorted((s for s in self if s.link is not None), key=lambda s: s.link.position))  # type: ignore[union-attr]

        return self._cached("chain", build)

    def thresholds(self) -> dict[str, float]:
        """The default θ of each chain link, in chain order."""
        return {s.symbol: s.link.threshold for s in self.chain}  # type: ignore[union-attr]

    def columns(self, group: Group) -> tuple[str, ...]:
        """The headline symbols of one table group: ``"implementation"``, ``"validation"``,
        ``"usage"`` (gold-free per-query usage metrics) or ``"gold"`` (gold-requiring ones)."""
        if group in ("implementation", "validation"):
            return self.symbols(phase=group, headline=True)
        if group not in ("usage", "gold"):
            raise ConfigError(
                f"column group must be implementation, validation, usage or gold, got {group!r}"
            )
        gold = group == "gold"
        return tuple(s.symbol for s in self.per_query if s.headline and s.needs_gold == gold)


# --------------------------------------------------------------------------- the built-in metrics


def _usage(
    symbol: str,
    name: str,
    stage: Stage,
    function: Callable[..., MetricResult],
    kernel: Callable[[U.QueryView], MetricResult] | None,
    section: str,
    **kwargs: Any,
) -> MetricSpec:
    return MetricSpec(symbol, name, "usage", stage, function, section, kernel=kernel, **kwargs)


_LOWER = {"higher_is_better": False}
_COUNT = {"value_range": None}

_CVR_PART = {"pred": "the predicate is not in the schema", "dom": "the subject's type is outside the predicate's domain", "rng": "the object's type is outside the predicate's range"}  # fmt: skip

# What a healthy value looks like and the lever when it is poor, for the metrics outside the chain
# (the chain links' come from their θ and REMEDIATION). Rules of thumb, not values from the paper,
# except where a section is named.
_GUIDE: dict[str, tuple[str, str]] = {
    "TCS": ("mean ≥ 0.8: the extractor is sure of most triples", "a stronger or better-prompted extraction model, temperature 0; drop triples below the confidence floor τ"),
    "SCR": ("close to 1: almost every passage yields a confident triple", "smaller or cleaner chunks; an extraction prompt that names the domain's relations"),
    "EC": ("≥ 0.7: repeated runs extract mostly the same triples", "temperature 0, a fixed prompt with examples, a constrained output format"),
    "EC_soft": ("≥ EC, near 1 when runs differ only in wording", "as for EC; a large gap to EC means paraphrases: canonicalize predicates"),
    "CSC": ("as high as the sources overlap; near 0 on a corpus with one source per fact", "canonicalize entities and predicates so one fact from two documents merges; add corroborating sources"),
    "EntRatio": ("≥ 0.8: the evidence entails most triples", "ask for evidence spans, a stricter extraction prompt; drop triples the NLI model does not entail"),
    "SC": ("≥ 0.9 when an ontology is given", "give the extractor the ontology's predicates and types; map predicates to the schema after extraction; or extend the ontology"),
    "CVR": ("near 0", "type the entities, check each triple's domain and range, filter or repair violating triples"),
    "CVR_pred": ("near 0", "map extracted predicates to the schema's, or add the missing predicates to the ontology"),
    "CVR_dom": ("near 0", "fix subject typing (entity types in the extraction prompt) or widen the predicate's domain"),
    "CVR_rng": ("near 0", "fix object typing or widen the predicate's range"),
    "CSR_link": ("≥ 0.9: nearly every endpoint links to a canonical entity", "entity linking: an alias table, fuzzy or embedding matching, merging surface forms"),
    "EAR": ("close to 1", "have the extractor return the evidence span of each triple"),
    "TRIAGE-TI": ("≥ 0.7; read its components", "raise the lowest of its components (TCS, SCR, EC, CSC, SC, CSR_link)"),
    "MR": ("small relative to the number of candidate entities (1 is perfect)", "a better KG-embedding model or more training triples; filter the candidate set by type (MRR_type)"),
    "MRR": ("as high as possible; compare against a baseline model on the same KG", "a better KG-embedding model, more training triples, type constraints"),
    "Hits@K": ("as high as possible at the K you retrieve with", "as for MRR"),
    "MRR_type": ("≥ MRR: type constraints should only help", "declare entity types and predicate domains/ranges in the ontology"),
    "ECE": ("≤ 0.05: confidences match accuracy", "recalibrate the completion scores (temperature or isotonic scaling)"),
    "cos": ("≥ 0.8 against the gold triples", "extraction fidelity: a stronger extractor, domain examples in the prompt"),
    "Score": ("close to 1 for a matched pair", "as for Soft-F1"),
    "Soft-F1": ("≥ 0.7 against the gold triples", "extraction recall (more relations per passage) and precision (fewer spurious triples)"),
    "TFI": ("≥ 0.7", "raise the lowest of cos, Soft-F1 and EntRatio"),
    "LC": ("close to 1: few conflicting triples", "resolve conflicts: one object for functional predicates, disjoint types kept apart, source trust or recency to choose"),
    "OC": ("most schema elements instantiated; low means the KG covers little of the ontology", "acquire documents for the uncovered classes and predicates, or prune the ontology to the domain"),
    "DNR": ("low (≤ 0.3); near 0 for a well-linked KG", "link and canonicalize entities so isolated nodes join the graph; extract more relations per entity"),
    "SRR": ("near 0", "deduplicate: merge paraphrased predicates and duplicate entities"),
    "COR": ("close to 1 against the reference KG", "extraction precision: drop low-confidence or unentailed triples (TCS, EntRatio)"),
    "CMP": ("as high as the corpus allows", "extraction recall and document acquisition"),
    "ERP": ("read relatively: low by construction (most retrieved nodes are not query entities)", "rerank or prune the retrieved subgraph; watch ERC, which a tighter retrieval can lower"),
    "RPC": ("as low as keeps ERC and RRS above θ", "cap top-k, hops or the beam; seed from linked query entities"),
    "RHD": ("the question's hop count; ∞ means the answer is not connected to the query entities", "more hops for deep questions; an ∞ share is a connectivity gap (see RRS)"),
    "AUR": ("high enough that the context is not mostly unused; low means context bloat", "smaller top-k, reranking, pruning triples off the reasoning path"),
    "KNI": ("> 0: the retrieved context improves grounding over the closed-book answer", "≤ 0: check retrieval (ERC, RRS) and that the reader prompt uses the context"),
    "GPC": ("share of queries with a whole gold path retrieved, close to 1", "more hops or a wider beam; seeds from the linked query entities"),
    "RPP": ("high: retrieved triples lie on gold paths", "rerank or prune off-path triples"),
    "RPR": ("close to 1: the gold paths are retrieved", "more hops, a wider beam, more seeds"),
    "CC": ("close to 1: the gold answer is in the context", "the retrieval levers of the chain (ERC, RRS)"),
    "Hits@1": ("as high as the benchmark allows; read the chain signature of the misses", "the levers of the misses' signatures (triage score shows them per query)"),
    "F1": ("as for Hits@1", "as for Hits@1; a low F1 with a high Hits@1 means extra or missing answer entities"),
    "RFR": ("low: when the answer is in context the reader finds it", "the reader: its prompt or model, fewer distractor triples in the context"),
    "HHR": ("close to 1: hard answers are found as often as any", "more hops and relation-aware retrieval for multi-hop questions"),
}  # fmt: skip


def _guided(specs: Iterable[MetricSpec]) -> Iterator[MetricSpec]:
    """The specs with their :data:`_GUIDE` entry (and CVR parts' definitions) filled in."""
    for spec in specs:
        healthy, lever = _GUIDE.get(spec.symbol, ("", ""))
        part = spec.symbol.removeprefix("CVR_")
        definition = f"CVR counting one constraint: {_CVR_PART[part]}." if part in _CVR_PART else ""
        yield dataclasses.replace(spec, healthy=healthy, lever=lever, definition=definition)


BUILTIN_METRICS = MetricRegistry(_guided(
    (
        # KG Implementation (TRIAGE §4.1)
        MetricSpec("TCS", "Triple Confidence Score", "implementation", "extraction", X.triple_confidence_score, "§4.1.2, eq. 7"),
        MetricSpec("SCR", "Source Coverage Ratio", "implementation", "extraction", X.source_coverage_ratio, "§4.1.2, eq. 8"),
        MetricSpec("EC", "Extraction Consistency", "implementation", "extraction", X.extraction_consistency, "§4.1.2, eq. 9"),
        MetricSpec("EC_soft", "Semantic Extraction Consistency", "implementation", "extraction", X.semantic_extraction_consistency, "§4.1.2, eq. 9 with eq. 4", headline=False),
        MetricSpec("CSC", "Cross-Source Corroboration", "implementation", "extraction", X.cross_source_corroboration, "§4.1.2, eq. 10"),
        MetricSpec("EntRatio", "Entailment Ratio", "implementation", "extraction", X.entailment_ratio, "§4.1.1, eq. 5 (after [24])", headline=False),
        MetricSpec("SC", "Schema Compliance Rate", "implementation", "extraction", X.schema_compliance_rate, "§4.1.2, eq. 11–12"),
        MetricSpec("CVR", "Constraint Violation Rate", "implementation", "extraction", X.constraint_violation_rate, "§4.1.2, eq. 13", headline=False, **_LOWER),
        *(
            MetricSpec(f"CVR_{c}", f"Constraint Violation Rate ({c})", "implementation", "extraction",
                       functools.partial(X.constraint_violation_rate, constraint=c), "§4.1.2, eq. 13", headline=False, **_LOWER)
            for c in X.CONSTRAINTS
        ),
        MetricSpec("CSR_link", "Canonicalization Success Rate", "implementation", "extraction", X.canonicalization_success_rate, "§4.1.2, eq. 14"),
        MetricSpec("EAR", "Evidence Attribution Rate", "implementation", "extraction", X.evidence_attribution_rate, "§4.1.2, eq. 15"),
        MetricSpec("TRIAGE-TI", "Aggregated Trustworthiness Index", "implementation", "extraction", X.trustworthiness_index, "§4.1.2, eq. 16", headline=False),
        MetricSpec("MR", "Mean Rank", "implementation", "completion", C.mean_rank, "§4.1.3", headline=False, **_LOWER, **_COUNT),
        MetricSpec("MRR", "Mean Reciprocal Rank", "implementation", "completion", C.mean_reciprocal_rank, "§4.1.3", headline=False),
        MetricSpec("Hits@K", "Hits@K (link prediction)", "implementation", "completion", C.hits_at_k, "§4.1.3", headline=False),
        MetricSpec("MRR_type", "Ontology-constrained MRR", "implementation", "completion", C.type_constrained_mrr, "§4.1.3, eq. 17", headline=False),
        MetricSpec("ECE", "Calibration of completion confidence", "implementation", "completion", C.expected_calibration_error, "§4.1.3, eq. 18 (after [19])", headline=False, **_LOWER),
        MetricSpec("cos", "Embedding Similarity", "implementation", "extraction", X.embedding_similarity, "§4.1.1, eq. 1 (after [47])", needs_gold=True, headline=False, value_range=(-1.0, 1.0)),
        MetricSpec("Score", "Component Score", "implementation", "extraction", X.component_score, "§4.1.1, eq. 2", needs_gold=True, headline=False),
        MetricSpec("Soft-F1", "Soft-F1", "implementation", "extraction", X.soft_f1, "§4.1.1, eq. 3–4 (after [5])", needs_gold=True, headline=False),
        MetricSpec("TFI", "Triple Fidelity Index", "implementation", "extraction", X.triple_fidelity_index, "§4.1.1, eq. 6", needs_gold=True, headline=False),
        # KG Validation (TRIAGE §4.2)
        MetricSpec("LC", "Logical Consistency", "validation", "graph", V.logical_consistency, "§4.2, eq. 19 (after [2])"),
        MetricSpec("OC", "Ontology Coverage", "validation", "graph", V.ontology_coverage, "§4.2, eq. 20"),
        MetricSpec("DNR", "Dead Node Ratio", "validation", "graph", V.dead_node_ratio, "§4.2, eq. 21", **_LOWER),
        MetricSpec("SRR", "Semantic Redundancy Rate", "validation", "graph", V.semantic_redundancy_rate, "§4.2, eq. 22", **_LOWER),
        MetricSpec("COR", "Correctness", "validation", "graph", V.correctness, "§4.2, eq. 23 (after [2])", needs_gold=True, headline=False),
        MetricSpec("CMP", "Completeness", "validation", "graph", V.completeness, "§4.2, eq. 24 (after [2])", needs_gold=True, headline=False),
        # KG Usage (TRIAGE §4.3)
        _usage("QGR", "Query Grounding Rate", "retrieval", U.query_grounding_rate, U.QueryView.qgr, "§4.3.2, eq. 25",
               link=LinkSpec(1, _THETA["QGR"], "out_of_scope", "entities not grounded in the KG")),
        _usage("ERC", "Entity Retrieval Coverage", "retrieval", U.entity_retrieval_coverage, U.QueryView.erc, "§4.3.2, eq. 26",
               link=LinkSpec(2, _THETA["ERC"], "retrieval_gap", "in the KG, not retrieved")),
        _usage("ERP", "Entity Retrieval Precision", "retrieval", U.entity_retrieval_precision, U.QueryView.erp, "§4.3.2, eq. 27"),
        _usage("RRS", "Reasoning Readiness Score", "retrieval", U.reasoning_readiness_score, U.QueryView.rrs, "§4.3.2, eq. 28",
               link=LinkSpec(3, _THETA["RRS"], "connectivity_gap", "retrieved, not connected")),
        _usage("RPC", "Retrieval Path Cost", "retrieval", U.retrieval_path_cost, U.QueryView.rpc, "§4.3.2, eq. 29", **_LOWER, **_COUNT),
        _usage("RHD", "Reasoning Hop Depth", "retrieval", U.reasoning_hop_depth, U.QueryView.rhd, "§4.3.3, eq. 33",
               headline=False, higher_is_better=None, **_COUNT),
        _usage("AGR", "Answer Grounding Rate", "generation", U.answer_grounding_rate, U.QueryView.agr, "§4.3.3, eq. 30",
               link=LinkSpec(5, _THETA["AGR"], "generation_gap", "answer not grounded in the retrieved evidence")),
        _usage("AUR", "Answer Utilization Rate", "generation", U.answer_utilization_rate, U.QueryView.aur, "§4.3.3, eq. 31"),
        _usage("ARF", "Answer Reasoning Faithfulness", "generation", U.answer_reasoning_faithfulness, U.QueryView.arf, "§4.3.3, eq. 32",
               link=LinkSpec(4, _THETA["ARF"], "relational_gap", "connected, relation not stated")),
        _usage("KNI", "KG Net Impact", "closed_book", U.kg_net_impact, U.QueryView.kni, "§4.3.5 (after [33])",
               headline=False, higher_is_better=None, value_range=(-1.0, 1.0)),
        _usage("GPC", "Gold Path Coverage", "retrieval", U.gold_path_coverage, U.QueryView.gpc, "§4.3.4, eq. 34", needs_gold=True, headline=False),
        _usage("RPP", "Retrieval Path Precision", "retrieval", U.retrieval_path_precision, U.QueryView.rpp, "§4.3.4, eq. 35", needs_gold=True, headline=False),
        _usage("RPR", "Retrieval Path Recall", "retrieval", U.retrieval_path_recall, U.QueryView.rpr, "§4.3.4, eq. 35", needs_gold=True, headline=False),
        _usage("CC", "Context Coverage", "retrieval", U.context_coverage, U.QueryView.cc, "§4.3.5 (after [65])", needs_gold=True),
        _usage("Hits@1", "Answer Correctness (Hits@1)", "generation", U.hits_at_1, U.QueryView.hits1, "§4.3.4 (after [64])", needs_gold=True),
        _usage("F1", "Answer Correctness (F1)", "generation", U.answer_f1, U.QueryView.f1, "§4.3.4 (after [64])", needs_gold=True),
        _usage("RFR", "Reasoning Failure Rate", "population", U.reasoning_failure_rate, None, "§4.3.5 (after [65])",
               needs_gold=True, headline=False, **_LOWER),
        _usage("HHR", "Hard Hits Rate", "population", U.hard_hits_rate, None, "§4.3.5 (after [70])",
               needs_gold=True, headline=False, value_range=None),
    )
))  # fmt: skip
"""The metrics this package defines, in the order of TRIAGE Table 2 within each phase."""


# --------------------------------------------------------------------------- registered metrics


class Registered(Protocol):
    """What one plugin registered (:class:`~triage_plugins.runtime.manager.Registration`)."""

    plugin: str
    items: tuple[Any, ...]
    error: BaseException | None
    source: str


def registry_from(registrations: Iterable[Registered], *, strict: bool = False) -> MetricRegistry:
    """The metrics plugins registered through ``triage_register_metrics``, plugin by plugin.

    A default plugin's metrics (``triage.metrics`` registers :data:`BUILTIN_METRICS`) are built-in:
    they may be chain links. A plugin whose hook raised, or that registered a taken symbol, adds none
    of its metrics: with ``strict`` that is a :class:`ConfigError`; otherwise it is logged and listed
    in :attr:`MetricRegistry.failed`, and the other plugins' metrics are kept.
    """
    registry = MetricRegistry()
    for done in registrations:
        try:
            registry = _add_registered(registry, done)
        except ConfigError as exc:
            if strict:
                raise
            log.error("metrics of plugin %r left out: %s", done.plugin, exc)
            registry.failed[done.plugin] = str(exc)
    return registry


def _add_registered(registry: MetricRegistry, done: Registered) -> MetricRegistry:
    """``registry`` plus one plugin's metrics (a new registry).

    :raises ConfigError: the plugin's hook raised, or it registered a taken symbol.
    """
    name, error = done.plugin, done.error
    if error is not None:
        raise ConfigError(f"plugin {name!r}: triage_register_metrics raised {type(error).__name__}: {error}")
    out = registry.copy()
    try:
        for spec in done.items:
            if done.source == "default":
                out._add(spec, "built-in")
            else:
                out.register(spec, origin=f"plugin {name!r}")
    except ConfigError as exc:
        raise ConfigError(f"plugin {name!r}: {exc}") from exc
    return out
