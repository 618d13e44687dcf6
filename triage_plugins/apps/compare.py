"""``triage compare``: the same corpus and questions through every installed framework (DESIGN §1.4).

A framework takes part through a small runner (:class:`FrameworkRunner`): it drives the framework over
the corpus in one mode and **emits events through the manager** — it computes nothing. The row's
manager scores each query once, live (DESIGN §4 "Scoring once"), and every number of a row comes from
the records it broadcast (:class:`~triage_plugins.contract.records.QueryRecord`, KG Usage §4.3 and the
chain §4.5; :class:`~triage_plugins.contract.records.GraphRecord`, KG Implementation §4.1 and Validation
§4.2), filtered by ``framework`` and ``retriever`` (:func:`aggregate_records`): the table shows what the
store's report shows, and no metric is computed twice.

Decisions:

* **One manager per framework × mode.** Each gets a fresh :class:`~triage_plugins.runtime.manager.TriageManager`
  (synchronous delivery, no entry-point plugins, so runs are deterministic), its own store run (kind
  ``"compare"``), and a score namespace ``"<framework>/<mode>@<run id>:<unit>"`` in the shared store,
  so the EvoRAG contribution scores learned in one mode (or an earlier compare) never leak into another.
* **Runners** are those plugins register through the hook ``triage_register_runners``, called through
  the manager's pluggy relay (:func:`runner_registry`): the reference runner
  (:class:`~triage_plugins.reference.runner.ReferenceRunner`, registered by the default plugin
  ``triage.reference``), those added with :func:`register_runner`, and the ``triage`` entry-point
  plugins' (each adapter's); the core never imports an adapter. The runner SDK (:class:`Corpus`,
  :class:`Question`, :func:`query_id`, :func:`~triage_plugins.adapter_kit.runner.run_rounds`, the gold-hit
  rule) is :mod:`triage_plugins.adapter_kit.runner`. An unknown framework name is a
  :class:`~triage_plugins.ConfigError` naming the close matches.
* **Query ids** are :func:`query_id` ``(question, mode, round)``: unique per framework across modes
  and feedback rounds, because a generation event carries no retriever and must be joined to its
  retrieval by id. A runner must use them.
* **Feedback rounds** (EvoRAG §4–5): round 0 answers every question; each round k ≥ 1 first sends gold
  feedback (1 when :func:`~triage_plugins.metrics.answers.gold_hit`, else 0) for round k − 1, then
  asks again with reweighting on. Accuracy per round is Hits@1 of that round's queries. Rounds need gold answers.
* **Failure isolation.** An unavailable framework is reported with its reason; a runner that raises is
  reported with the error, and the other frameworks complete.
"""

from __future__ import annotations

import difflib
import json
import logging
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage_plugins.adapter_kit.runner import (
    Corpus,
    FrameworkRunner,
    Progress,
    Question,
    Setup,
    missing_package,
    no_progress,
    parse_query_id,
    query_id,
    setup_of,
)
from triage_plugins.contract.errors import ConfigError, DatasetError
from triage_plugins.contract.events import (
    Chunk,
    Event,
    ExtractionEvent,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
)
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.records import GraphRecord, QueryRecord, RecordCollector
from triage_plugins.diagnosis.chain import SIGNATURES
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry
from triage_plugins.metrics.result import MetricResult, na
from triage_plugins.reference.runner import ReferenceRunner
from triage_plugins.report.results import (
    CompareResult,
    CompareRow,
    Difference,
    MetricSummary,
    RoundSummary,
    SeedStat,
    SeedSummary,
)
from triage_plugins.store.scoped import SCORE_UNITS_PARAM

if TYPE_CHECKING:
    from triage_plugins.kg.ontology import Ontology
    from triage_plugins.runtime.manager import Registration, TriageManager
    from triage_plugins.store import Store

__all__ = [
    "GOLD_METRICS",
    "IMPLEMENTATION_METRICS",
    "RUNNERS",
    "USAGE_METRICS",
    "VALIDATION_METRICS",
    "Corpus",
    "FrameworkRunner",
    "Progress",
    "Question",
    "ReferenceRunner",
    "Setup",
    "add_intervals",
    "aggregate_events",
    "aggregate_records",
    "embedded_corpus",
    "load_corpus_dir",
    "load_question_file",
    "missing_package",
    "parse_query_id",
    "query_id",
    "register_runner",
    "run_compare",
    "run_compare_seeds",
    "runner_registry",
    "summarize_seeds",
    "unregister_runner",
]

log = logging.getLogger("triage.compare")

