"""The feedback learner: EvoRAG contribution scores as a default plugin (EvoRAG §4–5; DESIGN §4).

It remembers each query's retrieval and generation (bounded LRU, keyed by framework and query id),
turns a feedback event into path utilities with the configured evaluator, backpropagates them into
the contribution scores and α, and — when ``config.reweight`` is on — answers ``triage_rerank``
with the hybrid priority P(t) = (1 − α)·S_r(t) + α·S_c(t) (eq. 2), times the suppression factor.

Paths (DESIGN §4, EvoRAG §6.12):

- ``unit="triple"``: the retrieval's paths as triple sequences; a retriever that reports no paths
  (a flat, entity-and-relation retrieval) gets each retrieved triple as a one-hop path, and the
  evaluators then credit the triples on the chains of retrieved triples that connect the
  question's entity to the rated answer (``EvaluationContext.flat``; :mod:`triage_plugins.feedback.credit`);
- ``unit="chunk"``: each retrieved chunk is a one-unit path. Our reading of §6.12 ("contribution
  scores for text chunks … incorporated into retrieval ranking alongside semantic similarity"):
  the same eq. 2–9 with |L_i| = 1, so P(L_i) = P(c_i)/Σ_j P(c_j) and a chunk's gradient is its own
  path's term only.

Under the default ``credit="relation"`` a flat context and chunks are credited by the relation the
question asks about and by content (:mod:`triage_plugins.feedback.credit`), and the step runs over
the scored paths and a baseline path only (:mod:`triage_plugins.feedback.backprop`), so bystanders
are neither lowered nor dilute the step.

S_r in the backward pass is the relevance the framework sent with ``triage_rerank`` for the same
query (so forward and backward use the same P(t)); units it did not cover get the configured
relevance function (default :func:`~triage_plugins.feedback.priority.token_relevance`).

Options (``config.options``, keys ``"feedback.<name>"``): ``eta`` (0.25), ``max_step`` (0.1),
``alpha`` (0.5), ``learn_alpha`` (True), ``eta_alpha`` (0.01), ``max_alpha_step`` (0.01),
``alpha_bounds`` ((0.05, 0.95)), ``evaluator`` (``None`` = gold when the retrieval carries gold,
else answer support; or ``"answer"``, ``"gold"``, ``"llm"``, or a ``PathEvaluator``), ``gold_others``
(``"neutral"``: how the gold evaluator treats paths that lead to no gold answer, see
:class:`~triage_plugins.feedback.evaluators.GoldEvaluator`), ``credit`` (``"relation"``: credit the
paths that lead from the question to the rated answer through the relation it asks about;
``"path"``: the same, relation-blind, with every path in the softmax; ``"entity"``: the earliest
rule, every path touching the answer entity — kept to measure the difference,
``benchmarks/bench_credit.py``), ``llm`` (the
judge callable for ``"llm"``), ``fidelity_min`` (0.0), ``conflict_max`` (0.0), ``relevance``
(``relevance(query, texts) -> S_r``), ``memory`` (1024 queries), ``max_hops`` (3), ``fusion_rule``
(``"average"``), ``labeller``, ``suppress_after`` (3), ``suppression_factor`` (0.5), ``width``
(2: evolution thresholds μ ± width·σ, where Algorithm 1 has μ ± σ — σ is small once most scores
have moved a little, so at 1σ a single, possibly wrong, feedback fused or suppressed; measured in
``benchmarks/RESULTS.md``: PQ-2H dev +8.7 → +10.0 points under 20 % flipped feedback, and the demo's
held-out accuracy after 3 rounds, mean of seeds 0–3, 0.558 → 0.558 at 1σ and 0.558 → 0.600 at 2σ),
``init`` (100), ``scale`` (200), ``staleness`` (1.0 s, see below), ``max_per_query`` (3, or
``None`` for no cap: the feedback events one source — ``human``, ``llm``, ``gold`` — can apply to
one query; later ones are counted under the cause ``"over the cap per query"`` and change nothing,
so a flood of ratings cannot drive a query's scores to 0; counted in the store's atomic counter
``feedback.per_query.<source>.<framework>/<query id>`` when the store has one, so the cap holds
across pulls and workers).

Sharing one store (DESIGN §7; ``docs/postgres.md``). Many workers (gunicorn workers, hosts) may
learn from one store:

- score increments are the store's atomic ``add_scores``; α steps are the store's atomic
  ``add_param`` (clamped to ``alpha_bounds`` in the same statement), so concurrent steps compose
  instead of the last writer winning;
- feedback for a query this worker did not serve is learned from the retrieval (and generation)
  the recorder stored, looked up by framework and query id (``store.last_event``); S_r then comes
  from ``relevance`` (the framework's rerank relevance is known only to the worker that served it);
- every ``staleness`` seconds at most, one indexed range read (``store.scores_changed_since``)
  lists the scores changed since the last look, back to ``SETTLE`` seconds before it (for
  transactions that committed after a newer one; writers' clocks are assumed that close), and the
  cached values of those ids are replaced (this worker's own newer writes kept) and α re-read, so
  another worker's learning shows within ``staleness`` seconds; ``0`` checks on every query. A store
  without that read (or with too many changes) has the whole cache dropped instead when
  ``store.scores_changed_at`` shows a change;
- on a store with ``add_scores_and_param`` the ``max_per_query`` count is made by the same call as
  the score and α writes (the writes apply only under the cap, in SQL): one round trip per feedback;
- on the manager's delivery worker, a feedback is attributed when it arrives (its retrieval,
  generation, S_r and path utilities, read in order with the other events) and its step on the
  scores and α is taken at the end of its batch (``at_batch_end``: in the batch's transaction, before
  its commit), in arrival order (:meth:`FeedbackLearner.learn_pending`). The step reads only what
  steps change, so the learned scores are those of stepping at once, and a batch holds the store's
  score and α locks only from its first step to its commit;
- feedback that cannot be attributed — no retrieval for its query id here or in the store, a
  retrieval with nothing to score, an answer that names no graph entity, an answer entity no
  retrieved path leads to, or (another evaluator) no path scored — is logged once per process and
  cause (a warning; later ones at debug level) and counted in :attr:`FeedbackLearner.unattributed`
  and in the store's atomic counter ``feedback.unattributed.<cause>`` (:data:`UNATTRIBUTED_CAUSES`,
  :func:`unattributed_param`), so every worker's drops add up in one place. Feedback of exactly
  0.5 carries no verdict and is not counted.

Speed (``benchmarks/bench_feedback.py``, ``handler/…`` rows): the labels of a framework's triples
are normalized once per graph version (a memo per framework, dropped on its next graph event),
each path is walked once per feedback however many answer sets are tested, and S_r sent with
``triage_rerank`` is used as it is.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from triage_plugins.contract.errors import ConfigError, FeedbackError
from triage_plugins.contract.events import (
    Chunk,
    FeedbackEvent,
    GenerationEvent,
    GraphEvent,
    RerankRequest,
    RetrievalEvent,
    Triple,
)
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.lru import LRU as _LRU
from triage_plugins.feedback.backprop import FeedbackOptimizer, Update
from triage_plugins.feedback.credit import CREDIT_RULES, Ends
from triage_plugins.feedback.evaluators import (
    AnswerSupportEvaluator,
    EvaluationContext,
    GoldEvaluator,
    LLMJudgeEvaluator,
    PathEvaluator,
)
from triage_plugins.feedback.evolution import EvolutionResult, KGEvolution, join_relations
from triage_plugins.feedback.priority import Relevance, clamp_relevance, token_relevance, unit_priority
from triage_plugins.feedback.scores import ContributionScores
from triage_plugins.feedback.statements import Statements
from triage_plugins.kg.relations import lower_stems, question_stems

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.contract.graph_view import GraphView

__all__ = [
    "MOVE_REASONS",
    "UNATTRIBUTED",
    "UNATTRIBUTED_CAUSES",
    "FeedbackLearner",
    "Move",
    "move_reason",
    "replay_moves",
    "unattributed_param",
]

log = logging.getLogger("triage.plugins.feedback")

PREFIX = "feedback."
DEFAULTS: dict[str, Any] = {
    "eta": 0.25,
    "max_step": 0.1,
    "alpha": 0.5,
    "learn_alpha": True,
    "eta_alpha": 0.01,
    "max_alpha_step": 0.01,
    "alpha_bounds": (0.05, 0.95),
    "evaluator": None,
    "gold_others": "neutral",
    "credit": "relation",
    "llm": None,
    "fidelity_min": 0.0,
    "conflict_max": 0.0,
    "relevance": None,
    "memory": 1024,
    "max_hops": 3,
    "fusion_rule": "average",
    "labeller": join_relations,
    "suppress_after": 3,
    "suppression_factor": 0.5,
    "width": 2.0,
    "init": 100.0,
    "scale": 200.0,
    "staleness": 1.0,
    "max_per_query": 3,
}
#: Seconds after a score change during which every staleness check drops the cache again.
SETTLE = 5.0
#: Triples whose normalized labels are remembered per framework before the memo starts afresh.
LABELS_MAX = 1 << 18
#: Prefix of the store counters of unattributed feedback (:func:`unattributed_param`).
UNATTRIBUTED = "feedback.unattributed."
#: The causes :class:`FeedbackLearner` counts (``"no chunk retrieved"`` with ``unit="chunk"``).
UNATTRIBUTED_CAUSES = (
    "unknown query id",
    "no triple retrieved",
    "no chunk retrieved",
    "no answer entity",
    "no path to the answer",
    "no path scored",
    "over the cap per query",
)
#: Prefix of the store counters of feedback applied per source and query (``max_per_query``).
PER_QUERY = "feedback.per_query."


@dataclass
class _Model:
    scores: ContributionScores
    optimizer: _SharedOptimizer
    evolution: KGEvolution
    checked: float = -math.inf  # monotonic time of the last staleness check
    seen: float | None = None  # the store's newest score change at that check
    wall: float | None = None  # time.time() of the last check that read the store's changes


class _Cap:
    """The ``max_per_query`` count of one feedback: made by the store call that writes its update (one
    round trip, :meth:`_SharedOptimizer._write_step`), or on its own (:meth:`count`) when none does."""

    __slots__ = ("check", "limit", "name", "within")

    def __init__(self, name: str, limit: int, check: Callable[[], bool]) -> None:
        self.name, self.limit, self.check = name, limit, check
        self.within: bool | None = None  # not counted yet

    def count(self) -> bool:
        """Whether the feedback is within the cap, counting it now unless it was counted already."""
        if self.within is None:
            self.within = self.check()
        return self.within


@dataclass(frozen=True, slots=True)
class _Attributed:
    """A feedback's attribution (:meth:`FeedbackLearner._attribute`): what its score step needs beyond
    the scores and α, read in arrival order; the step itself is :meth:`FeedbackLearner._apply`.
    ``path_ids is None``: nothing to learn, only ``cap`` to count."""

    key: tuple[str, str]
    unit: str
    cap: _Cap | None
    path_ids: Sequence[Sequence[str]] | None = None
    utilities: Sequence[float | None] = ()
    relevance: Mapping[str, float] | None = None
    baseline: bool = False
    no_credit: str | None = None  # the cause to count when no path was scored


def _options(raw: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(DEFAULTS)
    for key, value in raw.items():
        if not key.startswith(PREFIX):
            continue
        name = key[len(PREFIX) :]
        if name not in DEFAULTS:
            raise ConfigError(
                f"unknown option {key!r}; the feedback learner knows {sorted(PREFIX + k for k in DEFAULTS)}"
            )
        out[name] = value
    if out["credit"] not in CREDIT_RULES:
        raise ConfigError(f"feedback.credit must be one of {', '.join(CREDIT_RULES)}, got {out['credit']!r}")
    if not isinstance(out["memory"], int) or out["memory"] < 1:
        raise ConfigError(f"feedback.memory must be a whole number >= 1, got {out['memory']!r}")
    cap = out["max_per_query"]
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
        raise ConfigError(f"feedback.max_per_query must be a whole number >= 1 or None, got {cap!r}")
    stale = out["staleness"]
    if (
        isinstance(stale, bool)
        or not isinstance(stale, int | float)
        or not (math.isfinite(stale) and stale >= 0)
    ):
        raise ConfigError(f"feedback.staleness must be a number of seconds >= 0, got {stale!r}")
    return out


def unattributed_param(cause: str) -> str:
    """The store counter of unattributed feedback for ``cause``: ``feedback.unattributed.<cause>``,
    the cause's words joined by ``_`` (``"unknown query id"`` → ``feedback.unattributed.unknown_query_id``)."""
    return UNATTRIBUTED + "_".join(cause.split())


