"""The core's own features, shipped as default plugins (STYLE: the contract is sufficient).

Each entry is ``(name, "module:Factory")``; the factory is called with the manager, typed as a
:class:`~triage_plugins.contract.context.PluginContext`. Block any of them with
``TRIAGE_DISABLE_PLUGINS=name`` or replace it by registering your own plugin. The built-in metrics
(``triage.metrics``) and the reference runner of ``triage compare`` (``triage.reference``) are
registered through the registration hooks, as a third-party plugin's are.
"""

from __future__ import annotations

DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("triage.metrics", "triage_plugins.plugins.builtin_metrics:BuiltinMetrics"),
    ("triage.recorder", "triage_plugins.plugins.recorder:StoreRecorder"),
    ("triage.implementation", "triage_plugins.plugins.implementation:ImplementationRecorder"),
    ("triage.usage", "triage_plugins.plugins.usage:UsageRecorder"),
    ("triage.gate", "triage_plugins.plugins.gate:DefaultGate"),
    ("triage.feedback", "triage_plugins.plugins.feedback:FeedbackLearner"),
    ("triage.otel", "triage_plugins.plugins.otel:otel_plugin"),
    ("triage.reference", "triage_plugins.reference.plugin:ReferencePlugin"),
)
