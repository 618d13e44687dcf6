"""The ``/triage`` routes of :mod:`triage_lightrag.server` (FastAPI, behind LightRAG's own auth).

- ``POST /triage/feedback`` ``{"query_id", "score" in [0, 1], "source": "human"|"llm"|"gold"}``:
  200 ``{"status": "recorded"}`` once the feedback is delivered to the plugins (and so in the
  store); 200 ``{"status": "already recorded"}`` for a replay (a query id and source rated
  before, by any worker: nothing is delivered, no score moves; see
  :mod:`triage_lightrag.feedback_guard`); 202 ``{"status": "held"}`` while the rated answer is
  still streaming (applied at its end); 403 for ``source`` ``"llm"`` / ``"gold"`` without the
  operator credential (nothing stored); 404 for an id not of the shape this server issues, or one
  neither this worker answered recently (its last 2048 queries) nor the store holds a retrieval
  for; 422 for a score outside [0, 1] or not a finite number (JSON ``NaN`` / ``Infinity``: nothing
  is stored); 429 over the per-client rate (``Retry-After`` says when); 503 while the server is not
  serving or the store cannot be read.
  Feedback on a query that produced no answer built on its retrieval (a ``/query/data`` query,
  ``mode="bypass"``) is stored, but the feedback learner credits what an answer used, so it changes
  no learned score: the 200 body then says ``"learned": false`` with a ``"detail"``.
  An id another worker (or an earlier server) answered is accepted when the shared store holds its
  retrieval event: the feedback goes through this worker's manager, and its learner reloads that
  retrieval from the store. The answering worker records asynchronously, so for an id another
  process issued (its tag, the id's middle part, is not this process's) the route waits up to
  :data:`PEER_WAIT_SECONDS` for the retrieval to appear, then up to :data:`ANSWER_GRACE_SECONDS`
  for its answer (a ``/query/data`` query has none). The 200 body's ``"query_from"`` says which
  held the query: ``"this worker"`` or ``"store"``.
- ``GET /triage/summary``: the store's recent query metrics (mean and count per metric, how many
  were undefined), the gate's decisions, drops, plugin failures and store write failures
  (``store_write_failures``: by what and cause, and how many were stored after recovery) of this worker,
  and the serving processes found killed (``killed_workers``: each run ended without closing, with
  the queries whose answer never reached the store; :mod:`triage_lightrag.heartbeat`).
"""

from __future__ import annotations

import asyncio
import logging
import math
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

from triage_lightrag.feedback_guard import (
    OPERATOR_HEADER,
    FeedbackPolicy,
    RateLimiter,
    claim,
    from_peer,
    is_issued_shape,
    release,
)
from triage_lightrag.heartbeat import killed_runs
from triage_plugins import StoreError, TriageError
from triage_plugins.adapter_kit import unscoped
from triage_plugins.adapter_kit.lru import LRU

if TYPE_CHECKING:
    from triage_lightrag.server import TriageServerState

__all__ = ["Claims", "FeedbackRequest", "FiniteJSONRoute", "query_metrics", "summary", "triage_router"]

log = logging.getLogger("triage.lightrag.server")

SUMMARY_ROWS = 500  # most recent stored query-metric rows the summary reads (one per query, ~12 metrics)
FLUSH_SECONDS = 10.0
#: Longest wait for the retrieval of a query another process answered to reach the store.
PEER_WAIT_SECONDS = 5.0
#: Longest further wait, once that retrieval is stored, for the query's answer (generation event).
ANSWER_GRACE_SECONDS = 1.0
POLL_SECONDS = 0.05
#: What a replay's 200 body says.
REPLAYED = (
    "already recorded: this query was rated from this source before; one feedback per query id and "
    "source is kept (TRIAGE_FEEDBACK_REVISIONS=1 accepts revisions), so this one changes nothing"
)


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
    policy: FeedbackPolicy = state.options.policy()
    limiter = RateLimiter(policy.rate_per_minute) if policy.rate_per_minute else None
    claims = Claims(policy)

    def serving() -> Any:
        if state.inst is None:
            raise HTTPException(status_code=503, detail="triage is not running (server starting or stopping)")
        return state.inst

    @router.post("/feedback")
    async def feedback(body: FeedbackRequest, request: Request) -> Any:
        inst = serving()
        admit(body, request, policy, limiter)
        if not is_issued_shape(body.query_id, inst.framework):
            raise HTTPException(status_code=404, detail=unknown_id(body.query_id, inst.framework))
        if not inst.knows_query(body.query_id):
            return await asyncio.to_thread(feedback_from_store, inst, body, claims)
        if not await asyncio.to_thread(claims.take, inst, body):
            return _replayed(body)
        try:
            inst.feedback(body.query_id, body.score, body.source)
        except TriageError as exc:
            await asyncio.to_thread(claims.give_back, inst, body)
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


