"""triage-plugins: observe, diagnose and improve graph-RAG frameworks.

The public surface most users need, all importable from here (explicit ``__all__``)::

    from triage_plugins import hookimpl, TriageManager, RetrievalEvent, Triple, Subgraph, QueryRecord

the hook marker, the manager, the events and their parts, the scorer's records, ``MetricSpec`` /
``MetricResult`` (to register a metric), ``PluginContext`` (what a plugin may use of the manager) and
``open_store``. Everything but the markers and the
errors is imported on first use, so ``import triage_plugins`` stays cheap.

The package is laid out one folder per concern (DESIGN §2): ``contract/`` (hooks, events, graph
view, errors, options), ``runtime/`` (the manager), ``plugins/`` (the default plugins), ``kg/``,
``metrics/``, ``diagnosis/``, ``feedback/``, ``store/``, ``adapter_kit/``, ``apps/`` and
``report/``. Plugin authors import from here; adapters from here and
:mod:`triage_plugins.adapter_kit`; the rest is private.
"""

from __future__ import annotations

import importlib

from triage_plugins.contract.errors import (
    ConfigError,
    DatasetError,
    EventError,
    OntologyError,
    StoreError,
    TriageError,
)
from triage_plugins.contract.hookspecs import hookimpl

__version__ = "0.1.0"

#: Public names imported on first use, and the module that holds each.
_LAZY: dict[str, str] = {
    "TriageManager": "triage_plugins.runtime.manager",
    **dict.fromkeys(
        (
            "Chunk",
            "Event",
            "ExtractedTriple",
            "ExtractionEvent",
            "FeedbackEvent",
            "GateDecision",
            "GenerationEvent",
            "Gold",
            "GraphEvent",
            "Path",
            "RerankRequest",
            "RetrievalEvent",
            "Subgraph",
            "Triple",
        ),
        "triage_plugins.contract.events",
    ),
    "GraphView": "triage_plugins.contract.graph_view",
    "PluginContext": "triage_plugins.contract.context",
    "QueryRecord": "triage_plugins.contract.records",
    "GraphRecord": "triage_plugins.contract.records",
    "MetricSpec": "triage_plugins.metrics.registry",
    "MetricResult": "triage_plugins.metrics.result",
    "TriageConfig": "triage_plugins.contract.config",
    "open_store": "triage_plugins.store",
}

__all__ = [
    "ConfigError",
    "DatasetError",
    "EventError",
    "OntologyError",
    "StoreError",
    "TriageError",
    "hookimpl",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str) -> object:  # lazy: importing the package stays cheap
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'triage_plugins' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