def _no_credit_cause(
    evaluator: PathEvaluator,
    query: str,
    answer: str,
    paths: Sequence[Sequence[Triple | Chunk]],
    context: EvaluationContext,
) -> str:
    """Why an evaluator scored no path of a rated answer: the answer names no graph entity, no
    retrieved path leads to the entity it names, or (any other evaluator) none was scored."""
    if isinstance(evaluator, AnswerSupportEvaluator):
        if not AnswerSupportEvaluator.answer_targets(query, answer, paths, context):
            return "no answer entity"
        return "no path to the answer"
    return "no path scored"


class _SharedOptimizer(FeedbackOptimizer):
    """:class:`FeedbackOptimizer` whose α steps are the store's atomic ``add_param`` (when it has one).

    The step is the same as the base class's (eq. 9, bounded by ``max_alpha_step``), and the clamp
    into ``alpha_bounds`` is applied by the store in the same statement, so steps of concurrent
    workers compose as serial steps would. :attr:`alpha_steps` sums the steps this process sent.
    """

    alpha_steps: float = 0.0
    _version: int = 0  # bumped by every step: a reload read before a step does not overwrite it
    _alpha_lock = threading.Lock()  # class-wide: steps and reloads are rare and short

    def _alpha_step(self, d_alpha: float) -> float:
        add_param = getattr(self.scores.store, "add_param", None)
        if add_param is None or not self.learn_alpha or not math.isfinite(d_alpha):
            with self._alpha_lock:
                self._version += 1
                return super()._alpha_step(d_alpha)
        change = max(-self.max_alpha_step, min(self.max_alpha_step, -self.eta_alpha * d_alpha))
        if change == 0.0:
            return self._alpha
        with self._alpha_lock:
            self._alpha = float(
                add_param(self.param_name, change, initial=self._alpha, bounds=self.alpha_bounds)
            )
            self._version += 1
        self.alpha_steps += change
        return self._alpha

    _capping = threading.local()  # .cap: the _Cap a step on this thread counts (capped())

    @contextlib.contextmanager
    def capped(self, cap: _Cap | None) -> Iterator[None]:
        """Steps inside count ``cap`` in their store write (:meth:`_write_step`)."""
        self._capping.cap = cap
        try:
            yield
        finally:
            self._capping.cap = None

    def _write_step(self, deltas: Mapping[str, float], d_alpha: float) -> float:
        """The score deltas and the α step as one store write (one round trip on PostgreSQL) when the
        store has ``add_scores_and_param``; the values written and returned are those of the two
        separate writes (:meth:`ContributionScores.add_and_step`). A pending cap (:meth:`capped`) is
        counted in that write, or on its own first; over it, nothing is written (α is returned as it was)."""
        cap = getattr(self._capping, "cap", None)
        if cap is not None and cap.within is not None:
            cap = None  # already counted
        store = self.scores.store
        change = 0.0
        if (
            getattr(type(store), "add_scores_and_param", None) is not None
            and self.learn_alpha
            and math.isfinite(d_alpha)
        ):
            change = max(-self.max_alpha_step, min(self.max_alpha_step, -self.eta_alpha * d_alpha))
        if change == 0.0:
            if cap is not None and not cap.count():
                return self._alpha
            return super()._write_step(deltas, d_alpha)
        with self._alpha_lock:
            alpha = self.scores.add_and_step(
                deltas, self.param_name, change, initial=self._alpha, bounds=self.alpha_bounds,
                cap=None if cap is None else (cap.name, float(cap.limit)),
            )  # fmt: skip
            if cap is not None:
                cap.within = alpha is not None
            if alpha is None:
                return self._alpha
            self._alpha = alpha
            self._version += 1
        self.alpha_steps += change
        return self._alpha

    def reload_alpha(self) -> None:
        """Re-read the learned α from the store (another worker may have stepped it); a step taken
        while the store was read wins (it is newer)."""
        if not self.learn_alpha:
            return
        with self._alpha_lock:
            version = self._version
        stored = self.scores.get_param(self.param_name)
        if isinstance(stored, int | float) and not isinstance(stored, bool) and math.isfinite(stored):
            lo, hi = self.alpha_bounds
            with self._alpha_lock:
                if version == self._version:
                    self._alpha = min(max(float(stored), lo), hi)


