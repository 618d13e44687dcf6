"""The store writer: a default plugin that records every notification event (DESIGN §7, STYLE "the data").

It runs on the manager's background worker, so the store write stays off the host's hot path.
Block it like any plugin (``TRIAGE_DISABLE_PLUGINS``) to keep traces out of the store.

On the worker, the events of one delivery batch are written together (``store.record_events``, one
transaction) at the end of the batch (``TriageManager.at_batch_end``), before the batch counts as
delivered, so ``flush()`` and ``emit_feedback(wait=True)`` still return with every event committed.
If that write fails, the events are written one by one, so only a bad one is lost. Called directly
or on a synchronous manager, each event is written at once, in its own transaction.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.hookspecs import hookimpl

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
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

log = logging.getLogger("triage.plugins.recorder")


class StoreRecorder:
    """Records extraction, graph, retrieval, generation and feedback events into ``manager.store``.

    Events are stored under the manager's current run id (``manager.run_id``) when it has one.
    With no store (``manager.store is None``) every hook is a no-op.

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (anything with ``.store``
        and, optionally, ``.run_id``).
    """

    def __init__(self, manager: PluginContext) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._pending: list[tuple[Any, str | None, Event]] = []  # (store, run id, event) this batch
        at_batch_end = getattr(manager, "at_batch_end", None)
        self._batched = bool(at_batch_end is not None and at_batch_end("triage.recorder", self.write_pending))

    @property
    def store(self) -> Store | None:
        """The manager's store, read at each event (so a store attached later is used too)."""
        return getattr(self._manager, "store", None)

    def _record(self, event: Event) -> None:
        store = self.store
        if store is None:
            return
        run_id = getattr(self._manager, "run_id", None)
        if self._batched and self._manager.batching():
            with self._lock:
                self._pending.append((store, run_id, event))
            return
        store.record_event(event, run_id=run_id)

    def write_pending(self) -> None:
        """Write the events buffered during a delivery batch, in order (see the module docstring)."""
        with self._lock:
            pending, self._pending = self._pending, []
        start = 0
        for i in range(1, len(pending) + 1):  # runs of consecutive events with the same store and run
            if i < len(pending) and pending[i][:2] == pending[start][:2]:
                continue
            store, run_id, _ = pending[start]
            events = [e for _, _, e in pending[start:i]]
            try:
                store.record_events(events, run_id=run_id)
            except Exception as exc:  # noqa: BLE001 - one bad event must not lose the batch
                log.warning("batched write of %d event(s) failed (%s); one by one", len(events), exc)
                _one_by_one(store, run_id, events)
            start = i

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


def _one_by_one(store: Any, run_id: str | None, events: list[Event]) -> None:
    """Write each event in its own transaction; the last failure is raised (the manager counts it)."""
    failed: Exception | None = None
    for event in events:
        try:
            store.record_event(event, run_id=run_id)
        except Exception as exc:  # noqa: BLE001 - write the others first
            failed = exc
    if failed is not None:
        raise failed
