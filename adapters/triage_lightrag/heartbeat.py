"""A lease per serving process in the shared store, so a SIGKILLed worker's lost events are counted.

Each serving process (one per gunicorn worker) holds a lease on its run: a store parameter
``lightrag.lease/<run id>`` rewritten every :data:`HEARTBEAT_SECONDS` (``TRIAGE_HEARTBEAT_SECONDS``)
and whenever a query starts, holding its pid and host, the time, how long the lease lasts (three
beats), the ids of the ``/query*`` requests in flight and the events queued for the store.

A run ended cleanly has ``ended_at`` set by its manager. A run whose lease expired (or whose process,
on this host, is gone) without that is *killed*: at the next start of any serving process of the
same store and workspace (and on its later beats) :func:`reap` ends it with ``undelivered`` = the
queries in flight at its last beat whose answer (generation event) never reached the store (at
least one event each was lost), and ``faults["killed"]`` saying what is known: pid, last beat,
those queries, and the events that were queued at the last beat. A query started and killed between
two writes of the lease is unknowable; so is what was queued after the last beat.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = [
    "HEARTBEAT_SECONDS",
    "InFlightMiddleware",
    "Lease",
    "killed_runs",
    "lease_name",
    "reap",
]

log = logging.getLogger("triage.lightrag.heartbeat")

#: Seconds between two writes of a lease (``TRIAGE_HEARTBEAT_SECONDS``); a lease lasts three.
HEARTBEAT_SECONDS = 5.0
RUN_KIND = "lightrag-server"
FRAMEWORK = "lightrag"
MAX_IDS = 1000  # in-flight query ids a lease lists (more are counted, not named)
MIN_GAP_SECONDS = 0.25  # between two writes of a lease woken by starting queries


def lease_name(run_id: str) -> str:
    return f"lightrag.lease/{run_id}"


def heartbeat_seconds() -> float:
    try:
        value = float(os.environ.get("TRIAGE_HEARTBEAT_SECONDS", "") or HEARTBEAT_SECONDS)
    except ValueError:
        return HEARTBEAT_SECONDS
    return value if value > 0 else HEARTBEAT_SECONDS


class Lease:
    """This process's lease: the queries in flight, and the thread that writes them down."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._in_flight: dict[str, float] = {}
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.store: Any = None
        self.run_id: str | None = None
        self.pending: Callable[[], int] = lambda: 0
        self.reaped: list[dict[str, Any]] = []

    # the query side (event loop): cheap, no I/O
    def begin(self, query_id: str) -> None:
        with self._lock:
            self._in_flight[query_id] = time.time()
        self._wake.set()

    def end(self, query_id: str) -> None:
        with self._lock:
            self._in_flight.pop(query_id, None)

    # the serving process's start and stop
    def start(self, store: Any, run_id: str | None, pending: Callable[[], int]) -> None:
        """Reap killed runs, write the first lease, then beat in a daemon thread."""
        if store is None or run_id is None:
            return
        self.store, self.run_id, self.pending = store, run_id, pending
        self._stop.clear()
        self.reaped = reap(store, own_run=run_id)
        self._write()
        self._thread = threading.Thread(target=self._beat, name="triage-lease", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating; the run's clean end (its manager's ``end_run``) makes the lease moot."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def _beat(self) -> None:
        interval = heartbeat_seconds()
        next_reap = time.monotonic() + 3 * interval
        while not self._stop.is_set():
            self._wake.wait(interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self._write()
            self._stop.wait(MIN_GAP_SECONDS)  # a burst of queries: one write
            if time.monotonic() >= next_reap:
                next_reap = time.monotonic() + 3 * interval
                self.reaped += reap(self.store, own_run=self.run_id)

    def _write(self) -> None:
        with self._lock:
            ids = list(self._in_flight)
        lease = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "at": time.time(),
            "ttl": 3 * heartbeat_seconds(),
            "in_flight": ids[:MAX_IDS],
            "in_flight_count": len(ids),
            "queued": int(self.pending()),
        }
        try:
            self.store.set_param(lease_name(str(self.run_id)), lease)
        except Exception as exc:  # noqa: BLE001 - a missed beat must not fail the host
            log.warning("triage: could not write the lease of run %s: %s", self.run_id, exc)