def _per_query(event: FeedbackEvent) -> str:
    """The store counter of ``event``'s source and query (``max_per_query``)."""
    return f"{PER_QUERY}{event.source}.{event.framework}/{event.query_id}"


def _count(cap: _Cap | None) -> bool:
    """Count ``cap`` unless it is counted already; whether the feedback is within it (``True`` without one)."""
    return cap is None or cap.count()


def _utility_of(
    path_ids: Sequence[Sequence[str]], utilities: Sequence[float | None]
) -> dict[str, float | None]:
    """The utility each unit key got (a scored path wins over an unscored one)."""
    utility_of: dict[str, float | None] = {}
    for ids, u in zip(path_ids, utilities, strict=True):
        for i in ids:
            if u is not None or i not in utility_of:
                utility_of[i] = u
    return utility_of


def _asked(query: str, unit: str) -> frozenset[str]:
    """The relation stems ``query`` asks about, read as the unit's statements are read
    (:mod:`~triage_plugins.feedback.statements`)."""
    return lower_stems(query) if unit == "chunk" else question_stems(query)


def _text(unit: Triple | Chunk) -> str:
    if isinstance(unit, Triple):
        return f"{unit.subject} {unit.predicate} {unit.object}"
    return unit.text


class FeedbackLearner:
    """Default plugin: learns EvoRAG contribution scores from feedback and reranks with them.

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (its ``store`` and ``config``).
    """

    #: Options this plugin reads (``TriageConfig.options``), with their defaults.
    triage_options: ClassVar[Mapping[str, Any]] = {PREFIX + k: v for k, v in DEFAULTS.items()}

    def __init__(self, manager: PluginContext) -> None:
        self.manager = manager
        self.options = _options(manager.config.options)
        size = self.options["memory"]
        self._retrievals: _LRU[tuple[str, str], RetrievalEvent] = _LRU(size)
        self._generations: _LRU[tuple[str, str], GenerationEvent] = _LRU(size)
        self._relevance: _LRU[tuple[str, str], dict[str, float]] = _LRU(size)
        self._models: dict[str, _Model] = {}
        self._graph: GraphView | None = None
        self._labels: dict[str, Ends] = {}
        self._statements = Statements()
        self._lock = threading.RLock()
        self.last_update: Update | None = None
        #: The utility each unit key got from the last feedback learned (None: not scored).
        self.last_utilities: dict[str, float | None] = {}
        self.last_evolution: EvolutionResult | None = None
        #: Feedback events that changed nothing, per cause (each cause is logged once).
        self.unattributed: Counter[str] = Counter()
        #: Feedback applied per (source, framework, query id) when the store keeps no counter.
        self._per_query: _LRU[tuple[str, str, str], int] = _LRU(max(size, 4096))
        # Feedback attributed during a delivery batch, stepped at its end (learn_pending), in order.
        self._queued: list[_Attributed] = []
        self._queued_lock = threading.Lock()
        at_batch_end = getattr(manager, "at_batch_end", None)
        self._batched = bool(at_batch_end is not None and at_batch_end("triage.feedback", self.learn_pending))

    # ------------------------------------------------------------------ state

    @property
    def unit(self) -> str:
        return self.manager.config.unit

    def model(self, unit: str | None = None) -> _Model:
        """Scores, optimizer and evolution of ``unit`` (default: the configured one), built once."""
        unit = unit or self.unit
        model = self._models.get(unit)
        if model is None:
            with self._lock:
                model = self._models.get(unit)
                if model is None:
                    model = self._models[unit] = self._build(unit)
        return model

    def _build(self, unit: str) -> _Model:
        o = self.options
        scores = ContributionScores(self.manager.store, unit, init=o["init"], scale=o["scale"])  # type: ignore[arg-type]
        optimizer = _SharedOptimizer(
            scores,
            eta=o["eta"],
            max_step=o["max_step"],
            alpha=o["alpha"],
            learn_alpha=o["learn_alpha"],
            eta_alpha=o["eta_alpha"],
            max_alpha_step=o["max_alpha_step"],
            alpha_bounds=tuple(o["alpha_bounds"]),
        )
        evolution = KGEvolution(
            scores,
            max_hops=o["max_hops"],
            labeller=o["labeller"],
            rule=o["fusion_rule"],
            suppress_after=o["suppress_after"],
            suppression_factor=o["suppression_factor"],
            width=o["width"],
        )
        return _Model(scores, optimizer, evolution)

    def evaluator(self, retrieval: RetrievalEvent) -> PathEvaluator:
        """The configured evaluator, or the default: gold when the retrieval has gold, else answer support."""
        choice = self.options["evaluator"]
        credit = self.options["credit"]
        if choice is None:
            gold = retrieval.gold
            return (
                GoldEvaluator(others=self.options["gold_others"], credit=credit)
                if gold is not None and (gold.answers or gold.paths)
                else AnswerSupportEvaluator(credit=credit)
            )
        if choice == "answer":
            return AnswerSupportEvaluator(credit=credit)
        if choice == "gold":
            return GoldEvaluator(others=self.options["gold_others"], credit=credit)
        if choice == "llm":
            llm = self.options["llm"]
            if not callable(llm):
                raise ConfigError('feedback.evaluator "llm" needs feedback.llm, a callable prompt -> reply')
            return LLMJudgeEvaluator(
                llm, fidelity_min=self.options["fidelity_min"], conflict_max=self.options["conflict_max"]
            )
        if isinstance(choice, PathEvaluator):
            return choice
        raise ConfigError(
            f"feedback.evaluator must be None, 'answer', 'gold', 'llm' or a PathEvaluator, got {choice!r}"
        )

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        self._graph = event.graph
        self._labels.pop(event.framework, None)  # a new graph version: labels may have changed

    def _labels_of(self, framework: str) -> Ends:
        """Normalized triple labels of ``framework``'s current graph version, memoized across queries."""
        labels = self._labels.get(framework)
        if labels is None or len(labels.cache) > LABELS_MAX:
            labels = self._labels[framework] = Ends()
        return labels

    @hookimpl
    def triage_retrieval(self, event: RetrievalEvent) -> None:
        self._retrievals.put((event.framework, event.query_id), event)
        if self.manager.config.reweight and self._per_statement(self.unit):  # for the next reranks
            self._statements.see(event.chunks if self.unit == "chunk" else event.subgraph.triples)

    @hookimpl
    def triage_generation(self, event: GenerationEvent) -> None:
        if event.context == "retrieved":
            self._generations.put((event.framework, event.query_id), event)

    @hookimpl
    def triage_feedback(self, event: FeedbackEvent) -> None:
        if self._batched and self.manager.batching():
            attributed = self._attribute(event)  # now: it reads what the events before it left
            if attributed is not None:
                with self._queued_lock:
                    self._queued.append(attributed)
            return
        self.learn(event)

    def learn_pending(self) -> None:
        """Step the scores and α for the feedback attributed during a delivery batch, in arrival order
        (the manager's ``at_batch_end``: inside the batch's store transaction, before its commit).

        Only the step waits for the batch's end: it reads nothing but the scores, α and the evolution's
        state, which no other event changes; what a feedback reads from the events before it (their
        retrieval and generation, the graph's labels, the framework's S_r, the store's stored
        events) is read when it arrives. So the learned scores and α are those of learning each
        feedback at once, whatever the batch boundaries, and a batch holds the store's score and α
        locks only from its first step to its commit. An exception is raised after the others ran.
        """
        with self._queued_lock:
            queued, self._queued = self._queued, []
        failed: Exception | None = None
        for attributed in queued:
            try:
                self._apply(attributed)
            except Exception as exc:  # noqa: BLE001 - one failed step must not lose the batch's others
                failed = failed or exc
        if failed is not None:
            raise failed

    @hookimpl
    def triage_rerank(self, request: RerankRequest) -> list[float] | None:
        if request.query_id is not None:
            self._relevance.put(
                (request.framework, request.query_id), dict(zip(request.ids, request.relevance, strict=True))
            )
        if not self.manager.config.reweight or request.unit != self.unit:
            return None
        return self.priorities(request.ids, request.relevance, query=request.query).tolist()

    @hookimpl
    def triage_learned_scores(self, unit: str, ids: Sequence[str] | None) -> dict[str, float]:
        scores = self.model(unit).scores
        if ids is None:
            return scores.scored()
        return {i: float(row.raw) for i, row in scores.store.get_scores(unit, ids).items()}

    @hookimpl
    def triage_seed_scores(self, unit: str, scores: Mapping[str, float]) -> int:
        model = self.model(unit)
        known = model.scores.store.get_scores(unit, list(scores))  # only the ids offered, not every score
        seeded = 0
        with self._lock:
            for id_, raw in scores.items():
                if id_ not in known:
                    model.scores.set(id_, float(raw))
                    seeded += 1
        return seeded

    # ------------------------------------------------------------------ learning

    def priorities(
        self,
        ids: Sequence[str],
        relevance: Sequence[float],
        unit: str | None = None,
        *,
        query: str | None = None,
    ) -> np.ndarray:
        """P(t) of eq. 2 for ``ids`` with S_r = ``relevance``, times suppression factors.

        :param query: the question: a merged row is ranked by the statement it asks about
            (:mod:`~triage_plugins.feedback.statements`); ``None``: by the row's own score.
        """
        model = self.model(unit)
        self._keep_fresh(model)
        if query is not None and self._per_statement(model.scores.unit):
            ids = self._statements.keys(ids, _asked(query, model.scores.unit))
        s_c = model.scores.normalized(ids)
        p = unit_priority(clamp_relevance(relevance), s_c, model.optimizer.alpha)
        factor = model.evolution.factors(ids, s_c)
        return p if factor is None else p * factor

    def learn(self, event: FeedbackEvent) -> Update | None:
        """Backpropagate one feedback event into the scores; ``None`` when there is nothing to learn from.

        The query's retrieval is this worker's (remembered) or, failing that, the one stored by
        whichever worker served it. Feedback that cannot be attributed is counted in
        :attr:`unattributed` and in the store (:meth:`_unattributed`).
        """
        attributed = self._attribute(event)
        return None if attributed is None else self._apply(attributed)

    def _attribute(self, event: FeedbackEvent) -> _Attributed | None:
        """What ``event``'s step needs, read from the events before it: its paths, their utilities and
        S_r; ``None`` when nothing is left to do (the feedback was counted as unattributed, or over
        a cap counted here). Reads no score, no α: those are :meth:`_apply`'s."""
        key = (event.framework, event.query_id)
        retrieval = self._retrievals.get(key)
        generation = self._generations.get(key)
        if retrieval is None:
            retrieval, generation = self._stored_state(key)
        if retrieval is None:
            self._unattributed("unknown query id", key)
            return None
        unit = self.unit
        paths = self._paths(retrieval, unit)
        if not paths:
            self._unattributed(f"no {unit} retrieved", key)
            return None
        cap = self._deferred_cap(event)  # counted with the score write: no round trip of its own
        if cap is None and not self._within_cap(event):
            self._unattributed("over the cap per query", key)
            return None
        context = EvaluationContext(
            unit=unit,  # type: ignore[arg-type]
            answer_entities=tuple(v for v in generation.answer_grounding.values() if v) if generation else (),
            query_entities=tuple(v for v in retrieval.grounding.values() if v),
            gold=retrieval.gold,
            flat=unit == "triple" and not retrieval.paths,
            labels=self._labels_of(event.framework),
            triples=retrieval.subgraph.triples if unit == "chunk" else (),
        )
        answer = generation.answer if generation else ""
        evaluator = self.evaluator(retrieval)
        try:
            utilities = evaluator.evaluate(retrieval.query, answer, paths, event.score, context)
        except FeedbackError as exc:
            log.warning("feedback for %s/%s not used: %s", *key, exc)
            return None if cap is None else _Attributed(key, unit, cap)
        if len(utilities) != len(paths):
            log.warning(
                "evaluator returned %d utilities for %d paths; feedback skipped", len(utilities), len(paths)
            )
            return None if cap is None else _Attributed(key, unit, cap)
        no_credit = None
        if event.score != 0.5 and all(u is None for u in utilities):
            no_credit = _no_credit_cause(evaluator, retrieval.query, answer, paths, context)
        path_ids = (
            [p.triple_ids for p in retrieval.paths]
            if unit == "triple" and retrieval.paths
            else [[u.id for u in path] for path in paths]
        )
        with self._lock:
            relevance = self._relevance_of(key, retrieval.query, paths, path_ids)
            if (context.flat or unit == "chunk") and self._per_statement(unit):
                path_ids, relevance = self._statement_paths(retrieval, unit, path_ids, relevance)
        return _Attributed(
            key,
            unit,
            cap,
            path_ids,
            utilities,
            relevance,
            self._baseline(context),
            no_credit,
        )

    def _apply(self, attributed: _Attributed) -> Update | None:
        """Count ``attributed``'s cap and take its step on the scores and α (:meth:`_attribute`)."""
        key, cap, path_ids = attributed.key, attributed.cap, attributed.path_ids
        if path_ids is None:  # nothing to learn: the cap is counted all the same
            _count(cap)
            return None
        if attributed.no_credit is not None:
            if not _count(cap):
                self._unattributed("over the cap per query", key)
                return None
            self._unattributed(attributed.no_credit, key)
        model = self.model(attributed.unit)
        self._keep_fresh(model)
        utilities = attributed.utilities
        with self._lock:
            factors = None
            if model.evolution.suppressing:
                ids = list(dict.fromkeys(i for p in path_ids for i in p))
                factor = model.evolution.factors(ids, model.scores.normalized(ids))
                factors = None if factor is None else dict(zip(ids, factor.tolist(), strict=True))
            with model.optimizer.capped(cap):
                update = model.optimizer.step(
                    path_ids, utilities, attributed.relevance, factors, baseline=attributed.baseline
                )
        if not _count(cap):  # over the cap: the store call changed nothing but the counter
            self._unattributed("over the cap per query", key)
            return None
        self.last_update = update
        self.last_utilities = _utility_of(path_ids, utilities)
        return update

    def _per_statement(self, unit: str) -> bool:
        """Merged rows and chunks learned and ranked per statement
        (:mod:`~triage_plugins.feedback.statements`): under relation-aware credit."""
        return self.options["credit"] == "relation"

    def _statement_paths(
        self,
        retrieval: RetrievalEvent,
        unit: str,
        path_ids: Sequence[Sequence[str]],
        relevance: Mapping[str, float],
    ) -> tuple[list[list[str]], dict[str, float]]:
        """One-unit paths keyed by the statement the question asks about, and S_r under those keys."""
        self._statements.see(retrieval.chunks if unit == "chunk" else retrieval.subgraph.triples)
        ids = [p[0] for p in path_ids]
        keys = self._statements.keys(ids, _asked(retrieval.query, unit))
        return [[k] for k in keys], {k: relevance[i] for i, k in zip(ids, keys, strict=True)}

    def _baseline(self, context: EvaluationContext) -> bool:
        """Bystanders out of the softmax, a baseline path in (:mod:`~triage_plugins.feedback.backprop`):
        under relation-aware credit, for a framework's flat context and for chunks."""
        return self.options["credit"] == "relation" and (context.flat or context.unit == "chunk")

    def _stored_state(self, key: tuple[str, str]) -> tuple[RetrievalEvent | None, GenerationEvent | None]:
        """The retrieval and generation another worker stored for ``key`` (``(None, None)`` if none)."""
        store = self.manager.store
        lookup = getattr(store, "last_event", None)
        if lookup is None:
            return None, None
        retrieval = lookup("retrieval", framework=key[0], query_id=key[1])
        if not isinstance(retrieval, RetrievalEvent):
            return None, None
        generation = lookup("generation", framework=key[0], query_id=key[1])
        if not isinstance(generation, GenerationEvent) or generation.context != "retrieved":
            generation = None
        return retrieval, generation

    def _deferred_cap(self, event: FeedbackEvent) -> _Cap | None:
        """``event``'s ``max_per_query`` count, to be made by the store call that writes its update (a
        store with ``add_scores_and_param``); ``None``: count it now (:meth:`_within_cap`)."""
        cap = self.options["max_per_query"]
        if cap is None or getattr(type(self.manager.store), "add_scores_and_param", None) is None:
            return None
        return _Cap(_per_query(event), cap, lambda: self._within_cap(event))

    def _within_cap(self, event: FeedbackEvent) -> bool:
        """Count ``event`` against ``max_per_query``; ``False`` when its source already reached the cap
        for its query (the store's atomic counter when it has one, else this process's)."""
        cap = self.options["max_per_query"]
        if cap is None:
            return True
        name = _per_query(event)
        add_param = getattr(self.manager.store, "add_param", None)
        if add_param is not None:
            try:
                return float(add_param(name, 1.0, bounds=(0.0, cap + 1.0))) <= cap
            except Exception as exc:  # noqa: BLE001 - the store is down: count here instead
                log.debug("could not count feedback per query in the store: %s", exc)
        key = (event.source, event.framework, event.query_id)
        with self._lock:
            n = (self._per_query.get(key) or 0) + 1
            self._per_query.put(key, n)
        return n <= cap

    def _unattributed(self, cause: str, key: tuple[str, str]) -> None:
        """Count feedback that cannot be attributed: in :attr:`unattributed` and in the store's atomic
        counter ``feedback.unattributed.<cause>`` (:func:`unattributed_param`); the first of each
        cause in this process is a warning, the rest are debug messages."""
        with self._lock:
            self.unattributed[cause] += 1
            first = self.unattributed[cause] == 1
        add_param = getattr(self.manager.store, "add_param", None)
        if add_param is not None:
            try:
                add_param(unattributed_param(cause), 1.0)
            except Exception as exc:  # noqa: BLE001 - a counter must never lose the feedback path
                log.debug("could not count unattributed feedback in the store: %s", exc)
        message = "feedback for %s/%s changed no score: %s"
        if first:
            log.warning(
                message + "; logged once per cause, counted in FeedbackLearner.unattributed and in the "
                "store as %s",
                *key,
                cause,
                unattributed_param(cause),
            )
        else:
            log.debug(message, *key, cause)

    def _keep_fresh(self, model: _Model) -> None:
        """Bring the cached scores and α up to the store's (at most every ``staleness`` s): merge the
        scores changed since the last look, back to ``SETTLE`` s before it (transactions commit after
        they stamp ``updated_at``); a store that cannot list them has the whole cache dropped when any
        score changed."""
        store = self.manager.store
        changed_at = getattr(store, "scores_changed_at", None)
        if changed_at is None:
            return
        now = time.monotonic()
        if now - model.checked < self.options["staleness"]:
            return
        model.checked = now
        listed = getattr(type(store), "scores_changed_since", None) is not None
        wall, mark = time.time(), model.scores.mark()
        if listed and model.wall is not None:
            rows = store.scores_changed_since(model.scores.unit, model.wall - SETTLE)  # type: ignore[union-attr]
            if rows is not None:  # None: too many; read them all again
                model.wall = wall
                if rows:  # α steps come with score changes
                    model.scores.merge({k: float(r.raw) for k, r in rows.items()}, mark)
                    model.optimizer.reload_alpha()
                return
        newest = changed_at(model.scores.unit)
        model.wall = wall if listed else None
        if newest is None:
            return
        if newest != model.seen or time.time() - newest < SETTLE:
            model.seen = newest
            model.scores.refresh()
            model.optimizer.reload_alpha()

    def _paths(self, retrieval: RetrievalEvent, unit: str) -> list[tuple[Triple | Chunk, ...]]:
        if unit == "chunk":
            return [(c,) for c in retrieval.chunks]
        if retrieval.paths:
            unit_of = {t.id: t for t in retrieval.subgraph.triples}.__getitem__
            return [tuple(map(unit_of, p.triple_ids)) for p in retrieval.paths]
        return [(t,) for t in retrieval.subgraph.triples]

    def _relevance_of(
        self,
        key: tuple[str, str],
        query: str,
        paths: Sequence[Sequence[Triple | Chunk]],
        path_ids: Sequence[Sequence[str]],
    ) -> Mapping[str, float]:
        """S_r of every unit on ``paths``: the framework's (``triage_rerank``), else ``relevance``."""
        known = self._relevance.get(key) or {}
        missing = set(itertools.chain.from_iterable(path_ids)).difference(known)
        if not missing:
            return known
        units = {u.id: u for p in paths for u in p if u.id in missing}
        fn: Relevance = self.options["relevance"] or token_relevance
        values = clamp_relevance(fn(query, [_text(u) for u in units.values()]))
        out = dict(known)
        out.update(zip(units, values.tolist(), strict=True))
        return out

    # ------------------------------------------------------------------ evolution

    def evolve(self) -> tuple[Triple, ...]:
        """Run relation fusion and suppression once (call once per feedback iteration).

        :return: the new shortcut triples (their scores are already stored); add them to the graph
            and emit a graph event. Details are in :attr:`last_evolution`.
        """
        model = self.model()
        if self._graph is not None:
            triples: list[Triple] = list(self._graph.triples)
        else:
            seen: dict[str, Triple] = {}
            for r in self._retrievals.values():
                seen.update((t.id, t) for t in r.subgraph.triples)
            triples = list(seen.values())
        with self._lock:
            result = model.evolution.evolve(triples)
        self.last_evolution = result
        return tuple(s.triple for s in result.shortcuts)