# The built-in compare columns (a row's are those of the registry it was scored with, plugins' included).
IMPLEMENTATION_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("implementation")
VALIDATION_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("validation")
USAGE_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("usage")
GOLD_METRICS: tuple[str, ...] = BUILTIN_METRICS.columns("gold")

# --------------------------------------------------------------------------- inputs


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


# --------------------------------------------------------------------------- the runner registry


REFERENCE_PLUGIN = "triage.reference"
"""The default plugin that registers the reference runner."""

RUNNERS: dict[str, FrameworkRunner] = {}
"""Runners added in this process with :func:`register_runner` (a script's or a test's own). The reference
runner and the adapters' runners are registered by plugins through the hook ``triage_register_runners``
(:func:`runner_registry`)."""


def register_runner(runner: FrameworkRunner, *, replace: bool = False) -> None:
    """Add a runner to :data:`RUNNERS` (``replace=True`` to override one of the same name)."""
    _check_runner(runner)
    if runner.name in RUNNERS and not replace:
        raise ConfigError(f"a runner named {runner.name!r} is already registered (pass replace=True)")
    RUNNERS[runner.name] = runner


def unregister_runner(name: str) -> None:
    """Remove a runner from :data:`RUNNERS` (no error when absent)."""
    RUNNERS.pop(name, None)


def _check_runner(runner: object) -> None:
    if not isinstance(runner, FrameworkRunner) or isinstance(runner, type):
        raise ConfigError(f"{runner!r} is not a FrameworkRunner (needs name, modes, available(), run())")


