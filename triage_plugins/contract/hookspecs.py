"""The hook specification: the whole contract between adapters and handlers (DESIGN §3).

Adapters (one per framework, and the reference pipeline) *call* these hooks through
:class:`triage_plugins.runtime.manager.TriageManager`; plugins *implement* them with :data:`hookimpl`::

    from triage_plugins import hookimpl

    class SlowQueries:
        @hookimpl
        def triage_retrieval(self, event):
            if event.seconds and event.seconds > 1.0:
                print("slow:", event.query_id)

Notification hooks are delivered by a background worker (off the host's hot path); ``triage_gate``
and ``triage_rerank`` are called synchronously because the host waits for their answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import pluggy

if TYPE_CHECKING:
    from triage_plugins.adapter_kit.runner import FrameworkRunner
    from triage_plugins.contract.events import (
        ExtractionEvent,
        FeedbackEvent,
        GateDecision,
        GenerationEvent,
        GraphEvent,
        RerankRequest,
        RetrievalEvent,
    )
    from triage_plugins.contract.records import GraphRecord, QueryRecord
    from triage_plugins.metrics.registry import MetricSpec

PROJECT = "triage"

hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)

# -------------------------------------------------------------------------------------------
# extraction stage
# -------------------------------------------------------------------------------------------


@hookspec
def triage_extraction(event: ExtractionEvent) -> None:
    """Called after a chunk's triples are extracted: once per chunk per extraction run.

    Several runs over the same chunk (same ``chunk.id``, different ``run_id``) are what
    extraction consistency (EC) is computed from.

    :param event: the chunk, the triples read from it (with token log-probabilities when the
        extractor exposes them), the model and its temperature.
    """


# -------------------------------------------------------------------------------------------
# graph stage
# -------------------------------------------------------------------------------------------


@hookspec
def triage_graph(event: GraphEvent) -> None:
    """Called after the knowledge graph is built, rebuilt or updated.

    :param event: a read-only view of the whole graph, the alias map and, when the user has
        one, the ontology to validate against.
    """


# -------------------------------------------------------------------------------------------
# usage stage: retrieval, gate, generation
# -------------------------------------------------------------------------------------------


@hookspec
def triage_retrieval(event: RetrievalEvent) -> None:
    """Called after retrieval for a query, before the reader runs.

    :param event: the query, its mentions and their grounding, the retrieved subgraph K_S,
        paths, chunks, the expansion count (RPC), timing and the retriever's name.
    """


@hookspec(firstresult=True)
def triage_gate(event: RetrievalEvent) -> GateDecision | None:
    """Called right after :func:`triage_retrieval`, synchronously: should the reader run?

    Stops at the first non-None result.

    :param event: the same retrieval event.
    :return: a :class:`~triage_plugins.contract.events.GateDecision` — ``proceed``, ``warn`` (answer but
        flag the result) or ``reroute`` (retrieve again as ``suggestion`` says) — or ``None`` to
        leave the decision to the next plugin. When no plugin decides, the host proceeds.
    """


@hookspec
def triage_generation(event: GenerationEvent) -> None:
    """Called after the reader produced an answer.

    :param event: the answer text and the entities it mentions, prompt size and timing;
        ``context="none"`` marks a closed-book run used for knowledge-injection (KNI).
    """


# -------------------------------------------------------------------------------------------
# scoring (each query and graph scored once; after pytest's pytest_runtest_logreport)
# -------------------------------------------------------------------------------------------


@hookspec
def triage_query_scored(record: QueryRecord) -> None:
    """Called after the scorer (the ``triage.usage`` plugin) scored a query at one phase.

    Called at ``"retrieval"`` (provisional chain), at ``"generation"`` (the whole chain) and, when a
    closed-book answer comes after the answer, at ``"closed_book"`` (KNI). In an offline replay
    (``triage score``) each query is called once, with its final record. Read the metrics from the
    record rather than computing them again, and keep no map of your own per query: every consumer
    then shows the same numbers (collect records with
    :class:`~triage_plugins.contract.records.RecordCollector`).

    :param record: a :class:`~triage_plugins.contract.records.QueryRecord`: the query's events, gold,
        gate decision, metrics (computed with the manager's metric registry) and chain diagnosis.
    """


@hookspec
def triage_graph_scored(record: GraphRecord) -> None:
    """Called after a graph event's KG Implementation and Validation metrics were computed.

    :param record: a :class:`~triage_plugins.contract.records.GraphRecord`: the framework, the graph
        event and its metrics.
    """


# -------------------------------------------------------------------------------------------
# feedback stage
# -------------------------------------------------------------------------------------------


@hookspec
def triage_feedback(event: FeedbackEvent) -> None:
    """Called when a score for an answered query arrives (from a human, an LLM judge or gold).

    :param event: the query id and a score in [0, 1].
    """


@hookspec(firstresult=True)
def triage_rerank(request: RerankRequest) -> list[float] | None:
    """Called synchronously while a framework ranks candidate triples or chunks.

    Stops at the first non-None result.

    :param request: the query, the unit (``"triple"`` or ``"chunk"``), candidate ids and the
        framework's own relevance S_r of each.
    :return: one priority per candidate, in the order of ``request.ids`` (higher ranks first),
        or ``None`` to keep the framework's own order.
    """


# -------------------------------------------------------------------------------------------
# learned state (what an adapter writes back into its framework's own ranking and storage)
# -------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def triage_learned_scores(unit: str, ids: Sequence[str] | None) -> Mapping[str, float] | None:
    """Called synchronously when an adapter needs the learned raw contribution scores.

    Stops at the first non-None result.

    :param unit: ``"triple"`` or ``"chunk"``.
    :param ids: the ids wanted, or ``None`` for every id that has a learned score.
    :return: raw score (EvoRAG §4.2, init 100) per id that has one, or ``None`` when this plugin
        keeps no scores.
    """


@hookspec(firstresult=True)
def triage_seed_scores(unit: str, scores: Mapping[str, float]) -> int | None:
    """Called when an adapter finds scores its framework persisted (e.g. after a restart).

    Stops at the first non-None result.

    :param unit: ``"triple"`` or ``"chunk"``.
    :param scores: raw score per id as the framework stored it.
    :return: how many ids were seeded (only ids with no learned score yet), or ``None`` when this
        plugin keeps no scores.
    """


# -------------------------------------------------------------------------------------------
# registration (called once, when a registry is first read; after simonw/llm's register_models)
# -------------------------------------------------------------------------------------------


@hookspec
def triage_register_metrics(register: Callable[[MetricSpec], None]) -> None:
    """Called once when a manager's metric registry is first read, through the manager's pluggy relay
    one plugin at a time; add metrics with ``register(spec)``.

    A metric registered here is computed by the usage plugin and ``triage score``, and appears in
    ``triage compare`` and both reports, with no edit to the core. The built-in metrics come through
    this hook too (the default plugin ``triage.metrics``).

    :param register: call it with one :class:`~triage_plugins.MetricSpec` per metric. A plugin that
        registers a symbol already taken, or whose hook raises, adds none of its metrics: it is
        logged and listed in ``MetricRegistry.failed``, and the other plugins' metrics are kept.
    """


@hookspec
def triage_register_runners(register: Callable[[FrameworkRunner], None]) -> None:
    """Called once when ``triage compare`` looks for frameworks, through the manager's pluggy relay one
    plugin at a time; add runners with ``register(runner)``. The reference runner comes through this
    hook too (the default plugin ``triage.reference``).

    :param register: call it with one runner per framework (an object with the
        :class:`~triage_plugins.adapter_kit.runner.FrameworkRunner` shape); its ``name`` is what
        ``--frameworks`` selects. A runner whose name is taken is left out with the plugin's later
        ones, and said among the compare notes.
    """