# ---------------------------------------------------------------------- audit (#30 point 6)

#: Why a feedback moved a score, in the order a report lists them.
MOVE_REASONS = (
    "led to a wrong answer",
    "alternative to a right answer",
    "led to a right answer",
    "leads to the gold answer",
    "bystander",
)


@dataclass(frozen=True, slots=True)
class Move:
    """One feedback's step on one score: which query, its score, the unit's utility, the step, why."""

    key: str
    framework: str
    query_id: str
    feedback: float
    utility: float | None
    delta: float
    reason: str


def move_reason(feedback: float, utility: float | None) -> str:
    """Why a step moved a unit (:data:`MOVE_REASONS`): by the unit's utility for that feedback, or
    ``"bystander"`` when the unit had none (it moved only through the softmax of other paths)."""
    if not utility:
        return "bystander"
    if utility < 0:
        return "led to a wrong answer" if feedback < 0.5 else "alternative to a right answer"
    return "led to a right answer" if feedback > 0.5 else "leads to the gold answer"


def replay_moves(
    events: Sequence[Any], unit: str = "triple", options: Mapping[str, Any] | None = None
) -> list[Move]:
    """Every score step the feedback in ``events`` makes, replayed in order through a fresh learner
    (in memory; default options unless given): learned scores are a pure function of the events and
    feedback, so the steps, their signs and reasons are the live learner's. Their sizes can differ a
    little where the live learner had the framework's own relevance S_r from ``triage_rerank`` (not
    stored): the replay uses the configured relevance function there."""
    from types import SimpleNamespace

    from triage_plugins.contract.config import TriageConfig

    opts = {"feedback.memory": max(1024, len(events)), **(options or {})}
    config = TriageConfig(unit=unit, options=opts)  # type: ignore[arg-type]
    learner = FeedbackLearner(SimpleNamespace(store=None, config=config))  # type: ignore[arg-type]
    moves: list[Move] = []
    for e in events:
        if isinstance(e, RetrievalEvent):
            learner.triage_retrieval(e)
        elif isinstance(e, GenerationEvent):
            learner.triage_generation(e)
        elif isinstance(e, FeedbackEvent):
            update = learner.learn(e)
            if update is None:
                continue
            for key, delta in update.deltas.items():
                u = learner.last_utilities.get(key)
                moves.append(Move(key, e.framework, e.query_id, e.score, u, delta, move_reason(e.score, u)))
    return moves
