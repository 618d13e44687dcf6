"""The OpenTelemetry exporter: TRIAGE metrics as OpenInference spans, a default plugin (issue #17).

**Off unless configured the standard way.** :func:`otel_plugin` (the ``triage.otel`` factory) turns
spans on when one of these holds, in this order, and otherwise registers an inert object with no
hooks (no provider is created, no span is made, nothing is imported from the SDK):

1. option ``otel.tracer_provider`` is a ``TracerProvider`` (yours; used as it is, never shut down);
2. the host already set a global tracer provider (``opentelemetry.trace.set_tracer_provider``, as a
   user of a framework traced by OpenInference instrumentors has): our spans join the host's
   traces through the host's own processors and exporters, and **no second provider is created**;
3. ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set: one SDK
   provider per process (resource from ``OTEL_SERVICE_NAME`` / ``OTEL_RESOURCE_ATTRIBUTES``, default
   service name ``triage``) exporting OTLP/HTTP through a ``BatchSpanProcessor``. It is not made the
   global provider, so a host that sets its own later is not refused.

``OTEL_SDK_DISABLED=true`` or option ``otel.enabled = False`` keeps it off; ``TRIAGE_DISABLE_PLUGINS=
triage.otel`` blocks it. Set the host's provider up before the manager is created (before
``instrument()``): the choice is made once, when the plugin loads.

**Spans** (OpenInference semantic conventions, ``openinference.span.kind``). The metrics and chain
readings are the scorer's (``triage_query_scored`` and ``triage_graph_scored`` records), never
recomputed here: with the ``triage.usage`` scorer blocked there are no retrieval or answer spans, and
with ``triage.implementation`` blocked no indexing trace.

* ``triage.retrieval`` — RETRIEVER, one per retrieval event: ``input.value`` (the query),
  ``retrieval.documents.<i>.document.{id,content,score,metadata}`` for the retrieved triples then
  chunks (metadata: unit, endpoints, provenance chunk ids from the last graph event, locator), the
  subgraph size (``triage.subgraph.triples`` / ``.nodes``), every retrieval-stage usage metric as
  ``triage.<m>`` (``triage.qgr``, ``triage.erc``, …; an undefined one is omitted and
  ``triage.<m>.reason`` says why), and the provisional chain signature with its remediation stage and
  levers (``triage.signature``, ``triage.remediation.stage``, ``triage.remediation.lever``);
* ``triage.gate`` — GUARDRAIL, the gate's decision (``triage.gate.action``, reason, suggestion);
* ``triage.generation`` — CHAIN, the answer (``output.value``) with the generation metrics (AGR, AUR,
  ARF, KNI, and with gold Hits@1, F1) and the final signature;
* ``triage.indexing`` — CHAIN, emitted when a graph is scored: one ``triage.extraction`` child per
  chunk and run since the last graph (triple count, TCS, EC of the chunk when it has several runs) and
  a ``triage.graph`` child with the validation metrics (DNR, SRR, OC, LC, …).

Every span carries ``triage.query_id`` (or none for indexing) and ``triage.framework``: that is how
``triage feedback pull`` maps a Phoenix annotation back to the query it rates.

**Parenting.** Notifications are delivered on the manager's background worker, so the plugin sets
``manager.carry_context`` to :func:`pin_current_span`: the manager then delivers each event inside
a copy of the emitting thread's ``contextvars``, the current span pinned as it was at emit time, and
the host's current span (the OpenInference span of the framework call that emitted, under its
``query`` span; a span of your own) is the parent. Without a host span the retrieval span is the root
of the query's trace and the gate and generation spans are its children. Span end times are the delivery time
(``triage.seconds`` holds the event's own duration), except the gate span, timed on the host's thread.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.lru import LRU

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.contract.events import (
        ExtractionEvent,
        GateDecision,
        GenerationEvent,
        GraphEvent,
        RetrievalEvent,
    )
    from triage_plugins.contract.records import GraphRecord, QueryRecord

__all__ = ["OPTIONS", "OtelExporter", "OtelOff", "metric_attribute", "otel_plugin", "pin_current_span"]

log = logging.getLogger("triage.plugins.otel")

#: Options ``triage.otel`` reads (``TriageConfig.options``), with their defaults.
OPTIONS: Mapping[str, Any] = {
    "otel.enabled": None,  # None: on when configured (see the module docstring); False: off
    "otel.tracer_provider": None,  # your TracerProvider
    "otel.max_documents": 50,  # retrieval.documents per span, within the SDK's attribute limit (the
    # rest counted in triage.documents.omitted)
    "otel.content_chars": 2000,  # document.content / input / output cut to this many characters
    "otel.max_queries": 10_000,  # queries remembered (retrieval span context, early gate decisions)
    "otel.max_extractions": 100_000,  # extraction events kept until the next graph event
}

SCOPE = "triage_plugins.otel"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")

_OWN: dict[str, Any] = {}  # the one provider this process created (rule 3), shared by every manager
_OWN_LOCK = threading.Lock()


def metric_attribute(symbol: str) -> str:
    """The span attribute of a metric: ``"ERC"`` → ``"triage.erc"``, ``"Hits@1"`` → ``"triage.hits_at_1"``."""
    name = re.sub(r"[^a-z0-9]+", "_", symbol.lower().replace("@", "_at_")).strip("_")
    return f"triage.{name}"


# --------------------------------------------------------------------------- the factory


class OtelOff:
    """What ``triage.otel`` registers when tracing is not configured: no hooks, only the reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"OtelOff({self.reason!r})"


