"""What ``triage report STORE`` shows, read from a live deployment's store (TRIAGE §4.5 "Closing the loop").

:func:`build_store_report` turns the store's rows into plain data:

* per framework × retriever, the per-query metric rows written by the usage recorder, in time order:
  summaries (median, mean, N/A count), rolling means over the last ``window`` defined values, the RHD
  distribution (eq. 33) and the current signature per query (its most recent ``signature`` row);
* the KG-update triggers that would have fired: one :class:`~triage_plugins.diagnosis.chain.WindowTrigger` per
  chain metric fed the queries in order, with the diagnosed stage and the remediation levers;
* the worst queries per failing signature (lowest value of the failing link first), each with its chain
  traced by :func:`~triage_plugins.diagnosis.chain.diagnose` and its query text from the retrieval event;
* the latest graph-scope metrics per framework (KG Implementation §4.1, Validation §4.2);
* contribution-score movement (EvoRAG §4.3): the most promoted and most suppressed triples or chunks,
  raw score against the initial 100, and how many updates each had.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent, Triple
from triage_plugins.diagnosis.chain import CHAIN, SIGNATURES, ChainStep, WindowTrigger, diagnose
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry
from triage_plugins.metrics.result import MetricResult
from triage_plugins.metrics.usage import rhd_distribution

if TYPE_CHECKING:
    from triage_plugins.contract.events import Event
    from triage_plugins.plugins.feedback import Move
    from triage_plugins.store import MetricRow, ScoreRow, Store

__all__ = [
    "CHAIN_METRICS",
    "GroupReport",
    "QueryDetail",
    "QueryDetails",
    "QueryTrace",
    "ScoreMove",
    "ScoreUnitReport",
    "StoreReport",
    "TriggerFired",
    "build_store_report",
    "load_query_details",
    "parse_since",
    "summary_metrics",
]

CHAIN_METRICS: tuple[str, ...] = tuple(link.metric for link in CHAIN)


def summary_metrics(registry: MetricRegistry = BUILTIN_METRICS) -> tuple[str, ...]:
    """The per-query metrics a group summarizes (median, mean, N/A): the registry's headline ones."""
    return tuple(spec.symbol for spec in registry.per_query if spec.headline)


SUMMARY_METRICS: tuple[str, ...] = summary_metrics()
INITIAL_SCORE = 100.0


@dataclass(frozen=True, slots=True)
class QueryTrace:
    """One query with its metrics and its chain, as the usage recorder stored them (``query``, the text,
    is filled for the worst queries shown)."""

    query_id: str
    query: str | None
    ts: float
    signature: str | None
    metrics: Mapping[str, MetricResult]
    steps: tuple[ChainStep, ...]

    @property
    def failed(self) -> ChainStep | None:
        return next((s for s in self.steps if s.status == "fail"), None)


@dataclass(frozen=True, slots=True)
class TriggerFired:
    """A KG-update trigger that fired: after which query, what crossed, and what to do."""

    metric: str
    statistic: str
    value: float
    threshold: float
    window: int
    position: int
    query_id: str
    ts: float
    signature: str | None
    stage: str | None
    levers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class MetricStats:
    """Median, mean, N/A count of a per-query metric, and the mean of the last window."""

    name: str
    median: float | None
    mean: float | None
    n: int
    na: int
    last_window: float | None


@dataclass
class GroupReport:
    """One framework × retriever of the store."""

    framework: str
    retriever: str
    queries: list[QueryTrace]
    stats: dict[str, MetricStats]
    rolling: dict[str, list[tuple[float, float | None]]]
    signatures: dict[str, int]
    rhd: dict[str, float]
    triggers: list[TriggerFired]
    worst: dict[str, list[QueryTrace]]

    @property
    def label(self) -> str:
        return f"{self.framework} / {self.retriever}"