@dataclass
class RunnerRegistry:
    """The runners ``triage compare`` can select, in order (the reference runner, :data:`RUNNERS`, then
    each plugin's), and what went wrong while collecting them (a plugin that failed to load or to
    register)."""

    runners: dict[str, FrameworkRunner]
    errors: list[str] = field(default_factory=list)

    def select(self, names: Sequence[str] | None) -> list[FrameworkRunner]:
        """The runners named (default: all); an unknown name raises naming the close matches."""
        if not names:
            return list(self.runners.values())
        unknown = [n for n in names if n not in self.runners]
        if unknown:
            raise ConfigError(self._unknown_message(unknown))
        return [self.runners[n] for n in names]

    def _unknown_message(self, unknown: Sequence[str]) -> str:
        known = list(self.runners)
        parts = []
        for name in unknown:
            close = difflib.get_close_matches(name, known, n=3, cutoff=0.6)
            parts.append(f"{name!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
        what = "unknown framework" + ("s" if len(parts) > 1 else "")
        message = f"{what} {', '.join(parts)}; known frameworks: {', '.join(known) or 'none'}"
        if self.errors:
            message += "; " + "; ".join(self.errors)
        return message


def runner_registry(plugins: Iterable[object] | None = None) -> RunnerRegistry:
    """The runners plugins register through ``triage_register_runners``, each plugin's hook called
    through the manager's pluggy relay: the default plugin ``triage.reference``'s first (the
    reference runner), then :data:`RUNNERS`, then each other plugin's.

    :param plugins: read these plugin objects instead of the ``triage`` entry-point plugins.

    A plugin whose hook raises, or that registers a non-runner or a taken name, is said in
    :attr:`RunnerRegistry.errors`; what it registered before stands, and the other frameworks still run.
    """
    from triage_plugins.runtime.manager import TriageManager

    with TriageManager(
        defaults=(REFERENCE_PLUGIN,), entry_points=plugins is None, synchronous=True
    ) as manager:
        for plugin in plugins or ():
            manager.register(plugin)
        errors = [f"plugin {e.name!r} failed to load: {e.error}" for e in manager.load_errors]
        registrations = manager.registrations("triage_register_runners")
    registry = RunnerRegistry({}, errors)
    for done in (r for r in registrations if r.source == "default"):
        _add_runners(registry, done)
    registry.runners.update(RUNNERS)
    for done in (r for r in registrations if r.source != "default"):
        _add_runners(registry, done)
    return registry


def _add_runners(registry: RunnerRegistry, done: Registration) -> None:
    """Add one plugin's runners in the order it registered them, up to the first bad one."""
    for runner in done.items:
        try:
            _check_runner(runner)
            if runner.name in registry.runners:
                raise ConfigError(f"a runner named {runner.name!r} is already registered")
        except ConfigError as exc:
            registry.errors.append(
                f"plugin {done.plugin!r}: triage_register_runners raised ConfigError: {exc}"
            )
            return
        registry.runners[runner.name] = runner
    error = done.error
    if error is not None:
        registry.errors.append(
            f"plugin {done.plugin!r}: triage_register_runners raised {type(error).__name__}: {error}"
        )


# --------------------------------------------------------------------------- results


def _with_holm(differences: list[Difference]) -> list[Difference]:
    """``differences`` with ``p_holm`` filled: Holm over the differences of each metric."""
    from triage_plugins.diagnosis.multiple import holm_adjust

    out = list(differences)
    for metric in {d.metric for d in differences}:
        family = [i for i, d in enumerate(out) if d.metric == metric and d.p_value is not None]
        for i, p in zip(family, holm_adjust([out[i].p_value or 0.0 for i in family]), strict=True):
            out[i] = replace(out[i], p_holm=p)
    return out


def _seed_value(row: CompareRow | None, metric: str) -> float | None:
    """The rate of ``row`` in one seed: the mean of its per-question values; a chain signature no
    diagnosed question had is 0, a row that did not complete (or has no such rate) ``None``."""
    if row is None or row.status != "ok":
        return None
    values = row.per_question.get(metric)
    if values:
        return math.fsum(values.values()) / len(values)
    if metric.startswith("chain:") and any(k.startswith("chain:") for k in row.per_question):
        return 0.0
    return None


def summarize_seeds(seeds: Sequence[int], results: Sequence[CompareResult]) -> SeedSummary:
    """Per row (matched by label across seeds, in first-seen order) and rate, the values over seeds,
    their mean and t interval."""
    from triage_plugins.diagnosis.intervals import seed_interval

    by_seed = [{r.label: r for r in res.rows} for res in results]
    labels = list(dict.fromkeys(r.label for res in results for r in res.rows if r.status == "ok"))
    summary = SeedSummary(tuple(seeds))
    for label in labels:
        rows = [rows_of.get(label) for rows_of in by_seed]
        metrics = sorted({m for r in rows if r is not None for m in r.per_question})
        stats: dict[str, SeedStat] = {}
        for metric in metrics:
            values = tuple(_seed_value(r, metric) for r in rows)
            kept = [v for v in values if v is not None]
            mean = math.fsum(kept) / len(kept) if kept else None
            stats[metric] = SeedStat(values, mean, seed_interval(kept))
        summary.rows[label] = stats
    return summary


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


Scored = tuple[QueryRecord, dict[str, MetricResult]]
"""A query's final record with every per-query metric of the registry (:func:`_completed`)."""


def aggregate_records(
    records: Iterable[QueryRecord],
    framework: str,
    retriever: str | None = None,
    *,
    mode: str | None = None,
    registry: MetricRegistry = BUILTIN_METRICS,
    graphs: Sequence[GraphRecord] = (),
    triples_extracted: int | None = None,
) -> CompareRow:
    """One compare row from the records a scorer broadcast, scoring nothing again: only records whose
    ``framework`` is ``framework``, and whose retrieval's ``retriever`` is ``retriever`` (when given).

    A query's last record is its reading (a gate reroute's last retrieval). Usage (§4.3), RHD (eq. 33)
    and signatures (§4.5) come from round-0 queries; each feedback round is summarized apart.

    :param records: the records in the order they were broadcast (a query is placed where it was first
        scored); a metric of ``registry`` a record lacks is N/A with the reason (a live scorer computes
        the gold metrics only for queries with gold).
    :param registry: the metrics the records were scored with (the columns).
    :param graphs: the graph records of the run, in order: the framework's first gives the graph size,
        its last the Implementation (§4.1) and Validation (§4.2) metrics (what the store's report shows).
    :param triples_extracted: triples extracted in the framework's first extraction run.
    """
    by_round, twice = _finals_by_round(records, framework, retriever, registry)
    row = CompareRow(framework, mode or retriever or "-", "ok", triples_extracted=triples_extracted)
    _fill_graph(row, [g for g in graphs if g.framework == framework], registry)
    round0 = by_round.get(0, [])
    _fill_usage(row, round0, registry)
    row.latency = _latency(round0)
    for rnd in sorted(by_round):
        scored = by_round[rnd]
        hits = _summary("Hits@1", (m["Hits@1"] for _, m in scored if "Hits@1" in m))
        per_question = {
            parse_query_id(r.query_id)[0]: float(v)
            for r, m in scored
            if "Hits@1" in m and (v := m["Hits@1"].value) is not None
        }
        row.rounds.append(RoundSummary(rnd, len(scored), hits.mean, _signature_counts(scored), per_question))
    if len(row.rounds) == 1:
        row.rounds = []
    if twice:
        row.notes.append(
            f"{twice} queries were retrieved twice (a gate reroute): the last retrieval is scored"
        )
    return row


def _finals_by_round(
    records: Iterable[QueryRecord], framework: str, retriever: str | None, registry: MetricRegistry
) -> tuple[dict[int, list[Scored]], int]:
    """Feedback round -> each query's final record with its completed metrics, in the order queries were
    first scored; and how many round-0 queries were retrieved more than once."""
    last: dict[str, QueryRecord] = {}  # a local of this call: the row's queries, read once
    twice: set[str] = set()
    for record in records:
        if record.framework != framework:
            continue
        if retriever is not None and record.retrieval.retriever != retriever:
            continue
        before = last.get(record.query_id)
        if before is not None and before.retrieval is not record.retrieval:
            twice.add(record.query_id)
        last[record.query_id] = record
    by_round: dict[int, list[Scored]] = {}
    for record in last.values():
        by_round.setdefault(parse_query_id(record.query_id)[2], []).append(
            (record, _completed(record, registry))
        )
    return by_round, sum(parse_query_id(q)[2] == 0 for q in twice)


def _completed(record: QueryRecord, registry: MetricRegistry) -> dict[str, MetricResult]:
    """Every per-query metric of ``registry`` for ``record``, in registry order: the scorer's value, or
    N/A with the reason where the scorer computed none (no gold, no answer)."""
    out: dict[str, MetricResult] = {}
    for spec in registry.per_query:
        result = record.metrics.get(spec.symbol)
        if result is None:
            if spec.needs_gold and record.gold is None:
                result = na(spec.symbol, "no gold annotations for this query")
            elif record.answer is None:
                result = na(spec.symbol, "no generation event for this query")
            else:
                result = na(spec.symbol, "not scored for this query")
        out[spec.symbol] = result
    return out


def _fill_graph(row: CompareRow, graphs: Sequence[GraphRecord], registry: MetricRegistry) -> None:
    """The row's graph size and its Implementation and Validation metrics from its graph records, or
    notes saying why there are none."""
    columns = registry.columns
    if graphs:
        row.graph_triples = len(graphs[0].event.graph.triples)
        metrics = graphs[-1].metrics
        row.implementation = {k: metrics[k] for k in columns("implementation") if k in metrics}
        row.validation = {k: metrics[k] for k in columns("validation") if k in metrics}
    if not row.implementation:
        row.notes.append(
            "implementation: no extraction events in the trace"
            if row.triples_extracted is None or graphs
            else "implementation: no graph event in the trace (extractions are scored against one)"
        )
    if not graphs:
        row.notes.append("validation: no graph event in the trace")


def _fill_usage(row: CompareRow, round0: Sequence[Scored], registry: MetricRegistry) -> None:
    """The row's usage and gold summaries, RHD, signatures and per-question rates from round 0."""
    from triage_plugins.metrics.usage import rhd_distribution

    columns = registry.columns
    row.queries = len(round0)
    row.usage = {m: _summary(m, (ms[m] for _, ms in round0 if m in ms)) for m in columns("usage")}
    row.distributions = {
        m: [float(ms[m].value) for _, ms in round0 if m in ms and ms[m].value is not None]
        for m in columns("usage")
    }
    if any(r.gold is not None for r, _ in round0):
        row.gold = {m: _summary(m, (ms[m] for _, ms in round0 if m in ms)) for m in columns("gold")}
    rhd = rhd_distribution(ms["RHD"] for _, ms in round0 if "RHD" in ms)
    row.rhd = {("inf" if k == math.inf else str(int(k))): v for k, v in rhd.items()}
    row.signatures = _signature_counts(round0)
    row.per_question = _per_question(round0)


def _signature_counts(scored: Sequence[Scored]) -> dict[str, int]:
    """Chain signature -> queries, in the chain's order, ``"undetermined"`` last."""
    counts = Counter(r.signature or "undetermined" for r, _ in scored)
    ordered = {s: counts[s] for s in SIGNATURES if counts[s]}
    if counts["undetermined"]:
        ordered["undetermined"] = counts["undetermined"]
    return ordered


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
    """One compare row from recorded events, offline: the framework's events are replayed through a
    synchronous scorer (:class:`~triage_plugins.apps.score.Replay`, each query scored once) and its
    first graph event is scored, then :func:`aggregate_records` builds the row.

    :param gold: question id -> gold annotations, attached to retrievals that carry none (a host
        framework does not know the benchmark's gold; the question id is read from :func:`query_id`).
    """
    from triage_plugins.apps.score import Replay, Trace, score_phases
    from triage_plugins.runtime.registrations import metric_registry

    mine = [e for e in events if getattr(e, "framework", None) == framework]
    extractions = [e for e in mine if isinstance(e, ExtractionEvent)]
    graph = next((e for e in mine if isinstance(e, GraphEvent)), None)
    registry = metric_registry()
    replay = Replay(thresholds, registry)
    try:
        if graph is not None:
            replay.use_graph(graph)
        for event in _query_events(mine, retriever, gold):
            replay.feed(event)
        records = list(replay.records())
    finally:
        replay.close()
    graphs: list[GraphRecord] = []
    if graph is not None:
        phases = score_phases(Trace(extractions, graph), ontology, None, registry)
        scored = {k: v for phase in phases.values() for k, v in phase.metrics.items()}
        graphs.append(GraphRecord(framework, graph, scored))
    first_run = extractions[0].run_id if extractions else None
    extracted = sum(len(e.triples) for e in extractions if e.run_id == first_run) if extractions else None
    return aggregate_records(
        records, framework, retriever, mode=mode, registry=registry, graphs=graphs,
        triples_extracted=extracted,
    )  # fmt: skip


def _query_events(
    mine: Sequence[Event], retriever: str | None, gold: Mapping[str, Gold] | None
) -> list[RetrievalEvent | GenerationEvent]:
    """The retrievals of ``retriever`` (gold attached), then the generations of their query ids."""
    retrievals = [
        e for e in mine if isinstance(e, RetrievalEvent) and (retriever is None or e.retriever == retriever)
    ]
    if gold:
        retrievals = [_with_gold(e, gold) for e in retrievals]
    asked = {e.query_id for e in retrievals}
    generations = [e for e in mine if isinstance(e, GenerationEvent) and e.query_id in asked]
    return [*retrievals, *generations]


def _per_question(scored: Sequence[Scored]) -> dict[str, dict[str, float]]:
    """Per-question values of the rates that get intervals: Hits@1 and each chain signature's share
    (a 0/1 indicator per diagnosed question), keyed ``"Hits@1"`` and ``"chain:<signature>"``."""
    out: dict[str, dict[str, float]] = {}
    diagnosed = [(parse_query_id(r.query_id)[0], r.signature) for r, _ in scored if r.signature is not None]
    for sig in sorted({s for _, s in diagnosed} | ({"supported"} if diagnosed else set())):
        out[f"chain:{sig}"] = {qid: float(s == sig) for qid, s in diagnosed}
    hits = {
        parse_query_id(r.query_id)[0]: float(m["Hits@1"].value)
        for r, m in scored
        if "Hits@1" in m and m["Hits@1"].value is not None
    }
    if hits:
        out["Hits@1"] = hits
    return out


def add_intervals(result: CompareResult, questions: Sequence[Question], *, n_resamples: int = 2000) -> None:
    """Fill each row's 95 % intervals (clustered BCa over questions sharing gold entities,
    :mod:`triage_plugins.diagnosis.intervals`) and the paired Hits@1 and ``supported`` differences
    between every two rows, with p-values Holm-adjusted per metric; deterministic for ``result.seed``."""
    from triage_plugins.diagnosis.intervals import (
        metric_seed,
        paired_difference,
        question_clusters,
        rate_interval,
    )
    from triage_plugins.diagnosis.multiple import bca_p_value

    clusters = question_clusters({q.id: (q.gold.entities if q.gold is not None else ()) for q in questions})
    rows = [r for r in result.rows if r.status == "ok"]
    held_out = {q.id for q in questions if not q.rated}
    for row in rows:
        row.rounds = [_held_out(s, held_out, clusters, result.seed, n_resamples) for s in row.rounds]
        for metric, values in sorted(row.per_question.items()):
            iv = rate_interval(
                values, clusters, seed=metric_seed(result.seed, metric), n_resamples=n_resamples
            )
            if iv is not None:
                row.intervals[metric] = iv
    result.differences = []
    for i, a in enumerate(rows):
        for b in rows[i + 1 :]:
            for metric in ("Hits@1", "chain:supported"):
                if metric in a.per_question and metric in b.per_question:
                    iv = paired_difference(
                        a.per_question[metric],
                        b.per_question[metric],
                        clusters,
                        seed=metric_seed(result.seed, metric),
                        n_resamples=n_resamples,
                    )
                    if iv is not None:
                        p = bca_p_value(
                            a.per_question[metric],
                            b.per_question[metric],
                            clusters,
                            seed=metric_seed(result.seed, metric),
                            n_resamples=n_resamples,
                        )
                        result.differences.append(Difference(a.label, b.label, metric, iv, p))
    result.differences = _with_holm(result.differences)


def _latency(round0: Sequence[Scored]) -> dict[str, float | None]:
    """Median retrieval, generation and whole-query seconds of round 0's scored retrievals and their
    answers (closed-book answers left out)."""
    timed = [(r.retrieval.seconds, r.answer.seconds if r.answer is not None else None) for r, _ in round0]
    return {
        "retrieval_median": _median(ret for ret, _ in timed),
        "generation_median": _median(gen for _, gen in timed),
        "query_median": _median(ret + (gen or 0.0) if ret is not None else None for ret, gen in timed),
    }


# --------------------------------------------------------------------------- running




@dataclass
class _Plan:
    """What every row of one comparison shares."""

    corpus: Corpus
    questions: tuple[Question, ...]
    store: Store
    feedback_rounds: int
    seed: int
    thresholds: Mapping[str, float] | None
    progress: Progress
    units: list[str] = field(default_factory=list)


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
    plugins: Iterable[object] | None = None,
    split: bool = True,
) -> CompareResult:
    """Run ``corpus`` through each requested framework in each requested mode; one row per pair.

    :param frameworks: runner names (default: every registered runner, :func:`runner_registry`); an
        unknown name raises :class:`ConfigError` naming the close matches; an unavailable framework
        gives an ``"unavailable"`` row with the reason.
    :param modes: modes to run; for each framework only the modes it supports are run (all of its
        modes when ``None``). A requested mode no selected framework supports raises.
    :param questions: default: the corpus's own questions.
    :param store: where events, metric rows and (namespaced) scores are recorded; default in memory.
    :param plugins: collect runners from these plugin objects instead of the ``triage`` entry points.
    :param split: with feedback rounds, rate half the questions (:func:`split_rated`); ``False`` keeps
        each question's own :attr:`Question.rated` (``evolve-bench --framework``: generated training
        questions rated, the benchmark's test questions held out).
    """
    from triage_plugins.store import is_store, open_store

    if feedback_rounds < 0:
        raise ConfigError(f"feedback rounds must be >= 0, got {feedback_rounds}")
    asked = tuple(questions if questions is not None else corpus.questions)
    feedback_rounds, notes = _input_notes(asked, feedback_rounds)
    if feedback_rounds:
        asked = split_rated(asked, seed) if split else asked
        n_out = sum(not q.rated for q in asked)
        notes.append(
            f"feedback rounds rate {len(asked) - n_out} of {len(asked)} questions; accuracy per round is "
            f"held-out Hits@1 over the {n_out} never rated "
            + (f"(split by question id, seed {seed})" if split else "(the caller's split)")
        )
    registry = runner_registry(plugins)
    selected = registry.select(frameworks)
    notes.extend(registry.errors)
    _check_modes(selected, modes)
    owns = not is_store(store)
    shared: Store = open_store(":memory:" if store is None else store)
    plan = _Plan(corpus, asked, shared, feedback_rounds, seed, thresholds, progress)
    rows: list[CompareRow] = []
    try:
        plan.units.extend(shared.get_param(SCORE_UNITS_PARAM, []) or [])
        for runner in selected:
            rows.extend(_rows_of(runner, modes, plan))
        shared.set_param(SCORE_UNITS_PARAM, sorted(set(plan.units)))
    finally:
        if owns:
            shared.close()
    result = CompareResult(
        rows,
        corpus.name,
        len(asked),
        seed,
        feedback_rounds,
        None if owns and store is None else str(store),
        notes,
    )
    add_intervals(result, asked)
    return result


