"""``triage compare``: the same corpus and questions through every installed framework (DESIGN §1.4).

A framework takes part through a small runner (:class:`FrameworkRunner`): it drives the framework over
the corpus in one mode and **emits events through the manager** — it computes nothing. Every number of
a row then comes from that framework's own recorded events, filtered by ``framework`` and
``retriever`` (:func:`aggregate_events`), scored with :func:`triage_plugins.apps.score.score_events`
(KG Implementation §4.1, KG Validation §4.2, KG Usage §4.3, the chain §4.5).

Decisions:

* **One manager per framework × mode.** Each gets a fresh :class:`~triage_plugins.runtime.manager.TriageManager`
  (synchronous delivery, no entry-point plugins, so runs are deterministic), its own store run (kind
  ``"compare"``), and a score namespace ``"<framework>/<mode>@<run id>:<unit>"`` in the shared store,
  so the EvoRAG contribution scores learned in one mode (or an earlier compare) never leak into another.
* **Runners** come from :data:`RUNNERS` or, for an installed adapter, from the entry-point group
  ``"triage.compare"`` (:data:`RUNNER_ENTRY_POINT_GROUP`); the core never imports an adapter.
* **Query ids** are :func:`query_id` ``(question, mode, round)``: unique per framework across modes
  and feedback rounds, because a generation event carries no retriever and must be joined to its
  retrieval by id. A runner must use them.
* **Feedback rounds** (EvoRAG §4–5): round 0 answers every question; each round k ≥ 1 first sends gold
  feedback (1 when the answer hits a gold answer, else 0) for round k − 1, then asks again with
  reweighting on. Accuracy per round is Hits@1 of that round's queries. Rounds need gold answers.
* **Failure isolation.** An unavailable framework is reported with its reason; a runner that raises is
  reported with the error, and the other frameworks complete.
"""

from __future__ import annotations

import json
import logging
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from triage_plugins.contract.errors import ConfigError, DatasetError
from triage_plugins.contract.events import (
    Chunk,
    Event,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
)
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.registry import BUILTIN_METRICS
from triage_plugins.metrics.result import MetricResult

if TYPE_CHECKING:
    from triage_plugins.kg.ontology import Ontology
    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store import Store

__all__ = [
    "DEFAULT_FRAMEWORKS",
    "GOLD_METRICS",
    "IMPLEMENTATION_METRICS",
    "RUNNERS",
    "USAGE_METRICS",
    "VALIDATION_METRICS",
    "CompareResult",
    "CompareRow",
    "Corpus",
    "FrameworkRunner",
    "MetricSummary",
    "Progress",
    "Question",
    "ReferenceRunner",
    "RoundSummary",
    "aggregate_events",
    "embedded_corpus",
    "load_corpus_dir",
    "load_question_file",
    "missing_package",
    "parse_query_id",
    "query_id",
    "register_runner",
    "run_compare",
    "unregister_runner",
]

log = logging.getLogger("triage.compare")

# The built-in compare columns (a row's are those of the registry it was scored with, plugins' included).
IMPLEMENTATION_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("implementation")
VALIDATION_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("validation")
USAGE_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("usage")
GOLD_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("gold")
DEFAULT_FRAMEWORKS: tuple[str, ...] = ("reference", "lightrag", "graphrag", "llamaindex")

Status = Literal["ok", "failed", "unavailable"]


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Question:
    """A question to ask every framework; ``gold`` enables CC, Hits@1, F1 and feedback rounds."""

    id: str
    text: str
    gold: Gold | None = None


@dataclass(frozen=True)
class Corpus:
    """Documents as chunks, plus what a runner may use to build its graph.

    :param extract: the extractor the reference pipeline uses (default: the offline rule-based one).
    :param ontology: schema for SC/OC/LC (``--ontology`` or the embedded world's schema).
    """

    name: str
    chunks: tuple[Chunk, ...]
    questions: tuple[Question, ...] = ()
    ontology: Ontology | None = None
    extract: Callable[[Chunk], Sequence[ExtractedTriple]] | None = None


def embedded_corpus(seed: int = 0, *, n_questions: int = 60, n_documents: int = 30) -> Corpus:
    """The seeded synthetic world of :func:`triage_plugins.offline.world.generate_world` (DESIGN §5)."""
    from triage_plugins.offline.extractor import extract_chunk
    from triage_plugins.offline.world import generate_world

    world = generate_world(seed, n_questions=n_questions, n_documents=n_documents)
    questions = tuple(Question(q.id, q.text, q.gold()) for q in world.questions)
    return Corpus(
        f"embedded (seed {seed})", tuple(world.chunks()), questions, world.ontology(), extract_chunk
    )


