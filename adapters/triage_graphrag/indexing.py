"""Index instrumentation for GraphRAG 3.3: a registered workflow and a logprob-recording model type.

:func:`observe` (``GraphRAGInstrumentor.observe_index`` / ``triage_graphrag.observe_index``) returns
an :class:`IndexObservation` whose ``config`` is a copy of the user's configuration with three
changes, all through GraphRAG's public extension points:

1. ``snapshots.raw_graph = True``, so ``raw_relationships`` keeps every chunk's relationship
   descriptions aligned with ``text_unit_ids`` (the per-chunk triples of TRIAGE §4.1);
2. a workflow registered with ``PipelineFactory.register`` and appended to ``workflows``: after
   the standard pipeline it reads the output tables and emits one **extraction** event per text
   unit and one **graph** event (entities, relationships with their text units);
3. the extraction model is wrapped by the completion type :data:`LOGPROB_TYPE` (registered with
   ``graphrag_llm.completion.register_completion``): it builds the user's configured model, asks
   it for ``logprobs`` on graph-extraction prompts only, and records the token log-probabilities of
   each relationship record, joined back to the text unit on the stripped chunk text (GraphRAG
   strips the chunk before formatting the prompt). Models that return no log-probabilities leave
   TCS N/A.

**Incremental updates.** Observe an update with ``observe(config, manager, method="standard-update")``
and run ``build_index(obs.config, is_update_run=True, callbacks=obs.callbacks)``. GraphRAG then
indexes only the new documents into a delta, and its update workflows merge the delta into the
output tables. The workflow emits the extraction events of the new text units (from the delta) and
the graph event of the **merged** graph (read from the output tables, not the delta). Triple keys
are GraphRAG's merge key (:func:`~triage_graphrag.translate.triple_id`), so a relationship the new
documents mention again keeps its key and its learned score. Before emitting the graph, scores
stored under pre-#16 keys are carried over (:func:`~triage_graphrag.translate.migrate_legacy_scores`).

**Failures are reported.** GraphRAG stops the pipeline at the first failing workflow, so the triage
workflow never runs: ``obs.callbacks`` (pass them to ``build_index``) logs a warning naming the
failed workflow, ``obs.error`` records it, and ``obs.close()`` warns when the observed run never
reached the triage workflow.

``graphrag index`` / ``graphrag update`` (the CLI) take no callbacks and do not know the workflow:
run ``python -m triage_graphrag index --root DIR`` / ``python -m triage_graphrag update --root DIR``
instead, which install the same observation.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage_graphrag.translate import (
    GraphTables,
    RecordLogprobs,
    extraction_events,
    migrate_legacy_scores,
    record_logprobs,
)
from triage_plugins import ConfigError
from triage_plugins.adapter_kit.logprobs import logprob_pairs

if TYPE_CHECKING:
    from graphrag.config.models.graph_rag_config import GraphRagConfig

    from triage_plugins import TriageManager

__all__ = ["LOGPROB_TYPE", "IndexObservation", "LogprobRecorder", "observe"]

log = logging.getLogger("triage.graphrag.indexing")

LOGPROB_TYPE = "triage_logprobs"
EXTRACTION_MODEL_ID = "triage_extraction_model"
_INNER = "triage_inner_type"
_RECORDER = "triage_recorder"

_recorders: dict[str, LogprobRecorder] = {}
_lock = threading.Lock()


# --------------------------------------------------------------------------- logprob recording


@dataclass
class LogprobRecorder:
    """Collects the relationship records (with token log-probs) of extraction completions, per chunk text.

    :param prefix: the extraction prompt up to the chunk text (entity types filled in).
    :param suffix: the extraction prompt after the chunk text.
    """

    prefix: str
    suffix: str
    key: str = field(default_factory=lambda: uuid.uuid4().hex)
    records: dict[str, list[RecordLogprobs]] = field(default_factory=dict)
    calls: int = 0
    with_logprobs: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def chunk_text(self, prompt: str) -> str | None:
        """The chunk text inside an extraction prompt, or ``None`` when ``prompt`` is not one."""
        fits = len(prompt) >= len(self.prefix) + len(self.suffix)
        if fits and prompt.startswith(self.prefix) and prompt.endswith(self.suffix):
            return prompt[len(self.prefix) : len(prompt) - len(self.suffix)]
        return None

    def record(self, text: str, content: str, logprobs: Any) -> None:
        tokens = logprob_pairs(logprobs)
        with self._lock:
            self.calls += 1
            if tokens is None:
                return
            self.with_logprobs += 1
            self.records.setdefault(text, []).extend(record_logprobs(content, tokens))

    def by_text_unit(self, text_units: Any) -> dict[str, list[RecordLogprobs]]:
        """Text unit id -> records, joining on the stripped chunk text."""
        out: dict[str, list[RecordLogprobs]] = {}
        for row in text_units.itertuples(index=False):
            recs = self.records.get(str(row.text).strip())
            if recs:
                out[str(row.id)] = recs
        return out


def _text_of(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else getattr(message, "content", "")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


class LogprobCompletion:
    """A completion model type wrapping the user's configured model (registered as :data:`LOGPROB_TYPE`).

    The model config carries ``triage_inner_type`` (the wrapped type) and ``triage_recorder`` (the
    :class:`LogprobRecorder` key). Every call is delegated unchanged, except graph-extraction prompts
    (first user message is an extraction prompt, and the turn is not gleaning's yes/no question): those
    get ``logprobs=True`` and their completion is recorded.
    """

    def __init__(
        self, *, model_config: Any, tokenizer: Any, cache: Any = None, cache_key_creator: Any = None, **_: Any
    ) -> None:
        from graphrag_llm.completion import create_completion
        from graphrag_llm.config import ModelConfig

        extra = dict(model_config.model_extra or {})
        self._recorder = _recorders.get(str(extra.get(_RECORDER)))
        data = {k: v for k, v in model_config.model_dump().items() if not k.startswith("triage_")}
        data["type"] = extra.get(_INNER) or "litellm"
        self._inner = create_completion(
            ModelConfig(**data), cache=cache, cache_key_creator=cache_key_creator, tokenizer=tokenizer
        )

    def _extraction(self, kwargs: dict[str, Any]) -> str | None:
        if self._recorder is None or kwargs.get("stream"):
            return None
        messages = kwargs.get("messages")
        if isinstance(messages, str):
            return self._recorder.chunk_text(messages)
        users = [
            _text_of(m) for m in messages or () if (m.get("role") if isinstance(m, dict) else None) == "user"
        ]
        if not users or (len(users) > 1 and users[-1].startswith("It appears some entities")):
            return None
        return self._recorder.chunk_text(users[0])

    def completion(self, /, **kwargs: Any) -> Any:
        text = self._extraction(kwargs)
        if text is None:
            return self._inner.completion(**kwargs)
        kwargs.setdefault("logprobs", True)
        response = self._inner.completion(**kwargs)
        self._keep(text, response)
        return response

    async def completion_async(self, /, **kwargs: Any) -> Any:
        text = self._extraction(kwargs)
        if text is None:
            return await self._inner.completion_async(**kwargs)
        kwargs.setdefault("logprobs", True)
        response = await self._inner.completion_async(**kwargs)
        self._keep(text, response)
        return response

    def _keep(self, text: str, response: Any) -> None:
        try:
            choice = response.choices[0]
            self._recorder.record(text, choice.message.content or "", getattr(choice, "logprobs", None))  # type: ignore[union-attr]
        except Exception as exc:  # noqa: BLE001 - recording must never break indexing
            log.warning("could not record extraction log-probabilities: %s", exc)

    @property
    def metrics_store(self) -> Any:
        return self._inner.metrics_store

    @property
    def tokenizer(self) -> Any:
        return self._inner.tokenizer


_registered = False


def register_logprob_completion() -> None:
    """Register :data:`LOGPROB_TYPE` with ``graphrag_llm``'s completion factory (idempotent)."""
    global _registered
    with _lock:
        if _registered:
            return
        from graphrag_llm.completion import LLMCompletion, register_completion

        cls = type(
            "LogprobCompletion",
            (LogprobCompletion, LLMCompletion),
            {"__init__": LogprobCompletion.__init__, "__module__": __name__},
        )
        register_completion(LOGPROB_TYPE, cls)
        _registered = True


# --------------------------------------------------------------------------- the observation


@dataclass
class IndexObservation:
    """What :func:`observe` installed: pass ``config`` (and ``callbacks``) to ``build_index``.

    :ivar config: the observed copy of the configuration.
    :ivar callbacks: workflow callbacks for ``build_index(callbacks=...)``: they report a run that
        failed before the triage workflow (a warning, and :attr:`error`).
    :ivar workflow: the name of the registered workflow.
    :ivar recorder: the log-probability recorder of the extraction model (``None`` when disabled).
    :ivar events: counts of emitted events by kind, after the run.
    :ivar method: the observed indexing method (``"standard-update"`` for incremental updates).
    :ivar ran: whether the triage workflow ran (``False`` when an earlier workflow failed).
    :ivar error: why nothing was observed (a failed workflow), else ``None``.
    """

    config: GraphRagConfig
    manager: TriageManager
    workflow: str
    recorder: LogprobRecorder | None
    run_id: str
    callbacks: list[Any] = field(default_factory=list)
    events: dict[str, int] = field(default_factory=dict)
    tables: GraphTables | None = None
    method: str = "standard"
    ran: bool = False
    error: str | None = None
    warned: bool = False
    started: bool = False
    last_workflow: str = "<startup>"

    on_close: list[Any] = field(default_factory=list, repr=False)

    def close(self) -> None:
        """Unregister the workflow and the recorder (then release what observed it; idempotent)."""
        from graphrag.index.workflows.factory import PipelineFactory

        PipelineFactory.workflows.pop(self.workflow, None)
        if not self.ran and self.started and not self.warned:
            self.failed(self.error or "the run stopped before the triage workflow")
        if self.recorder is not None:
            _recorders.pop(self.recorder.key, None)
        while self.on_close:
            self.on_close.pop()()

    def failed(self, why: str) -> None:
        """Warn (once) that this run emitted no index events, and why."""
        self.error = why
        if not self.warned:
            self.warned = True
            log.warning(
                "triage: GraphRAG indexing did not reach the triage workflow (%s); no extraction or graph "
                "events were emitted for this run — fix the failure and index again",
                why,
            )

    async def _run(self, config: Any, context: Any) -> Any:
        """The registered workflow: read the output tables, emit extraction and graph events."""
        from graphrag.index.typing.workflow import WorkflowFunctionOutput

        self.ran = True
        try:
            merged = self._merged_provider(config, context)
            await self._emit(context.output_table_provider, merged)
        except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
            log.warning("triage observation of the GraphRAG index failed: %s", exc, exc_info=exc)
        return WorkflowFunctionOutput(result=None)

    def _merged_provider(self, config: Any, context: Any) -> Any:
        """The output tables of an update run (the merged graph), or ``None`` for a standard run."""
        stamp = context.state.get("update_timestamp")
        if context.previous_table_provider is None or stamp is None:
            return None
        if not self.method.endswith("-update"):
            log.warning(
                "triage: an update run (is_update_run=True) observed with method %r: GraphRAG's update "
                "workflows did not run, so the delta is not merged; observe with method='standard-update'",
                self.method,
            )
            return None
        from graphrag.index.run.utils import get_update_table_providers

        return get_update_table_providers(config, stamp)[0]

    async def _emit(self, provider: Any, merged: Any = None) -> None:
        """Extraction events from ``provider`` (the run's own tables: the delta of an update run),
        the graph event from ``merged`` when given (the merged output of an update run)."""

        async def table(name: str, source: Any = provider) -> Any:
            return await source.read_dataframe(name) if await source.has(name) else None

        graph_source = merged if merged is not None else provider
        entities = await table("entities", graph_source)
        relationships = await table("relationships", graph_source)
        text_units = await table("text_units", graph_source)
        communities = await table("communities", graph_source)
        run_units = text_units if merged is None else await table("text_units")
        raw = await table("raw_relationships")
        if entities is None or relationships is None or text_units is None or run_units is None:
            log.warning("GraphRAG output has no entities/relationships/text_units table; nothing to observe")
            return
        tables = GraphTables.from_frames(entities, relationships, text_units, communities)
        self.tables = tables
        logprobs = self.recorder.by_text_unit(run_units) if self.recorder is not None else None
        model = self.config.get_completion_model_config(self.config.extract_graph.completion_model_id).model
        if raw is not None:
            for event in extraction_events(
                raw,
                run_units,
                run_id=self.run_id,
                entity_types=tables.entity_types,
                logprobs=logprobs,
                model=model,
            ):
                self.manager.emit_extraction(event)
                self.events["extraction"] = self.events.get("extraction", 0) + 1
        else:
            log.warning("no raw_relationships snapshot (snapshots.raw_graph is off): no extraction events")
        try:
            migrate_legacy_scores(self.manager, tables.triples)
        except Exception as exc:  # noqa: BLE001 - a failed carry-over never blocks the graph event
            log.warning("triage: carrying old-style triple scores over failed: %s", exc, exc_info=exc)
        self.manager.emit_graph(tables.graph_event())
        self.events["graph"] = self.events.get("graph", 0) + 1


def _workflow_callbacks(obs: IndexObservation) -> Any:
    """GraphRAG ``WorkflowCallbacks`` that report a run which failed before the triage workflow."""
    from graphrag.callbacks.noop_workflow_callbacks import NoopWorkflowCallbacks

    class TriageWorkflowCallbacks(NoopWorkflowCallbacks):
        def pipeline_start(self, names: list[str]) -> None:
            obs.started = True

        def workflow_start(self, name: str, instance: object) -> None:
            obs.last_workflow = name

        def pipeline_error(self, error: BaseException) -> None:
            obs.failed(f"workflow {obs.last_workflow!r} failed: {type(error).__name__}: {error}")

        def pipeline_end(self, results: list[Any]) -> None:
            if not obs.ran:
                failed = [r.workflow for r in results if getattr(r, "error", None) is not None]
                obs.failed(f"workflow {failed[0]!r} failed" if failed else "the triage workflow did not run")

    return TriageWorkflowCallbacks()


def _load(config_or_root: Any) -> GraphRagConfig:
    from graphrag.config.models.graph_rag_config import GraphRagConfig

    if isinstance(config_or_root, GraphRagConfig):
        return config_or_root
    if isinstance(config_or_root, str | os.PathLike):
        from graphrag.config.load_config import load_config

        return load_config(root_dir=Path(config_or_root))
    raise ConfigError(
        f"observe_index takes a GraphRagConfig or a project root, got {type(config_or_root).__name__}"
    )


def observe(
    config_or_root: GraphRagConfig | str | os.PathLike[str],
    manager: TriageManager,
    *,
    logprobs: bool = True,
    method: str = "standard",
) -> IndexObservation:
    """Instrument a GraphRAG indexing run (``graphrag.api.build_index``), emitting to ``manager``.

    ::

        obs = observe(config, manager)
        await graphrag.api.build_index(obs.config, callbacks=obs.callbacks)

    :param config_or_root: a ``GraphRagConfig`` (not modified) or a project root with settings.yaml.
    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` to emit to.
    :param logprobs: wrap the extraction model to record token log-probabilities.
    :param method: the indexing method whose pipeline is observed (``"standard"``, ``"fast"``,
        ``"standard-update"`` for ``build_index(..., is_update_run=True)`` ...), used when the config
        names no ``workflows`` of its own.
    :return: the observation; its ``config`` is the instrumented copy to index with.
    """
    from graphrag.index.workflows.factory import PipelineFactory

    base = _load(config_or_root)
    config = base.model_copy(deep=True)
    config.snapshots.raw_graph = True
    recorder: LogprobRecorder | None = None
    if logprobs:
        register_logprob_completion()
        model_id = config.extract_graph.completion_model_id
        model = config.get_completion_model_config(model_id)
        if model.type != LOGPROB_TYPE:
            types = config.extract_graph.entity_types
            template = config.extract_graph.resolved_prompts().extraction_prompt
            sentinel = "\x00TRIAGE\x00"
            prefix, _, suffix = template.format(input_text=sentinel, entity_types=",".join(types)).partition(
                sentinel
            )
            recorder = LogprobRecorder(prefix, suffix)
            _recorders[recorder.key] = recorder
            data = model.model_dump()
            data.update({"type": LOGPROB_TYPE, _INNER: model.type, _RECORDER: recorder.key})
            config.completion_models[EXTRACTION_MODEL_ID] = type(model)(**data)
            config.extract_graph.completion_model_id = EXTRACTION_MODEL_ID
    run_id = f"graphrag-index-{uuid.uuid4().hex[:12]}"
    obs = IndexObservation(
        config, manager, f"triage_observe_{uuid.uuid4().hex[:8]}", recorder, run_id, method=method
    )
    obs.callbacks.append(_workflow_callbacks(obs))
    PipelineFactory.register(obs.workflow, obs._run)
    workflows = config.workflows or list(PipelineFactory.pipelines.get(method, []))
    if not workflows:
        raise ConfigError(
            f"GraphRAG has no indexing method {method!r}; known: {sorted(PipelineFactory.pipelines)}"
        )
    config.workflows = [*workflows, obs.workflow]
    log.debug("observing GraphRAG index with workflow %s", obs.workflow)
    return obs