def run_compare_seeds(
    corpus_of: Callable[[int], Corpus], seeds: Sequence[int], **options: Any
) -> CompareResult:
    """:func:`run_compare` once per corpus seed (``corpus_of(seed)``, e.g. :func:`embedded_corpus`),
    each with ``seed=seed`` and ``options``. One seed gives exactly :func:`run_compare`'s result; with
    more, the result is the first seed's with :attr:`CompareResult.across_seeds` filled
    (:func:`summarize_seeds`) and a note naming the seeds."""
    seeds = tuple(seeds)
    if not seeds:
        raise ConfigError("--seeds must be at least 1")
    results = [run_compare(corpus_of(s), seed=s, **options) for s in seeds]
    first = results[0]
    if len(seeds) > 1:
        first.across_seeds = summarize_seeds(seeds, results)
        first.notes.append(
            f"repeated over corpus seeds {seeds[0]}–{seeds[-1]}: the tables show seed {seeds[0]}; "
            "'Across seeds' gives each row's mean over the seeds with a 95 % t interval"
        )
    return first


def split_rated(questions: Sequence[Question], seed: int) -> tuple[Question, ...]:
    """Half of ``questions`` rated in feedback rounds, half held out (:attr:`Question.rated`): a
    question is held out when the first byte of BLAKE2b(``"<seed>:<id>"``) is odd, so the split
    depends only on the seed and the question's id (the same in every framework and run); with
    two or more questions each side gets at least one."""
    import hashlib

    def odd(q: Question) -> bool:
        return hashlib.blake2b(f"{seed}:{q.id}".encode()).digest()[0] % 2 == 1

    flags = [not odd(q) for q in questions]
    if len(flags) >= 2 and len(set(flags)) == 1:
        flags[0] = not flags[0]
    return tuple(replace(q, rated=f) for q, f in zip(questions, flags, strict=True))


