"""What the commands hand to the report: the records and rows :mod:`triage_plugins.report` renders.

Each command of :mod:`triage_plugins.apps` builds one of these and hands it to a renderer here; its
``to_dict()`` is the command's ``--json`` form. They hold results and their JSON shape, and compute
nothing, so the report renders them without importing a command (issue 32: ``apps`` → ``report``,
never back):

* ``triage score``: :class:`ScoreReport` of :class:`PhaseReport` and :class:`QueryScore`, with the
  :class:`BadLines` ``--skip-bad`` passed over;
* ``triage compare``: :class:`CompareResult` of :class:`CompareRow` (:class:`MetricSummary`,
  :class:`RoundSummary`), its :class:`Difference` s and, over seeds, :class:`SeedSummary`;
* ``triage probe``: :class:`ProbeResult` of :class:`Observation` and :class:`Stratum` (TRIAGE Table 5);
* ``triage demo``: :class:`DemoResult`, and :class:`DemoSeeds` of :class:`SeedInterval` over seeds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from triage_plugins.adapter_kit.runner import Setup
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry
from triage_plugins.reference.probe_builder import PAPER_TABLE5, PAPER_THETA_ERC
from triage_plugins.reference.retrievers import FEEDBACK_RETRIEVER

if TYPE_CHECKING:
    from pathlib import Path

    from triage_plugins.diagnosis.calibration import Interval
    from triage_plugins.diagnosis.chain import Diagnosis
    from triage_plugins.metrics.result import MetricResult
    from triage_plugins.reference.probe_builder import ProbeQuestion

__all__ = [
    "BadLines",
    "CompareResult",
    "CompareRow",
    "DemoResult",
    "DemoSeeds",
    "Difference",
    "MetricSummary",
    "Observation",
    "PhaseReport",
    "ProbeResult",
    "QueryScore",
    "RoundSummary",
    "ScoreReport",
    "SeedInterval",
    "SeedStat",
    "SeedSummary",
    "Status",
    "Stratum",
    "result_dict",
    "rhd_key",
]


# --------------------------------------------------------------------------- triage score


def result_dict(result: MetricResult) -> dict[str, Any]:
    return {
        "value": result.value,
        "reason": result.reason,
        "n": result.n,
        # _json_safe inlined for the finite values (most): one call per value was ~5 % of `triage score`
        "details": {
            k: v if not isinstance(v, float) or math.isfinite(v) else _json_safe(v)
            for k, v in result.details.items()
        },
    }


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "inf" if value > 0 else ("-inf" if value < 0 else None)
    return value


def rhd_key(k: int | float) -> str:
    return "inf" if k == math.inf else str(int(k))


@dataclass(slots=True)
class PhaseReport:
    """One TKG phase: its metrics, or why it was skipped."""

    name: str
    metrics: dict[str, MetricResult] = field(default_factory=dict)
    skipped: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"skipped": self.skipped, "metrics": {k: result_dict(v) for k, v in self.metrics.items()}}


@dataclass(slots=True)
class QueryScore:
    """The usage metrics of one query and its chain diagnosis (``None`` when undetermined)."""

    query_id: str
    framework: str
    retriever: str
    query: str
    metrics: dict[str, MetricResult]
    diagnosis: Diagnosis | None
    undetermined: str | None = None
    answered: bool = False

    @property
    def signature(self) -> str | None:
        return self.diagnosis.signature if self.diagnosis is not None else None

    def row(self) -> dict[str, Any]:
        """A flat row: ids, each metric's value (``None`` when N/A) and the signature."""
        out: dict[str, Any] = {
            "query_id": self.query_id,
            "framework": self.framework,
            "retriever": self.retriever,
            "query": self.query,
        }
        out.update({name: r.value for name, r in self.metrics.items()})
        out["signature"] = self.signature
        return out

    def to_dict(self) -> dict[str, Any]:
        d = self.diagnosis
        return {
            "query_id": self.query_id,
            "framework": self.framework,
            "retriever": self.retriever,
            "query": self.query,
            "answered": self.answered,
            "signature": self.signature,
            "undetermined": self.undetermined,
            "stage": d.remediation.stage if d is not None else None,
            "chain": [
                {
                    "metric": s.metric,
                    "value": s.value,
                    "threshold": s.threshold,
                    "status": s.status,
                    "reason": s.reason,
                }
                for s in (d.steps if d is not None else ())
            ],
            "metrics": {k: result_dict(v) for k, v in self.metrics.items()},
        }


