"""The core's own features, shipped as default plugins (STYLE: the contract is sufficient).

Each entry is ``(name, "module:Factory")``; the factory is called with the manager. Block any of
them with ``TRIAGE_DISABLE_PLUGINS=name`` or replace it by registering your own plugin.
"""

from __future__ import annotations

DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("triage.recorder", "triage_plugins.plugins.recorder:StoreRecorder"),
    ("triage.implementation", "triage_plugins.plugins.implementation:ImplementationRecorder"),
    ("triage.usage", "triage_plugins.plugins.usage:UsageRecorder"),
    ("triage.gate", "triage_plugins.plugins.gate:DefaultGate"),
    ("triage.feedback", "triage_plugins.plugins.feedback:FeedbackLearner"),
    ("triage.otel", "triage_plugins.plugins.otel:otel_plugin"),
)