@dataclass(frozen=True, slots=True)
class ScoreMove:
    """A contribution score: raw value, its change from the initial 100, its update count."""

    id: str
    raw: float
    delta: float
    n_updates: int
    updated_at: float
    reason: str | None = None  # why it moved most (plugins.feedback.MOVE_REASONS), from the replay
    by: tuple[tuple[str, float], ...] = ()  # the feedback that moved it most: (query id, step)


@dataclass
class ScoreUnitReport:
    """Score movement of one unit (``"triple"``, ``"chunk"``, or a compare namespace's unit).

    :param reasons: moved scores per reason they moved (the learning audit, #30): a score lowered
        because it led to wrong answers is told from one lowered as a bystander.
    """

    unit: str
    total: int
    moved: int
    promoted: list[ScoreMove]
    suppressed: list[ScoreMove]
    reasons: dict[str, int] = field(default_factory=dict)


@dataclass
class StoreReport:
    """Everything :func:`build_store_report` read."""

    store: str
    generated_at: float
    since: float | None
    window: int
    counts: dict[str, int]
    runs: int
    groups: list[GroupReport]
    graph: dict[str, dict[str, MetricResult]]
    scores: list[ScoreUnitReport]
    notes: list[str] = field(default_factory=list)
    thresholds: dict[str, float] = field(default_factory=dict)
    #: Events the runs lost, summed over runs: queue full (``dropped``), still queued at close
    #: (``undelivered``). Metrics computed from the store miss these.
    dropped: int = 0
    undelivered: int = 0
    #: Per-query drill-down (question, retrieved triples and chunks, answer, gold), bounded; ``None``
    #: when not loaded (``detail_queries=0``).
    details: QueryDetails | None = None