@dataclass(slots=True)
class ScoreReport:
    """Everything :func:`~triage_plugins.apps.score.score_events` found: phases, per-query usage,
    aggregates, notes."""

    phases: dict[str, PhaseReport]
    queries: list[QueryScore]
    aggregate: dict[str, MetricResult]
    rhd: dict[int | float, float]
    signatures: dict[str, int]
    counts: dict[str, int]
    notes: list[str] = field(default_factory=list)
    registry: MetricRegistry = field(default=BUILTIN_METRICS, repr=False)
    #: Queries scored in all; ``queries`` may hold only the first of them (a streamed file).
    n_queries: int | None = None
    #: The lines skipped as not events (``triage score --skip-bad``), or ``None`` when none were allowed.
    bad_lines: BadLines | None = None

    @property
    def total_queries(self) -> int:
        return len(self.queries) if self.n_queries is None else self.n_queries

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per query (for :func:`~triage_plugins.apps.score.calibrate_rows` and CSV export)."""
        return [q.row() for q in self.queries]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``math.inf`` written as ``"inf"``)."""
        return {
            "counts": dict(self.counts),
            "phases": {k: v.to_dict() for k, v in self.phases.items()},
            "usage": {
                "aggregate": {k: result_dict(v) for k, v in self.aggregate.items()},
                "rhd": {rhd_key(k): v for k, v in self.rhd.items()},
                "signatures": dict(self.signatures),
            },
            "queries": [q.to_dict() for q in self.queries],
            "notes": list(self.notes),
        }


@dataclass(slots=True)
class BadLines:
    """Lines of a trace file that are not events, skipped by ``triage score --skip-bad``.

    :param keep: how many ``(line number, reason)`` pairs to keep for the summary.
    """

    count: int = 0
    first: list[tuple[int, str]] = field(default_factory=list)
    keep: int = 5

    def add(self, number: int, reason: str) -> None:
        self.count += 1
        if len(self.first) < self.keep:
            self.first.append((number, reason))

    def summary(self, path: str | Path) -> str:
        """One line: how many lines were skipped, and the first few with their reasons."""
        shown = "; ".join(f"line {n}: {why}" for n, why in self.first)
        more = f"; {self.count - len(self.first)} more" if self.count > len(self.first) else ""
        return f"{self.count} bad line(s) of {path} skipped ({shown}{more})"


# --------------------------------------------------------------------------- triage compare


Status = Literal["ok", "failed", "unavailable"]


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
    """One feedback round of a row: its queries, accuracy (Hits@1 mean over every question) and
    signature counts; with a held-out split (:func:`~triage_plugins.apps.compare.split_rated`), Hits@1
    of the questions that were never rated, with its 95 % interval, and of the rated ones
    (:func:`~triage_plugins.apps.compare.add_intervals` fills them)."""

    round: int
    queries: int
    hits_at_1: float | None
    signatures: Mapping[str, int]
    per_question: Mapping[str, float] = field(default_factory=dict)  # question id -> Hits@1
    held_out: float | None = None
    held_out_n: int = 0
    held_out_interval: Interval | None = None
    rated: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "queries": self.queries,
            "hits_at_1": self.hits_at_1,
            "held_out_hits_at_1": self.held_out,
            "held_out_questions": self.held_out_n,
            "held_out_interval": None
            if self.held_out_interval is None
            else _interval_dict(self.held_out_interval),
            "rated_hits_at_1": self.rated,
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
    per_question: dict[str, dict[str, float]] = field(default_factory=dict)  # metric -> question -> value
    intervals: dict[str, Interval] = field(default_factory=dict)
    setup: Setup = field(default_factory=Setup)

    @property
    def label(self) -> str:
        return f"{self.framework} / {self.mode}"

    @property
    def display_label(self) -> str:
        """:attr:`label`, followed by ``"(non-default: …)"`` when the row's query set-up is not the
        framework's default (#18 item 3)."""
        return f"{self.label} {self.setup.label}" if self.setup.label else self.label

    def interval_text(self, metric: str, digits: int = 3) -> str:
        """The ``"[low, high]"`` cell of ``metric``'s 95 % interval; ``""`` without one."""
        from triage_plugins.diagnosis.intervals import format_interval

        return format_interval(self.intervals.get(metric), digits)

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
            "intervals": {k: _interval_dict(v) for k, v in self.intervals.items()},
            "setup": {"description": self.setup.description, "default": self.setup.default},
            "notes": list(self.notes),
        }


