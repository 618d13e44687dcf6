"""Path utility U ∈ [−1, 1] from response-level feedback (EvoRAG §4.2, eq. 1: U{L} = f(q, R_q, L, FS)).

Every evaluator implements :class:`PathEvaluator`: ``evaluate(query, answer, paths, feedback_score,
context) -> list[float | None]``, one utility per path, ``None`` meaning "no update through this
path" (see :mod:`triage_plugins.feedback.backprop` for how such a path is treated). A path is a
sequence of :class:`~triage_plugins.contract.events.Triple` (triple level) or a one-element sequence of
:class:`~triage_plugins.contract.events.Chunk` (chunk level, EvoRAG §6.12). ``feedback_score`` is in [0, 1]
(a 1–5 rating r arrives as (r − 1)/4); its signed form is f = 2·s − 1 ∈ [−1, 1].

- :class:`LLMJudgeEvaluator` — the paper's evaluator: one prompt, Supportiveness, Fidelity and
  Conflict per path, utility = Supportiveness only when Fidelity is high and Conflict low.
- :class:`AnswerSupportEvaluator` — no LLM: a path supports the response when it leads from the
  question's entity to the response's answer entity (:mod:`triage_plugins.feedback.credit`).
- :class:`GoldEvaluator` — gold answers (and gold paths) of a benchmark.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from triage_plugins.contract.errors import ConfigError, JudgeOutputError
from triage_plugins.contract.events import Chunk, Gold, Triple
from triage_plugins.contract.graph_view import normalize_label
from triage_plugins.feedback.credit import (
    COMPETES,
    CREDIT_RULES,
    SUPPORTS,
    Credit,
    Ends,
    PathFacts,
    has_phrase,
    touches,
)
from triage_plugins.kg.relations import question_stems, relation_stems

__all__ = [
    "AnswerSupportEvaluator",
    "EvaluationContext",
    "GoldEvaluator",
    "LLMJudgeEvaluator",
    "PathEvaluator",
    "Unit",
    "judge_prompt",
    "parse_judgement",
]

log = logging.getLogger("triage.feedback.evaluators")

Unit = Triple | Chunk


@dataclass(frozen=True, slots=True)
class EvaluationContext:
    """What an evaluator may need beyond the query, answer, paths and score.

    :param unit: ``"triple"`` or ``"chunk"``.
    :param answer_entities: node ids the answer was grounded to (``GenerationEvent.answer_grounding``).
    :param query_entities: node ids the query was grounded to (``RetrievalEvent.grounding``).
    :param gold: gold annotations of the query, when a benchmark has them.
    :param flat: the paths are the retrieved triples one by one, because the retriever reported no
        paths (a flat retrieval of relationships, as the framework adapters report): support is then
        judged through chains of them (:mod:`triage_plugins.feedback.credit`).
    :param triples: the retrieved triples, with ``unit="chunk"``: chunks are credited by the triples
        they state (:func:`~triage_plugins.feedback.credit.stating_roles`).
    :param labels: a memo of normalized triple labels to reuse (the learner keeps one per framework
        and graph version); ``None``: a fresh one per evaluation.
    """

    unit: Literal["triple", "chunk"] = "triple"
    answer_entities: tuple[str, ...] = ()
    query_entities: tuple[str, ...] = ()
    gold: Gold | None = None
    flat: bool = False
    labels: Ends | None = field(default=None, compare=False, repr=False)
    triples: tuple[Triple, ...] = ()


@runtime_checkable
class PathEvaluator(Protocol):
    """Turns response-level feedback into one utility per path (EvoRAG eq. 1)."""

    def evaluate(
        self,
        query: str,
        answer: str,
        paths: Sequence[Sequence[Unit]],
        feedback_score: float,
        context: EvaluationContext,
    ) -> list[float | None]:
        """One utility in [−1, 1] per path, or ``None`` for "no update through this path"."""
        ...


def _topics(query: str, paths: Sequence[Sequence[Unit]], context: EvaluationContext, ends: Ends) -> set[str]:
    """Normalized query entities: the grounded ones, else the path entities the query names."""
    grounded = {normalize_label(e) for e in context.query_entities} - {""}
    if grounded:
        return grounded
    query_norm = normalize_label(query)
    return {e for e in ends.entities(paths) if has_phrase(query_norm, e)}


def _relations(credit: str, query: str, topics: set[str]) -> frozenset[str] | None:
    """Stems of the relation the question asks about under ``credit="relation"``, else ``None``."""
    return question_stems(query, topics) if credit == "relation" else None


def _check_credit(credit: str, max_hops: int) -> None:
    if credit not in CREDIT_RULES:
        raise ConfigError(f"credit must be one of {', '.join(CREDIT_RULES)}, got {credit!r}")
    if isinstance(max_hops, bool) or not isinstance(max_hops, int) or max_hops < 1:
        raise ConfigError(f"max_hops must be a whole number >= 1, got {max_hops!r}")


# --------------------------------------------------------------------------- answer support


class AnswerSupportEvaluator:
    """No-LLM utility: does the path lead from the question to the response's answer entity?

    Answer entities are the answer's grounded node ids minus those also grounded in the query (a
    question's topic entity starts every path and says nothing about the answer), unless that
    leaves none. Without grounding, the entities of the paths whose label occurs as whole words in
    the answer text (and not in the query) are used; for chunks, the normalized answer text itself.
    Query entities are the grounded ones, else the path entities the query names.

    Each path's role comes from :func:`~triage_plugins.feedback.credit.path_roles` (EvoRAG §3 ➋,
    §4.2): it *supports* when it leads from a query entity to an answer entity (flat retrieval:
    when its triple lies on a shortest chain of retrieved triples between them that states the
    asked relation), *competes* when it starts at a query entity and leads elsewhere (flat
    retrieval: an alternative answer, the asked relation to another object), and is *unrelated*
    otherwise; chunks are judged by what their sentences state. Sign follows the signed feedback
    f = 2s − 1:

    - f > 0 (a good answer): supporting paths get +f, competing paths −f (they point to another
      answer), unrelated paths ``None``;
    - f < 0 (a bad answer): supporting paths get f (they misled the reader), the others ``None``
      — they did not produce the wrong answer, and nothing says they hold the right one;
    - f = 0, or no answer entity can be identified: ``None`` for every path.

    :param credit: ``"relation"`` (default, above), ``"path"`` (the relation-blind chains) or
        ``"entity"``: the earliest rule, kept for comparison — every path that touches an answer
        entity supports, every other path competes.
    :param max_hops: longest chain credited in flat retrieval.
    """

    def __init__(self, *, credit: Credit = "relation", max_hops: int = 3) -> None:
        _check_credit(credit, max_hops)
        self.credit = credit
        self.max_hops = max_hops

    def evaluate(
        self,
        query: str,
        answer: str,
        paths: Sequence[Sequence[Unit]],
        feedback_score: float,
        context: EvaluationContext,
    ) -> list[float | None]:
        f = 2.0 * float(feedback_score) - 1.0
        ends = context.labels or Ends()
        targets = self.answer_targets(query, answer, paths, context, ends=ends)
        if f == 0.0 or not targets:
            return [None] * len(paths)
        if self.credit == "entity":
            roles = [SUPPORTS if touches(p, targets, ends) else COMPETES for p in paths]
        else:
            topics = _topics(query, paths, context, ends)
            relations = _relations(self.credit, query, topics)
            facts = PathFacts(
                paths,
                topics,
                flat=context.flat,
                max_hops=self.max_hops,
                ends=ends,
                relations=relations,
                statements=context.triples,
            )
            roles = facts.roles(targets, misled=f < 0)
        if f > 0:
            return [f if r == SUPPORTS else -f if r == COMPETES else None for r in roles]
        return [f if r == SUPPORTS else None for r in roles]

    @staticmethod
    def answer_targets(
        query: str,
        answer: str,
        paths: Sequence[Sequence[Unit]],
        context: EvaluationContext,
        *,
        ends: Ends | None = None,
    ) -> set[str]:
        """Normalized labels of the answer entities (class docstring)."""
        query_norm = normalize_label(query)
        topic = {normalize_label(e) for e in context.query_entities}
        grounded = {normalize_label(e) for e in context.answer_entities} - {""}
        if grounded:
            specific = {e for e in grounded if e not in topic and not has_phrase(query_norm, e)}
            return specific or grounded
        answer_norm = normalize_label(answer)
        if not answer_norm:
            return set()
        if context.unit == "chunk":
            return {answer_norm}
        return {
            entity
            for entity in (ends or Ends()).entities(paths)
            if has_phrase(answer_norm, entity) and entity not in topic and not has_phrase(query_norm, entity)
        }


# --------------------------------------------------------------------------- gold


class GoldEvaluator:
    """Utility from gold annotations (EvoRAG §6.4's ground-truth feedback).

    U = +1 for a path that leads to a gold answer. ``others`` chooses what the other paths get:

    - ``"neutral"`` (default): U = −1 for a path that leads to the response's answer entity when
      the response is wrong (it misled the reader); U = 0 for the rest — the midpoint
      of the utility scale, "no evidence either way": such a path keeps its place in the softmax
      and in the gradient, so promoting the helpful paths takes a little probability mass from
      it, but it is never pushed down as harmful.
    - ``"misled"``: as ``"neutral"``, but the rest get ``None`` (no update through them at all).
    - ``"penalize"``: every path that reaches no gold answer is harmful: with gold paths,
      U = 2·φ − 1, φ the share of its triples on a gold path (matched by id or normalized
      (subject, predicate, object)) — a correct first hop is not harmful; else U = −1.

    The verdict on the response's own answer comes from the feedback (``neutral``/``misled``): a
    path that leads to the response's answer entity gets +1 when the feedback score is above 0.5
    and −1 below (it produced an answer the feedback rejects); at exactly 0.5 (no verdict) the
    gold answers decide. With feedback derived from the same gold this equals the rule above; with
    a flipped feedback (EvoRAG §6.5) the evaluator is misled exactly as the paper's judge would be.

    "Leads to" (``neutral``/``misled``): the node a triple path ends on, walked from its topic
    entity, is the entity (a chunk: its text names it); a path that crosses a hub answer ("male")
    and walks on does not count. ``penalize`` keeps the earlier "any entity of the path" test.

    Why ``"neutral"``: measured in two settings (``benchmarks/RESULTS.md``, evolve-bench section).
    In the demo world, where held-out questions share little with the training ones, ``penalize``
    suppresses triples that were merely irrelevant to one training question for every question:
    held-out accuracy 0.558 → 0.367 after 3 rounds (4 seeds), ``misled`` 0.558 → 0.550,
    ``neutral`` 0.558 → 0.592. Under the EvoRAG protocol (training queries in the test queries'
    local subgraphs, 20 % conflicting noise, 6 iterations, fixed α; gains in ACC points, neutral /
    penalize / misled), first with simple paths and one training set repeated every iteration:
    PQ-2H +8.9 / +5.8 / −2.0, PQ-3H +2.1 / −0.7 / −3.3, MetaQA 2-hop +6.5 / +7.5 / +6.9; then with
    the bench's current pipeline and fresh training batches: PQ-3H +15.7 / – / +5.7 (2 × 500,
    μ ± σ), and ``penalize`` reads no feedback at all (PQ-2H: +9.4 with 0, 10 and 20 % flipped
    feedback alike), so it cannot stand for learning from feedback. With ``None`` only the paths
    that answered are ever updated, and triples that answer many easy training questions drift up
    until they crowd the test paths out of the top-M; with ``−1`` every irrelevant path is
    punished. ``neutral`` is the only mode that helps in every setting measured.

    The response's answer entities are those of :meth:`AnswerSupportEvaluator.answer_targets`.
    No gold answers and no gold paths: ``None`` for every path. In flat retrieval
    (``context.flat``: each retrieved triple is its own path) "leads to" is judged by chains of
    retrieved triples from the topic (:func:`~triage_plugins.feedback.credit.path_roles`), so a
    triple that merely touches a gold answer or the response's answer gets no credit.

    :param gold: gold annotations to use instead of ``context.gold``.
    :param others: ``"neutral"``, ``"misled"`` or ``"penalize"`` (above).
    :param credit: ``"relation"`` (default), ``"path"`` or ``"entity"`` (flat retrieval as before:
        each triple judged alone, touching a target end counts). Under ``"relation"``, flat triples
        and chunks are credited as :mod:`triage_plugins.feedback.credit` states, an alternative
        answer to the question that is no gold answer (a triple of the asked relation from the
        query entity to another object; a chunk naming them) gets U = −1, and every other path
        ``None`` whatever ``others`` says: a bystander of another relation is neither in the
        update nor lowered (DESIGN §4).
    :param max_hops: longest chain credited in flat retrieval.
    """

    def __init__(
        self,
        gold: Gold | None = None,
        *,
        others: Literal["neutral", "misled", "penalize"] = "neutral",
        credit: Credit = "relation",
        max_hops: int = 3,
    ) -> None:
        if others not in ("misled", "neutral", "penalize"):
            raise ConfigError(
                f"GoldEvaluator others must be 'neutral', 'misled' or 'penalize', got {others!r}"
            )
        _check_credit(credit, max_hops)
        self.gold = gold
        self.others = others
        self.credit = credit
        self.max_hops = max_hops

    def evaluate(
        self,
        query: str,
        answer: str,
        paths: Sequence[Sequence[Unit]],
        feedback_score: float,
        context: EvaluationContext,
    ) -> list[float | None]:
        gold = self.gold or context.gold
        if gold is None or (not gold.answers and not gold.paths):
            return [None] * len(paths)
        answers = {normalize_label(a) for a in gold.answers}
        ends = context.labels or Ends()
        if self.others in ("misled", "neutral"):
            response = AnswerSupportEvaluator.answer_targets(query, answer, paths, context, ends=ends)
            verdict = 0.0 if feedback_score == 0.5 else (1.0 if feedback_score > 0.5 else -1.0)
            if verdict == 0.0:  # no verdict: gold alone says whether the response misled
                verdict, response = -1.0, response - answers
            topics = {normalize_label(e) for e in (*context.query_entities, *gold.entities)} - {""}
            flat = context.flat and self.credit != "entity"
            if flat and not topics:
                topics = _topics(query, paths, context, ends)
            relations = _relations(self.credit, query, topics)
            if relations is not None:  # the gold path says which relations the question asks
                relations = relations.union(*(relation_stems(t.predicate) for p in gold.paths for t in p))
            facts = PathFacts(
                paths,
                topics,
                flat=flat,
                max_hops=self.max_hops,
                ends=ends,
                relations=relations,
                statements=context.triples,
            )
            led, right = facts.roles(response, misled=verdict < 0), facts.roles(answers)
            content = relations is not None and (flat or context.unit == "chunk")
            rest = None if self.others == "misled" or content else 0.0
            wrong = -1.0 if content else rest  # relation-aware: an alternative answer that is not gold
            return [
                verdict if a == SUPPORTS else 1.0 if b == SUPPORTS else wrong if b == COMPETES else rest
                for a, b in zip(led, right, strict=True)
            ]
        on_gold_ids = {t.id for p in gold.paths for t in p}
        on_gold_spo = {_spo(t) for p in gold.paths for t in p}
        out: list[float | None] = []
        for path in paths:
            if touches(path, answers, ends):
                out.append(1.0)
            elif gold.paths and all(isinstance(u, Triple) for u in path):
                hits = sum(1 for t in path if t.id in on_gold_ids or _spo(t) in on_gold_spo)
                out.append(2.0 * hits / len(path) - 1.0)
            else:
                out.append(-1.0)
        return out


def _spo(t: Triple) -> tuple[str, str, str]:
    return normalize_label(t.subject), normalize_label(t.predicate), normalize_label(t.object)


# --------------------------------------------------------------------------- LLM judge

_JUDGE_TEMPLATE = """You are evaluating how each retrieved reasoning path contributed to an answer.