def otel_plugin(manager: PluginContext) -> OtelExporter | OtelOff:
    """The ``triage.otel`` default plugin for ``manager``: an :class:`OtelExporter`, or :class:`OtelOff`."""
    options = getattr(getattr(manager, "config", None), "options", None) or {}
    provider, why = _resolve_provider(options)
    if provider is None:
        log.debug("triage.otel off: %s", why)
        return OtelOff(why)
    exporter = OtelExporter(manager, provider, source=why)
    if hasattr(manager, "carry_context"):
        # deliver events in the host's context, its current span pinned: spans parent to that span
        manager.carry_context = pin_current_span
    return exporter


def pin_current_span() -> None:
    """Replace the current span of this context by an immutable stand-in holding its span context.

    The manager runs it on the emitting thread, inside the context copy it delivers in. It matters
    because the current span may be a proxy that changes: an OpenInference instrumentor may set
    one that, once the framework's span ends, resolves to the span current before it, so read on the
    worker after the query it is no span at all and our spans would start traces of their own.
    """
    try:
        from opentelemetry import context, trace

        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            context.attach(trace.set_span_in_context(trace.NonRecordingSpan(span_context)))
    except Exception as exc:  # noqa: BLE001 - runs on the host's thread: never raise into it
        log.debug("current span not pinned: %s", exc)


otel_plugin.triage_options = OPTIONS  # type: ignore[attr-defined]  # read by TriageManager.declared_options


def _resolve_provider(options: Mapping[str, Any]) -> tuple[Any, str]:
    """(provider, how it was chosen) or (None, why tracing is off)."""
    enabled = options.get("otel.enabled")
    if enabled is not None and not isinstance(enabled, bool):
        raise ConfigError(f"otel.enabled must be True, False or None, got {enabled!r}")
    given = options.get("otel.tracer_provider")
    if given is not None and not callable(getattr(given, "get_tracer", None)):
        raise ConfigError(f"otel.tracer_provider must be a TracerProvider, got {type(given).__name__}")
    if enabled is False:
        return None, "otel.enabled is False"
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None, "OTEL_SDK_DISABLED=true"
    if given is not None:
        return given, "otel.tracer_provider"
    host = _host_provider()
    if host is not None:
        return host, "the host's global tracer provider"
    if any(os.environ.get(v, "").strip() for v in ENDPOINT_VARS):
        return _own_provider(), "OTEL_EXPORTER_OTLP_ENDPOINT"
    return None, "no tracer provider set and no OTEL_EXPORTER_OTLP_ENDPOINT"


