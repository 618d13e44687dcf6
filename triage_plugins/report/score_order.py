"""The order ``triage score`` lists its queries in: worst first, so the first screen shows what to fix.

A query that failed a link comes before one the chain could not read (undetermined), which comes before a
supported one; failures are ordered by the chain (earliest broken link first, TRIAGE Fig. 5), then by how
far the failed link fell below its threshold. Among supported queries, a wrong answer (Hits@1 = 0, a
silent failure) comes first. Ties keep the input order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from triage_plugins.diagnosis.chain import SIGNATURES

if TYPE_CHECKING:
    from triage_plugins.report.results import QueryScore

__all__ = ["WORST_FIRST", "worst_first"]

WORST_FIRST = "worst first: broken links in chain order, then undetermined, then silent failures"


def _failed_value(q: QueryScore) -> float:
    """The value of the link the query failed (lower is worse); 0 when unknown."""
    steps = q.diagnosis.steps if q.diagnosis is not None else ()
    failed = next((s for s in steps if s.status == "fail"), None)
    return 0.0 if failed is None or failed.value is None else failed.value


def _rank(q: QueryScore) -> tuple[int, float]:
    if q.signature is None:
        return len(SIGNATURES) - 1, 0.0
    if q.signature == "supported":
        hits = q.metrics.get("Hits@1")
        silent = hits is not None and hits.value == 0
        return len(SIGNATURES) + (0 if silent else 1), 0.0
    order = SIGNATURES.index(q.signature) if q.signature in SIGNATURES else len(SIGNATURES) - 1
    return order, _failed_value(q)


def worst_first(queries: list[QueryScore]) -> list[QueryScore]:
    """``queries`` sorted worst first (see the module docstring); a new list, the input is not changed."""
    return sorted(queries, key=_rank)