def _held_out(
    s: RoundSummary, held_out: set[str], clusters: Mapping[str, str], seed: int, n_resamples: int
) -> RoundSummary:
    """``s`` with Hits@1 of its held-out and rated questions (and the held-out 95 % interval)."""
    from triage_plugins.diagnosis.intervals import metric_seed, rate_interval

    if not held_out:
        return s
    out = {q: v for q, v in s.per_question.items() if q in held_out}
    rated = [v for q, v in s.per_question.items() if q not in held_out]
    iv = rate_interval(out, clusters, seed=metric_seed(seed, f"held-out@{s.round}"), n_resamples=n_resamples)
    return replace(
        s,
        held_out=statistics.fmean(out.values()) if out else None,
        held_out_n=len(out),
        held_out_interval=iv,
        rated=statistics.fmean(rated) if rated else None,
    )


def _input_notes(asked: Sequence[Question], feedback_rounds: int) -> tuple[int, list[str]]:
    """The feedback rounds that can run on ``asked`` (none without gold), and the notes saying why."""
    notes: list[str] = []
    if not asked:
        notes.append("no questions: only the KG Implementation and Validation metrics are computed")
    if feedback_rounds and not any(q.gold is not None for q in asked):
        notes.append(
            f"{feedback_rounds} feedback round(s) requested but no question has a gold answer: skipped"
        )
        feedback_rounds = 0
    return feedback_rounds, notes