# --------------------------------------------------------------------------- reaping


def _alive(lease: dict[str, Any], now: float) -> bool:
    """Whether a lease's process may still be serving: its lease is current and, on this host, its
    pid exists."""
    if lease.get("host") == socket.gethostname() and isinstance(lease.get("pid"), int):
        try:
            os.kill(lease["pid"], 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
    return float(lease.get("at", 0)) + float(lease.get("ttl", 0)) > now


def _unanswered(store: Any, lease: dict[str, Any]) -> list[str]:
    """The in-flight query ids of a lease whose answer never reached the store."""
    return [
        qid
        for qid in lease.get("in_flight") or ()
        if store.last_event("generation", framework=FRAMEWORK, query_id=str(qid)) is None
    ]


def reap(store: Any, *, own_run: str | None = None) -> list[dict[str, Any]]:
    """End every killed serving run of ``store`` (see the module docstring); what each lost."""
    now, out = time.time(), []
    try:
        runs = [r for r in store.runs(RUN_KIND) if r.ended_at is None and r.id != own_run]
    except Exception as exc:  # noqa: BLE001
        log.warning("triage: could not look for killed workers: %s", exc)
        return []
    for run in runs:
        lease = store.get_param(lease_name(run.id))
        if not isinstance(lease, dict) or _alive(lease, now):
            continue  # no lease (a run from before leases) or still serving
        if not store.claim_replay(f"reap:{run.id}"):
            continue  # another process reaped it
        unanswered = _unanswered(store, lease)
        killed = {
            "pid": lease.get("pid"),
            "host": lease.get("host"),
            "last_heartbeat": lease.get("at"),
            "queries_unanswered": len(unanswered),
            "unanswered_ids": unanswered[:20],
            "in_flight_unnamed": max(
                0, int(lease.get("in_flight_count", 0)) - len(lease.get("in_flight") or ())
            ),
            "queued_at_last_heartbeat": int(lease.get("queued", 0)),
        }
        store.end_run(
            run.id, dropped=run.dropped, undelivered=run.undelivered + len(unanswered),
            faults={**dict(run.faults), "killed": killed},
        )  # fmt: skip
        log.warning(
            "triage: run %s (pid %s) ended without closing: %d answered queries lost their events",
            run.id, killed["pid"], len(unanswered),
        )  # fmt: skip
        out.append({"run": run.id, **killed})
    return out


def killed_runs(store: Any) -> list[dict[str, Any]]:
    """The serving runs of ``store`` that were reaped as killed, oldest first, with what they lost."""
    return [
        {"run": r.id, "ended_at": r.ended_at, "undelivered": r.undelivered, **dict(r.faults["killed"])}
        for r in store.runs(RUN_KIND)
        if isinstance(r.faults.get("killed"), dict)
    ]


# --------------------------------------------------------------------------- the middleware


class InFlightMiddleware:
    """Pure ASGI middleware, inside ``QueryIdMiddleware``: a ``/query*`` request is in flight (in
    the lease) from its start until its last body byte is sent."""

    def __init__(self, app: Callable[..., Any], lease: Lease) -> None:
        self.app = app
        self.lease = lease

    async def __call__(
        self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]
    ) -> None:
        from triage_plugins.adapter_kit.query_ids import current_query_id

        qid = current_query_id() if scope.get("type") == "http" else None
        if qid is None:
            await self.app(scope, receive, send)
            return
        self.lease.begin(qid)
        try:
            await self.app(scope, receive, send)
        finally:
            self.lease.end(qid)
