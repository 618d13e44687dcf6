"""What every adapter shares (DESIGN §2): the instrumentor shape and the parts every framework needs once.

- :mod:`~triage_plugins.adapter_kit.instrumentor` — :class:`Instrumentor`, the base of every
  adapter's ``XInstrumentor`` (instrument / uninstrument / feedback / flush / query, one manager
  policy);
- :mod:`~triage_plugins.adapter_kit.ordering` — priorities -> host order;
- :mod:`~triage_plugins.adapter_kit.lru` — the bounded LRU;
- :mod:`~triage_plugins.adapter_kit.query_ids` — new query ids and the current one;
- :mod:`~triage_plugins.adapter_kit.logprobs` — token log-probabilities matched to record spans.

Mention coalescing is the grounder's (:func:`triage_plugins.kg.grounding.coalesce_mentions`).
Nothing here imports a framework.
"""

from __future__ import annotations

from triage_plugins.adapter_kit.instrumentor import Instrumentor
from triage_plugins.adapter_kit.lru import LRU
from triage_plugins.adapter_kit.ordering import as_relevance, ask_priorities, host_order
from triage_plugins.adapter_kit.query_ids import current_query_id, new_query_id, using_query_id

__all__ = [
    "LRU",
    "Instrumentor",
    "ask_priorities",
    "as_relevance",
    "current_query_id",
    "host_order",
    "new_query_id",
    "using_query_id",
]
