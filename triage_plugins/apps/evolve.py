"""``triage evolve-bench``: EvoRAG's feedback-learning protocol, offline (EvoRAG §6.1–6.2, §6.5, §6.12).

For each seed:

1. **Noise.** :func:`~triage_plugins.apps.evolve_noise.inject_noise` adds conflicting facts (and as
   many irrelevant ones) on ``noise`` of the (node, relation, direction) steps of the test
   questions' gold paths.
2. **Queries.** Test queries are the dataset's (a seeded sample when ``sample`` is set); training
   queries are generated in their local subgraphs (:func:`~triage_plugins.apps.evolve_noise.training_queries`,
   EvoRAG §6.1): each iteration answers a fresh set of them, as many as test queries (§6.3: "each
   iteration processes a set of training queries (equal in size to the test set)"), drawn without
   repetition while the local subgraphs hold new ones, then reused in order.
3. **Static baseline** (iteration 0): the reference pipeline's ``krag`` retriever
   (:data:`DEFAULT_PIPELINE`) with the query relevance S_r alone (``reweight`` off) and the
   relation-aware extractive reader (which reads a fused shortcut ``a/b`` as the hops it abstracts).
4. **Iterations 1…K**, with the feedback learner reranking (``reweight`` on): the iteration's
   training queries are answered; the response-level feedback s = 1 when a gold answer is in the
   response, else 0, is flipped with probability ``feedback_noise`` (EvoRAG §6.5); the learner updates the
   contribution scores and α (eq. 4–9); then one KG evolution (§5.1): fusion shortcuts are added
   to the pipeline's graph, suppression applies at ranking time. Then every test query is answered.

The path evaluator is the learner's default for queries with gold, the
:class:`~triage_plugins.feedback.evaluators.GoldEvaluator` (``feedback.gold_others``, default
``"neutral"``): paths leading to a gold answer +1, paths leading to the response's answer +1 or −1
as the feedback judges it, the rest 0. A flipped feedback therefore misleads it the way EvoRAG's
judge is misled: a correct answer reported wrong has its supporting paths pushed down, a wrong
answer reported right has its misleading paths pushed up.

Reported per iteration (averaged over seeds): ACC (a gold answer is contained in the response,
EvoRAG §6.2), EM (the response equals a gold answer after normalization), token F1 against the
best gold answer, the problematic-triplet ratio (injected triples among the retrieved triples, mean
over test queries, EvoRAG Fig. 7), α, training accuracy, shortcuts added and triples suppressed.
``modes`` runs the learned-α (small step) and the fixed-α learner on the same noise and queries.

Chunk level (``unit="chunk"``, EvoRAG §6.12): the KB has no text, so a chunk is defined as one
source's facts about one subject — ``kb:<subject>`` for the clean facts and ``noise:<subject>``
for the injected ones (a conflicting fact comes from another, outdated document); with
``chunking="subject"`` every fact of a subject, injected or not, is in one chunk, and a chunk
score cannot separate a conflicting fact from the true one. A triple's
priority is P(t) = (1 − α)·S_r(t) + α·S_c(chunk(t)); each retrieved chunk is a one-unit path for
the backward pass, with S_r(chunk) the best S_r of its retrieved triples. Fusion needs relations,
so at chunk level evolution is suppression only.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from triage_plugins.apps.evolve_noise import NoisyKB, TrainingQuery, inject_noise, training_queries
from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError, DatasetError
from triage_plugins.contract.events import Chunk, FeedbackEvent, Gold, RerankRequest, RetrievalEvent, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.datasets import load_kb, load_questions
from triage_plugins.datasets.qa import QAItem
from triage_plugins.metrics.answers import gold_hit, normalize_answer

if TYPE_CHECKING:
    from rich.console import Console

    from triage_plugins.plugins.feedback import FeedbackLearner
    from triage_plugins.reference.pipeline import ReferencePipeline
    from triage_plugins.runtime.manager import TriageManager

__all__ = [
    "EvolveBenchResult",
    "IterationRow",
    "RunResult",
    "answer_correct",
    "answer_f1",
    "exact_match",
    "flip",
    "render_evolve_bench",
    "run_evolve_bench",
]

log = logging.getLogger("triage.evolve_bench")

Mode = Literal["learned", "fixed"]
Progress = Callable[[str, int], Callable[[], None]]

DEFAULT_FEEDBACK: dict[str, Any] = {
    "alpha": 0.5,
    "eta_alpha": 0.001,
    "max_alpha_step": 0.001,
    "eta": 1.0,
    "max_step": 0.2,
    "suppression_factor": 0.9,
    "width": 2.0,
}
"""Learner options of the bench (``feedback.<name>``), chosen on PQ-2H (seeds 0–1, 500 questions,
fixed α, 20 % noise, the default pipeline and fresh training batches) and then applied unchanged
to PQ-3H and MetaQA. ACC gains after 6 iterations with exact / 10 % / 20 % flipped feedback:

