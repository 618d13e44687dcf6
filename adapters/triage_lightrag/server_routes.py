"""The ``/triage`` routes of :mod:`triage_lightrag.server` (FastAPI, behind LightRAG's own auth).

- ``POST /triage/feedback`` ``{"query_id", "score" in [0, 1], "source": "human"|"llm"|"gold"}``:
  200 ``{"status": "recorded"}`` once the feedback is delivered to the plugins (and so in the
  store); 202 ``{"status": "held"}`` while the rated answer is still streaming (applied at its
  end); 404 for an id this worker never answered or no longer remembers (the last 2048 queries);
  422 for a score outside [0, 1]; 503 while the server is not serving.
- ``GET /triage/summary``: the store's recent query metrics (mean and count per metric, how many
  were undefined), the gate's decisions, drops and plugin failures of this worker.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel, Field

from triage_plugins.contract.errors import TriageError

if TYPE_CHECKING:
    from triage_lightrag.server import TriageServerState

__all__ = ["FeedbackRequest", "summary", "triage_router"]

SUMMARY_ROWS = 5000  # most recent query-metric rows the summary reads
FLUSH_SECONDS = 10.0


class FeedbackRequest(BaseModel):
    query_id: str = Field(min_length=1, max_length=200)
    score: float = Field(ge=0.0, le=1.0)
    source: Literal["human", "llm", "gold"] = "human"


def triage_router(state: TriageServerState, api_key: str | None) -> APIRouter:
    """The router, guarded by the same auth dependency as LightRAG's own routes."""
    from lightrag.api.utils_api import get_combined_auth_dependency

    router = APIRouter(
        prefix="/triage", tags=["triage"], dependencies=[Depends(get_combined_auth_dependency(api_key))]
    )

    def serving() -> Any:
        if state.inst is None:
            raise HTTPException(status_code=503, detail="triage is not running (server starting or stopping)")
        return state.inst

    @router.post("/feedback")
    async def feedback(body: FeedbackRequest) -> Any:
        inst = serving()
        if not inst.knows_query(body.query_id):
            raise HTTPException(
                status_code=404,
                detail=f"unknown or expired query id {body.query_id!r} (not among this worker's recent queries)",
            )
        try:
            inst.feedback(body.query_id, body.score, body.source)
        except TriageError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from None
        if inst.awaiting_stream(body.query_id):
            from fastapi.responses import JSONResponse

            return JSONResponse(
                status_code=202,
                content={
                    "query_id": body.query_id,
                    "status": "held",
                    "detail": "applied when the answer stream ends",
                },
            )
        delivered = await asyncio.to_thread(inst.flush, FLUSH_SECONDS)
        return {
            "query_id": body.query_id,
            "score": body.score,
            "status": "recorded" if delivered else "queued",
        }

    @router.get("/summary")
    async def get_summary() -> Any:
        inst = serving()
        return await asyncio.to_thread(summary, inst)

    return router


def summary(inst: Any) -> dict[str, Any]:
    """What ``GET /triage/summary`` returns (computed off the event loop)."""
    manager = inst.manager
    out: dict[str, Any] = {
        "framework": inst.framework,
        "reweight": inst.reweight,
        "unit": inst.unit,
        "gate": inst.gate_mode,
        "dropped": manager.dropped,
        "pending": manager.pending,
        "adapter_errors": inst.errors,
        "plugin_failures": sum(manager.failures.values()),
        "gate_decisions": dict(Counter(d.action for _, d in inst.gate_decisions())),
        "store": None,
        "metrics": {},
    }
    store = manager.store
    if store is None:
        return out
    out["store"] = store.url
    rows = store.metrics(scope="query")[-SUMMARY_ROWS:]
    values: dict[str, list[float]] = {}
    undefined: Counter[str] = Counter()
    for row in rows:
        if row.value is None or not math.isfinite(row.value):
            undefined[row.name] += 1
        else:
            values.setdefault(row.name, []).append(float(row.value))
    for name in sorted(set(values) | set(undefined)):
        got = values.get(name, [])
        out["metrics"][name] = {
            "mean": sum(got) / len(got) if got else None,
            "n": len(got),
            "undefined": undefined[name],
        }
    out["queries"] = len({row.scope_id for row in rows})
    return out