# --------------------------------------------------------------------------- helpers

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def parse_since(text: str | None, *, now: float | None = None) -> float | None:
    """``--since``: a duration back from now (``"30m"``, ``"2h"``, ``"7d"``), an ISO date/time
    (UTC when no zone is given) or epoch seconds; returns epoch seconds."""
    if text is None or not str(text).strip():
        return None
    text = str(text).strip()
    now = time.time() if now is None else now
    m = _RELATIVE.match(text)
    if m:
        return now - float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
    try:
        epoch = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(epoch):
            raise ConfigError(f"--since {text!r}: epoch seconds must be a finite number")
        return epoch
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ConfigError(
            f"--since {text!r}: expected a duration (30m, 2h, 7d), an ISO date (2026-01-31T12:00) or epoch seconds"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def _result(row: MetricRow) -> MetricResult:
    return MetricResult(row.name, row.value, row.reason, row.n, dict(row.details))


def _stats(name: str, results: Sequence[MetricResult], window: int) -> MetricStats:
    values = [float(r.value) for r in results if r.value is not None]
    na = sum(1 for r in results if r.value is None)
    last = values[-window:]
    return MetricStats(
        name,
        statistics.median(values) if values else None,
        math.fsum(values) / len(values) if values else None,
        len(values),
        na,
        math.fsum(last) / len(last) if last else None,
    )


def _rolling(results: Sequence[MetricResult | None], window: int) -> list[tuple[float, float | None]]:
    """Rolling mean of the last ``window`` defined values at each query position (``None`` before 2)."""
    kept: list[float] = []
    out: list[tuple[float, float | None]] = []
    for i, r in enumerate(results, 1):
        if r is not None and r.value is not None:
            kept.append(float(r.value))
        tail = kept[-window:]
        out.append((float(i), math.fsum(tail) / len(tail) if len(tail) >= 2 else None))
    return out


def _query_text(store: Store, framework: str, query_id: str) -> str | None:
    """The query text of the last retrieval event of ``query_id`` (indexed lookup; ``None`` when absent)."""
    text = None
    for event in store.events("retrieval", framework=framework, query_id=query_id):
        if isinstance(event, RetrievalEvent):
            text = event.query
    return text


# --------------------------------------------------------------------------- building


def _traces(
    per_query: dict[str, dict[str, MetricRow]], first_ts: dict[str, float], thresholds: Mapping[str, float]
) -> list[QueryTrace]:
    """Each query's metrics and chain, in time order; its signature is the stored one when there is one."""
    traces: list[QueryTrace] = []
    for qid in sorted(per_query, key=lambda q: (first_ts[q], q)):
        rows = per_query[qid]
        metrics = {name: _result(r) for name, r in rows.items() if name != "signature"}
        diagnosis = diagnose(metrics, thresholds)
        stored = rows.get("signature")
        if stored is not None:
            signature = stored.details.get("signature") if stored.reason == "undetermined" else stored.reason
        else:
            signature = diagnosis.signature if diagnosis.defined else None
        traces.append(QueryTrace(qid, None, first_ts[qid], signature, metrics, diagnosis.steps))
    return traces


def _summaries(traces: list[QueryTrace], registry: MetricRegistry) -> tuple[str, ...]:
    """The metrics summarized: the registry's headline per-query ones, then any recorded metric the
    registry does not know (a plugin's, recorded by another process), in first-seen order."""
    unknown = dict.fromkeys(n for t in traces for n in t.metrics if n not in registry)
    return (*summary_metrics(registry), *unknown)


def _triggers(
    traces: list[QueryTrace], window: int, thresholds: Mapping[str, float], statistic: str
) -> list[TriggerFired]:
    """The KG-update triggers of each chain metric fed the queries in order (TRIAGE §4.5)."""
    triggers: list[TriggerFired] = []
    for metric in CHAIN_METRICS:
        trigger = WindowTrigger(
            metric,
            window,
            statistic,  # type: ignore[arg-type]
            threshold=None if statistic == "failing_rate" else thresholds.get(metric),
            query_threshold=thresholds.get(metric) if statistic == "failing_rate" else None,
            min_count=min(window, max(2, window // 2)),
        )
        for position, t in enumerate(traces, 1):
            signal = trigger.update(t.metrics.get(metric))
            if signal is not None:
                triggers.append(
                    TriggerFired(
                        signal.metric, signal.statistic, signal.value, signal.threshold, signal.window,
                        position, t.query_id, t.ts, signal.signature, signal.stage, signal.levers,
                    )
                )  # fmt: skip
    triggers.sort(key=lambda s: (s.position, s.metric))
    return triggers


def _badness(t: QueryTrace) -> tuple[float, str]:
    step = t.failed
    value = step.value if step is not None and step.value is not None else -1.0
    return (value, t.query_id)


def _worst(
    traces: list[QueryTrace], text_of: Callable[[str], str | None], worst_n: int
) -> dict[str, list[QueryTrace]]:
    """The worst queries of each failing signature, lowest value of the failing link first."""
    worst: dict[str, list[QueryTrace]] = {}
    for sig in SIGNATURES:
        if sig == "supported":
            continue
        hits = [t for t in traces if t.signature == sig]
        if not hits:
            continue
        # only the queries shown get their text (one indexed lookup each, not a scan of every event)
        worst[sig] = [replace(t, query=text_of(t.query_id)) for t in sorted(hits, key=_badness)[:worst_n]]
    return worst


def _group(
    framework: str,
    retriever: str,
    per_query: dict[str, dict[str, MetricRow]],
    first_ts: dict[str, float],
    text_of: Callable[[str], str | None],
    *,
    window: int,
    thresholds: Mapping[str, float],
    statistic: str,
    worst_n: int,
    registry: MetricRegistry = BUILTIN_METRICS,
) -> GroupReport:
    traces = _traces(per_query, first_ts, thresholds)
    stats = {
        m: _stats(m, [t.metrics[m] for t in traces if m in t.metrics], window)
        for m in _summaries(traces, registry)
        if any(m in t.metrics for t in traces)
    }
    rolling = {m: _rolling([t.metrics.get(m) for t in traces], window) for m in CHAIN_METRICS}
    signatures = Counter(t.signature or "undetermined" for t in traces)
    ordered = {s: signatures[s] for s in (*SIGNATURES, "undetermined") if signatures[s]}
    rhd = rhd_distribution(t.metrics["RHD"] for t in traces if "RHD" in t.metrics)
    return GroupReport(
        framework,
        retriever,
        traces,
        stats,
        rolling,
        ordered,
        {("inf" if k == math.inf else str(int(k))): v for k, v in rhd.items()},
        _triggers(traces, window, thresholds, statistic),
        _worst(traces, text_of, worst_n),
    )


#: Feedback events the learning audit replays at most (the rest are counted in a note).
AUDIT_LIMIT = 5000


def _score_units(store: Store, since: float | None, top: int, notes: list[str]) -> list[ScoreUnitReport]:
    from triage_plugins.store.scoped import SCORE_UNITS_PARAM

    units = ["triple", "chunk", *(store.get_param(SCORE_UNITS_PARAM, []) or [])]
    out: list[ScoreUnitReport] = []
    sequence: list[Event] | None = None  # the feedback to replay, read once for both units
    for unit in dict.fromkeys(units):
        rows = store.get_scores(unit)
        if not rows:
            continue
        why: dict[str, list[Move]] = {}
        if unit in ("triple", "chunk"):
            if sequence is None:
                sequence = _feedback_sequence(store, notes)
            why = _audit(sequence, unit)
        moves = [
            _score_move(i, r, why.get(i, ()))
            for i, r in rows.items()
            if since is None or r.updated_at >= since
        ]
        moved = [m for m in moves if m.delta != 0.0]
        promoted = sorted((m for m in moved if m.delta > 0), key=lambda m: (-m.delta, m.id))[:top]
        suppressed = sorted((m for m in moved if m.delta < 0), key=lambda m: (m.delta, m.id))[:top]
        reasons = Counter(m.reason for m in moved if m.reason is not None)
        out.append(ScoreUnitReport(unit, len(moves), len(moved), promoted, suppressed, dict(reasons)))
    return out


def audit_line(reasons: Mapping[str, int]) -> str:
    """One line of the learning audit: how many moved scores moved most for each reason."""
    from triage_plugins.plugins.feedback import MOVE_REASONS

    parts = [f"{reasons[r]} {r}" for r in MOVE_REASONS if reasons.get(r)]
    return "learning audit (scores by why they moved most): " + ", ".join(parts)


def _score_move(key: str, row: ScoreRow, steps: Sequence[Move]) -> ScoreMove:
    """A stored score with what the replay says moved it: the reason that moved it furthest and the
    three largest steps."""
    by_reason: dict[str, float] = defaultdict(float)
    for m in steps:
        by_reason[m.reason] += m.delta
    reason = max(by_reason, key=lambda r: (abs(by_reason[r]), r)) if by_reason else None
    largest = sorted(steps, key=lambda m: -abs(m.delta))[:3]
    raw = float(row.raw)
    return ScoreMove(
        key,
        raw,
        raw - INITIAL_SCORE,
        row.n_updates,
        row.updated_at,
        reason,
        tuple((m.query_id, m.delta) for m in largest),
    )


def _feedback_sequence(store: Store, notes: list[str]) -> list[Event]:
    """The store's feedback events (at most :data:`AUDIT_LIMIT`, a note past it), each after the
    retrieval and generation of its query: what the learner was sent."""
    import itertools

    lookup = getattr(store, "last_event", None)
    if lookup is None:
        return []
    feedback = list(itertools.islice(store.events("feedback"), AUDIT_LIMIT + 1))
    if len(feedback) > AUDIT_LIMIT:
        notes.append(f"learning audit: only the first {AUDIT_LIMIT} feedback events were replayed")
        feedback = feedback[:AUDIT_LIMIT]
    sequence: list[Event] = []
    for fb in feedback:
        for kind in ("retrieval", "generation"):
            e = lookup(kind, framework=fb.framework, query_id=fb.query_id)
            if e is not None:
                sequence.append(e)
        sequence.append(fb)
    return sequence


def _audit(sequence: Sequence[Event], unit: str) -> dict[str, list[Move]]:
    """The learning audit: ``sequence`` replayed through a fresh learner
    (:func:`~triage_plugins.plugins.feedback.replay_moves`), each step filed under its unit key."""
    from triage_plugins.plugins.feedback import replay_moves

    out: dict[str, list[Move]] = defaultdict(list)
    for m in replay_moves(sequence, unit):
        out[m.key].append(m)
    return out


# --------------------------------------------------------------------------- per-query drill-down

#: The verdicts of the query table, in the order the table lists them first.
VERDICTS: tuple[str, ...] = ("silent failure", "wrong", "no gold", "right")
CHUNK_CHARS = 600


def verdict(signature: str | None, hits1: MetricResult | None) -> str:
    """``"silent failure"`` (the chain says ``supported`` yet Hits@1 = 0, TRIAGE's silent failure),
    ``"wrong"`` (Hits@1 = 0), ``"right"`` (Hits@1 > 0) or ``"no gold"`` (Hits@1 undefined or absent)."""
    if hits1 is None or hits1.value is None:
        return "no gold"
    if hits1.value > 0:
        return "right"
    return "silent failure" if signature == "supported" else "wrong"


@dataclass(frozen=True, slots=True)
class QueryDetail:
    """One query as its events recorded it: what was asked, retrieved and answered, against the gold.

    ``triples``, ``nodes`` and ``chunks`` are cut to the loader's bounds; the ``*_total`` fields give
    the sizes before the cut. Chunk texts are cut to :data:`CHUNK_CHARS` characters."""

    framework: str
    retriever: str
    trace: QueryTrace
    mentions: tuple[str, ...]
    grounding: Mapping[str, str | None]
    triples: tuple[Triple, ...]
    triples_total: int
    nodes: tuple[str, ...]
    chunks: tuple[tuple[str, str], ...]
    chunks_total: int
    answer: str | None
    answer_nodes: tuple[str, ...]
    gold: tuple[str, ...] | None
    recorded: bool

    @property
    def key(self) -> str:
        return f"{self.framework}/{self.retriever}/{self.trace.query_id}"

    @property
    def seeds(self) -> tuple[str, ...]:
        """The query entities: the nodes the mentions grounded to."""
        return tuple(dict.fromkeys(n for n in self.grounding.values() if n))

    @property
    def hits1(self) -> MetricResult | None:
        return self.trace.metrics.get("Hits@1")

    @property
    def verdict(self) -> str:
        return verdict(self.trace.signature, self.hits1)


@dataclass
class QueryDetails:
    """The queries embedded in the HTML report: at most ``max_queries`` of ``total``, silent failures
    first, then wrong answers, then queries without gold, then right ones (time order within each)."""

    queries: list[QueryDetail]
    total: int
    max_queries: int
    max_triples: int
    notes: list[str] = field(default_factory=list)


def _priority(group: GroupReport, t: QueryTrace) -> tuple[int, int, float, str]:
    rank = VERDICTS.index(verdict(t.signature, t.metrics.get("Hits@1")))
    return (rank, 0 if t.signature not in (None, "supported") else 1, t.ts, group.label)


def _last_of(store: Store, kind: str, framework: str, query_id: str, retriever: str) -> list[object]:
    """Events of one query (indexed lookup), those of ``retriever`` when the id is shared."""
    events = list(store.events(kind, framework=framework, query_id=query_id))
    if kind == "retrieval":
        own = [e for e in events if getattr(e, "retriever", None) == retriever]
        events = own or events
    return events


def _detail(
    store: Store, group: GroupReport, t: QueryTrace, max_triples: int, max_chunks: int
) -> QueryDetail:
    fw, ret = group.framework, group.retriever
    retrievals = [
        e for e in _last_of(store, "retrieval", fw, t.query_id, ret) if isinstance(e, RetrievalEvent)
    ]
    answers = [
        e
        for e in _last_of(store, "generation", fw, t.query_id, ret)
        if isinstance(e, GenerationEvent) and e.context == "retrieved"
    ]
    r = retrievals[-1] if retrievals else None
    g = answers[-1] if answers else None
    triples = r.subgraph.triples if r is not None else ()
    nodes = list(
        dict.fromkeys(
            [
                *(r.subgraph.nodes if r else ()),
                *(n for x in triples[:max_triples] for n in (x.subject, x.object)),
            ]
        )
    )
    chunks = r.chunks if r is not None else ()
    return QueryDetail(
        framework=fw,
        retriever=ret,
        trace=replace(t, query=r.query if r is not None else t.query),
        mentions=r.mentions if r is not None else (),
        grounding=dict(r.grounding) if r is not None else {},
        triples=tuple(triples[:max_triples]),
        triples_total=len(triples),
        nodes=tuple(nodes[: 2 * max_triples]),
        chunks=tuple(
            (c.id, c.text[:CHUNK_CHARS] + ("…" if len(c.text) > CHUNK_CHARS else ""))
            for c in chunks[:max_chunks]
        ),
        chunks_total=len(chunks),
        answer=g.answer if g is not None else None,
        answer_nodes=tuple(dict.fromkeys(n for n in g.answer_grounding.values() if n))
        if g is not None
        else (),
        gold=r.gold.answers if r is not None and r.gold is not None else None,
        recorded=r is not None,
    )


def load_query_details(
    store: Store,
    groups: Sequence[GroupReport],
    *,
    max_queries: int = 500,
    max_triples: int = 200,
    max_chunks: int = 20,
) -> QueryDetails:
    """The per-query drill-down of the HTML report, read from the retrieval and generation events
    (two indexed lookups per query kept). Bounded: ``max_queries`` queries (silent failures first, see
    :class:`QueryDetails`), ``max_triples`` triples and ``max_chunks`` chunks each; cuts are noted."""
    ranked = sorted(((g, t) for g in groups for t in g.queries), key=lambda gt: _priority(*gt))
    kept = ranked[: max(0, max_queries)]
    details = [_detail(store, g, t, max_triples, max_chunks) for g, t in kept]
    notes: list[str] = []
    if len(ranked) > len(kept):
        notes.append(
            f"{len(kept)} of {len(ranked)} queries embedded (at most {max_queries}: silent failures, then "
            "wrong answers, then queries without gold, then right ones)"
        )
    cut = sum(1 for d in details if d.triples_total > len(d.triples))
    if cut:
        notes.append(
            f"{cut} queries retrieved more than {max_triples} triples: only the first {max_triples} are shown"
        )
    missing = sum(1 for d in details if not d.recorded)
    if missing:
        notes.append(
            f"{missing} queries have metrics but no retrieval event in this store (pruned or never recorded)"
        )
    return QueryDetails(details, len(ranked), max_queries, max_triples, notes)


def _query_rows(
    store: Store, since: float | None
) -> tuple[dict[tuple[str, str], dict[str, dict[str, MetricRow]]], dict[tuple[str, str], dict[str, float]]]:
    """Per (framework, retriever): each query's latest row per metric, and its first timestamp."""
    by_group: dict[tuple[str, str], dict[str, dict[str, MetricRow]]] = defaultdict(dict)
    first_ts: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    for row in store.metrics(scope="query"):
        if since is not None and (row.ts or 0.0) < since:
            continue
        key = (row.framework or "(unknown)", row.retriever or "(unknown)")
        rows = by_group[key].setdefault(row.scope_id, {})
        rows[row.name] = row  # rows come in recording order: the latest value of a metric wins
        ts = row.ts or 0.0
        first_ts[key][row.scope_id] = min(first_ts[key].get(row.scope_id, ts), ts)
    return by_group, first_ts


def _faults_note(runs: list) -> str:
    """The runs' failed store writes (``RunRow.faults``) by cause, summed; ``""`` when none failed."""
    from triage_plugins.store.guard import describe_faults, sum_faults

    total = sum_faults(getattr(r, "faults", None) or {} for r in runs)
    text = describe_faults(total)
    if not text:
        return ""
    faulty = sum(1 for r in runs if (getattr(r, "faults", None) or {}).get("failed"))
    return f"{text}, in {faulty} of {len(runs)} runs"


def _lost_note(runs: list, dropped: int, undelivered: int) -> str:
    lossy = sum(1 for r in runs if r.dropped or r.undelivered)
    return (
        f"{dropped + undelivered} events never reached this store ({dropped} dropped with the queue "
        f"full, {undelivered} still queued at close, in {lossy} of {len(runs)} runs): "
        "the metrics above miss them"
    )


def _graph_metrics(store: Store, since: float | None) -> dict[str, dict[str, MetricResult]]:
    """Graph-scope metric rows by graph id (a later row of a metric replaces an earlier one)."""
    graph: dict[str, dict[str, MetricResult]] = {}
    for row in store.metrics(scope="graph"):
        if since is not None and (row.ts or 0.0) < since:
            continue
        graph.setdefault(row.scope_id, {})[row.name] = _result(row)
    return graph


def build_store_report(
    store: Store,
    *,
    since: float | None = None,
    window: int = 20,
    thresholds: Mapping[str, float] | None = None,
    statistic: str = "mean",
    worst: int = 5,
    top_scores: int = 10,
    metrics: MetricRegistry | None = None,
    detail_queries: int = 500,
    detail_triples: int = 200,
) -> StoreReport:
    """Read a store into a :class:`StoreReport` (see the module docstring).

    :param since: only metric rows and score updates at or after this epoch time.
    :param window: W of the rolling means and of the triggers (TRIAGE §4.5), at least 2.
    :param statistic: the triggers' statistic: ``"mean"``, ``"quantile"`` or ``"failing_rate"``.
    :param metrics: whose metrics are summarized (default
        :func:`~triage_plugins.runtime.registrations.metric_registry`); recorded metrics it does not know
        are summarized too, after its own.
    :param detail_queries: how many queries get a drill-down (:func:`load_query_details`; 0: none).
    :param detail_triples: at most this many retrieved triples per drilled-down query.
    """
    if window < 2:
        raise ConfigError(f"window must be >= 2 (one query never triggers an update), got {window}")
    from triage_plugins.runtime.registrations import metric_registry

    registry = metric_registry() if metrics is None else metrics
    theta = {**registry.thresholds(), **(thresholds or {})}
    notes: list[str] = []

    by_group, first_ts = _query_rows(store, since)
    groups: list[GroupReport] = []
    for framework, retriever in sorted(by_group):
        groups.append(
            _group(
                framework,
                retriever,
                by_group[(framework, retriever)],
                first_ts[(framework, retriever)],
                lambda qid, fw=framework: _query_text(store, fw, qid),
                window=window,
                thresholds=theta,
                statistic=statistic,
                worst_n=worst,
                registry=registry,
            )
        )
    if not groups:
        notes.append(
            "no per-query metric rows" + (" since the given time" if since else "") + " in this store"
        )

    runs = store.runs()
    dropped = sum(r.dropped for r in runs)
    undelivered = sum(r.undelivered for r in runs)
    if dropped or undelivered:
        notes.insert(0, _lost_note(runs, dropped, undelivered))
    faults = _faults_note(runs)
    if faults:
        notes.insert(0, faults)
    return StoreReport(
        store=str(getattr(store, "url", store)),
        generated_at=time.time(),
        since=since,
        window=window,
        counts=store.counts(),
        runs=len(runs),
        groups=groups,
        graph=_graph_metrics(store, since),
        scores=_score_units(store, since, top_scores, notes),
        notes=notes,
        thresholds={m: theta[m] for m in CHAIN_METRICS},
        dropped=dropped,
        undelivered=undelivered,
        details=load_query_details(store, groups, max_queries=detail_queries, max_triples=detail_triples)
        if detail_queries > 0
        else None,
    )
