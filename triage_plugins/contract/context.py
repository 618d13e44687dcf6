"""What a plugin may use of the manager that loads it: :class:`PluginContext`.

A default plugin's factory is called with the manager (:mod:`triage_plugins.plugins`); this protocol
names exactly what the default plugins read from it, so a plugin is typed against the contract, not
against :class:`~triage_plugins.runtime.manager.TriageManager`, and a test may pass any object that
has these members. Types are imported under ``TYPE_CHECKING``: the contract imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.contract.records import GraphRecord, QueryRecord
    from triage_plugins.metrics.registry import MetricRegistry
    from triage_plugins.plugins.feedback import FeedbackLearner
    from triage_plugins.plugins.recorder import StoreRecorder
    from triage_plugins.plugins.usage import UsageRecorder
    from triage_plugins.runtime.manager import Registration
    from triage_plugins.store.base import Store

__all__ = ["PluginContext"]


class PluginContext(Protocol):
    """The manager as the default plugins see it.

    :ivar config: thresholds, switches and the plugins' declared options.
    :ivar store: where rows go, or ``None`` (no persistence).
    :ivar run_id: the store run events are recorded under, or ``None``.
    :ivar carry_context: deliver queued items inside the emitting thread's ``contextvars`` (``True``
        or a callable run there first; set by ``triage.otel``).
    """

    config: TriageConfig
    store: Store | None
    run_id: str | None
    carry_context: bool | Callable[[], None]

    @property
    def metrics(self) -> MetricRegistry:
        """The metrics the manager's plugins register (the built-ins included)."""
        ...

    @property
    def learner(self) -> FeedbackLearner | None:
        """The registered feedback learner, or ``None``."""
        ...

    @property
    def recorder(self) -> StoreRecorder | None:
        """The registered store recorder, or ``None``."""
        ...

    @property
    def scorer(self) -> UsageRecorder | None:
        """The registered scorer, or ``None``."""
        ...

    def registrations(self, hook_name: str) -> list[Registration]:
        """What each plugin registers through a registration hook, called through pluggy's relay."""
        ...

    def batching(self) -> bool:
        """Whether the caller runs inside a delivery batch, so :meth:`at_batch_end` callbacks run after it."""
        ...

    def at_batch_end(self, owner: str, fn: Callable[[], None]) -> bool:
        """Run ``fn()`` after each delivery batch; ``False`` for a synchronous manager (write at once)."""
        ...

    def defer(self, fn: Callable[..., object], *args: object) -> bool:
        """Run ``fn(*args)`` on the delivery worker, in order with the queued notifications; ``False``
        when it was dropped."""
        ...

    def emit_query_scored(self, record: QueryRecord) -> None:
        """Broadcast one scored query (``triage_query_scored``)."""
        ...

    def emit_graph_scored(self, record: GraphRecord) -> None:
        """Broadcast one scored graph (``triage_graph_scored``)."""
        ...