def _check_modes(selected: Sequence[FrameworkRunner], modes: Sequence[str] | None) -> None:
    """Raise when a requested mode is supported by none of the selected runners."""
    if not modes:
        return
    known = {m for r in selected for m in r.modes}
    unknown = [m for m in modes if m not in known]
    if unknown:
        close = sorted(
            {c for m in unknown for c in difflib.get_close_matches(m, sorted(known), n=3, cutoff=0.6)}
        )
        raise ConfigError(
            f"mode(s) {', '.join(unknown)} are not supported by {', '.join(r.name for r in selected)}"
            + (f" (did you mean {', '.join(close)}?)" if close else "")
            + f"; known modes: {', '.join(sorted(known))}"
        )


def _rows_of(runner: FrameworkRunner, modes: Sequence[str] | None, plan: _Plan) -> list[CompareRow]:
    """One row per mode of ``runner`` that was asked for, or one ``"unavailable"`` row saying why not."""
    try:
        ok, why = runner.available()
    except Exception as exc:  # noqa: BLE001 - a broken probe is a report, not a crash
        ok, why = False, f"availability check raised {type(exc).__name__}: {exc}"
    if not ok:
        return [CompareRow(runner.name, "-", "unavailable", why or "not available")]
    run_modes = [m for m in runner.modes if m in modes] if modes else list(runner.modes)
    if not run_modes:
        return [CompareRow(runner.name, "-", "unavailable", "none of the requested modes is supported")]
    rows = []
    for mode in run_modes:
        row = _run_one(runner, mode, plan)
        row.setup = setup_of(runner, mode)
        rows.append(row)
    return rows


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


