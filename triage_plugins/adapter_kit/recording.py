"""An event recorder: register it on a manager, read back what was delivered.

``rec = EventRecorder(); manager.register(rec)``; after ``manager.flush()``, ``rec.events`` holds
every extraction, graph, retrieval, generation and feedback event in delivery order and
``rec.of("retrieval")`` those of one kind. ``triage compare`` collects each row's events with it,
and adapter tests (this project's, or an adapter author's) read what they emitted (it observes
only: no hook returns a value).
"""

from __future__ import annotations

from typing import Any

from triage_plugins.contract.hookspecs import hookimpl

__all__ = ["EventRecorder"]


class EventRecorder:
    """Records every notification event it is delivered, in order."""

    def __init__(self) -> None:
        self.events: list[Any] = []

    def of(self, kind: str) -> list[Any]:
        """The recorded events of one kind (``"extraction"``, ``"graph"``, ``"retrieval"`` …)."""
        return [e for e in self.events if e.kind == kind]

    @hookimpl
    def triage_extraction(self, event: Any) -> None:
        self.events.append(event)

    @hookimpl
    def triage_graph(self, event: Any) -> None:
        self.events.append(event)

    @hookimpl
    def triage_retrieval(self, event: Any) -> None:
        self.events.append(event)

    @hookimpl
    def triage_generation(self, event: Any) -> None:
        self.events.append(event)

    @hookimpl
    def triage_feedback(self, event: Any) -> None:
        self.events.append(event)