def _interval_dict(iv: Interval) -> dict[str, Any]:
    return {
        "estimate": iv.estimate,
        "low": iv.low,
        "high": iv.high,
        "confidence": iv.confidence,
        "method": iv.method,
        "n": iv.n,
        "n_clusters": iv.n_clusters,
    }


@dataclass(frozen=True, slots=True)
class Difference:
    """A paired difference of one per-question rate between two rows (``a`` − ``b``) over the
    questions both answered, with its clustered BCa interval; significant when it excludes 0.
    ``p_value`` is the bootstrap's two-sided p; ``p_holm`` the same Holm-adjusted over every
    difference of ``metric`` in the comparison (:mod:`triage_plugins.diagnosis.multiple`)."""

    a: str
    b: str
    metric: str
    interval: Interval
    p_value: float | None = None
    p_holm: float | None = None

    @property
    def significant(self) -> bool:
        """The interval excludes 0 (one test alone, not corrected for the others)."""
        return self.interval.low > 0.0 or self.interval.high < 0.0

    @property
    def significant_holm(self) -> bool:
        """Significant at 1 − confidence after Holm's correction over the metric's family."""
        return self.p_holm is not None and self.p_holm < 1 - self.interval.confidence

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "metric": self.metric,
            "significant": self.significant,
            "p_value": self.p_value,
            "p_holm": self.p_holm,
            "significant_holm": self.significant_holm,
            **_interval_dict(self.interval),
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
    differences: list[Difference] = field(default_factory=list)
    across_seeds: SeedSummary | None = None  # ``--seeds N`` with N > 1; the rows are the first seed's

    def to_dict(self) -> dict[str, Any]:
        out = {
            "corpus": self.corpus,
            "questions": self.questions,
            "seed": self.seed,
            "feedback_rounds": self.feedback_rounds,
            "store": self.store,
            "rows": [r.to_dict() for r in self.rows],
            "differences": [d.to_dict() for d in self.differences],
            "notes": list(self.notes),
        }
        if self.across_seeds is not None:
            out["across_seeds"] = self.across_seeds.to_dict()
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, allow_nan=False, default=str)


@dataclass(frozen=True, slots=True)
class SeedStat:
    """One rate of one row over corpus seeds: its value per seed (``None`` where the row did not
    complete), the mean of the defined ones and their t interval
    (:func:`~triage_plugins.diagnosis.intervals.seed_interval`)."""

    values: tuple[float | None, ...]
    mean: float | None
    interval: Interval | None

    def to_dict(self) -> dict[str, Any]:
        iv = self.interval
        return {
            "values": list(self.values),
            "mean": self.mean,
            "low": None if iv is None else iv.low,
            "high": None if iv is None else iv.high,
            "confidence": None if iv is None else iv.confidence,
            "method": None if iv is None else iv.method,
        }


@dataclass
class SeedSummary:
    """``triage compare --seeds N``: per row label, per rate (``Hits@1``, ``chain:<signature>``), its
    :class:`SeedStat` over the corpus seeds."""

    seeds: tuple[int, ...]
    rows: dict[str, dict[str, SeedStat]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seeds": list(self.seeds),
            "rows": {label: {m: s.to_dict() for m, s in stats.items()} for label, stats in self.rows.items()},
        }


# --------------------------------------------------------------------------- triage probe


@dataclass(frozen=True)
class Observation:
    """One question × retriever run."""

    question_id: str
    category: str
    retriever: str
    ERC: float | None
    RRS: float | None
    QGR: float | None
    RPC: float | None
    CC: float | None
    hits1: float | None
    answer: str


@dataclass(frozen=True)
class Stratum:
    """One row of Table 5: CC % and Hits@1 % with clustered BCa intervals."""

    name: str
    n: int
    cc: float | None
    cc_ci: tuple[float, float] | None
    hits1: float | None
    hits1_ci: tuple[float, float] | None


