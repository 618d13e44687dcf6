"""triage-plugins: observe, diagnose and improve graph-RAG frameworks.

The public surface most users need::

    from triage_plugins import hookimpl, TriageManager
    from triage_plugins.events import RetrievalEvent, Triple, Subgraph
"""

from __future__ import annotations

from triage_plugins.errors import (
    ConfigError,
    DatasetError,
    EventError,
    OntologyError,
    StoreError,
    TriageError,
)
from triage_plugins.hookspecs import hookimpl

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "DatasetError",
    "EventError",
    "OntologyError",
    "StoreError",
    "TriageError",
    "TriageManager",
    "hookimpl",
    "__version__",
]


def __getattr__(name: str):  # lazy: importing the package stays cheap
    if name == "TriageManager":
        from triage_plugins.manager import TriageManager

        return TriageManager
    raise AttributeError(name)
