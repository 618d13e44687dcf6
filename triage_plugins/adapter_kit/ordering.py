"""Priorities -> host order: how every adapter turns ``triage_rerank``'s answer into a ranking.

An adapter collects the candidates its framework is about to rank (triples or chunks, possibly
with repeats), sends each distinct id once with the framework's own relevance S_r in [0, 1]
(:func:`ask_priorities`), and orders the candidates by the priorities that come back
(:func:`host_order`): a **stable** sort, best first, so candidates the scores cannot tell apart keep
the framework's order. What the adapter then writes into the framework (a reordered list, integer
ranks, a score field) is its own ranking knob; the order itself is computed here, once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from triage_plugins.contract.events import RerankRequest

if TYPE_CHECKING:
    from triage_plugins.runtime.manager import TriageManager

__all__ = ["ask_priorities", "as_relevance", "host_order"]


def as_relevance(value: Any) -> float:
    """A framework score as S_r in [0, 1]: clipped; non-numbers and NaN count as 0."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if math.isnan(v) else min(1.0, max(0.0, v))


def ask_priorities(
    manager: TriageManager,
    framework: str,
    query: str,
    unit: str,
    ids: Sequence[str],
    relevance: Sequence[Any],
    query_id: str | None = None,
) -> list[float] | None:
    """``manager.rerank`` for these candidates: one priority per candidate, or ``None``.

    Repeated ids are asked once, with the first occurrence's relevance (clamped by
    :func:`as_relevance`), and share that priority. ``None`` when there is no candidate or no
    plugin answered: keep the framework's order.
    """
    unique: dict[str, float] = {}
    for cid, s_r in zip(ids, relevance, strict=True):
        unique.setdefault(cid, as_relevance(s_r))
    if not unique:
        return None
    request = RerankRequest(framework, query, unit, tuple(unique), tuple(unique.values()), query_id)  # type: ignore[arg-type]
    answer = manager.rerank(request)
    if answer is None:
        return None
    by_id = dict(zip(unique, answer, strict=True))
    return [by_id[cid] for cid in ids]


def host_order(priorities: Sequence[float], ties: Sequence[int] | None = None) -> list[int]:
    """Candidate indices best first: a stable sort by descending priority.

    :param ties: the order that decides among equal priorities (default: the candidates' own order,
        i.e. the framework's); a permutation of ``range(len(priorities))``.
    """
    base = range(len(priorities)) if ties is None else ties
    return sorted(base, key=lambda i: -priorities[i])