@dataclass
class ProbeResult:
    """Everything ``triage probe`` measured."""

    kb: str
    questions: list[ProbeQuestion]
    observations: list[Observation]
    pooled: list[Stratum]
    per_retriever: dict[str, list[Stratum]]
    theta_erc: float | None
    theta_ci: tuple[float, float] | None
    youden_j: float | None
    category_counts: dict[str, int]
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def rows(items: list[Stratum]) -> list[dict[str, Any]]:
            return [s.__dict__ for s in items]

        return {
            "kb": self.kb,
            "categories": self.category_counts,
            "observations": [o.__dict__ for o in self.observations],
            "pooled": rows(self.pooled),
            "per_retriever": {k: rows(v) for k, v in self.per_retriever.items()},
            "theta_erc": self.theta_erc,
            "theta_erc_ci": self.theta_ci,
            "youden_j": self.youden_j,
            "paper": {"table5": PAPER_TABLE5, "theta_erc": PAPER_THETA_ERC},
            "notes": self.notes,
        }


# --------------------------------------------------------------------------- triage demo


@dataclass
class DemoResult:
    """What ``triage demo`` measured."""

    seed: int
    world: dict[str, int]
    implementation: dict[str, MetricResult]
    validation: dict[str, MetricResult]
    usage: ScoreReport
    accuracy: dict[str, float]
    rounds: list[dict[str, Any]]
    traced: QueryScore | None
    store: str | None
    seconds: float
    dropped_events: int
    plugin_failures: int
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        def metric(r: MetricResult) -> dict[str, Any]:
            return {"value": r.value, "reason": r.reason, "n": r.n}

        return {
            "seed": self.seed,
            "world": self.world,
            "implementation": {k: metric(v) for k, v in self.implementation.items()},
            "validation": {k: metric(v) for k, v in self.validation.items()},
            "usage": self.usage.to_dict(),
            "accuracy_static": self.accuracy,
            "feedback_rounds": self.rounds,
            "traced_query": self.traced.to_dict() if self.traced is not None else None,
            "store": self.store,
            "seconds": round(self.seconds, 3),
            "dropped_events": self.dropped_events,
            "plugin_failures": self.plugin_failures,
            "notes": self.notes,
        }


@dataclass(frozen=True)
class SeedInterval:
    """Mean over seeds of one quantity with its two-sided Student-t interval (``None`` with a reason
    when it is undefined: fewer than two seeds)."""

    values: tuple[float, ...]
    mean: float | None
    low: float | None
    high: float | None
    confidence: float = 0.95
    reason: str | None = None

    @classmethod
    def of(cls, values: Sequence[float], confidence: float = 0.95) -> SeedInterval:
        """mean ± t(1 − α/2, n − 1) · s / √n over the seeds (a t-interval: seeds are independent worlds)."""
        import math
        import statistics

        from scipy.stats import t

        vals = tuple(values)
        if not vals:
            return cls(vals, None, None, None, confidence, "no seed measured it")
        mean = statistics.fmean(vals)
        if len(vals) < 2:
            return cls(vals, mean, None, None, confidence, "an interval needs at least 2 seeds")
        half = (
            float(t.ppf(0.5 + confidence / 2, len(vals) - 1)) * statistics.stdev(vals) / math.sqrt(len(vals))
        )
        return cls(vals, mean, mean - half, mean + half, confidence)

    def to_dict(self) -> dict[str, Any]:
        return {
            "values": list(self.values),
            "mean": self.mean,
            "low": self.low,
            "high": self.high,
            "confidence": self.confidence,
            "method": "Student t-interval over seeds",
            "reason": self.reason,
        }


@dataclass
class DemoSeeds:
    """``triage demo --seeds N``: the first seed's full result, and held-out accuracy of the feedback
    retriever before (static) and after the last feedback round, per seed, with intervals."""

    first: DemoResult
    seeds: list[int]
    before: SeedInterval
    after: SeedInterval
    gain: SeedInterval  # after − before, paired by seed
    feedback_rounds: int

    def to_dict(self) -> dict[str, Any]:
        out = self.first.to_dict()
        out["seeds"] = {
            "seeds": self.seeds,
            "retriever": FEEDBACK_RETRIEVER,
            "feedback_rounds": self.feedback_rounds,
            "store": "only the first seed's runs are written to the store; the others run in memory",
            "held_out_accuracy_static": self.before.to_dict(),
            "held_out_accuracy_after": self.after.to_dict(),
            "gain": self.gain.to_dict(),
        }
        return out
