"""The ``/triage`` routes of :mod:`triage_lightrag.server` (FastAPI, behind LightRAG's own auth).

- ``POST /triage/feedback`` ``{"query_id", "score" in [0, 1], "source": "human"|"llm"|"gold"}``:
  200 ``{"status": "recorded"}`` once the feedback is delivered to the plugins (and so in the
  store); 202 ``{"status": "held"}`` while the rated answer is still streaming (applied at its
  end); 404 for an id neither this worker answered recently (its last 2048 queries) nor the store
  holds a retrieval for; 422 for a score outside [0, 1] or not a finite number (JSON ``NaN`` /
  ``Infinity``: nothing is stored); 503 while the server is not serving or the store cannot be read.
  Feedback on a query that produced no answer built on its retrieval (a ``/query/data`` query,
  ``mode="bypass"``) is stored, but the feedback learner credits what an answer used, so it changes
  no learned score: the 200 body then says ``"learned": false`` with a ``"detail"``.
  An id another worker (or an earlier server) answered is accepted when the shared store holds its
  retrieval event: the feedback goes through this worker's manager, and its learner reloads that
  retrieval from the store. The answering worker records asynchronously, so for an id in the
  shape of another process's (``lightrag-<10 hex>-<n>``) the route waits up to
  :data:`PEER_WAIT_SECONDS` for the retrieval to appear, then up to :data:`ANSWER_GRACE_SECONDS`
  for its answer (a ``/query/data`` query has none). The 200 body's ``"query_from"`` says which
  held the query: ``"this worker"`` or ``"store"``.
- ``GET /triage/summary``: the store's recent query metrics (mean and count per metric, how many
  were undefined), the gate's decisions, drops and plugin failures of this worker.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Literal

from fastapi import APIRouter, Depends, HTTPException
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, Field
from starlette.requests import Request
from starlette.responses import Response

from triage_plugins.contract.errors import StoreError, TriageError

if TYPE_CHECKING:
    from triage_lightrag.server import TriageServerState

__all__ = ["FeedbackRequest", "FiniteJSONRoute", "summary", "triage_router"]

SUMMARY_ROWS = 5000  # most recent query-metric rows the summary reads
FLUSH_SECONDS = 10.0
#: Longest wait for the retrieval of a query another process answered to reach the store.
PEER_WAIT_SECONDS = 5.0
#: Longest further wait, once that retrieval is stored, for the query's answer (generation event).
ANSWER_GRACE_SECONDS = 1.0
POLL_SECONDS = 0.05
#: ``new_query_id``'s shape: ``<framework>-<10 hex process part>-<counter>``.
_QUERY_ID = re.compile(r"^(?P<framework>[A-Za-z0-9_.]+)-(?P<process>[0-9a-f]{10})-(?P<n>[0-9]+)$")


#: What the 200 body's ``"detail"`` says when the rated query has no answer to learn from.
NO_ANSWER = (
    "recorded, but no score changed: this query produced no answer built on its retrieval (a "
    "/query/data query, or mode=bypass), and the feedback learner credits what an answer used"
)
FINITE_SCORE = "score must be a finite number between 0 and 1 (JSON NaN and Infinity are not scores)"


class FeedbackRequest(BaseModel):
    query_id: str = Field(min_length=1, max_length=200)
    score: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    source: Literal["human", "llm", "gold"] = "human"


class FiniteJSONRoute(APIRoute):
    """A route whose 422 can always be rendered: Python's JSON parser accepts ``NaN`` and
    ``Infinity``, and a validation error echoes its input, which ``lightrag-server``'s own 422
    handler (like Starlette's ``JSONResponse``) cannot serialize, so the client got a 500. Here
    non-finite numbers in the errors become the strings ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``
    and a non-finite score is named as such."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                errors = [_finite_error(e) for e in exc.errors()]
                raise RequestValidationError(
                    errors, body=_finite(exc.body), endpoint_ctx=exc.endpoint_ctx
                ) from None

        return route


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its JSON-ish name (a string)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_finite(v) for v in value)
    return value


def _finite_error(error: Any) -> Any:
    if not isinstance(error, dict):
        return error
    error = _finite(error)
    if error.get("type") == "finite_number" or (
        tuple(error.get("loc") or ())[-1:] == ("score",)
        and error.get("input") in ("NaN", "Infinity", "-Infinity")
    ):
        error["msg"] = FINITE_SCORE
    return error


