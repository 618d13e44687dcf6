"""The scorer: a default plugin scoring each query once (TRIAGE §4.3 metrics and the §4.5 chain).

Each scoring step is assembled into one frozen :class:`~triage_plugins.contract.records.QueryRecord`
(DESIGN §4 "Scoring once"), written to the store from the record and broadcast through
``triage_query_scored(record)``; the OTel exporter, the gate, ``triage score`` and ``triage compare``
read the record instead of computing the metrics again. The gate's decision on a query (seen by a
``triage_gate`` wrapper) travels in the query's later records.

The metrics are the per-query usage metrics of the manager's metric registry
(:attr:`~triage_plugins.runtime.manager.TriageManager.metrics`: the built-ins plus those plugins register
through ``triage_register_metrics``, read on the first event), written by their ``stage``. On
``triage_retrieval`` it computes the ``"retrieval"`` ones (QGR, ERC, ERP, RRS, RPC, RHD, and with gold
GPC, RPP, RPR, CC) and a provisional signature from the pre-generation links; on
``triage_generation`` it completes the ``"generation"`` ones (AGR, AUR, ARF, with gold Hits@1 and F1),
the ``"closed_book"`` ones (KNI) once both a ``context="retrieved"`` and a ``context="none"`` answer
arrived, and the final signature. Rows go to ``manager.store`` (scope ``"query"``, scope id = query
id), one per metric with the value or ``None`` and its reason, plus a row named ``"signature"``:

* ``value`` is ``None`` and ``reason`` is the signature name (``"connectivity_gap"`` ...);
* ``details["phase"]`` is ``"retrieval"`` (provisional: only QGR → ERC → RRS read) or
  ``"generation"`` (the whole chain); the most recent row of a query is its current signature;
* ``details`` also gives ``stage`` (the remediation stage, or ``None``), ``evaluated`` (the links
  that had a value) and ``failed`` (the failing link's metric, or ``None``);
* when no link could be evaluated (no mentions supplied and no graph to ground them) the row's reason
  is ``"undetermined"`` and ``details["signature"]`` is ``None``.

Gold metrics are written only for queries that carry gold annotations. Events without mentions are
grounded with a :class:`~triage_plugins.kg.grounding.Grounder` over the last graph seen, built lazily
on first need. The scorer is the one owner of pending query state: one map keyed by
``(framework, query id)`` holds each query's retrieval, answers, gate decision, its retrieval-phase
record until the answer (:meth:`UsageRecorder.retrieval_record`, read by the gate) and answers that
overtook their retrieval; it is an LRU of ``options["usage.max_queries"]`` queries (default 10 000).
With ``replay=True`` (``triage score``) the same map holds each query's events until
:meth:`UsageRecorder.finish` scores it once.

On the manager's delivery worker the rows of a whole batch are written together, in one store
transaction at the end of the batch (``TriageManager.at_batch_end``), before the batch counts as
delivered: ``flush()`` still returns with every row stored. Called directly or on a synchronous
manager, each event's rows are written at once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.records import QueryRecord, RecordCollector
from triage_plugins.diagnosis.chain import diagnose
from triage_plugins.metrics.per_query import usage_metrics
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.contract.events import GateDecision, GenerationEvent, GraphEvent, RetrievalEvent
    from triage_plugins.contract.records import Phase
    from triage_plugins.diagnosis.chain import Diagnosis
    from triage_plugins.metrics.result import MetricResult

__all__ = ["UsageRecorder", "collect_records"]

log = logging.getLogger("triage.plugins.usage")


@dataclass(slots=True)
class _Query:
    """One query's pending state: the scorer's one per-query map holds these."""

    retrieval: RetrievalEvent | None  # None: only generations so far (they overtook the retrieval)
    answer: GenerationEvent | None = None
    closed_book: GenerationEvent | None = None
    closed_book_written: bool = False
    scored: QueryRecord | None = None  # the retrieval-phase record, until the first answer reuses it
    gate: GateDecision | None = None
    early: list[GenerationEvent] = field(default_factory=list)  # generations awaiting the retrieval


class UsageRecorder:
    """Default plugin scoring each query once: records, rows and signatures.

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (reads ``.store``, ``.config``
        and ``.run_id``; broadcasts through ``emit_query_scored`` when it has one).
    :param registry: the metrics to compute (default: the manager's registry, read on first use).
    :param replay: offline scoring (``triage score``): hold each query's events (the last retrieval, answer
        and closed-book answer) until :meth:`finish`, then score it once with every per-query metric (a
        query never answered holds the generation metrics as N/A) into its one final record.
    """

    #: Options this plugin reads (``TriageConfig.options``), with their defaults.
    triage_options: ClassVar[Mapping[str, Any]] = {"usage.max_queries": 10_000}

    def __init__(
        self, manager: PluginContext, *, registry: MetricRegistry | None = None, replay: bool = False
    ) -> None:
        self._manager = manager
        self._graph: Any = None
        self._aliases: dict[str, str | None] = {}
        self._grounder: Any = None
        self._queries: OrderedDict[tuple[str, str], _Query] = OrderedDict()  # the one per-query map
        self._lock = threading.Lock()
        self._max = int(manager.config.options.get("usage.max_queries", 10_000))
        self._registry: MetricRegistry | None = registry
        self._replay = replay
        self._names: dict[tuple[str, bool], tuple[str, ...]] = {}
        self._needed: dict[tuple[str, bool], frozenset[str]] = {}
        self._theta: tuple[MetricRegistry, Any, dict[str, float]] | None = None
        self._pending: list[tuple[Any, str | None, list[Any]]] = []  # (store, run id, rows) this batch
        at_batch_end = getattr(manager, "at_batch_end", None)
        self._batched = bool(at_batch_end is not None and at_batch_end("triage.usage", self.write_pending))

    # ------------------------------------------------------------------ state

    def _grounder_for(self) -> Any:
        if self._grounder is None and self._graph is not None:
            from triage_plugins.kg.grounding import shared_grounder

            self._grounder = shared_grounder(self._graph, self._aliases)
        return self._grounder

    @property
    def grounder(self) -> Any:
        """The grounder over the last graph seen (``None`` before any graph event)."""
        with self._lock:
            return self._grounder_for()

    def _remember(self, key: tuple[str, str], entry: _Query) -> None:
        self._queries[key] = entry
        self._queries.move_to_end(key)
        while len(self._queries) > self._max:
            self._queries.popitem(last=False)

    def __len__(self) -> int:
        """How many queries are held in memory."""
        return len(self._queries)

    def metrics(self) -> MetricRegistry:
        """The manager's metric registry, read on first use. A plugin whose registration fails is
        logged and its metrics are left out: the built-in ones are still recorded."""
        if self._registry is None:
            if not hasattr(self._manager, "plugins"):
                self._registry = BUILTIN_METRICS
            else:
                try:
                    self._registry = self._manager.metrics
                except ConfigError as exc:
                    log.error("metrics registered by plugins are not recorded: %s", exc)
                    self._registry = BUILTIN_METRICS
        return self._registry

    def _stage(self, stage: str, gold: bool) -> tuple[str, ...]:
        """The per-query metrics written at ``stage``; gold-requiring ones only for gold queries."""
        names = self._names.get((stage, gold))
        if names is None:
            specs = self.metrics().per_query
            names = tuple(s.symbol for s in specs if s.stage == stage and (gold or not s.needs_gold))
            self._names[(stage, gold)] = names
        return names

    def _compute(self, phase: str, gold: bool) -> frozenset[str]:
        """The symbols computed at ``phase``: those written then, and the chain links
        of that phase (the signature reads them). At ``"generation"`` the retrieval-time ones are reused."""
        needed = self._needed.get((phase, gold))
        if needed is None:
            if phase == "retrieval":
                written = self._stage("retrieval", gold)
                links = {s.symbol for s in self.metrics().chain if s.stage == "retrieval"}
            else:
                written = self._stage("generation", gold) + self._stage("closed_book", gold)
                links = {s.symbol for s in self.metrics().chain if s.stage != "retrieval"}
            needed = self._needed[(phase, gold)] = frozenset(written) | links
        return needed

    # ------------------------------------------------------------------ hooks

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        with self._lock:
            self._graph = event.graph
            self._aliases = dict(event.aliases)
            self._grounder = None

    @hookimpl
    def triage_retrieval(self, event: RetrievalEvent) -> None:
        key = (event.framework, event.query_id)
        if self._replay:
            self._hold(key, event)
            return
        with self._lock:
            held = self._queries.get(key)
            early = held.early if held is not None else []
            entry = _Query(event)
            self._remember(key, entry)
            grounder = self._grounder_for()
        gold = event.gold is not None
        metrics = usage_metrics(
            event, grounder=grounder, metrics=self.metrics(), only=self._compute("retrieval", gold)
        )
        entry.scored = self._record(entry, "retrieval", metrics, self._stage("retrieval", gold), chain=True)
        self._publish(entry.scored)
        for generation in early:
            self.triage_generation(generation)

    def retrieval_record(self, event: RetrievalEvent) -> QueryRecord | None:
        """The record of the retrieval phase when this very ``event`` was scored and its answer has not
        arrived yet (the gate reads its chain links from it), else ``None``."""
        with self._lock:
            entry = self._queries.get((event.framework, event.query_id))
            record = entry.scored if entry is not None else None
        return record if record is not None and record.retrieval is event else None

    @hookimpl(wrapper=True)
    def triage_gate(self, event: RetrievalEvent) -> Generator[None, Any, Any]:
        """See the final gate decision on the host's thread; it joins the query on the worker."""
        decision = yield
        if decision is not None:
            defer = getattr(self._manager, "defer", None)
            try:
                if defer is not None:
                    defer(self._gate_seen, event, decision)
            except Exception as exc:  # noqa: BLE001 - a wrapper is not isolated: never raise into the host
                log.debug("gate decision not queued: %s", exc)
        return decision

    def _gate_seen(self, event: RetrievalEvent, decision: GateDecision) -> None:
        with self._lock:
            entry = self._queries.get((event.framework, event.query_id))
            if entry is not None and entry.retrieval is not None:
                entry.gate = decision

    @hookimpl
    def triage_generation(self, event: GenerationEvent) -> None:
        key = (event.framework, event.query_id)
        if self._replay:
            self._hold(key, None, event)
            return
        with self._lock:
            entry = self._queries.get(key)
            if entry is None or entry.retrieval is None:
                # The answer overtook its retrieval (or the retrieval was evicted): keep it a while.
                if entry is None:
                    entry = _Query(None)
                self._remember(key, entry)
                entry.early.append(event)
                log.debug("generation for %s arrived before its retrieval", event.query_id)
                return
            self._queries.move_to_end(key)
            if event.context == "none":
                entry.closed_book = event
            else:
                entry.answer = event
                entry.closed_book_written = False
            answer, closed, retrieval = entry.answer, entry.closed_book, entry.retrieval
            known = entry.scored.metrics if entry.scored is not None else None
            if answer is not None:
                entry.scored = None  # used once: kept no longer than the answer (less for the GC to scan)
            grounder = self._grounder_for()
        if answer is None:
            return  # a closed-book answer alone: KNI waits for the retrieved-context answer
        gold = retrieval.gold is not None
        only = None if known is None else self._compute("generation", gold)
        metrics = usage_metrics(
            retrieval, answer, grounder=grounder, closed_book=closed, metrics=self.metrics(), only=only
        )
        if known is not None:
            metrics = {**known, **metrics}
        if event.context == "none":
            defined = tuple(n for n in self._stage("closed_book", gold) if metrics[n].value is not None)
            if not entry.closed_book_written and defined:
                entry.closed_book_written = True
                self._publish(self._record(entry, "closed_book", metrics, defined, chain=False))
            return
        names = self._stage("generation", gold)
        if closed is not None:
            names += self._stage("closed_book", gold)
            entry.closed_book_written = True
        self._publish(self._record(entry, "generation", metrics, names, chain=True))

    # ------------------------------------------------------------------ replay (offline scoring)

    def _hold(
        self, key: tuple[str, str], retrieval: RetrievalEvent | None, generation: GenerationEvent | None = None
    ) -> None:
        """File a replayed event under its query: the last of each part is scored. A query's place is
        where its first retrieval came (an entry opened by an earlier answer moves there)."""
        with self._lock:
            entry = self._queries.get(key)
            if entry is None:
                entry = self._queries[key] = _Query(None)
            if retrieval is not None:
                if entry.retrieval is None:
                    self._queries.move_to_end(key)
                entry.retrieval = retrieval
            elif generation is not None and generation.context == "none":
                entry.closed_book = generation
            else:
                entry.answer = generation

    def held(self) -> list[tuple[str, str]]:
        """The ``(framework, query id)`` of every query held for :meth:`finish`, in scoring order."""
        with self._lock:
            return list(self._queries)

    def holds_retrieval(self, framework: str, query_id: str) -> bool:
        """Whether a retrieval of this query is held (a replay notes a query retrieved twice)."""
        with self._lock:
            entry = self._queries.get((framework, query_id))
            return entry is not None and entry.retrieval is not None

    def finish(self, framework: str, query_id: str) -> int:
        """Score a held query once, publish its one final record, and forget it.

        :return: how many of its generation events went unscored for want of a retrieval (0 or more).
        """
        with self._lock:
            entry = self._queries.pop((framework, query_id), None)
            grounder = self._grounder_for()
        if entry is None:
            return 0
        retrieval, answer, closed = entry.retrieval, entry.answer, entry.closed_book
        if retrieval is None:
            return (answer is not None) + (closed is not None)
        gold = retrieval.gold is not None
        if answer is None:  # never answered: the retrieval's record, generation metrics N/A
            metrics = usage_metrics(retrieval, grounder=grounder, metrics=self.metrics())
            self._publish(self._record(entry, "retrieval", metrics, self._stage("retrieval", gold), chain=True))
            return 0
        metrics = usage_metrics(retrieval, answer, grounder=grounder, closed_book=closed, metrics=self.metrics())
        names = self._stage("generation", gold) + (self._stage("closed_book", gold) if closed else ())
        self._publish(self._record(entry, "generation", metrics, names, chain=True))
        return 0

    # ------------------------------------------------------------------ records

    def _thresholds(self) -> dict[str, float]:
        """The registry's θ overridden by the config's, remembered while the registry is the same
        object and the config's θ are equal (a dict compare, not a merge, per record)."""
        registry, config = self.metrics(), self._manager.config.thresholds
        cached = self._theta
        if cached is None or cached[0] is not registry or cached[1] != config:
            cached = self._theta = (registry, dict(config), {**registry.thresholds(), **config})
        return cached[2]

    def _record(
        self,
        entry: _Query,
        phase: Phase,
        metrics: dict[str, MetricResult],
        settled: tuple[str, ...],
        *,
        chain: bool,
    ) -> QueryRecord:
        """The one record of this scoring step (the chain read when ``chain``)."""
        retrieval = entry.retrieval
        assert retrieval is not None  # only a query with its retrieval is scored
        return QueryRecord(
            retrieval.framework,
            retrieval.query_id,
            phase,
            retrieval,
            metrics,
            settled,
            diagnose(metrics, self._thresholds()) if chain else None,
            entry.gate,
            entry.answer if phase != "retrieval" else None,
            entry.closed_book if phase != "retrieval" else None,
        )

    def _publish(self, record: QueryRecord) -> None:
        """Write the record's rows, then broadcast it (``triage_query_scored``)."""
        self._write(record)
        emit = getattr(self._manager, "emit_query_scored", None)
        if emit is not None:
            emit(record)

    # ------------------------------------------------------------------ writing

    def _write(self, record: QueryRecord) -> None:
        store = getattr(self._manager, "store", None)
        if store is None:
            return
        from triage_plugins.store import MetricRow

        retrieval = record.retrieval
        framework, retriever, qid = retrieval.framework, retrieval.retriever, retrieval.query_id
        fields = {"framework": framework, "retriever": retriever}
        # MetricRow.from_result's rows, unchecked when the results are in their normal form
        rows = MetricRow.from_results("query", qid, record.settled_results(), framework, retriever)
        if record.diagnosis is not None:
            rows.append(_signature_row(retrieval, record.diagnosis, record.phase, fields))
        run_id = getattr(self._manager, "run_id", None)
        if self._batched and self._manager.batching():
            with self._lock:
                self._pending.append((store, run_id, rows))
            return
        store.record_metrics(rows, run_id=run_id)

    def write_pending(self) -> None:
        """Write the rows buffered during a delivery batch: one ``record_metrics`` per store and run."""
        with self._lock:
            pending, self._pending = self._pending, []
        groups: dict[tuple[int, str | None], list[tuple[Any, str | None, list[Any]]]] = {}
        for entry in pending:
            groups.setdefault((id(entry[0]), entry[1]), []).append(entry)
        failed: Exception | None = None
        for entries in groups.values():
            store, run_id = entries[0][0], entries[0][1]
            try:
                store.record_metrics([row for _, _, rows in entries for row in rows], run_id=run_id)
                continue
            except Exception:  # noqa: BLE001 - retried per event below: one bad row loses one event's rows
                log.warning("batched write of %d queries' metric rows failed; one by one", len(entries))
            for _, _, rows in entries:
                try:
                    store.record_metrics(rows, run_id=run_id)
                except Exception as exc:  # noqa: BLE001 - write the others first
                    failed = exc
        if failed is not None:
            raise failed  # the manager counts it


def _signature_row(retrieval: RetrievalEvent, d: Diagnosis, phase: str, fields: dict) -> Any:
    """The ``"signature"`` row of one chain reading (see the module docstring)."""
    from triage_plugins.store import MetricRow

    failed = next((s.metric for s in d.steps if s.status == "fail"), None)
    name = d.signature if d.defined else "undetermined"
    details = {
        "phase": phase,
        "signature": d.signature if d.defined else None,
        "stage": d.remediation.stage if d.defined else None,
        "evaluated": ",".join(d.evaluated),
        "failed": failed,
    }
    return MetricRow("query", retrieval.query_id, "signature", None, name, details=details, **fields)


def collect_records(manager: Any, prefix: str) -> RecordCollector:
    """Register a :class:`~triage_plugins.contract.records.RecordCollector` on ``manager`` as
    ``<prefix>.records`` (``triage probe``, ``triage demo``), and a scorer as ``<prefix>.scorer`` when
    it has none (no default plugins, or ``triage.usage`` blocked)."""
    if manager.scorer is None:
        manager.register(UsageRecorder(manager), f"{prefix}.scorer")
    collector = RecordCollector()
    manager.register(collector, f"{prefix}.records")
    return collector