- η = 1.0 with steps bounded by 0.2 (S_c units): +13.7 / +11.8 / +7.0, against +12.5 / +11.1 /
  +6.2 at η = 0.5 and +11.6 / +9.9 / +5.6 at the learner's default (η = 0.25, bound 0.1) — all
  at μ ± σ with suppression factor 0.5; η = 2 and 4 lost accuracy on PQ-3H under flipped feedback;
- evolution thresholds μ ± 2σ instead of Algorithm 1's μ ± σ: +13.7 / +12.7 / +10.0 against
  +13.9 / +12.4 / +8.7 (1.5σ: +13.6 / +12.4 / +9.7; 3σ as 2σ). σ of S_c is small (≈ 0.03: most
  scored triples only moved through the softmax), so μ ± σ is crossed by a triple that one
  feedback touched — one flipped feedback could suppress a true triple or fuse a path through a
  wrong one. At 2σ the evolution acts on what several feedbacks agree on (EvoRAG §5.1:
  "statistically significant differences rather than random fluctuations"). Measured on PQ-3H
  (2 × 500) too: +13.3 / – / +10.0 at 2σ against +15.7 / +11.7 / +8.9 at 1σ;
- suppression multiplies P(t) by 0.9 (at 1σ: the learner's default 0.5 gave +13.7 / +11.8 / +7.0,
  0.8 +13.8 / +12.4 / +7.6, 0.9 +13.9 / +12.4 / +8.7 — a halving of a falsely suppressed true
  triple's priority outweighs everything the scores learned; at 2σ 0.5 and 0.9 measure the same);
- the learned mode starts α at 0.5 with a small step (rate and bound 0.001 per update): with the
  learner's 0.01, α slid to its 0.05 floor within two iterations and eroded the gain;
- the fixed mode keeps α = 0.5.
"""

DEFAULT_PIPELINE: dict[str, Any] = {"n_seeds": 1, "paths_per_seed": 10, "per_length": True, "walks": True}
"""Reference pipeline options of the bench (``hops`` is the longest test path). One seed (the
grounded topic entity) and EvoRAG's M = 10 paths, kept per path length, over walks that may revisit
a node. On PQ-3H (300 questions, seed 0, 20 % noise) the static accuracy is 29 % with simple paths
and one top-10, 54 % with walks and per-length top-10: 48 % of PQ-3H gold paths revisit a node
("X's heir's mother's place of birth"), and 1-hop paths, whose only triple touches the topic named
in the question, otherwise fill the top-10.
"""


# --------------------------------------------------------------------------- answer metrics


def _norm(text: str) -> str:
    return normalize_answer(text)


def answer_correct(answer: str, gold: Sequence[str]) -> bool:
    """ACC (EvoRAG §6.2): a gold answer is contained in the response (normalized, whole words) —
    the one gold-hit rule, :func:`triage_plugins.metrics.answers.gold_hit`."""
    return gold_hit(answer, gold)


def exact_match(answer: str, gold: Sequence[str]) -> bool:
    """EM: the response equals a gold answer, both normalized by the gold-hit rule
    (:func:`~triage_plugins.metrics.answers.normalize_answer`)."""
    text = _norm(answer)
    return bool(text) and any(text == _norm(g) for g in gold)


def answer_f1(answer: str, gold: Sequence[str]) -> float:
    """Token-level F1 of the response against the best-matching gold answer (tokens of the gold-hit
    rule's normalization); 0 for an empty response (the WebQSP convention: P = 1, R = 0)."""
    pred = _norm(answer).split()
    if not pred:
        return 0.0
    best = 0.0
    for g in gold:
        ref = _norm(g).split()
        common = sum(min(pred.count(w), ref.count(w)) for w in set(pred) & set(ref))
        if common:
            p, r = common / len(pred), common / len(ref)
            best = max(best, 2 * p * r / (p + r))
    return best


# --------------------------------------------------------------------------- results


@dataclass
class IterationRow:
    """Test metrics after one iteration (0 = static baseline)."""

    iteration: int
    accuracy: float
    em: float
    f1: float
    problematic_ratio: float
    alpha: float | None
    train_accuracy: float | None = None
    shortcuts: int = 0
    suppressed: int = 0
    flipped: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {k: (round(v, 4) if isinstance(v, float) else v) for k, v in self.__dict__.items()}


@dataclass
class RunResult:
    """One seed, one α mode."""

    seed: int
    mode: Mode
    rows: list[IterationRow]

    @property
    def gain(self) -> float:
        return self.rows[-1].accuracy - self.rows[0].accuracy

    def to_dict(self) -> dict[str, Any]:
        return {
            "seed": self.seed,
            "mode": self.mode,
            "gain": round(self.gain, 4),
            "rows": [r.to_dict() for r in self.rows],
        }


@dataclass
class EvolveBenchResult:
    """What ``triage evolve-bench`` measured: per-seed runs and their mean per mode."""

    settings: dict[str, Any]
    runs: list[RunResult]
    data: dict[str, Any]
    seconds: float
    notes: list[str] = field(default_factory=list)

    def modes(self) -> list[Mode]:
        return list(dict.fromkeys(r.mode for r in self.runs))

    def mean_rows(self, mode: Mode) -> list[IterationRow]:
        """Iteration rows averaged over seeds (α: mean of the seeds that have one)."""
        runs = [r for r in self.runs if r.mode == mode]
        out = []
        for k in range(len(runs[0].rows)):
            rows = [r.rows[k] for r in runs]

            def mean(name: str, rows: list[IterationRow] = rows) -> float | None:
                values = [getattr(x, name) for x in rows if getattr(x, name) is not None]
                return float(np.mean(values)) if values else None

            out.append(
                IterationRow(
                    iteration=k,
                    accuracy=mean("accuracy") or 0.0,
                    em=mean("em") or 0.0,
                    f1=mean("f1") or 0.0,
                    problematic_ratio=mean("problematic_ratio") or 0.0,
                    alpha=mean("alpha"),
                    train_accuracy=mean("train_accuracy"),
                    shortcuts=round(mean("shortcuts") or 0),
                    suppressed=round(mean("suppressed") or 0),
                    flipped=round(mean("flipped") or 0),
                    seconds=mean("seconds") or 0.0,
                )
            )
        return out

    def gain(self, mode: Mode) -> float:
        """Mean ACC gain (last iteration − static baseline) over seeds."""
        return float(np.mean([r.gain for r in self.runs if r.mode == mode]))

    def gain_std(self, mode: Mode) -> float:
        return float(np.std([r.gain for r in self.runs if r.mode == mode]))

    def to_dict(self) -> dict[str, Any]:
        return {
            "settings": self.settings,
            "data": self.data,
            "summary": {
                mode: {
                    "gain": round(self.gain(mode), 4),
                    "gain_std": round(self.gain_std(mode), 4),
                    "rows": [r.to_dict() for r in self.mean_rows(mode)],
                }
                for mode in self.modes()
            },
            "runs": [r.to_dict() for r in self.runs],
            "seconds": round(self.seconds, 2),
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- chunk level


def chunk_of(triple: Triple, injected: frozenset[str]) -> str:
    """The chunk a KB triple belongs to: one source's facts about one subject (module docstring).

    With an empty ``injected`` every fact of a subject is in one chunk (``chunking="subject"``).
    """
    return f"{'noise' if triple.id in injected else 'kb'}:{triple.subject}"


class ChunkBridge:
    """Answers the reference retriever's triple-level ``triage_rerank`` with chunk contribution scores.

    P(t) = (1 − α)·S_r(t) + α·S_c(chunk(t)) (times chunk suppression), through the feedback
    learner configured with ``unit="chunk"``; the chunk's S_r (best S_r of its candidate triples)
    is handed to the learner as a chunk-level rerank request so the backward pass uses it.
    """

    def __init__(self, learner: FeedbackLearner, injected: frozenset[str], framework: str) -> None:
        self.learner = learner
        self.injected = injected
        self.framework = framework

    @hookimpl
    def triage_rerank(self, request: RerankRequest) -> list[float] | None:
        if not self.learner.manager.config.reweight or request.unit != "triple":
            return None
        chunks = [chunk_of(_triple_from_id(i), self.injected) for i in request.ids]
        best: dict[str, float] = {}
        for c, r in zip(chunks, request.relevance, strict=True):
            best[c] = max(r, best.get(c, 0.0))
        self.learner.triage_rerank(
            RerankRequest(
                request.framework, request.query, "chunk", tuple(best), tuple(best.values()), request.query_id
            )
        )
        return self.learner.priorities(chunks, request.relevance, unit="chunk", query=request.query).tolist()


def _triple_from_id(triple_id: str) -> Triple:
    s, p, o = triple_id.split("|", 2) if triple_id.count("|") == 2 else (triple_id, "", "")
    return Triple(triple_id, s, p, o)


def _with_chunks(event: RetrievalEvent, injected: frozenset[str]) -> RetrievalEvent:
    """The retrieval with its chunks: every source chunk of a retrieved triple (text = its facts)."""
    facts: dict[str, list[str]] = {}
    for t in event.subgraph.triples:
        facts.setdefault(chunk_of(t, injected), []).append(f"{t.subject} {t.predicate} {t.object}")
    chunks = tuple(Chunk(cid, cid.split(":", 1)[0], ". ".join(lines)) for cid, lines in facts.items())
    return replace(event, chunks=chunks)


# --------------------------------------------------------------------------- data


_METAQA_DIR = re.compile(r"(\d+)-hop")


def _annotations_for(questions: Path) -> Path | None:
    """MetaQA: ``.../metaqa/2-hop/qa_test.txt`` -> ``.../metaqa/derived/2hop_qa_test_annotated.jsonl``."""
    m = _METAQA_DIR.fullmatch(questions.parent.name)
    if m is None:
        return None
    candidate = questions.parent.parent / "derived" / f"{m.group(1)}hop_{questions.stem}_annotated.jsonl"
    return candidate if candidate.is_file() else None


def load_bench_data(
    kb: str | Path | Sequence[str | Path],
    questions: str | Path,
    *,
    annotations: str | Path | None = None,
) -> tuple[list[Triple], list[QAItem], str]:
    """Clean KB triples, the usable test questions (with gold paths; MetaQA: ``answerable_exact``)
    and a note saying what was kept."""
    kb_paths = [kb] if isinstance(kb, str | Path) else list(kb)
    triples = list(load_kb(kb_paths))
    qpath = Path(questions)
    notes = annotations if annotations is not None else _annotations_for(qpath)
    qs = load_questions(qpath, kb=triples, annotations=notes) if notes else load_questions(qpath, kb=triples)
    kept = [
        q
        for q in qs
        if q.gold_paths
        and q.meta.get("answerable_exact", True)
        and q.meta.get("gold_path_in_kb", True)
        and not q.meta.get("gold_paths_truncated", False)
    ]
    if not kept:
        raise DatasetError(
            f"{qpath}: no question has a gold path in the KB (MetaQA needs its annotated JSONL: pass annotations=)"
        )
    note = f"{len(kept)} of {len(qs)} questions have gold paths in the KB" + (
        " and are answerable_exact" if notes else ""
    )
    return triples, kept, note


# --------------------------------------------------------------------------- one run


@dataclass
class _Item:
    id: str
    text: str
    answers: tuple[str, ...]
    gold: Gold


def _items(questions: Sequence[QAItem | TrainingQuery]) -> list[_Item]:
    return [_Item(q.id, q.text, tuple(q.answers), q.gold()) for q in questions]


class _Runner:
    """One α mode on one seed's noisy KB."""

    def __init__(
        self,
        noisy: NoisyKB,
        mode: Mode,
        *,
        unit: Literal["triple", "chunk"],
        chunking: Literal["source", "subject"] = "source",
        pipeline_options: Mapping[str, Any],
        feedback_options: Mapping[str, Any],
    ) -> None:
        from triage_plugins.plugins.feedback import FeedbackLearner
        from triage_plugins.reference.pipeline import ReferencePipeline
        from triage_plugins.runtime.manager import TriageManager

        options = {f"feedback.{k}": v for k, v in {**DEFAULT_FEEDBACK, **feedback_options}.items()}
        options["feedback.learn_alpha"] = mode == "learned"
        if unit == "chunk":
            options.setdefault("feedback.max_hops", 1)
            # EvoRAG §6.12 as the paper runs it: every chunk in the softmax, relation-blind. This
            # bench's chunks bundle every fact of a subject as lower-case "s p o" lines, so neither
            # names (capitals) nor one statement per sentence can be told apart, and relation-aware
            # credit loses here: PQ-3H, 500 questions, seed 0, fixed α: +6.8 points "path",
            # -0.4 "relation" per chunk, -3.4 "relation" per statement (benchmarks/RESULTS.md).
            options.setdefault("feedback.credit", "path")
        config = TriageConfig(reweight=False, unit=unit, gate=False, options=options)
        self.manager: TriageManager = TriageManager(
            None, config=config, entry_points=False, defaults=False, synchronous=True
        )
        self.learner: FeedbackLearner = FeedbackLearner(self.manager)
        self.manager.register(self.learner, name="triage.feedback")
        self.unit = unit
        self.noisy = noisy
        self.bridge: ChunkBridge | None = None
        self.sources = noisy.injected_ids if chunking == "source" else frozenset()
        if unit == "chunk":
            self.bridge = ChunkBridge(self.learner, self.sources, "reference")
            self.manager.register(self.bridge, name="evolve-bench.chunk-bridge")
        self.pipeline: ReferencePipeline = ReferencePipeline(
            self.manager, GraphView(noisy.triples), retriever="krag", **pipeline_options
        )

    def close(self) -> None:
        self.manager.close()

    @property
    def alpha(self) -> float:
        return self.learner.model().optimizer.alpha

    def evaluate(
        self,
        test: Sequence[_Item],
        tick: Callable[[], None],
        subgraphs: dict[str, list[list[Triple]]] | None = None,
    ) -> tuple[float, float, float, float]:
        acc = em = f1 = prob = 0.0
        injected = self.noisy.injected_ids
        for q in test:
            answer = self.pipeline.ask(q.text, query_id=f"test-{q.id}", gold=q.gold)
            acc += answer_correct(answer.text, q.answers)
            em += exact_match(answer.text, q.answers)
            f1 += answer_f1(answer.text, q.answers)
            retrieved = answer.retrieval.subgraph.triples
            if subgraphs is not None:
                by_id = {t.id: t for t in retrieved}
                subgraphs[answer.query_id] = [
                    [by_id[i] for i in p.triple_ids] for p in answer.retrieval.paths
                ]
            if retrieved:
                prob += sum(t.id in injected for t in retrieved) / len(retrieved)
            tick()
        n = max(len(test), 1)
        return acc / n, em / n, f1 / n, prob / n

    def train(
        self,
        train: Sequence[_Item],
        rng: random.Random,
        flips: random.Random,
        feedback_noise: float,
        tick: Callable[[], None],
    ) -> tuple[float, int]:
        """Answer every training query and send its (possibly flipped) feedback; (accuracy, flips)."""
        correct = flipped = 0
        order = list(train)
        rng.shuffle(order)
        for q in order:
            qid = f"{q.id}-{rng.getrandbits(32):08x}"
            answer = self.pipeline.ask(q.text, query_id=qid, gold=q.gold)
            ok = answer_correct(answer.text, q.answers)
            correct += ok
            score = 1.0 if ok else 0.0
            event = answer.retrieval
            if flip(flips, feedback_noise):
                flipped += 1
                score = 1.0 - score
            if self.unit == "chunk":
                event = _with_chunks(event, self.sources)
            if event is not answer.retrieval:
                self.manager.emit_retrieval(event)
            self.manager.emit_feedback(FeedbackEvent("reference", qid, score, "gold"))
            tick()
        return correct / max(len(order), 1), flipped

    def evolve(self) -> tuple[int, int]:
        shortcuts = self.learner.evolve()
        if shortcuts and self.unit == "triple":
            self.pipeline.add_triples(shortcuts)
        result = self.learner.last_evolution
        return len(shortcuts), len(result.suppressed) if result is not None else 0


def _iteration_batch(pool: Sequence[_Item], k: int, n: int) -> list[_Item]:
    """Iteration ``k``'s (1-based) training queries: the next ``n`` of ``pool``, wrapping around."""
    if not pool:
        return []
    n = min(n, len(pool))
    return [pool[(j + (k - 1) * n) % len(pool)] for j in range(n)]


def flip(rng: random.Random, probability: float) -> bool:
    """Whether to flip one feedback (EvoRAG §6.5: a random share of the feedback is inverted)."""
    return probability > 0.0 and rng.random() < probability


def run_evolve_bench(
    kb: str | Path | Sequence[str | Path],
    questions: str | Path,
    *,
    annotations: str | Path | None = None,
    noise: float = 0.2,
    feedback_noise: float = 0.0,
    iterations: int = 6,
    unit: Literal["triple", "chunk"] = "triple",
    seed: int = 0,
    seeds: int = 1,
    sample: int | None = None,
    modes: Sequence[Mode] = ("learned", "fixed"),
    pipeline_options: Mapping[str, Any] | None = None,
    feedback_options: Mapping[str, Any] | None = None,
    progress: Progress | None = None,
    data: tuple[list[Triple], list[QAItem], str] | None = None,
    train_source: Literal["retrieved", "neighbourhood"] = "retrieved",
    split: Literal["all", "dev", "test"] = "all",
    train_hops: int = 2,
    chunking: Literal["source", "subject"] = "source",
    train_refresh: bool = True,
) -> EvolveBenchResult:
    """Run the EvoRAG protocol (module docstring) on a KB and a question file.

    :param kb: KB file(s) (PathQuestion ``*-kb.txt``; MetaQA's two ``kb_reconstructed.part*.txt``).
    :param questions: the test questions (PathQuestion file, or MetaQA ``qa_test.txt``).
    :param annotations: MetaQA annotated JSONL (found next to the questions when omitted).
    :param noise: fraction of the test gold steps that receive a conflicting fact.
    :param feedback_noise: probability of flipping each training feedback.
    :param iterations: feedback iterations after the static baseline.
    :param seed: first seed; ``seeds`` consecutive seeds are run and averaged.
    :param sample: test questions per seed (seeded sample); ``None`` = all.
    :param modes: ``"learned"`` (α learned with a small step) and/or ``"fixed"`` (α = 0.5).
    :param pipeline_options: reference pipeline options over :data:`DEFAULT_PIPELINE` (and
        ``hops`` = the longest test path).
    :param feedback_options: learner options without the ``feedback.`` prefix (e.g. ``eta``).
    :param progress: ``progress(label, total)`` returns a ``tick()`` callable.
    :param data: already loaded ``(kb triples, questions, note)`` (skips loading).
    :param train_source: where training paths are sampled: ``"retrieved"`` (segments of the
        paths retrieved for the test queries) or ``"neighbourhood"`` (random walks from the topic
        in the searched graph); see :func:`~triage_plugins.apps.evolve_noise.training_queries`.
    :param split: ``"dev"`` / ``"test"``: a fixed partition of the usable questions (every fifth
        in a permutation seeded ``"dev-split"`` is dev), so settings can be chosen on dev and
        reported on test; ``"all"`` uses every question.
    :param train_hops: longest training path (EvoRAG §6.1: two).
    :param train_refresh: each iteration answers a fresh set of training queries, as many as
        test queries, drawn without repetition from the same local subgraphs (EvoRAG §6.3: "each
        iteration processes a set of training queries (equal in size to the test set)"); when the
        subgraphs hold fewer distinct queries, the pool is reused in order. ``False``: the same
        set every iteration.
    :param chunking: chunk level only: ``"source"`` (injected facts in their own ``noise:<subject>``
        chunk, as if from another document) or ``"subject"`` (one chunk per subject, noise mixed in).
    """
    _check_bench_options(iterations, seeds, feedback_noise, unit, modes)
    started = time.perf_counter()
    triples, all_questions, note = (
        data if data is not None else load_bench_data(kb, questions, annotations=annotations)
    )
    max_hops = max(q.hops or len(q.gold_paths[0]) for q in all_questions)
    all_questions = _split_questions(all_questions, split)
    bench = _Bench(
        noise, feedback_noise, iterations, unit, sample, tuple(modes),
        {"hops": max_hops, **DEFAULT_PIPELINE, **(pipeline_options or {})}, dict(feedback_options or {}),
        train_source, train_hops, chunking, train_refresh, progress or (lambda label, total: lambda: None),
    )  # fmt: skip
    data_notes: dict[str, Any] = {
        "questions_usable": len(all_questions),
        "kb_triples": len(triples),
        "load": note,
    }
    runs: list[RunResult] = []
    for s in range(seed, seed + seeds):
        runs.extend(_run_seed(bench, s, triples, all_questions, data_notes))
    settings = _settings(bench, kb, questions, seed, seeds, split)
    return EvolveBenchResult(settings, runs, data_notes, time.perf_counter() - started)


def _check_bench_options(
    iterations: int, seeds: int, feedback_noise: float, unit: str, modes: Sequence[str]
) -> None:
    if iterations < 0:
        raise ConfigError(f"iterations must be >= 0, got {iterations}")
    if seeds < 1:
        raise ConfigError(f"seeds must be >= 1, got {seeds}")
    if not 0.0 <= feedback_noise <= 1.0:
        raise ConfigError(f"feedback noise must lie in [0, 1], got {feedback_noise!r}")
    if unit not in ("triple", "chunk"):
        raise ConfigError(f"unit must be 'triple' or 'chunk', got {unit!r}")
    bad = [m for m in modes if m not in ("learned", "fixed")]
    if bad or not modes:
        raise ConfigError(f"modes must be 'learned' and/or 'fixed', got {list(modes)!r}")


def _split_questions(questions: list[QAItem], split: str) -> list[QAItem]:
    """``"dev"`` / ``"test"``: every fifth question of a permutation seeded ``"dev-split"`` is dev."""
    if split == "all":
        return questions
    if split not in ("dev", "test"):
        raise ConfigError(f"split must be 'all', 'dev' or 'test', got {split!r}")
    order = list(range(len(questions)))
    random.Random("dev-split").shuffle(order)
    dev = set(order[::5])
    return [q for k, q in enumerate(questions) if (k in dev) == (split == "dev")]


@dataclass
class _Bench:
    """The options one evolve-bench run shares across its seeds and α modes."""

    noise: float
    feedback_noise: float
    iterations: int
    unit: Literal["triple", "chunk"]
    sample: int | None
    modes: tuple[Mode, ...]
    pipeline_options: dict[str, Any]
    feedback_options: dict[str, Any]
    train_source: Literal["retrieved", "neighbourhood"]
    train_hops: int
    chunking: Literal["source", "subject"]
    train_refresh: bool
    bar: Progress


def _settings(
    bench: _Bench,
    kb: str | Path | Sequence[str | Path],
    questions: str | Path,
    seed: int,
    seeds: int,
    split: str,
) -> dict[str, Any]:
    return {
        "kb": [str(p) for p in ([kb] if isinstance(kb, str | Path) else kb or ())],
        "questions": str(questions),
        "noise": bench.noise,
        "feedback_noise": bench.feedback_noise,
        "iterations": bench.iterations,
        "unit": bench.unit,
        "seed": seed,
        "seeds": seeds,
        "sample": bench.sample,
        "modes": list(bench.modes),
        "train_source": bench.train_source,
        "split": split,
        "train_hops": bench.train_hops,
        "train_refresh": bench.train_refresh,
        "chunking": bench.chunking,
        "pipeline_options": bench.pipeline_options,
        "feedback_options": {**DEFAULT_FEEDBACK, **bench.feedback_options},
    }


def _run_seed(
    bench: _Bench, s: int, triples: list[Triple], all_questions: list[QAItem], data_notes: dict[str, Any]
) -> list[RunResult]:
    """Seed ``s``: sample the test questions, inject the noise, then run every α mode on them."""
    rng = random.Random(f"sample-{s}")
    test_q = list(all_questions)
    if bench.sample is not None and bench.sample < len(test_q):
        test_q = rng.sample(test_q, bench.sample)
    noisy = inject_noise(triples, test_q, bench.noise, seed=s)
    test = _items(test_q)
    train: list[_Item] | None = None
    seed_note: dict[str, Any] = {
        "seed": s,
        "test": len(test),
        "gold_steps": noisy.n_steps,
        "noisy_steps": len(noisy.noisy_steps),
        "conflicting_continuing": noisy.n_continuing,
        "irrelevant": len(noisy.irrelevant),
    }
    data_notes.setdefault("per_seed", []).append(seed_note)
    runs: list[RunResult] = []
    for mode in bench.modes:
        runner = _Runner(
            noisy,
            mode,
            unit=bench.unit,
            chunking=bench.chunking,
            pipeline_options=bench.pipeline_options,
            feedback_options=bench.feedback_options,
        )
        try:
            tick = bench.bar(f"seed {s} {mode}: static", len(test))
            t0 = time.perf_counter()
            subgraphs: dict[str, list[list[Triple]]] = {}
            acc, em, f1, prob = runner.evaluate(test, tick, subgraphs)
            rows = [IterationRow(0, acc, em, f1, prob, None, seconds=time.perf_counter() - t0)]
            if train is None:
                train = _items(_training_set(bench, s, triples, test_q, noisy, subgraphs))
                seed_note["train"] = len(train)
            rows.extend(_iterations(bench, runner, s, mode, train, test, rows[0].accuracy))
            runs.append(RunResult(s, mode, rows))
        finally:
            runner.close()
    return runs


def _training_set(
    bench: _Bench,
    s: int,
    triples: list[Triple],
    test_q: list[QAItem],
    noisy: NoisyKB,
    subgraphs: dict[str, list[list[Triple]]],
) -> list[TrainingQuery]:
    """EvoRAG §6.1: training queries in the subgraphs retrieved for the test queries (or their
    neighbourhood), as many as the iterations will ask."""
    by_id = {q.id: subgraphs[f"test-{q.id}"] for q in test_q}
    wanted = len(test_q) * (max(bench.iterations, 1) if bench.train_refresh else 1)
    if bench.train_source == "retrieved":
        return training_queries(triples, test_q, wanted, seed=s, paths=by_id, max_hops=bench.train_hops)
    return training_queries(
        triples, test_q, wanted, seed=s, neighbourhood=noisy.triples, max_hops=bench.train_hops
    )


def _iterations(
    bench: _Bench,
    runner: _Runner,
    s: int,
    mode: Mode,
    train: list[_Item],
    test: list[_Item],
    static: float,
) -> list[IterationRow]:
    """Iterations 1…K with reweighting on: train (feedback), evolve the KG, evaluate the test set."""
    runner.manager.config.reweight = True
    order_rng = random.Random(f"order-{s}")
    flip_rng = random.Random(f"flip-{s}")
    rows: list[IterationRow] = []
    for k in range(1, bench.iterations + 1):
        t0 = time.perf_counter()
        tick = bench.bar(f"seed {s} {mode}: iteration {k}", min(len(train), len(test)) + len(test))
        batch = _iteration_batch(train, k, len(test)) if bench.train_refresh else train
        train_acc, n_flipped = runner.train(batch, order_rng, flip_rng, bench.feedback_noise, tick)
        n_short, n_supp = runner.evolve()
        acc, em, f1, prob = runner.evaluate(test, tick)
        rows.append(
            IterationRow(
                k, acc, em, f1, prob, runner.alpha, train_acc, n_short, n_supp, n_flipped,
                time.perf_counter() - t0,
            )
        )  # fmt: skip
        log.info("seed %d %s iteration %d: ACC %.3f (static %.3f)", s, mode, k, acc, static)
    return rows


# --------------------------------------------------------------------------- rendering


def render_evolve_bench(result: EvolveBenchResult, console: Console) -> None:
    """Print the per-iteration table of each α mode (means over seeds) and the gains."""
    from rich.table import Table

    st = result.settings
    console.print(
        f"[bold]EvoRAG evolve-bench[/bold] — {st['questions']}: noise {st['noise']:.0%}, "
        f"flipped feedback {st['feedback_noise']:.0%}, unit {st['unit']}, "
        f"{st['seeds']} seed(s) from {st['seed']}, sample {st['sample'] or 'all'}"
    )
    for mode in result.modes():
        title = "learned α (small step)" if mode == "learned" else "fixed α"
        table = Table(title=title)
        for col in ("iter", "ACC", "EM", "F1", "problematic", "α", "train ACC", "shortcuts", "suppressed"):
            table.add_column(col, justify="right")
        for r in result.mean_rows(mode):
            table.add_row(
                "static" if r.iteration == 0 else str(r.iteration),
                f"{r.accuracy:.1%}",
                f"{r.em:.1%}",
                f"{r.f1:.1%}",
                f"{r.problematic_ratio:.2%}",
                "–" if r.alpha is None else f"{r.alpha:.3f}",
                "–" if r.train_accuracy is None else f"{r.train_accuracy:.1%}",
                str(r.shortcuts),
                str(r.suppressed),
            )
        console.print(table)
        console.print(
            f"ACC gain after {st['iterations']} iteration(s): [bold]{result.gain(mode) * 100:+.2f}[/bold] points "
            f"(± {result.gain_std(mode) * 100:.2f} over seeds)"
        )
    console.print(f"{result.seconds:.1f} s")