def load_corpus_dir(path: str | Path) -> Corpus:
    """Every ``*.txt`` / ``*.md`` file under ``path`` as a document; blank-line paragraphs are chunks."""
    root = Path(path)
    if not root.is_dir():
        raise DatasetError(f"{root}: not a directory (pass --corpus embedded or a folder of .txt/.md files)")
    chunks: list[Chunk] = []
    for file in sorted(p for p in root.rglob("*") if p.suffix.lower() in {".txt", ".md"} and p.is_file()):
        doc_id = file.relative_to(root).as_posix()
        text = file.read_text(encoding="utf-8", errors="replace")
        paragraphs = [p.strip() for p in text.replace("\r\n", "\n").split("\n\n") if p.strip()]
        for i, para in enumerate(paragraphs):
            chunks.append(Chunk(f"{doc_id}#p{i}", doc_id, para, {"paragraph": i, "section": file.stem}))
    if not chunks:
        raise DatasetError(f"{root}: no .txt or .md document with text found")
    from triage_plugins.offline.extractor import extract_chunk

    return Corpus(str(root), tuple(chunks), (), None, extract_chunk)


def load_question_file(path: str | Path) -> tuple[Question, ...]:
    """Questions from JSON lines (``id``, ``question`` or ``text``, optional ``answers``, ``entities``)
    or from a PathQuestion / MetaQA file (:func:`triage_plugins.datasets.load_questions`)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"{path}: no such question file")
    with path.open(encoding="utf-8") as fh:
        first = next((line for line in fh if line.strip()), "")
    if not first.lstrip().startswith("{"):
        from triage_plugins.datasets import load_questions

        return tuple(Question(item.id, item.text, item.gold()) for item in load_questions(path))
    out: list[Question] = []
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                text = row.get("question", row.get("text"))
                if not isinstance(text, str) or not text.strip():
                    raise KeyError("question")
            except (json.JSONDecodeError, KeyError, AttributeError) as exc:
                raise DatasetError(
                    f"{path}:{number}: expected a JSON object with a 'question' (or 'text') string ({exc})"
                ) from None
            answers = tuple(str(a) for a in row.get("answers", ()) or ())
            entities = tuple(str(e) for e in row.get("entities", ()) or ())
            gold = Gold(answers=answers, paths=(), entities=entities) if answers else None
            out.append(Question(str(row.get("id", f"q{number}")), text, gold))
    return tuple(out)


# --------------------------------------------------------------------------- the runner protocol


class Progress(Protocol):
    """``progress(description, total)`` starts a progress bar and returns ``tick()`` (one step done);
    the same shape as the CLI's progress factory."""

    def __call__(self, description: str, total: int) -> Callable[[], None]: ...


def no_progress(description: str, total: int) -> Callable[[], None]:
    """A :class:`Progress` that shows nothing."""
    return lambda: None


def query_id(question_id: str, mode: str, round_: int = 0) -> str:
    """The query id a runner must use: unique per framework across modes and feedback rounds."""
    return f"{question_id}@{mode}" + (f"#r{round_}" if round_ else "")


def parse_query_id(qid: str) -> tuple[str, str | None, int]:
    """``(question id, mode, round)`` of a :func:`query_id`; a foreign id is round 0 with mode ``None``."""
    base, round_ = qid, 0
    head, sep, tail = qid.rpartition("#r")
    if sep and tail.isdigit():
        base, round_ = head, int(tail)
    question, sep, mode = base.rpartition("@")
    return (question, mode, round_) if sep else (base, None, round_)


@runtime_checkable
class FrameworkRunner(Protocol):
    """Drives one framework over a corpus in one mode, emitting events through the manager.

    :attr name: the framework's name in the table (``"reference"``, ``"lightrag"`` ...).
    :attr modes: the modes it can run (retrievers / query modes); the first is the default.

    Optional attributes read by :func:`run_compare`: ``framework`` (the ``framework`` field its events
    carry, default ``name``) and ``retriever_of(mode) -> str | None`` (the ``retriever`` field its
    retrieval events carry in that mode, default the mode; ``None`` means do not filter).
    """

    name: str
    modes: tuple[str, ...]

    def available(self) -> tuple[bool, str]:
        """``(True, "")`` when it can run here, else ``(False, why)`` (not installed, no adapter ...)."""
        ...

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: TriageManager,
        *,
        feedback_rounds: int,
        seed: int,
        progress: Progress,
    ) -> None:
        """Index ``corpus``, answer ``questions`` (ids from :func:`query_id`), send feedback rounds."""
        ...


