"""triage-plugins: observe, diagnose and improve graph-RAG frameworks.

The public surface most users need, all importable from here (explicit ``__all__``)::

    from triage_plugins import hookimpl, TriageManager, RetrievalEvent, Triple, Subgraph, QueryRecord

the hook marker, the manager, the events and their parts, the scorer's records, ``MetricSpec`` /
``MetricResult`` (to register a metric) and ``open_store``. Everything but the markers and the
errors is imported on first use, so ``import triage_plugins`` stays cheap.

The package is laid out one folder per concern (DESIGN §2): ``contract/`` (hooks, events, graph
view, errors, options), ``runtime/`` (the manager), ``plugins/`` (the default plugins), ``kg/``,
``metrics/``, ``diagnosis/``, ``feedback/``, ``store/``, ``adapter_kit/``, ``apps/`` and
``report/``. The modules users imported before that layout (``triage_plugins.events``,
``.hookspecs``, ``.manager`` …) stay importable under their old names.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

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

#: Old module paths (before the layout of DESIGN §2) and where they live now.
MOVED_MODULES: dict[str, str] = {
    "triage_plugins.events": "triage_plugins.contract.events",
    "triage_plugins.hookspecs": "triage_plugins.contract.hookspecs",
    "triage_plugins.errors": "triage_plugins.contract.errors",
    "triage_plugins.config": "triage_plugins.contract.config",
    "triage_plugins.graph": "triage_plugins.contract.graph_view",
    "triage_plugins.manager": "triage_plugins.runtime.manager",
    "triage_plugins.grounding": "triage_plugins.kg.grounding",
    "triage_plugins.ontology": "triage_plugins.kg.ontology",
}


class _MovedModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports an old module path as the module that now holds it (the same module object)."""

    def find_spec(self, fullname, path=None, target=None):  # noqa: ANN001 - importlib's signature
        if fullname not in MOVED_MODULES:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec):  # noqa: ANN001
        module = importlib.import_module(MOVED_MODULES[spec.name])
        spec.loader_state = module.__spec__  # importlib overwrites it next: exec_module restores it
        return module

    def exec_module(self, module) -> None:  # noqa: ANN001 - already executed under its own name
        # importlib stamped the alias spec on the module: give it back its own.
        module.__spec__ = module.__spec__.loader_state


if not any(isinstance(f, _MovedModuleFinder) for f in sys.meta_path):
    sys.meta_path.append(_MovedModuleFinder())


def __getattr__(name: str) -> object:  # lazy: importing the package stays cheap
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'triage_plugins' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