def triage_router(state: TriageServerState, api_key: str | None) -> APIRouter:
    """The router, guarded by the same auth dependency as LightRAG's own routes."""
    from lightrag.api.utils_api import get_combined_auth_dependency

    router = APIRouter(
        prefix="/triage",
        tags=["triage"],
        dependencies=[Depends(get_combined_auth_dependency(api_key))],
        route_class=FiniteJSONRoute,
    )

    def serving() -> Any:
        if state.inst is None:
            raise HTTPException(status_code=503, detail="triage is not running (server starting or stopping)")
        return state.inst

    @router.post("/feedback")
    async def feedback(body: FeedbackRequest) -> Any:
        inst = serving()
        if not inst.knows_query(body.query_id):
            return await asyncio.to_thread(feedback_from_store, inst, body)
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
        return _recorded(body, delivered, "this worker", inst.answered(body.query_id))

    @router.get("/summary")
    async def get_summary() -> Any:
        inst = serving()
        return await asyncio.to_thread(summary, inst)

    return router


def _recorded(
    body: FeedbackRequest, delivered: bool, query_from: str, answered: bool | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "query_id": body.query_id,
        "score": body.score,
        "status": "recorded" if delivered else "queued",
        "query_from": query_from,
    }
    if answered is False:
        out.update(learned=False, detail=NO_ANSWER)
    return out


def feedback_from_store(inst: Any, body: FeedbackRequest) -> dict[str, Any]:
    """Feedback for an id this worker does not know: accepted when the store holds its retrieval.

    Runs off the event loop (it may wait, see :func:`wait_for_retrieval`).
    :raises HTTPException: 404 when the store holds no retrieval for the id either; 503 when the
        store cannot be read.
    """
    from triage_plugins.contract.events import FeedbackEvent

    store = inst.manager.store
    try:
        found = store is not None and wait_for_retrieval(store, inst.framework, body.query_id)
    except StoreError as exc:
        raise HTTPException(status_code=503, detail=f"the store could not be read: {exc}") from None
    if not found:
        raise HTTPException(
            status_code=404,
            detail=(
                f"unknown or expired query id {body.query_id!r}: not among this worker's recent "
                f"queries, and the store holds no {inst.framework} retrieval for it"
            ),
        )
    event = FeedbackEvent(inst.framework, body.query_id, body.score, body.source)
    delivered = inst.manager.emit_feedback(event, wait=True, timeout=FLUSH_SECONDS)
    try:
        answer = store.last_event("generation", framework=inst.framework, query_id=body.query_id)
    except StoreError:
        answered = None  # the feedback is recorded; whether it can be learned from is unknown
    else:
        answered = answer is not None and getattr(answer, "context", "retrieved") == "retrieved"
    return _recorded(body, delivered, "store", answered)


def wait_for_retrieval(store: Any, framework: str, query_id: str) -> bool:
    """Whether ``store`` holds a ``framework`` retrieval event for ``query_id``.

    For an id in the shape another process's :func:`~triage_plugins.adapter_kit.query_ids.new_query_id`
    gives (that process may not have delivered its events yet), wait up to
    :data:`PEER_WAIT_SECONDS` for it, then up to :data:`ANSWER_GRACE_SECONDS` for the query's
    generation event, so the learner sees the answer too; any other id is looked up once.
    """
    match = _QUERY_ID.match(query_id)
    peer = match is not None and match["framework"] == framework and match["process"] != _own_process()
    deadline = time.monotonic() + (PEER_WAIT_SECONDS if peer else 0.0)
    while store.last_event("retrieval", framework=framework, query_id=query_id) is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_SECONDS)
    if peer:
        deadline = time.monotonic() + ANSWER_GRACE_SECONDS
        while store.last_event("generation", framework=framework, query_id=query_id) is None:
            if time.monotonic() >= deadline:
                break
            time.sleep(POLL_SECONDS)
    return True


def _own_process() -> str:
    """The process part of this process's query ids."""
    from triage_plugins.adapter_kit.query_ids import new_query_id

    return new_query_id("probe").split("-")[1]


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