def admit(
    body: FeedbackRequest, request: Request, policy: FeedbackPolicy, limiter: RateLimiter | None
) -> None:
    """Refuse, before anything is stored: a client over its rate (429), a privileged ``source``
    without the operator credential (403)."""
    if limiter is not None:
        client = request.client.host if request.client is not None else "unknown"
        wait = limiter.retry_after(client)
        if wait is not None:
            raise HTTPException(
                status_code=429,
                detail=f"too much feedback from {client}: at most {limiter.per_minute} per minute",
                headers={"Retry-After": str(max(1, math.ceil(wait)))},
            )
    refusal = policy.refusal(body.source, request.headers.get(OPERATOR_HEADER))
    if refusal is not None:
        raise HTTPException(status_code=403, detail=refusal)


def unknown_id(query_id: str, framework: str) -> str:
    return (
        f"unknown query id {query_id!r}: not an id this server issued (the {framework}-<tag>-<token> "
        "of an X-Triage-Query-Id header)"
    )


class Claims:
    """One feedback per query id and source (:func:`~triage_lightrag.feedback_guard.claim`), in the
    shared store; in this process only when there is no store; nothing when revisions are allowed.

    :raises HTTPException: 503 when the store cannot be written.
    """

    def __init__(self, policy: FeedbackPolicy) -> None:
        self.revisions = policy.revisions
        self._local: LRU[tuple[str, str, str], bool] = LRU(65536)

    def take(self, inst: Any, body: FeedbackRequest) -> bool:
        """``True`` when this feedback may be delivered (the first for its query id and source)."""
        if self.revisions:
            return True
        store = unscoped(inst.manager.store)  # query ids are unique across workspaces
        if store is None:
            key = (inst.framework, body.query_id, body.source)
            first = self._local.get(key) is None
            self._local.put(key, True)
            return first
        try:
            return claim(store, inst.framework, body.query_id, body.source)
        except StoreError as exc:
            raise HTTPException(status_code=503, detail=f"the store could not be written: {exc}") from None

    def give_back(self, inst: Any, body: FeedbackRequest) -> None:
        """Undo :meth:`take` for feedback that was not delivered."""
        if self.revisions:
            return
        store = unscoped(inst.manager.store)
        if store is None:
            self._local.pop((inst.framework, body.query_id, body.source), None)
            return
        try:
            release(store, inst.framework, body.query_id, body.source)
        except StoreError as exc:  # the slot stays taken: a retry is answered "already recorded"
            log.warning("could not release the feedback claim of %s: %s", body.query_id, exc)


def _replayed(body: FeedbackRequest) -> dict[str, Any]:
    return {"query_id": body.query_id, "score": body.score, "status": "already recorded", "detail": REPLAYED}


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


def feedback_from_store(inst: Any, body: FeedbackRequest, claims: Claims) -> dict[str, Any]:
    """Feedback for an id this worker does not know: accepted when the store holds its retrieval
    (once per query id and source, see :class:`Claims`).

    Runs off the event loop (it may wait, see :func:`wait_for_retrieval`).
    :raises HTTPException: 404 when the store holds no retrieval for the id either; 503 when the
        store cannot be read.
    """
    from triage_plugins import FeedbackEvent

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
    if not claims.take(inst, body):
        return _replayed(body)
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

    For an id another process issued (:func:`~triage_lightrag.feedback_guard.from_peer`: that
    process may not have delivered its events yet), wait up to :data:`PEER_WAIT_SECONDS` for it,
    then up to :data:`ANSWER_GRACE_SECONDS` for the query's generation event, so the learner sees
    the answer too; any other id is looked up once.
    """
    peer = is_issued_shape(query_id, framework) and from_peer(query_id)
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
        "store_write_failures": manager.write_failures,
        "gate_decisions": dict(Counter(d.action for _, d in inst.gate_decisions())),
        "store": None,
        "metrics": {},
    }
    store = manager.store
    if store is None:
        return out
    out["store"] = store.url
    out["metrics"], out["queries"] = query_metrics(store)
    out["killed_workers"] = killed_runs(store)
    return out


def query_metrics(store: Any, rows: int = SUMMARY_ROWS) -> tuple[dict[str, dict[str, Any]], int]:
    """(per metric: mean, n, undefined; how many queries) over the store's newest ``rows`` stored
    query-metric rows: a bounded read, whatever the store's size."""
    metrics: dict[str, dict[str, Any]] = {}
    read = store.metrics(scope="query", last=rows)
    values: dict[str, list[float]] = {}
    undefined: Counter[str] = Counter()
    for row in read:
        if row.value is None or not math.isfinite(row.value):
            undefined[row.name] += 1
        else:
            values.setdefault(row.name, []).append(float(row.value))
    for name in sorted(set(values) | set(undefined)):
        got = values.get(name, [])
        metrics[name] = {
            "mean": sum(got) / len(got) if got else None,
            "n": len(got),
            "undefined": undefined[name],
        }
    return metrics, len({row.scope_id for row in read})