def _host_provider() -> Any:
    """The global tracer provider when the host set one (not the API's proxy or no-op default)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        return None
    return provider


def _own_provider() -> Any:
    """This process's SDK provider exporting OTLP/HTTP in batches (created once, on first need)."""
    with _OWN_LOCK:
        if "provider" not in _OWN:
            try:
                from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
                from opentelemetry.sdk.resources import Resource
                from opentelemetry.sdk.trace import TracerProvider
                from opentelemetry.sdk.trace.export import BatchSpanProcessor
            except ImportError as exc:
                raise ImportError(
                    f"OTEL_EXPORTER_OTLP_ENDPOINT is set but {exc.name} is missing: "
                    "pip install 'triage-plugins[otel]'"
                ) from exc
            attributes = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "triage"}
            provider = TracerProvider(resource=Resource.create(attributes))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _OWN["provider"] = provider
        return _OWN["provider"]


# --------------------------------------------------------------------------- the exporter


@dataclass(slots=True)
class _QuerySpans:
    """What one query's later spans need: its retrieval span's context (``None`` until it is made) and
    the gate decisions that came first, as ``(decision, parent, start, end)``."""

    context: Any
    gates: list[tuple[GateDecision, Any, int, int]] = field(default_factory=list)


class OtelExporter:
    """Turns TRIAGE events into OpenInference spans on ``provider`` (see the module docstring).

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (reads ``.config``).
    :param provider: the tracer provider spans are made with.
    :param source: how the provider was chosen (shown by ``triage plugins``).
    """

    triage_options: ClassVar[Mapping[str, Any]] = OPTIONS

    def __init__(self, manager: PluginContext, provider: Any, *, source: str = "explicit") -> None:
        from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes
        from opentelemetry import trace

        from triage_plugins import __version__

        self._manager = manager
        self.provider = provider
        self.source = source
        self._trace = trace
        self._tracer = provider.get_tracer(SCOPE, __version__)
        self._kind_key = SpanAttributes.OPENINFERENCE_SPAN_KIND
        self._kinds = OpenInferenceSpanKindValues
        options = {**OPTIONS, **(getattr(manager.config, "options", None) or {})}
        self._max_documents = int(options["otel.max_documents"])
        self._max_attributes = _attribute_limit(provider)
        self._chars = int(options["otel.content_chars"])
        self._lock = threading.Lock()
        # the one span map: per (framework, query id), the retrieval span's context once it is made, and
        # gate decisions that came before it (their spans wait to be its children)
        self._spans: LRU[tuple[str, str], _QuerySpans] = LRU(int(options["otel.max_queries"]))
        self._extractions: dict[str, list[tuple[ExtractionEvent, int]]] = defaultdict(list)
        self._max_extractions = int(options["otel.max_extractions"])
        self._graph: Any = None
        self._registry: Any = None

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Export what the provider's processors hold (``True`` when the provider has no such call)."""
        flush = getattr(self.provider, "force_flush", None)
        return True if flush is None else bool(flush(timeout_millis))

    # ------------------------------------------------------------------ span plumbing

    def _parent(self, fallback: Any = None) -> Any:
        """The host's current context when it has a span, else a context holding ``fallback``."""
        from opentelemetry import context as otel_context

        current = otel_context.get_current()
        if self._trace.get_current_span(current).get_span_context().is_valid:
            return current
        if fallback is not None:
            return self._trace.set_span_in_context(self._trace.NonRecordingSpan(fallback))
        return None

    def _span(self, name: str, kind: Any, attrs: dict[str, Any], parent: Any, start: int, end: int) -> Any:
        span = self._tracer.start_span(name, context=parent, attributes=attrs, start_time=start)
        span.set_attribute(self._kind_key, kind.value)
        span.end(end_time=end)
        return span.get_span_context()

    def _cut(self, text: str) -> str:
        return text if len(text) <= self._chars else text[: self._chars] + "…"

    # ------------------------------------------------------------------ metrics

    def _metrics_registry(self) -> Any:
        if self._registry is None:
            from triage_plugins.metrics.registry import BUILTIN_METRICS

            try:
                self._registry = (
                    self._manager.metrics if hasattr(self._manager, "plugins") else BUILTIN_METRICS
                )
            except ConfigError as exc:
                log.error("metrics registered by plugins are not exported: %s", exc)
                self._registry = BUILTIN_METRICS
        return self._registry

    def _metric_attrs(self, record: QueryRecord, *stages: str) -> dict[str, Any]:
        """Attributes of the record's metrics of ``stages`` (gold ones only for a gold query)."""
        gold = record.gold is not None
        specs = self._metrics_registry().per_query
        names = [s.symbol for s in specs if s.stage in stages and (gold or not s.needs_gold)]
        return metric_attributes(record.metrics[n] for n in names if n in record.metrics)

    @staticmethod
    def _signature(record: QueryRecord) -> dict[str, Any]:
        d = record.diagnosis
        attrs: dict[str, Any] = {"triage.signature.phase": record.phase}
        if d is None or not d.defined:
            attrs["triage.signature"] = "undetermined"
            return attrs
        failed = next((s.metric for s in d.steps if s.status == "fail"), None)
        attrs.update({"triage.signature": d.signature, "triage.chain.evaluated": list(d.evaluated)})
        if failed:
            attrs["triage.chain.failed"] = failed
        if d.remediation.stage:
            attrs["triage.remediation.stage"] = d.remediation.stage
        if d.remediation.levers:
            attrs["triage.remediation.lever"] = d.remediation.levers[0]
            attrs["triage.remediation.levers"] = list(d.remediation.levers)
        return attrs

    # ------------------------------------------------------------------ usage stage

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        """Keep the graph for the retrieved triples' provenance."""
        with self._lock:
            self._graph = event.graph

    @hookimpl
    def triage_graph_scored(self, record: GraphRecord) -> None:
        """Emit the indexing trace with the graph's metrics as the implementation plugin scored them."""
        with self._lock:
            extractions = self._extractions.pop(record.framework, [])
        self._indexing_trace(record, extractions)

    @hookimpl
    def triage_query_scored(self, record: QueryRecord) -> None:
        """The retrieval span (phase ``retrieval``) or the answer's span (phase ``generation``)."""
        if record.phase == "retrieval":
            self._retrieval_span(record)
        elif record.phase == "generation" and record.answer is not None:
            self._generation_span(record.answer, record)

    def _retrieval_span(self, record: QueryRecord) -> None:
        event = record.retrieval
        end = time.time_ns()
        start = end - int((event.seconds or 0.0) * 1e9)
        metrics_attrs = self._metric_attrs(record, "retrieval")
        own = {**self._query_attrs(event), **metrics_attrs, **self._signature(record)}
        room = (self._max_attributes - len(own) - 2) // 4  # 2: the span kind, triage.documents.omitted
        # documents first: were the provider's limit lower still, the SDK drops the oldest attributes
        attrs = {**self._documents(event, max(0, min(self._max_documents, room))), **own}
        context = self._span("triage.retrieval", self._kinds.RETRIEVER, attrs, self._parent(), start, end)
        key = (event.framework, event.query_id)
        with self._lock:
            held = self._spans.pop(key)
            self._spans.put(key, _QuerySpans(context))
        for decision, parent, t0, t1 in held.gates if held is not None else ():
            self._gate_span(event, decision, parent or self._parent(context), t0, t1)

    def _query_attrs(self, event: RetrievalEvent) -> dict[str, Any]:
        attrs: dict[str, Any] = {
            "triage.query_id": event.query_id,
            "triage.framework": event.framework,
            "triage.retriever": event.retriever,
            "input.value": self._cut(event.query),
            "input.mime_type": "text/plain",
            "triage.subgraph.triples": len(event.subgraph.triples),
            "triage.subgraph.nodes": len(event.subgraph.node_ids),
            "triage.paths": len(event.paths),
            "triage.chunks": len(event.chunks),
        }
        if event.seconds is not None:
            attrs["triage.seconds"] = event.seconds
        if event.expanded_nodes is not None:
            attrs["triage.expanded_nodes"] = event.expanded_nodes
        return attrs

    def _documents(self, event: RetrievalEvent, most: int) -> dict[str, Any]:
        """``retrieval.documents.*`` for the first ``most`` retrieved triples, then chunks (OpenInference
        flattening: four attributes per document)."""
        score: dict[str, float] = {}
        for path in event.paths:
            if path.score is not None:
                for tid in path.triple_ids:
                    score[tid] = max(score.get(tid, path.score), path.score)
        sources = getattr(self._graph, "sources", None) or {}
        docs: list[tuple[str, str, float | None, dict]] = []
        for t in event.subgraph.triples:
            meta = {"unit": "triple", "subject": t.subject, "predicate": t.predicate, "object": t.object}
            if t.id in sources:
                meta["provenance"] = list(sources[t.id])
            docs.append((t.id, f"{t.subject} {t.predicate} {t.object}", score.get(t.id), meta))
        for c in event.chunks:
            meta = {"unit": "chunk", "doc_id": c.doc_id, **dict(c.locator)}
            docs.append((c.id, c.text, None, meta))
        attrs: dict[str, Any] = {}
        for i, (doc_id, content, value, meta) in enumerate(docs[:most]):
            prefix = f"retrieval.documents.{i}.document."
            attrs[prefix + "id"] = doc_id
            attrs[prefix + "content"] = self._cut(content)
            attrs[prefix + "metadata"] = json.dumps(meta, ensure_ascii=False)
            if value is not None:
                attrs[prefix + "score"] = value
        if len(docs) > most:
            attrs["triage.documents.omitted"] = len(docs) - most
        return attrs

    @hookimpl(wrapper=True)
    def triage_gate(self, event: RetrievalEvent) -> Any:
        """Observe the final gate decision on the host's thread; the span is made on the worker."""
        start = time.time_ns()
        decision = yield
        try:
            if decision is not None:
                self._manager.defer(self._gate_job, event, decision, start, time.time_ns())
        except Exception as exc:  # noqa: BLE001 - a wrapper is not isolated: never raise into the host
            log.debug("gate span not queued: %s", exc)
        return decision

    def _gate_job(self, event: RetrievalEvent, decision: GateDecision, start: int, end: int) -> None:
        key = (event.framework, event.query_id)
        parent = self._parent()
        with self._lock:
            held = self._spans.get(key)
            if (held is None or held.context is None) and parent is None:  # no retrieval span yet: wait
                if held is None:
                    held = _QuerySpans(None)
                    self._spans.put(key, held)
                held.gates.append((decision, None, start, end))
                return
        self._gate_span(event, decision, parent or self._parent(held.context if held else None), start, end)

    def _gate_span(
        self, event: RetrievalEvent, decision: GateDecision, parent: Any, start: int, end: int
    ) -> None:
        attrs: dict[str, Any] = {
            "triage.query_id": event.query_id,
            "triage.framework": event.framework,
            "triage.gate.action": decision.action,
            "triage.gate.reason": decision.reason,
            "input.value": self._cut(event.query),
            "output.value": decision.action,
        }
        for name, value in decision.metrics.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                attrs[metric_attribute(name)] = float(value)
        if decision.suggestion:
            attrs["triage.gate.suggestion"] = json.dumps(dict(decision.suggestion))
        self._span("triage.gate", self._kinds.GUARDRAIL, attrs, parent, start, end)

    @hookimpl
    def triage_generation(self, event: GenerationEvent) -> None:
        """A closed-book answer's span; an answer's span waits for its record (``triage_query_scored``)."""
        if event.context == "none":
            self._generation_span(event, None)

    def _generation_span(self, event: GenerationEvent, record: QueryRecord | None) -> None:
        end = time.time_ns()
        start = end - int((event.seconds or 0.0) * 1e9)
        key = (event.framework, event.query_id)
        with self._lock:
            held = self._spans.get(key)
        attrs: dict[str, Any] = {
            "triage.query_id": event.query_id,
            "triage.framework": event.framework,
            "triage.context": event.context,
            "output.value": self._cut(event.answer),
            "output.mime_type": "text/plain",
        }
        if event.seconds is not None:
            attrs["triage.seconds"] = event.seconds
        if event.prompt_tokens is not None:
            attrs["llm.token_count.prompt"] = event.prompt_tokens
        parent = self._parent(held.context if held else None)
        if record is not None:
            attrs["input.value"] = self._cut(record.retrieval.query)
            attrs.update(self._metric_attrs(record, "generation", "closed_book"))
            attrs.update(self._signature(record))
        name = "triage.generation" if event.context == "retrieved" else "triage.generation.closed_book"
        self._span(name, self._kinds.CHAIN, attrs, parent, start, end)

    # ------------------------------------------------------------------ indexing

    @hookimpl
    def triage_extraction(self, event: ExtractionEvent) -> None:
        with self._lock:
            kept = self._extractions[event.framework]
            if len(kept) < self._max_extractions:
                kept.append((event, time.time_ns()))

    def _indexing_trace(self, record: GraphRecord, extractions: list[tuple[ExtractionEvent, int]]) -> None:
        """One ``triage.indexing`` span: a child per chunk extraction and one for the graph's validation."""
        event = record.event
        end = time.time_ns()
        start = min((t for _, t in extractions), default=end)
        root_attrs = {
            "triage.framework": event.framework,
            "triage.extractions": len(extractions),
            "triage.graph.triples": len(event.graph.triples),
            "triage.graph.nodes": len(event.graph.nodes),
        }
        root = self._tracer.start_span(
            "triage.indexing", context=self._parent(), attributes=root_attrs, start_time=start
        )
        root.set_attribute(self._kind_key, self._kinds.CHAIN.value)
        inside = self._trace.set_span_in_context(root)
        for chunk_attrs, at in _extraction_attrs(extractions):
            self._span("triage.extraction", self._kinds.CHAIN, chunk_attrs, inside, at, at)
        graph_attrs = {"triage.framework": event.framework, **metric_attributes(record.metrics.values())}
        self._span("triage.graph", self._kinds.EVALUATOR, graph_attrs, inside, end, time.time_ns())
        root.end(end_time=time.time_ns())