Question: {query}
Answer given: {answer}
Feedback on the answer: {score:.2f} on a scale from 0 (wrong or useless) to 1 (correct and complete).

Retrieved paths:
{paths}

For every path give three numbers, each between -1 and 1:
- "supportiveness": judged in the light of the feedback. Positive when the path provides evidence
  for an answer the feedback rates good, or evidence against an answer the feedback rates bad;
  negative when the path supports an answer the feedback rates bad (it misled) or undermines one
  it rates good; near 0 when it is irrelevant.
- "fidelity": how much the answer actually draws on this path (-1 not at all, 1 entirely).
- "conflict": whether the path contradicts the answer (-1 no contradiction, 1 direct contradiction).

Reply with JSON only, no other text, exactly {n} entries in path order:
{{"paths": [{{"path": 1, "supportiveness": 0.0, "fidelity": 0.0, "conflict": 0.0}}, ...]}}"""

_FIELDS = ("supportiveness", "fidelity", "conflict")
_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*)\n```\Z", re.DOTALL)


def _render(path: Sequence[Unit], max_chars: int) -> str:
    if all(isinstance(u, Triple) for u in path):
        return " -> ".join(f"({t.subject}, {t.predicate}, {t.object})" for t in path)  # type: ignore[union-attr]
    text = " ".join(u.text if isinstance(u, Chunk) else str(u) for u in path)
    return text if len(text) <= max_chars else text[: max_chars - 3] + "..."


def judge_prompt(
    query: str, answer: str, paths: Sequence[Sequence[Unit]], feedback_score: float, max_chars: int = 1200
) -> str:
    """The single judging prompt covering every path (EvoRAG §4.2, §4.3.4: one LLM call per query)."""
    lines = "\n".join(f"[{i}] {_render(p, max_chars)}" for i, p in enumerate(paths, start=1))
    return _JUDGE_TEMPLATE.format(query=query, answer=answer, score=feedback_score, paths=lines, n=len(paths))


def parse_judgement(text: str, n_paths: int) -> list[tuple[float, float, float]]:
    """Parse the judge's reply strictly into (supportiveness, fidelity, conflict) per path.

    The reply must be one JSON object ``{"paths": [...]}`` (a single surrounding Markdown code
    fence is tolerated, nothing else) with exactly ``n_paths`` entries, entry k having ``"path": k``
    and the three scores as numbers in [−1, 1]. Other keys in an entry are ignored.

    :raises JudgeOutputError: naming what was wrong.
    """
    if not isinstance(text, str):
        raise JudgeOutputError(f"judge returned {type(text).__name__}, expected a JSON string")
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        data: Any = json.loads(body)
    except json.JSONDecodeError as exc:
        raise JudgeOutputError(
            f"judge output is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}): "
            f'{_preview(text)}; expected {{"paths": [...]}}'
        ) from None
    if not isinstance(data, dict) or "paths" not in data:
        raise JudgeOutputError(f'judge output must be a JSON object with key "paths", got {_preview(text)}')
    items = data["paths"]
    if not isinstance(items, list):
        raise JudgeOutputError(f'judge output "paths" must be a list, got {type(items).__name__}')
    if len(items) != n_paths:
        raise JudgeOutputError(f"judge scored {len(items)} path(s) but {n_paths} were given")
    out: list[tuple[float, float, float]] = []
    for k, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise JudgeOutputError(f"judge entry {k} must be a JSON object, got {type(item).__name__}")
        number = item.get("path")
        if isinstance(number, bool) or number != k:
            raise JudgeOutputError(
                f'judge entry {k} has "path": {number!r}; entries must be numbered 1..{n_paths} in order'
            )
        values = []
        for key in _FIELDS:
            if key not in item:
                raise JudgeOutputError(f'judge entry for path {k} is missing key "{key}"')
            v = item[key]
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise JudgeOutputError(f'judge entry for path {k}: "{key}" must be a number, got {v!r}')
            if not -1.0 <= v <= 1.0:
                raise JudgeOutputError(f'judge entry for path {k}: "{key}" = {v} is outside [-1, 1]')
            values.append(float(v))
        out.append((values[0], values[1], values[2]))
    return out


def _preview(text: str, limit: int = 80) -> str:
    flat = " ".join(str(text).split())
    return repr(flat if len(flat) <= limit else flat[: limit - 3] + "...")


class LLMJudgeEvaluator:
    """The paper's evaluator (EvoRAG §4.2): an LLM scores every path in one call.

    Gating ("a path's utility is updated based on Supportiveness only when Fidelity is high and
    Conflict is low; otherwise, the update is suppressed"): U = supportiveness when
    fidelity ≥ ``fidelity_min`` and conflict ≤ ``conflict_max``, else ``None``. On the judge's
    [−1, 1] scale "high" and "low" default to the upper and lower half: fidelity_min = 0,
    conflict_max = 0.

    :param llm: ``llm(prompt) -> reply text``.
    :raises JudgeOutputError: from :meth:`evaluate` when the reply is malformed.
    """

    def __init__(
        self,
        llm: Callable[[str], str],
        *,
        fidelity_min: float = 0.0,
        conflict_max: float = 0.0,
        max_chars: int = 1200,
    ) -> None:
        self.llm = llm
        self.fidelity_min = float(fidelity_min)
        self.conflict_max = float(conflict_max)
        self.max_chars = int(max_chars)

    def evaluate(
        self,
        query: str,
        answer: str,
        paths: Sequence[Sequence[Unit]],
        feedback_score: float,
        context: EvaluationContext,
    ) -> list[float | None]:
        if not paths:
            return []
        reply = self.llm(judge_prompt(query, answer, paths, feedback_score, self.max_chars))
        scores = parse_judgement(reply, len(paths))
        return [self.gate(*s) for s in scores]

    def gate(self, supportiveness: float, fidelity: float, conflict: float) -> float | None:
        """The gating rule: Supportiveness when Fidelity is high and Conflict low, else ``None``."""
        if fidelity >= self.fidelity_min and conflict <= self.conflict_max:
            return supportiveness
        return None
