"""The core's own features, shipped as default plugins (STYLE: the contract is sufficient).

Each entry is ``(name, "module:Factory")``; the factory is called with the manager. Block any of
them with ``TRIAGE_DISABLE_PLUGINS=name`` or replace it by registering your own plugin.
"""

from __future__ import annotations

DEFAULT_PLUGINS: tuple[tuple[str, str], ...] = (
    ("triage.recorder", "triage_plugins.handlers.recorder:StoreRecorder"),
    ("triage.feedback", "triage_plugins.handlers.feedback:FeedbackLearner"),
)