def _attribute_limit(provider: Any) -> int:
    """The most attributes a span of ``provider`` keeps (the SDK's limit; 128 by default)."""
    limits = getattr(provider, "_span_limits", None)  # the SDK provider's SpanLimits
    limit = getattr(limits, "max_span_attributes", None)
    if isinstance(limit, int) and limit > 0:
        return limit
    for var in ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"):
        raw = os.environ.get(var, "").strip()
        if raw.isdigit() and int(raw) > 0:
            return int(raw)
    return 128


def metric_attributes(results: Any) -> dict[str, Any]:
    """``triage.<m>`` = value for each defined metric; ``triage.<m>.reason`` for each undefined one."""
    attrs: dict[str, Any] = {}
    for result in results:
        key = metric_attribute(result.name)
        if result.value is None:
            attrs[key + ".reason"] = result.reason or "undefined"
        else:
            attrs[key] = float(result.value)
    return attrs


def _extraction_attrs(extractions: list[tuple[ExtractionEvent, int]]) -> list[tuple[dict[str, Any], int]]:
    """Per extraction event: chunk, run, triple count, TCS (mean over its triples), EC of its chunk."""
    from triage_plugins.metrics.extraction import extraction_consistency, mean_triple_confidence

    by_chunk: dict[str, list[ExtractionEvent]] = defaultdict(list)
    for ev, _ in extractions:
        by_chunk[ev.chunk.id].append(ev)
    consistency = {cid: extraction_consistency(evs) for cid, evs in by_chunk.items() if len(evs) > 1}
    out = []
    for ev, at in extractions:
        attrs: dict[str, Any] = {
            "triage.framework": ev.framework,
            "triage.chunk.id": ev.chunk.id,
            "triage.chunk.doc_id": ev.chunk.doc_id,
            "triage.run_id": ev.run_id,
            "triage.triples": len(ev.triples),
        }
        if ev.model:
            attrs["llm.model_name"] = ev.model
        tcs = mean_triple_confidence(ev.triples)
        attrs.update(metric_attributes([tcs]))
        ec = consistency.get(ev.chunk.id)
        if ec is not None:
            attrs.update(metric_attributes([ec]))
        else:
            attrs["triage.ec.reason"] = "one extraction run of this chunk"
        out.append((attrs, at))
    return out
