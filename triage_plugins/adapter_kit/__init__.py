"""What every adapter shares (DESIGN §2): the instrumentor shape and the parts every framework needs once.

- :mod:`~triage_plugins.adapter_kit.instrumentor` — :class:`Instrumentor`, the base of every
  adapter's ``XInstrumentor`` (instrument / uninstrument / feedback / flush / query, one manager
  policy);
- :mod:`~triage_plugins.adapter_kit.ordering` — priorities -> host order;
- :mod:`~triage_plugins.adapter_kit.lru` — the bounded LRU;
- :mod:`~triage_plugins.adapter_kit.query_ids` — new query ids and the current one;
- :mod:`~triage_plugins.adapter_kit.logprobs` — token log-probabilities matched to record spans.

With the package face (``from triage_plugins import TriageManager, RetrievalEvent, …``) this is the
one import of an adapter (a test holds them to it): the core's parts an adapter needs beyond the face
are re-exported here, imported on first use (the grounder, ``normalize_label``, ``na`` / ``ok``, the
store type and namespace helpers, ``default_manager``, ``DEFAULT_GATE_MODE``), and the offline
stand-ins an adapter's offline mode builds on are in :mod:`triage_plugins.adapter_kit.offline`.
Mention coalescing is the grounder's (:func:`coalesce_mentions`). Nothing here imports a framework.
"""

from __future__ import annotations

import importlib

from triage_plugins.adapter_kit.instrumentor import Instrumentor
from triage_plugins.adapter_kit.lru import LRU
from triage_plugins.adapter_kit.ordering import as_relevance, ask_priorities, host_order
from triage_plugins.adapter_kit.query_ids import current_query_id, new_query_id, using_query_id

#: The core's names an adapter may import from here beyond the package face, imported on first use.
_LAZY: dict[str, str] = {
    "GENERATION_CONTEXTS": "triage_plugins.contract.events",
    "trusted_parts": "triage_plugins.contract.events",
    "normalize_label": "triage_plugins.contract.graph_view",
    "Grounder": "triage_plugins.kg.grounding",
    "coalesce_mentions": "triage_plugins.kg.grounding",
    "shared_grounder": "triage_plugins.kg.grounding",
    "na": "triage_plugins.metrics.result",
    "ok": "triage_plugins.metrics.result",
    "DEFAULT_GATE_MODE": "triage_plugins.plugins.gate",
    "default_manager": "triage_plugins.runtime.manager",
    "Store": "triage_plugins.store.base",
    "join_namespaces": "triage_plugins.store.scoped",
    "unscoped": "triage_plugins.store.scoped",
}

__all__ = [
    "LRU",
    "Instrumentor",
    "ask_priorities",
    "as_relevance",
    "current_query_id",
    "host_order",
    "new_query_id",
    "using_query_id",
    *_LAZY,
]


def __getattr__(name: str) -> object:  # lazy: an adapter's import stays as cheap as before
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