RUNNERS: dict[str, FrameworkRunner] = {}
"""The registry: framework name -> runner. Adapters add theirs with :func:`register_runner`."""


def register_runner(runner: FrameworkRunner, *, replace: bool = False) -> None:
    """Add a runner to :data:`RUNNERS` (``replace=True`` to override one of the same name)."""
    if not isinstance(runner, FrameworkRunner):
        raise ConfigError(f"{runner!r} is not a FrameworkRunner (needs name, modes, available(), run())")
    if runner.name in RUNNERS and not replace:
        raise ConfigError(f"a runner named {runner.name!r} is already registered (pass replace=True)")
    RUNNERS[runner.name] = runner


def unregister_runner(name: str) -> None:
    """Remove a runner from :data:`RUNNERS` (no error when absent)."""
    RUNNERS.pop(name, None)


# --------------------------------------------------------------------------- the reference runner


def _hit(answer: str, gold: Gold) -> bool:
    from triage_plugins.contract.graph_view import normalize_label

    said = normalize_label(answer)
    return bool(said) and any(normalize_label(a) == said for a in gold.answers)


class ReferenceRunner:
    """The built-in networkx pipeline (:class:`~triage_plugins.reference.pipeline.ReferencePipeline`).

    Modes are the reference retrievers of TRIAGE §5.1. The corpus is extracted ``extraction_runs``
    times (default 2, so EC is defined; the offline extractor is deterministic, so EC = 1 there) and
    the graph assembled from the first run.
    """

    name = "reference"
    framework = "reference"

    def __init__(self, *, extraction_runs: int = 2) -> None:
        from triage_plugins.reference.retrievers import RETRIEVERS

        self.modes: tuple[str, ...] = tuple(RETRIEVERS)
        self.extraction_runs = extraction_runs

    def available(self) -> tuple[bool, str]:
        return True, ""

    def retriever_of(self, mode: str) -> str:
        return mode

    def run(
        self,
        corpus: Corpus,
        questions: Sequence[Question],
        mode: str,
        manager: TriageManager,
        *,
        feedback_rounds: int = 0,
        seed: int = 0,
        progress: Progress = no_progress,
    ) -> None:
        from triage_plugins.reference.pipeline import ReferencePipeline

        if mode not in self.modes:
            raise ConfigError(f"reference: unknown mode {mode!r}; choose from {', '.join(self.modes)}")
        extract = corpus.extract
        if extract is None:
            from triage_plugins.offline.extractor import extract_chunk as extract
        pipeline = ReferencePipeline(manager, retriever=mode)
        for run in range(2, self.extraction_runs + 1):
            tick = progress(f"reference/{mode}: extraction run {run}", len(corpus.chunks))
            for chunk in corpus.chunks:
                ets = tuple(extract(chunk))
                manager.emit_extraction(
                    ExtractionEvent(self.framework, f"run-{run}", chunk, ets, "offline", 0.0)
                )
                tick()
        tick = progress(f"reference/{mode}: extraction run 1 + graph", len(corpus.chunks))
        pipeline.index_chunks(
            corpus.chunks, extract, run_id="run-1", ontology=corpus.ontology, progress=lambda n: tick()
        )
        answers = self._ask(pipeline, questions, mode, 0, progress)
        for round_ in range(1, feedback_rounds + 1):
            for question, answer in answers:
                if question.gold is not None:
                    score = 1.0 if _hit(answer.text, question.gold) else 0.0
                    pipeline.feedback(answer.query_id, score, source="gold")
            manager.flush()
            answers = self._ask(pipeline, questions, mode, round_, progress)

    @staticmethod
    def _ask(
        pipeline: Any, questions: Sequence[Question], mode: str, round_: int, progress: Progress
    ) -> list:
        label = f"reference/{mode}: questions" + (f" (round {round_})" if round_ else "")
        tick = progress(label, len(questions))
        out = []
        for q in questions:
            out.append((q, pipeline.ask(q.text, query_id=query_id(q.id, mode, round_), gold=q.gold)))
            tick()
        return out


