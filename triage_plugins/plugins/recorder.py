"""The store writer: a default plugin that records every notification event (DESIGN §7, STYLE "the data").

It runs on the manager's background worker, so the store write stays off the host's hot path.
Block it like any plugin (``TRIAGE_DISABLE_PLUGINS``) to keep traces out of the store.

Each event is written in its own transaction: a hook call does not say where the worker's batch
ends, and an event buffered past that point could still be unwritten when ``flush()`` returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from triage_plugins.contract.hookspecs import hookimpl

if TYPE_CHECKING:
    from triage_plugins.contract.events import (
        Event,
        ExtractionEvent,
        FeedbackEvent,
        GenerationEvent,
        GraphEvent,
        RetrievalEvent,
    )
    from triage_plugins.store import Store

__all__ = ["StoreRecorder"]


class StoreRecorder:
    """Records extraction, graph, retrieval, generation and feedback events into ``manager.store``.

    Events are stored under the manager's current run id (``manager.run_id``) when it has one.
    With no store (``manager.store is None``) every hook is a no-op.

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (anything with ``.store``
        and, optionally, ``.run_id``).
    """

    def __init__(self, manager: Any) -> None:
        self._manager = manager

    @property
    def store(self) -> Store | None:
        """The manager's store, read at each event (so a store attached later is used too)."""
        return getattr(self._manager, "store", None)

    def _record(self, event: Event) -> None:
        store = self.store
        if store is None:
            return
        store.record_event(event, run_id=getattr(self._manager, "run_id", None))

    @hookimpl
    def triage_extraction(self, event: ExtractionEvent) -> None:
        self._record(event)

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        self._record(event)

    @hookimpl
    def triage_retrieval(self, event: RetrievalEvent) -> None:
        self._record(event)

    @hookimpl
    def triage_generation(self, event: GenerationEvent) -> None:
        self._record(event)

    @hookimpl
    def triage_feedback(self, event: FeedbackEvent) -> None:
        self._record(event)