class _RowCollector(RecordCollector):
    """What a row's scorer broadcast (query and graph records), and the number of triples each
    framework extracted in its first extraction run (counted, the events are not kept)."""

    def __init__(self) -> None:
        super().__init__()
        self.first_run: dict[str, str] = {}
        self.extracted: Counter[str] = Counter()

    @hookimpl
    def triage_extraction(self, event: ExtractionEvent) -> None:
        if self.first_run.setdefault(event.framework, event.run_id) == event.run_id:
            self.extracted[event.framework] += len(event.triples)


def _row_manager(
    runner: FrameworkRunner, mode: str, plan: _Plan
) -> tuple[TriageManager, _RowCollector, str, str]:
    """A fresh synchronous manager for one row, its record collector, store run id and score namespace."""
    from triage_plugins.contract.config import CHAIN_THRESHOLDS, TriageConfig
    from triage_plugins.plugins.usage import UsageRecorder
    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store.scoped import ScopedStore

    run_id = plan.store.start_run(
        "compare",
        {"framework": runner.name, "mode": mode, "seed": plan.seed, "feedback_rounds": plan.feedback_rounds},
    )
    # Scores are namespaced per run as well, so a second compare on the same store starts from 100 again.
    namespace = f"{runner.name}/{mode}@{run_id}"
    config = TriageConfig(
        thresholds={**CHAIN_THRESHOLDS, **(plan.thresholds or {})}, reweight=plan.feedback_rounds > 0
    )
    manager = TriageManager(
        ScopedStore(plan.store, namespace), config=config, entry_points=False, synchronous=True
    )
    manager.run_id = run_id
    # What the benchmark knows travels into every runner's events, so the store's report shows the same
    # gold answers (wrong answers, silent failures) and schema metrics as this table.
    gold = {q.id: q.gold for q in plan.questions if q.gold is not None}
    manager.gold_of = lambda qid: gold.get(parse_query_id(qid)[0])
    manager.ontology = plan.corpus.ontology
    if manager.scorer is None:  # the default scorer blocked (TRIAGE_DISABLE_PLUGINS): the row needs one
        manager.register(UsageRecorder(manager), name="triage.compare.scorer")
    collector = _RowCollector()
    manager.register(collector, name="triage.compare.collector")
    plan.units.extend(f"{namespace}:{u}" for u in ("triple", "chunk"))
    return manager, collector, run_id, namespace