def missing_package(module: str, extra: str, package: str | None = None) -> str | None:
    """Why a runner cannot run when ``module`` is not importable, else ``None``.

    :param extra: the project extra that installs it; ``package`` names it in the message (default: ``module``).
    """
    import importlib.util

    if importlib.util.find_spec(module) is None:
        return f"{package or module} is not installed (pip install 'triage-plugins[{extra}]')"
    return None


class PendingRunner:
    """A registry entry for a framework whose compare runner is not written yet.

    It reports, honestly, whether the framework is installed and that the runner is not available yet,
    instead of pretending to run. Replace it with :func:`register_runner` (``replace=True``).
    """

    def __init__(self, name: str, modes: tuple[str, ...], module: str, extra: str, adapter: str) -> None:
        self.name = name
        self.modes = modes
        self._module, self._extra, self._adapter = module, extra, adapter

    def available(self) -> tuple[bool, str]:
        missing = missing_package(self._module, self._extra)
        return False, missing or f"runner not available yet: {self._adapter} has no compare runner (pending)"

    def run(self, *args: Any, **kwargs: Any) -> None:
        raise ConfigError(f"{self.name}: {self.available()[1]}")


register_runner(ReferenceRunner())
# Placeholders: an installed adapter's runner (entry point group triage.compare) takes precedence.
register_runner(
    PendingRunner("lightrag", ("local", "global", "hybrid", "mix"), "lightrag", "lightrag", "triage_lightrag")
)
register_runner(PendingRunner("graphrag", ("local", "global"), "graphrag", "graphrag", "triage_graphrag"))
register_runner(
    PendingRunner("llamaindex", ("default",), "llama_index.core", "llamaindex", "triage_llamaindex")
)


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class MetricSummary:
    """A per-query metric over a row's queries: median and mean of the defined values, N/A count."""

    name: str
    median: float | None
    mean: float | None
    n: int
    na: int
    reason: str | None = None  # the most common N/A reason

    def to_dict(self) -> dict[str, Any]:
        return {"median": self.median, "mean": self.mean, "n": self.n, "na": self.na, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class RoundSummary:
    """One feedback round of a row: its queries, accuracy (Hits@1 mean) and signature counts."""

    round: int
    queries: int
    hits_at_1: float | None
    signatures: Mapping[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "queries": self.queries,
            "hits_at_1": self.hits_at_1,
            "signatures": dict(self.signatures),
        }


@dataclass
class CompareRow:
    """One framework × mode: status, then everything computed from its own events."""

    framework: str
    mode: str
    status: Status
    reason: str | None = None
    seconds: float | None = None
    triples_extracted: int | None = None
    graph_triples: int | None = None
    queries: int = 0
    implementation: dict[str, MetricResult] = field(default_factory=dict)
    validation: dict[str, MetricResult] = field(default_factory=dict)
    usage: dict[str, MetricSummary] = field(default_factory=dict)
    gold: dict[str, MetricSummary] | None = None
    rhd: dict[str, float] = field(default_factory=dict)
    signatures: dict[str, int] = field(default_factory=dict)
    latency: dict[str, float | None] = field(default_factory=dict)
    rounds: list[RoundSummary] = field(default_factory=list)
    distributions: dict[str, list[float]] = field(default_factory=dict)
    score_moves: list[tuple[str, float, int]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"{self.framework} / {self.mode}"

    def to_dict(self) -> dict[str, Any]:
        def result(r: MetricResult) -> dict[str, Any]:
            return {"value": r.value, "reason": r.reason, "n": r.n}

        return {
            "framework": self.framework,
            "mode": self.mode,
            "status": self.status,
            "reason": self.reason,
            "seconds": self.seconds,
            "triples_extracted": self.triples_extracted,
            "graph_triples": self.graph_triples,
            "queries": self.queries,
            "implementation": {k: result(v) for k, v in self.implementation.items()},
            "validation": {k: result(v) for k, v in self.validation.items()},
            "usage": {k: v.to_dict() for k, v in self.usage.items()},
            "gold": None if self.gold is None else {k: v.to_dict() for k, v in self.gold.items()},
            "rhd": dict(self.rhd),
            "signatures": dict(self.signatures),
            "latency": dict(self.latency),
            "rounds": [r.to_dict() for r in self.rounds],
            "score_moves": [{"id": i, "delta": d, "n_updates": n} for i, d, n in self.score_moves],
            "notes": list(self.notes),
        }


@dataclass
class CompareResult:
    """All rows of a comparison, with what was asked for."""

    rows: list[CompareRow]
    corpus: str
    questions: int
    seed: int
    feedback_rounds: int
    store: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "corpus": self.corpus,
            "questions": self.questions,
            "seed": self.seed,
            "feedback_rounds": self.feedback_rounds,
            "store": self.store,
            "rows": [r.to_dict() for r in self.rows],
            "notes": list(self.notes),
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=str)


# --------------------------------------------------------------------------- aggregation


def _summary(name: str, results: Iterable[MetricResult]) -> MetricSummary:
    values: list[float] = []
    reasons: Counter[str] = Counter()
    for r in results:
        if r.value is None:
            reasons[r.reason or "undefined"] += 1
        else:
            values.append(float(r.value))
    return MetricSummary(
        name,
        statistics.median(values) if values else None,
        math.fsum(values) / len(values) if values else None,
        len(values),
        sum(reasons.values()),
        reasons.most_common(1)[0][0] if reasons else None,
    )


def _with_gold(event: RetrievalEvent, gold: Mapping[str, Gold]) -> RetrievalEvent:
    if event.gold is not None:
        return event
    found = gold.get(parse_query_id(event.query_id)[0])
    return event if found is None else replace(event, gold=found)


def _median(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def _summarize_notes(notes: Sequence[str]) -> list[str]:
    """Per-query notes that repeat (a gate reroute retrieves a query twice) become one count."""
    twice = [n for n in notes if "retrieved twice" in n]
    out = [n for n in notes if "retrieved twice" not in n]
    if twice:
        out.append(f"{len(twice)} queries were retrieved twice (a gate reroute): the last retrieval is scored")
    return out


def aggregate_events(
    events: Iterable[Event],
    framework: str,
    retriever: str | None = None,
    *,
    mode: str | None = None,
    ontology: Ontology | None = None,
    thresholds: Mapping[str, float] | None = None,
    gold: Mapping[str, Gold] | None = None,
) -> CompareRow:
    """One compare row from recorded events: only events whose ``framework`` is ``framework``, and only
    retrievals whose ``retriever`` is ``retriever`` (when given) with the generations of their query ids.

    Phases (§4.1, §4.2) come from the framework's extraction events and its first graph event; usage
    (§4.3), RHD (eq. 33) and signatures (§4.5) from round-0 queries; each feedback round is scored apart.

    :param gold: question id -> gold annotations, attached to retrievals that carry none (a host
        framework does not know the benchmark's gold; the question id is read from :func:`query_id`).
    """
    from triage_plugins.apps.score import score_events

    mine = [e for e in events if getattr(e, "framework", None) == framework]
    extractions = [e for e in mine if isinstance(e, ExtractionEvent)]
    graphs = [e for e in mine if isinstance(e, GraphEvent)]
    retrievals = [
        e for e in mine if isinstance(e, RetrievalEvent) and (retriever is None or e.retriever == retriever)
    ]
    if gold:
        retrievals = [_with_gold(e, gold) for e in retrievals]
    by_round: dict[int, list[Event]] = {}
    qids_round: dict[str, int] = {}
    for e in retrievals:
        rnd = parse_query_id(e.query_id)[2]
        qids_round[e.query_id] = rnd
        by_round.setdefault(rnd, []).append(e)
    for e in mine:
        if isinstance(e, GenerationEvent) and e.query_id in qids_round:
            by_round[qids_round[e.query_id]].append(e)

    row = CompareRow(framework, mode or retriever or "-", "ok")
    if extractions:
        first_run = extractions[0].run_id
        row.triples_extracted = sum(len(e.triples) for e in extractions if e.run_id == first_run)
    graph = graphs[0] if graphs else None
    if graph is not None:
        row.graph_triples = len(graph.graph.triples)
    base = score_events(
        [*extractions, *([graph] if graph else []), *by_round.get(0, [])],
        ontology=ontology,
        thresholds=thresholds,
    )
    phases = base.phases
    graph_metrics = {**phases["implementation"].metrics, **phases["validation"].metrics}
    columns = base.registry.columns
    row.implementation = {k: graph_metrics[k] for k in columns("implementation") if k in graph_metrics}
    row.validation = {k: graph_metrics[k] for k in columns("validation") if k in graph_metrics}
    for phase in phases.values():
        if phase.skipped:
            row.notes.append(f"{phase.name}: {phase.skipped}")
    queries = base.queries
    row.queries = len(queries)
    row.usage = {m: _summary(m, (q.metrics[m] for q in queries if m in q.metrics)) for m in columns("usage")}
    row.distributions = {
        m: [float(q.metrics[m].value) for q in queries if m in q.metrics and q.metrics[m].value is not None]
        for m in columns("usage")
    }
    has_gold = any(isinstance(e, RetrievalEvent) and e.gold is not None for e in by_round.get(0, []))
    if has_gold:
        row.gold = {m: _summary(m, (q.metrics[m] for q in queries if m in q.metrics)) for m in columns("gold")}
    row.rhd = {("inf" if k == math.inf else str(int(k))): v for k, v in base.rhd.items()}
    row.signatures = dict(base.signatures)
    gen_seconds = {
        e.query_id: e.seconds
        for e in by_round.get(0, [])
        if isinstance(e, GenerationEvent) and e.context != "none"
    }
    ret = [e for e in by_round.get(0, []) if isinstance(e, RetrievalEvent)]
    row.latency = {
        "retrieval_median": _median(e.seconds for e in ret),
        "generation_median": _median(gen_seconds.values()),
        "query_median": _median(
            (e.seconds or 0.0) + (gen_seconds.get(e.query_id) or 0.0) if e.seconds is not None else None
            for e in ret
        ),
    }
    for rnd in sorted(by_round):
        report = base if rnd == 0 else score_events(by_round[rnd], thresholds=thresholds)
        hits = _summary("Hits@1", (q.metrics["Hits@1"] for q in report.queries))
        row.rounds.append(RoundSummary(rnd, len(report.queries), hits.mean, dict(report.signatures)))
    if len(row.rounds) == 1:
        row.rounds = []
    row.notes.extend(_summarize_notes(base.notes))
    return row


# --------------------------------------------------------------------------- running


class _Collector:
    """Keeps every notification event a run emits (in memory), for :func:`aggregate_events`."""

    def __init__(self) -> None:
        self.events: list[Event] = []

    @hookimpl
    def triage_extraction(self, event: Event) -> None:
        self.events.append(event)

    @hookimpl
    def triage_graph(self, event: Event) -> None:
        self.events.append(event)

    @hookimpl
    def triage_retrieval(self, event: Event) -> None:
        self.events.append(event)

    @hookimpl
    def triage_generation(self, event: Event) -> None:
        self.events.append(event)

    @hookimpl
    def triage_feedback(self, event: Event) -> None:
        self.events.append(event)


class ScopedScores:
    """A store view whose contribution scores and parameters live under a namespace.

    Everything else (events, metrics, runs) goes to the shared store unchanged, so one compare store
    holds every row's trace while each framework × mode learns its own EvoRAG scores.
    """

    def __init__(self, store: Store, namespace: str) -> None:
        self._store = store
        self.namespace = namespace

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def _unit(self, unit: str) -> str:
        return f"{self.namespace}:{unit}"

    def add_score(self, unit: str, id: str, delta: float, *, init: float = 100.0) -> float:
        return self._store.add_score(self._unit(unit), id, delta, init=init)

    def add_scores(self, unit: str, deltas: Mapping[str, float], init: float = 100.0) -> dict[str, float]:
        return self._store.add_scores(self._unit(unit), deltas, init=init)

    def set_score(self, unit: str, id: str, raw: float) -> None:
        self._store.set_score(self._unit(unit), id, raw)

    def get_scores(self, unit: str, ids: Iterable[str] | None = None) -> dict[str, Any]:
        return self._store.get_scores(self._unit(unit), ids)

    def get_param(self, name: str, default: Any = None) -> Any:
        return self._store.get_param(f"{self.namespace}:{name}", default)

    def set_param(self, name: str, value: Any) -> None:
        self._store.set_param(f"{self.namespace}:{name}", value)


SCORE_UNITS_PARAM = "compare.score_units"
"""Store parameter listing the namespaced score units a compare run wrote (read by ``triage report``)."""


RUNNER_ENTRY_POINT_GROUP = "triage.compare"
"""Entry-point group through which an installed adapter provides its runner (name = framework),
e.g. ``lightrag = "triage_lightrag.compare:LightRAGRunner"``: a runner instance, or a class or
factory called without arguments. It takes precedence over a :class:`PendingRunner` placeholder."""


def _runner_entry_points() -> list[Any]:
    return list(metadata.entry_points(group=RUNNER_ENTRY_POINT_GROUP))


def _entry_point_runner(name: str) -> FrameworkRunner | str | None:
    """The runner an adapter declares for ``name``; a string says why loading it failed."""
    for ep in _runner_entry_points():
        if ep.name != name:
            continue
        try:
            obj = ep.load()
            runner = obj if isinstance(obj, FrameworkRunner) and not isinstance(obj, type) else obj()
        except Exception as exc:  # noqa: BLE001 - a broken adapter is reported, not fatal
            return f"runner entry point {ep.value} failed to load: {type(exc).__name__}: {exc}"
        if not isinstance(runner, FrameworkRunner):
            return f"runner entry point {ep.value} did not give a FrameworkRunner"
        return runner
    return None


def _select(frameworks: Sequence[str] | None) -> list[tuple[str, FrameworkRunner | None, str | None]]:
    """(name, runner or ``None``, why not) per requested framework, registry first, then entry points."""
    names = list(frameworks) if frameworks else list(DEFAULT_FRAMEWORKS)
    out: list[tuple[str, FrameworkRunner | None, str | None]] = []
    for name in names:
        runner = RUNNERS.get(name)
        if runner is None or isinstance(runner, PendingRunner):
            found = _entry_point_runner(name)
            if isinstance(found, str):
                out.append((name, None, found))
                continue
            runner = found or runner
        out.append((name, runner, None if runner is not None else f"no runner registered for {name!r}"))
    return out


def run_compare(
    corpus: Corpus,
    *,
    frameworks: Sequence[str] | None = None,
    questions: Sequence[Question] | None = None,
    modes: Sequence[str] | None = None,
    feedback_rounds: int = 0,
    store: Store | str | Path | None = None,
    seed: int = 0,
    thresholds: Mapping[str, float] | None = None,
    progress: Progress = no_progress,
) -> CompareResult:
    """Run ``corpus`` through each requested framework in each requested mode; one row per pair.

    :param frameworks: runner names (default :data:`DEFAULT_FRAMEWORKS`); unknown or unavailable ones
        give an ``"unavailable"`` row with the reason.
    :param modes: modes to run; for each framework only the modes it supports are run (all of its
        modes when ``None``). A requested mode no selected framework supports raises.
    :param questions: default: the corpus's own questions.
    :param store: where events, metric rows and (namespaced) scores are recorded; default in memory.
    """
    from triage_plugins.store import is_store, open_store

    if feedback_rounds < 0:
        raise ConfigError(f"feedback rounds must be >= 0, got {feedback_rounds}")
    asked = tuple(questions if questions is not None else corpus.questions)
    notes: list[str] = []
    if not asked:
        notes.append("no questions: only the KG Implementation and Validation metrics are computed")
    if feedback_rounds and not any(q.gold is not None for q in asked):
        notes.append(
            f"{feedback_rounds} feedback round(s) requested but no question has a gold answer: skipped"
        )
        feedback_rounds = 0
    selected = _select(frameworks)
    if modes:
        known = {m for _, r, _ in selected if r is not None for m in r.modes}
        unknown = [m for m in modes if m not in known]
        if unknown:
            raise ConfigError(
                f"mode(s) {', '.join(unknown)} are not supported by {', '.join(n for n, _, _ in selected)}; "
                f"known modes: {', '.join(sorted(known))}"
            )
    owns = not is_store(store)
    shared: Store = open_store(":memory:" if store is None else store)
    rows: list[CompareRow] = []
    units: list[str] = list(shared.get_param(SCORE_UNITS_PARAM, []) or [])
    try:
        for name, runner, why_not in selected:
            if runner is None:
                rows.append(CompareRow(name, "-", "unavailable", why_not))
                continue
            try:
                ok, why = runner.available()
            except Exception as exc:  # noqa: BLE001 - a broken probe is a report, not a crash
                ok, why = False, f"availability check raised {type(exc).__name__}: {exc}"
            if not ok:
                rows.append(CompareRow(name, "-", "unavailable", why or "not available"))
                continue
            run_modes = [m for m in runner.modes if m in modes] if modes else list(runner.modes)
            if not run_modes:
                rows.append(CompareRow(name, "-", "unavailable", "none of the requested modes is supported"))
                continue
            for mode in run_modes:
                rows.append(
                    _run_one(
                        runner,
                        mode,
                        corpus,
                        asked,
                        shared,
                        feedback_rounds,
                        seed,
                        thresholds,
                        progress,
                        units,
                    )
                )
        shared.set_param(SCORE_UNITS_PARAM, sorted(set(units)))
    finally:
        if owns:
            shared.close()
    return CompareResult(
        rows,
        corpus.name,
        len(asked),
        seed,
        feedback_rounds,
        None if owns and store is None else str(store),
        notes,
    )


def _score_moves(store: Store, namespace: str, top: int = 6) -> list[tuple[str, float, int]]:
    """The most promoted and most suppressed contribution scores of a run: (id, raw − 100, updates)."""
    moves: list[tuple[str, float, int]] = []
    for unit in ("triple", "chunk"):
        for item, row in store.get_scores(f"{namespace}:{unit}").items():
            if row.raw != 100.0:
                moves.append((item, row.raw - 100.0, row.n_updates))
    up = sorted((m for m in moves if m[1] > 0), key=lambda m: (-m[1], m[0]))[:top]
    down = sorted((m for m in moves if m[1] < 0), key=lambda m: (m[1], m[0]))[:top]
    return up + down[::-1]


def _run_one(
    runner: FrameworkRunner,
    mode: str,
    corpus: Corpus,
    questions: Sequence[Question],
    store: Store,
    feedback_rounds: int,
    seed: int,
    thresholds: Mapping[str, float] | None,
    progress: Progress,
    units: list[str],
) -> CompareRow:
    from triage_plugins.contract.config import DEFAULT_THRESHOLDS, TriageConfig
    from triage_plugins.runtime.manager import TriageManager

    framework = getattr(runner, "framework", runner.name)
    retriever_of = getattr(runner, "retriever_of", None)
    retriever = retriever_of(mode) if callable(retriever_of) else mode
    run_id = store.start_run(
        "compare", {"framework": runner.name, "mode": mode, "seed": seed, "feedback_rounds": feedback_rounds}
    )
    # Scores are namespaced per run as well, so a second compare on the same store starts from 100 again.
    namespace = f"{runner.name}/{mode}@{run_id}"
    config = TriageConfig(
        thresholds={**DEFAULT_THRESHOLDS, **(thresholds or {})}, reweight=feedback_rounds > 0
    )
    manager = TriageManager(
        ScopedScores(store, namespace), config=config, entry_points=False, synchronous=True
    )
    manager.run_id = run_id
    collector = _Collector()
    manager.register(collector, name="triage.compare.collector")
    units.extend(f"{namespace}:{u}" for u in ("triple", "chunk"))
    started = time.perf_counter()
    try:
        try:
            runner.run(
                corpus,
                questions,
                mode,
                manager,
                feedback_rounds=feedback_rounds,
                seed=seed,
                progress=progress,
            )
            manager.flush()
        except Exception as exc:  # noqa: BLE001 - one framework failing must not stop the others
            log.warning("compare: %s/%s failed: %s", runner.name, mode, exc, exc_info=exc)
            return CompareRow(
                runner.name, mode, "failed", f"{type(exc).__name__}: {exc}", time.perf_counter() - started
            )
        seconds = time.perf_counter() - started
        try:
            row = aggregate_events(
                collector.events,
                framework,
                retriever,
                mode=mode,
                ontology=corpus.ontology,
                thresholds=config.thresholds,
                gold={q.id: q.gold for q in questions if q.gold is not None},
            )
        except Exception as exc:  # noqa: BLE001
            log.warning("compare: scoring %s/%s failed: %s", runner.name, mode, exc, exc_info=exc)
            return CompareRow(
                runner.name, mode, "failed", f"scoring failed: {type(exc).__name__}: {exc}", seconds
            )
    finally:
        manager.close()
        store.end_run(run_id)
    row.framework = runner.name
    row.seconds = seconds
    row.score_moves = _score_moves(store, namespace)
    if manager.failures:
        failed = ", ".join(f"{p}.{h} ({e}) ×{n}" for (p, h, e), n in sorted(manager.failures.items()))
        row.notes.append(f"plugin errors (skipped): {failed}")
    if not row.queries and questions:
        row.notes.append(
            f"no retrieval event with framework={framework!r} and retriever={retriever!r} was recorded"
        )
    return row