def _run_one(runner: FrameworkRunner, mode: str, plan: _Plan) -> CompareRow:
    """Run ``runner`` in ``mode`` and summarize the records its manager scored; a failure is a
    ``"failed"`` row."""
    framework = getattr(runner, "framework", runner.name)
    retriever_of = getattr(runner, "retriever_of", None)
    retriever = retriever_of(mode) if callable(retriever_of) else mode
    manager, collector, run_id, namespace = _row_manager(runner, mode, plan)
    started = time.perf_counter()
    try:
        try:
            runner.run(
                plan.corpus,
                plan.questions,
                mode,
                manager,
                feedback_rounds=plan.feedback_rounds,
                seed=plan.seed,
                progress=plan.progress,
            )
            manager.flush()
        except Exception as exc:  # noqa: BLE001 - one framework failing must not stop the others
            log.warning("compare: %s/%s failed: %s", runner.name, mode, exc, exc_info=exc)
            return CompareRow(
                runner.name, mode, "failed", f"{type(exc).__name__}: {exc}", time.perf_counter() - started
            )
        seconds = time.perf_counter() - started
        try:
            row = aggregate_records(
                collector.take(),
                framework,
                retriever,
                mode=mode,
                registry=manager.metrics,
                graphs=collector.graphs,
                triples_extracted=collector.extracted.get(framework),
            )
        except Exception as exc:  # noqa: BLE001
            log.warning("compare: summarizing %s/%s failed: %s", runner.name, mode, exc, exc_info=exc)
            return CompareRow(
                runner.name, mode, "failed", f"summarizing failed: {type(exc).__name__}: {exc}", seconds
            )
    finally:
        manager.close()  # ends the run once, with its dropped/undelivered counts and write failures
    return _finish_row(row, runner, manager, plan, namespace, seconds, framework, retriever)


def _mark_not_comparable(row: CompareRow, declared: Any) -> None:
    """Replace the metrics a runner declares not comparable in this mode (``runner.not_comparable``:
    mode -> metric -> why) by N/A summaries with the reason, so the table never prints a number that
    looks like the other rows'; the per-question values (and so the interval) are dropped too."""
    if not isinstance(declared, Mapping):
        return
    reasons = declared.get(row.mode) or {}
    for metric, why in sorted(reasons.items()):
        for table in (row.usage, row.gold or {}):
            old = table.get(metric)
            if old is not None:
                table[metric] = MetricSummary(metric, None, None, 0, old.n + old.na, f"not comparable: {why}")
        row.per_question.pop(metric, None)
        row.distributions.pop(metric, None)
        row.notes.append(f"{metric} not comparable: {why}")


def _finish_row(
    row: CompareRow,
    runner: FrameworkRunner,
    manager: TriageManager,
    plan: _Plan,
    namespace: str,
    seconds: float,
    framework: str,
    retriever: str | None,
) -> CompareRow:
    """Name the row after the runner and add its time, score moves and notes."""
    row.framework = runner.name
    row.seconds = seconds
    row.score_moves = _score_moves(plan.store, namespace)
    _mark_not_comparable(row, getattr(runner, "not_comparable", None))
    if manager.failures:
        failed = ", ".join(f"{p}.{h} ({e}) ×{n}" for (p, h, e), n in sorted(manager.failures.items()))
        row.notes.append(f"plugin errors (skipped): {failed}")
    if not row.queries and plan.questions:
        row.notes.append(
            f"no retrieval event with framework={framework!r} and retriever={retriever!r} was recorded"
        )
    return row
